package roster

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LogLimits bound a DeltaLog, per group: a batch is kept at most MaxAge
// after it was logged, and at most the MaxDeltas latest batches of a group
// (their JSON at most MaxBytes together) are kept. A zero limit keeps
// nothing: the log is off.
type LogLimits struct {
	MaxAge    time.Duration
	MaxDeltas int
	MaxBytes  int
}

// DeltaLog keeps, per group, the latest batches applied, with consecutive
// versions, so that a subscriber coming back with the version it holds can
// be sent what it missed (Resume) instead of the whole snapshot. It is
// bounded by time, count and bytes (LogLimits). The clock is injected; its
// methods may be called from any goroutine.
type DeltaLog struct {
	lim LogLimits
	now func() time.Time

	mu     sync.Mutex
	groups map[string]*ring
	bytes  int // in every group's ring
	deltas int
}

// ring is one group's batches, oldest first, each following the one before.
type ring struct {
	entries []logged
	bytes   int
}

type logged struct {
	d    Delta
	at   time.Time
	size int
}

// NewDeltaLog returns an empty log bounded by lim.
func NewDeltaLog(lim LogLimits, now func() time.Time) *DeltaLog {
	return &DeltaLog{lim: lim, now: now, groups: make(map[string]*ring)}
}

// On reports whether the log keeps anything.
func (l *DeltaLog) On() bool {
	return l.lim.MaxAge > 0 && l.lim.MaxDeltas > 0 && l.lim.MaxBytes > 0
}

