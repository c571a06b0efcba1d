package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/presenced/presenced/roster"
)

// GroupLog carries the group topics from the one node that cuts their
// batches (the leader) to every node: it keeps each group's snapshot at
// its latest version, and announces each batch (a GroupBatch event on
// every node that listens to the group: ListenGroups), so that the
// snapshot and the deltas are the same on every node. A batch is committed only if it follows the version the log holds:
// a second leader (the lease changed hands while the first still cut
// batches) cannot fork a group's history.
type GroupLog interface {
	// LeaseTTL is how long the leader's lease lives (Redis: the node TTL:
	// a leader that died is replaced as soon as its node would be swept).
	LeaseTTL() time.Duration
	// Lead takes or keeps the leadership for ttl; true while this node
	// (incarnation) holds it.
	Lead(ctx context.Context, ttl time.Duration) (bool, error)
	// OpenGroup stores s as a group's first snapshot unless the log holds
	// one, and returns the one it holds.
	OpenGroup(ctx context.Context, s roster.Snapshot) (roster.Snapshot, error)
	// CommitBatch applies d to the group's snapshot and announces it, if
	// the log holds version d.Follows; it reports whether it did.
	CommitBatch(ctx context.Context, d roster.Delta) (bool, error)
	// GroupSnapshot returns the group's snapshot, false when there is none.
	GroupSnapshot(ctx context.Context, group string) (roster.Snapshot, bool, error)
	// GroupHistory returns the group's snapshot, as GroupSnapshot, and
	// the latest batches the log keeps (KeepBatches), read together: a
	// node that begins to watch the group can then send a subscriber that
	// comes back with an older version what it missed (resume).
	GroupHistory(ctx context.Context, group string) (roster.Snapshot, []roster.Logged, bool, error)
	// KeepBatches has the log keep the latest n batches of each group
	// (with when each was committed) from now on; 0 (the default): none.
	KeepBatches(n int)
	// DropGroup forgets a deleted group's snapshot.
	DropGroup(ctx context.Context, group string) error

	// ListenGroups has the store report these groups' batches (GroupBatch
	// events) from now on; it returns once it hears them, so a snapshot
	// read after it misses no batch (hear first, read second). After a
	// lost subscription it reports a GroupBatch without a Delta for each
	// group it listens to (batches may have been missed: read it again).
	// Idempotent. UnlistenGroups stops them. (Memory: no-ops; its one
	// node hears every batch.)
	ListenGroups(ctx context.Context, groups []string) error
	UnlistenGroups(ctx context.Context, groups []string) error
}

// --- memory: one node, always the leader ---

type memoryLog struct {
	mu      sync.Mutex
	groups  map[string]roster.Snapshot
	batches map[string][]roster.Logged // the latest keep batches per group, oldest first
	keep    int
}

func (m *Memory) log() *memoryLog {
	m.logOnce.Do(func() {
		m.glog = &memoryLog{groups: make(map[string]roster.Snapshot), batches: make(map[string][]roster.Logged)}
	})
	return m.glog
}

// LeaseTTL implements GroupLog: the lease of a memory store, whose one
// node always leads, costs nothing to keep.
func (m *Memory) LeaseTTL() time.Duration { return 3 * time.Second }

// Lead implements GroupLog: a memory store has one node.
func (m *Memory) Lead(context.Context, time.Duration) (bool, error) { return true, nil }

// OpenGroup implements GroupLog.
func (m *Memory) OpenGroup(_ context.Context, s roster.Snapshot) (roster.Snapshot, error) {
	l := m.log()
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.groups[s.Group]; ok {
		return cur, nil
	}
	l.groups[s.Group] = s
	delete(l.batches, s.Group)
	return s, nil
}

// CommitBatch implements GroupLog.
func (m *Memory) CommitBatch(_ context.Context, d roster.Delta) (bool, error) {
	l := m.log()
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.groups[d.Group]
	if !ok || cur.Version != d.Follows {
		return false, nil
	}
	mir := roster.NewMirror()
	mir.Set(cur)
	next, _ := mir.Apply(d)
	l.groups[d.Group] = next
	if l.keep > 0 {
		b := append(l.batches[d.Group], roster.Logged{Delta: d, At: m.now()})
		if len(b) > l.keep {
			b = slices.Delete(b, 0, len(b)-l.keep)
		}
		l.batches[d.Group] = b
	}
	dd := d
	m.reportLog(Event{Kind: GroupBatch, Delta: &dd})
	return true, nil
}