// Append logs a batch just applied to the group's snapshot. A batch that
// does not follow the last one logged (the node read the snapshot again
// after a gap, or the log was empty) starts the group's log afresh from it.
func (l *DeltaLog) Append(d Delta) {
	if !l.On() {
		return
	}
	b, err := json.Marshal(d)
	if err != nil {
		return
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.groups[d.Group]
	if r == nil {
		r = &ring{}
		l.groups[d.Group] = r
	}
	if n := len(r.entries); n > 0 && r.entries[n-1].d.Version != d.Follows {
		l.dropLocked(r, n)
	}
	d.Changes, d.Removed = slices.Clone(d.Changes), slices.Clone(d.Removed)
	r.entries = append(r.entries, logged{d: d, at: now, size: len(b)})
	r.bytes += len(b)
	l.bytes += len(b)
	l.deltas++
	l.pruneLocked(r, now)
	if len(r.entries) == 0 {
		delete(l.groups, d.Group)
	}
}

// Logged is a batch as a group log keeps it, with when it was logged.
type Logged struct {
	Delta Delta
	At    time.Time
}

// Seed starts a group's log afresh from batches read from the store's
// group log with the snapshot at version current (the node just read the
// group): the run of them that follows on to current, within the bounds.
func (l *DeltaLog) Seed(group string, current uint64, batches []Logged) {
	l.Forget(group)
	if !l.On() || len(batches) == 0 {
		return
	}
	run := slices.Clone(batches)
	slices.SortFunc(run, func(a, b Logged) int { return cmp.Compare(a.Delta.Version, b.Delta.Version) })
	end := len(run) - 1
	for end >= 0 && run[end].Delta.Version > current {
		end--
	}
	if end < 0 || run[end].Delta.Version != current {
		return
	}
	start := end
	for start > 0 && run[start-1].Delta.Version == run[start].Delta.Follows {
		start--
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := &ring{}
	for _, b := range run[start : end+1] {
		if b.Delta.Group != group {
			return
		}
		j, err := json.Marshal(b.Delta)
		if err != nil {
			return
		}
		r.entries = append(r.entries, logged{d: b.Delta, at: b.At, size: len(j)})
		r.bytes += len(j)
		l.bytes += len(j)
		l.deltas++
	}
	l.groups[group] = r
	l.pruneLocked(r, now)
	if len(r.entries) == 0 {
		delete(l.groups, group)
	}
}

// Forget drops a group's log (the group is no longer kept here, or its
// snapshot was replaced by one that does not follow the last batch).
func (l *DeltaLog) Forget(group string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.groups[group]; r != nil {
		l.dropLocked(r, len(r.entries))
		delete(l.groups, group)
	}
}

// Prune drops the batches older than MaxAge from every group's log.
func (l *DeltaLog) Prune() {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for g, r := range l.groups {
		l.pruneLocked(r, now)
		if len(r.entries) == 0 {
			delete(l.groups, g)
		}
	}
}

// pruneLocked drops what is over the limits, oldest first.
func (l *DeltaLog) pruneLocked(r *ring, now time.Time) {
	n := 0
	for n < len(r.entries) {
		e := r.entries[n]
		over := len(r.entries)-n > l.lim.MaxDeltas || r.bytes > l.lim.MaxBytes || now.Sub(e.at) > l.lim.MaxAge
		if !over {
			break
		}
		r.bytes -= e.size
		l.bytes -= e.size
		l.deltas--
		n++
	}
	if n > 0 {
		r.entries = slices.Delete(r.entries, 0, n)
	}
}

// dropLocked drops a ring's n oldest entries.
func (l *DeltaLog) dropLocked(r *ring, n int) {
	for _, e := range r.entries[:n] {
		r.bytes -= e.size
		l.bytes -= e.size
		l.deltas--
	}
	r.entries = slices.Delete(r.entries, 0, n)
}

// LogStats are the log's size now.
type LogStats struct {
	Groups int // groups with a log
	Deltas int // batches kept
	Bytes  int // their JSON
}

// Stats returns the log's size.
func (l *DeltaLog) Stats() LogStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LogStats{Groups: len(l.groups), Deltas: l.deltas, Bytes: l.bytes}
}

// Outcome is what a resuming subscriber is sent.
type Outcome int

// The outcomes of Resume.
const (
	SendSnapshot Outcome = iota // the snapshot, as to a new subscriber (Cause says why)
	SendDelta                   // one delta, from the version held to the current one
	SendNothing                 // the subscriber holds the current version
)

// Cause is why a resume falls back to the snapshot.
type Cause string

// The causes of a fallback to the snapshot.
const (
	CauseGarbage Cause = "garbage" // the version held is not a version
	CauseFuture  Cause = "future"  // it is above the current version
	CauseTooOld  Cause = "too_old" // the log no longer reaches back to it
	CauseCold    Cause = "cold"    // the log holds nothing up to the current version here
)

// Causes lists every Cause.
var Causes = []Cause{CauseGarbage, CauseFuture, CauseTooOld, CauseCold}

// ParseVersion reads a version held, as a client sends it: a decimal
// number from 1 (no sign, no leading zero, at most 20 digits).
func ParseVersion(s string) (uint64, bool) {
	if s == "" || len(s) > 20 || s[0] == '0' || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// Resume decides what a subscriber holding version held of group is sent,
// the group's snapshot being at version current: nothing when it holds
// current; one delta from held to current (the log's batches after held,
// merged: Merge) when the log reaches from held to current; otherwise the
// snapshot, with the cause.
func (l *DeltaLog) Resume(group string, held, current uint64) (Delta, Outcome, Cause) {
	switch {
	case held > current:
		return Delta{}, SendSnapshot, CauseFuture
	case held == current:
		return Delta{}, SendNothing, ""
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.groups[group]
	if r != nil {
		l.pruneLocked(r, now)
	}
	if r == nil || len(r.entries) == 0 || r.entries[len(r.entries)-1].d.Version != current {
		return Delta{}, SendSnapshot, CauseCold
	}
	first := r.entries[0].d.Follows
	if held < first {
		return Delta{}, SendSnapshot, CauseTooOld
	}
	i, ok := slices.BinarySearchFunc(r.entries, held, func(e logged, v uint64) int { return cmp.Compare(e.d.Follows, v) })
	if !ok {
		return Delta{}, SendSnapshot, CauseTooOld
	}
	ds := make([]Delta, 0, len(r.entries)-i)
	for _, e := range r.entries[i:] {
		ds = append(ds, e.d)
	}
	return Merge(ds), SendDelta, ""
}

// Merge merges consecutive batches of a group into one, from the version
// the first follows to the version of the last: the latest entry per
// member, the members who left and did not come back, the last counts. A
// member who joined and left within the batches is in Removed, which a
// subscriber that does not hold it ignores.
func Merge(ds []Delta) Delta {
	if len(ds) == 0 {
		return Delta{}
	}
	last := ds[len(ds)-1]
	latest := make(map[string]*Member)
	for _, d := range ds {
		for _, m := range d.Changes {
			latest[m.User] = &m
		}
		for _, u := range d.Removed {
			latest[u] = nil
		}
	}
	out := Delta{Group: last.Group, Follows: ds[0].Follows, Version: last.Version, Changes: []Member{}, Counts: last.Counts}
	for _, u := range slices.Sorted(maps.Keys(latest)) {
		if m := latest[u]; m != nil {
			out.Changes = append(out.Changes, *m)
		} else {
			out.Removed = append(out.Removed, u)
		}
	}
	return out
}