// GroupSnapshot implements GroupLog.
func (m *Memory) GroupSnapshot(_ context.Context, group string) (roster.Snapshot, bool, error) {
	l := m.log()
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.groups[group]
	return s, ok, nil
}

// GroupHistory implements GroupLog.
func (m *Memory) GroupHistory(_ context.Context, group string) (roster.Snapshot, []roster.Logged, bool, error) {
	l := m.log()
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.groups[group]
	return s, slices.Clone(l.batches[group]), ok, nil
}

// KeepBatches implements GroupLog.
func (m *Memory) KeepBatches(n int) {
	l := m.log()
	l.mu.Lock()
	l.keep = n
	l.mu.Unlock()
}

// DropGroup implements GroupLog.
func (m *Memory) DropGroup(_ context.Context, group string) error {
	l := m.log()
	l.mu.Lock()
	delete(l.groups, group)
	delete(l.batches, group)
	l.mu.Unlock()
	return nil
}

// reportLog reports an event outside the store's lock (the group log has
// its own).
func (m *Memory) reportLog(e Event) { m.report(e) }

// --- Redis ---
//
// A group's log is a hash P:gs:{group} (the group's slot): "=v" its
// version, "=c" its counts (JSON), "m:<user>" each member (JSON), and
// "d:<version>" each of the latest batches kept (KeepBatches: "<unix ms>
// <delta JSON>", the time Redis committed it), written by the same
// script as the batch, which deletes the one KeepBatches versions older. A batch
// is one script on it that checks the version, writes the changed members
// and publishes the delta with SPUBLISH on P:gb:{group}, the group's own
// channel in the same slot: only the nodes that listen to the group
// (ListenGroups) hear it. The leader holds P:gleader (its
// node and incarnation, with the node TTL), renewed every third of it.

// LeaseTTL implements GroupLog: the node TTL.
func (r *Redis) LeaseTTL() time.Duration { return r.nodeTTL }

// Lead implements GroupLog.
func (r *Redis) Lead(ctx context.Context, ttl time.Duration) (bool, error) {
	r.mu.Lock()
	me := member(r.node, r.inc)
	r.mu.Unlock()
	n, err := scriptLead.Run(ctx, r.c, []string{r.k.groupLeader()}, me, ms(ttl)).Int()
	if err != nil {
		return false, r.fail("lead", err)
	}
	r.up()
	return n == 1, nil
}

// OpenGroup implements GroupLog.
func (r *Redis) OpenGroup(ctx context.Context, s roster.Snapshot) (roster.Snapshot, error) {
	counts, err := json.Marshal(s.Counts)
	if err != nil {
		return roster.Snapshot{}, err
	}
	args := []any{strconv.FormatUint(s.Version, 10), counts}
	for _, m := range s.Members {
		b, err := json.Marshal(m)
		if err != nil {
			return roster.Snapshot{}, err
		}
		args = append(args, m.User, b)
	}
	wrote, err := scriptGroupOpen.Run(ctx, r.c, []string{r.k.groupLog(s.Group)}, args...).Int()
	if err != nil {
		return roster.Snapshot{}, r.fail("group open", err)
	}
	if wrote == 1 {
		r.up()
		return s, nil
	}
	cur, ok, err := r.GroupSnapshot(ctx, s.Group)
	if err != nil {
		return roster.Snapshot{}, err
	}
	if !ok { // dropped in between
		return r.OpenGroup(ctx, s)
	}
	return cur, nil
}

// CommitBatch implements GroupLog.
func (r *Redis) CommitBatch(ctx context.Context, d roster.Delta) (bool, error) {
	counts, err := json.Marshal(d.Counts)
	if err != nil {
		return false, err
	}
	delta, err := json.Marshal(d)
	if err != nil {
		return false, err
	}
	args := []any{strconv.FormatUint(d.Follows, 10), strconv.FormatUint(d.Version, 10), counts, delta, len(d.Changes), r.keepBatches.Load()}
	for _, m := range d.Changes {
		b, err := json.Marshal(m)
		if err != nil {
			return false, err
		}
		args = append(args, m.User, b)
	}
	for _, u := range d.Removed {
		args = append(args, u)
	}
	n, err := scriptGroupCommit.Run(ctx, r.c, []string{r.k.groupLog(d.Group), r.k.groupChannel(d.Group)}, args...).Int()
	if err != nil {
		return false, r.fail("group commit", err)
	}
	r.up()
	return n == 1, nil
}

// GroupSnapshot implements GroupLog.
func (r *Redis) GroupSnapshot(ctx context.Context, group string) (roster.Snapshot, bool, error) {
	h, err := r.c.HGetAll(ctx, r.k.groupLog(group)).Result()
	if err != nil {
		return roster.Snapshot{}, false, r.fail("group snapshot", err)
	}
	r.up()
	if len(h) == 0 {
		return roster.Snapshot{}, false, nil
	}
	s, err := decodeGroupLog(group, h)
	return s, err == nil, err
}

// GroupHistory implements GroupLog.
func (r *Redis) GroupHistory(ctx context.Context, group string) (roster.Snapshot, []roster.Logged, bool, error) {
	h, err := r.c.HGetAll(ctx, r.k.groupLog(group)).Result()
	if err != nil {
		return roster.Snapshot{}, nil, false, r.fail("group history", err)
	}
	r.up()
	if len(h) == 0 {
		return roster.Snapshot{}, nil, false, nil
	}
	s, err := decodeGroupLog(group, h)
	if err != nil {
		return s, nil, false, err
	}
	return s, decodeGroupBatches(group, h), true, nil
}

// KeepBatches implements GroupLog.
func (r *Redis) KeepBatches(n int) { r.keepBatches.Store(int64(max(n, 0))) }

// decodeGroupBatches reads the batches kept in a group's log hash; one
// that does not decode is left out (the node then has no log before it).
func decodeGroupBatches(group string, h map[string]string) []roster.Logged {
	var out []roster.Logged
	for f, v := range h {
		if !strings.HasPrefix(f, "d:") {
			continue
		}
		ms, js, ok := strings.Cut(v, " ")
		n, err := strconv.ParseInt(ms, 10, 64)
		if !ok || err != nil {
			continue
		}
		var d roster.Delta
		if json.Unmarshal([]byte(js), &d) != nil || d.Group != group {
			continue
		}
		out = append(out, roster.Logged{Delta: d, At: time.UnixMilli(n)})
	}
	slices.SortFunc(out, func(a, b roster.Logged) int { return cmp.Compare(a.Delta.Version, b.Delta.Version) })
	return out
}

// decodeGroupLog reads a group's log hash.
func decodeGroupLog(group string, h map[string]string) (roster.Snapshot, error) {
	s := roster.Snapshot{Group: group, Members: []roster.Member{}}
	v, err := strconv.ParseUint(h["=v"], 10, 64)
	if err != nil || v == 0 {
		return s, fmt.Errorf("group log %s: bad version %q", group, h["=v"])
	}
	s.Version = v
	if err := json.Unmarshal([]byte(h["=c"]), &s.Counts); err != nil {
		return s, fmt.Errorf("group log %s: counts: %w", group, err)
	}
	for _, f := range slices.Sorted(maps.Keys(h)) {
		user, ok := strings.CutPrefix(f, "m:")
		if !ok {
			continue
		}
		var m roster.Member
		if err := json.Unmarshal([]byte(h[f]), &m); err != nil || m.User != user {
			return s, fmt.Errorf("group log %s: member %s: %v", group, user, err)
		}
		s.Members = append(s.Members, m)
	}
	return s, nil
}

// DropGroup implements GroupLog.
func (r *Redis) DropGroup(ctx context.Context, group string) error {
	if err := r.c.Del(ctx, r.k.groupLog(group)).Err(); err != nil {
		return r.fail("group drop", err)
	}
	r.up()
	return nil
}
