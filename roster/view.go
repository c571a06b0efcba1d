package roster

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/presenced/presenced/presence"
)

// Member is what a group shows of one member.
type Member struct {
	User     string          `json:"user"`
	Status   presence.Status `json:"status"`
	Text     string          `json:"text,omitempty"`
	LastSeen *time.Time      `json:"last_seen"` // null while online, or never seen
	Version  uint64          `json:"version"`   // the member's presence version; 0: never seen
}

// MemberOf is a's member entry.
func MemberOf(a presence.Aggregate) Member { return MemberShown(a.User, a.Shown()) }

// MemberShown is the member entry of user, shown s.
func MemberShown(user string, s presence.Shown) Member {
	m := Member{User: user, Status: s.Status, Text: s.Text, Version: s.Version}
	if !s.LastSeen.IsZero() {
		t := s.LastSeen.UTC().Truncate(time.Millisecond) // as the users payload writes it
		m.LastSeen = &t
	}
	return m
}

// Counts is a group's occupancy.
type Counts struct {
	Online   int                     `json:"online"` // members with a status other than offline
	Total    int                     `json:"total"`
	ByStatus map[presence.Status]int `json:"by_status"` // every status, offline included, zeros left out
}

// Snapshot is a group's whole state at one group version.
type Snapshot struct {
	Group   string   `json:"group"`
	Version uint64   `json:"version"`
	Members []Member `json:"members"` // by user name
	Counts
}

// Delta is a batch: every member change since the batch it follows, the
// latest per member, at group version Version (Follows + 1).
type Delta struct {
	Group   string   `json:"group"`
	Version uint64   `json:"version"`
	Follows uint64   `json:"follows"`
	Changes []Member `json:"changes"`           // members whose entry changed or who joined, by user name
	Removed []string `json:"removed,omitempty"` // members who left the group
	Counts
}

// Board keeps the groups someone watches: each one's members as last
// published, the member changes since, and its occupancy, and cuts the
// changes into batches, at most one per window per group. A member's
// change is coalesced with the ones before it in the same batch (the latest
// wins), and a group's batch is cut a window after the one before it,
// whatever its members do, so a busy member delays no one beyond the
// window. Versions are consecutive per group: a batch follows the version
// before it, and an observer that sees a gap subscribes again.
//
// The clock is injected; the board's methods may be called from any
// goroutine.
type Board struct {
	idx    *Index
	window time.Duration
	now    func() time.Time
	lookup func(user string) (presence.Shown, bool)

	mu     sync.Mutex
	groups map[string]*view
	dirty  map[string]struct{} // groups with pending changes: Cut and Next look only at them
	stats  BoardStats

	noted chan struct{} // signalled (1 kept) when a group gets a pending change
}

// BoardStats are the board's counts.
type BoardStats struct {
	Groups   int // groups kept (watched)
	Batches  int // deltas cut
	Changes  int // member entries in them
	Repaired int // occupancy counts found wrong and rebuilt
}

type view struct {
	version uint64
	members map[string]Member
	pending map[string]*Member // nil: the member left
	last    time.Time          // when the last batch was cut (or the view opened)
	counts  map[presence.Status]int
}

// NewBoard returns a board over idx's groups, cutting batches every window,
// reading a member's current presence (as published) with lookup.
func NewBoard(idx *Index, window time.Duration, now func() time.Time, lookup func(string) (presence.Shown, bool)) *Board {
	return &Board{idx: idx, window: window, now: now, lookup: lookup, groups: make(map[string]*view), dirty: make(map[string]struct{}), noted: make(chan struct{}, 1)}
}

// member is user's entry now: offline at version 0 when never seen.
func (b *Board) member(user string) Member {
	if s, ok := b.lookup(user); ok {
		return MemberShown(user, s)
	}
	return Member{User: user, Status: presence.Offline}
}

// Watch starts keeping group (from its members in the index) if it is not
// kept yet, and returns its snapshot; false when the group does not exist.
func (b *Board) Watch(group string) (Snapshot, bool) {
	users, ok := b.idx.Members(group)
	if !ok {
		return Snapshot{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.groups[group]
	if v == nil {
		v = &view{version: FirstVersion(b.now()), members: make(map[string]Member, len(users)), pending: make(map[string]*Member), last: b.now(), counts: make(map[presence.Status]int)}
		for _, u := range users {
			m := b.member(u)
			v.members[u] = m
			v.counts[m.Status]++
		}
		b.groups[group] = v
	}
	return v.snapshot(group), true
}

// FirstVersion is the version a group's history starts at when its log is
// opened: the time in microseconds (1 before 1970). Each batch adds one, at
// most one per window (10 ms at least), so a history opened again later
// (a store that forgot it, a memory store restarted) starts above every
// version of the one before: a subscriber that comes back with a version of
// a forgotten history holds a version the new one never had, and is sent
// the snapshot (Resume), never a delta of another history.
func FirstVersion(now time.Time) uint64 { return uint64(max(1, now.UnixMicro())) }

// Unwatch stops keeping group.
func (b *Board) Unwatch(group string) {
	b.mu.Lock()
	delete(b.groups, group)
	b.mu.Unlock()
}

// Watched reports whether group is kept.
func (b *Board) Watched(group string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.groups[group] != nil
}

// Snapshot returns a kept group's snapshot.
func (b *Board) Snapshot(group string) (Snapshot, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.groups[group]
	if v == nil {
		return Snapshot{}, false
	}
	return v.snapshot(group), true
}

// Note records a member's new presence in each kept group of the member.
// An aggregate not above the version the group holds is ignored.
func (b *Board) Note(a presence.Aggregate) { b.NoteShown(a.User, a.Shown()) }

// NoteShown is Note for what observers are shown of user.
func (b *Board) NoteShown(user string, shown presence.Shown) {
	groups := b.idx.GroupsOf(user)
	if len(groups) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range groups {
		v := b.groups[g]
		if v == nil {
			continue
		}
		var known uint64
		if p, ok := v.pending[user]; ok {
			if p == nil {
				continue // it left the group
			}
			known = p.Version
		} else if m, ok := v.members[user]; ok {
			known = m.Version
		}
		if shown.Version <= known {
			continue
		}
		m := MemberShown(user, shown)
		v.pending[user] = &m
		b.mark(g)
	}
}

// Joined records membership changes in the kept groups: a member who
// joined enters with its current presence, one who left is removed.
func (b *Board) Joined(changes []Change) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range changes {
		v := b.groups[c.Group]
		if v == nil {
			continue
		}
		b.mark(c.Group)
		if c.Added {
			m := b.member(c.User)
			v.pending[c.User] = &m
			continue
		}
		v.pending[c.User] = nil
	}
}

// mark notes that group g has pending changes, and signals Noted. b.mu is
// held.
func (b *Board) mark(g string) {
	b.dirty[g] = struct{}{}
	select {
	case b.noted <- struct{}{}:
	default:
	}
}

// Noted is signalled when a group gets a pending change (one signal is kept
// for a reader that was busy): the leader waits on it, then for Next,
// instead of looking every few milliseconds.
func (b *Board) Noted() <-chan struct{} { return b.noted }

// Cut returns the batches due now: one per kept group with changes whose
// last batch is at least a window old, in group order.
func (b *Board) Cut() []Delta {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Delta
	for _, g := range slices.Sorted(maps.Keys(b.dirty)) {
		v := b.groups[g]
		if v == nil || len(v.pending) == 0 {
			delete(b.dirty, g)
			continue
		}
		if now.Sub(v.last) < b.window {
			continue
		}
		delete(b.dirty, g)
		d := Delta{Group: g, Follows: v.version, Version: v.version + 1, Changes: []Member{}}
		for _, u := range slices.Sorted(maps.Keys(v.pending)) {
			p := v.pending[u]
			old, had := v.members[u]
			switch {
			case p == nil && had:
				v.counts[old.Status]--
				delete(v.members, u)
				d.Removed = append(d.Removed, u)
			case p == nil:
			case had && same(old, *p):
			default:
				if had {
					v.counts[old.Status]--
				}
				v.counts[p.Status]++
				v.members[u] = *p
				d.Changes = append(d.Changes, *p)
			}
		}
		clear(v.pending)
		if len(d.Changes) == 0 && len(d.Removed) == 0 {
			continue // nothing changed after all: no batch, the window is not spent
		}
		v.version = d.Version
		v.last = now
		d.Counts = v.occupancy()
		b.stats.Batches++
		b.stats.Changes += len(d.Changes) + len(d.Removed)
		out = append(out, d)
	}
	return out
}

// Next returns how long until a batch may be due: zero when one is due now,
// the window when nothing is pending.
func (b *Board) Next() time.Duration {
	next, _ := b.Due()
	return next
}

// Due returns how long until a batch may be due (zero: one is due now),
// and whether any is pending at all (false: nothing is, and the duration
// is the window).
func (b *Board) Due() (time.Duration, bool) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	next, pending := b.window, false
	for g := range b.dirty {
		v := b.groups[g]
		if v == nil || len(v.pending) == 0 {
			continue
		}
		next, pending = min(next, max(0, v.last.Add(b.window).Sub(now))), true
	}
	return next, pending
}

// Repair rebuilds every kept group's occupancy from its members and returns
// how many groups' counts were wrong (the counts are kept incrementally;
// this is their periodic check against the truth).
func (b *Board) Repair() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	wrong := 0
	for _, v := range b.groups {
		truth := make(map[presence.Status]int)
		for _, m := range v.members {
			truth[m.Status]++
		}
		maps.DeleteFunc(v.counts, func(_ presence.Status, n int) bool { return n == 0 })
		if !maps.Equal(truth, v.counts) {
			v.counts = truth
			wrong++
		}
	}
	b.stats.Repaired += wrong
	return wrong
}

// Stats returns the board's counts.
func (b *Board) Stats() BoardStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stats
	s.Groups = len(b.groups)
	return s
}

func (v *view) occupancy() Counts {
	c := Counts{Total: len(v.members), ByStatus: make(map[presence.Status]int)}
	for st, n := range v.counts {
		if n == 0 {
			continue
		}
		c.ByStatus[st] = n
		if st != presence.Offline {
			c.Online += n
		}
	}
	return c
}

func (v *view) snapshot(group string) Snapshot {
	s := Snapshot{Group: group, Version: v.version, Members: make([]Member, 0, len(v.members)), Counts: v.occupancy()}
	for _, u := range slices.Sorted(maps.Keys(v.members)) {
		s.Members = append(s.Members, v.members[u])
	}
	return s
}

// same reports whether two entries show the same.
func same(a, b Member) bool {
	if (a.LastSeen == nil) != (b.LastSeen == nil) || (a.LastSeen != nil && !a.LastSeen.Equal(*b.LastSeen)) {
		return false
	}
	return a.User == b.User && a.Status == b.Status && a.Text == b.Text && a.Version == b.Version
}

// Load makes the board keep group at the state of s (a snapshot published
// earlier, read back from the store), so that its next batch follows s's
// version; the board then catches up with Note. The window counts from now.
func (b *Board) Load(s Snapshot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := &view{version: s.Version, members: make(map[string]Member, len(s.Members)), pending: make(map[string]*Member), last: b.now(), counts: make(map[presence.Status]int)}
	for _, m := range s.Members {
		v.members[m.User] = m
		v.counts[m.Status]++
	}
	b.groups[s.Group] = v
}

// Groups returns the names of the kept groups.
func (b *Board) Groups() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.groups))
}

// Mirror holds the group topics as published: the snapshot of each group
// at its latest version, to which each delta is applied. Every node keeps
// one, fed by the one board that cuts the batches (the leader's), so the
// snapshot and deltas are the same on every node.
type Mirror struct {
	mu     sync.Mutex
	groups map[string]*Snapshot
}

// NewMirror returns an empty mirror.
func NewMirror() *Mirror { return &Mirror{groups: make(map[string]*Snapshot)} }

// Set makes s the group's state, unless the mirror holds a later version.
func (m *Mirror) Set(s Snapshot) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.groups[s.Group]; cur != nil && cur.Version >= s.Version {
		return false
	}
	c := s
	c.Members = slices.Clone(s.Members)
	slices.SortFunc(c.Members, func(a, b Member) int { return strings.Compare(a.User, b.User) }) // Apply searches them
	m.groups[s.Group] = &c
	return true
}

// Get returns a group's snapshot.
func (m *Mirror) Get(group string) (Snapshot, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.groups[group]
	if s == nil {
		return Snapshot{}, false
	}
	c := *s
	c.Members = slices.Clone(s.Members)
	return c, true
}

// Version returns the version held of a group, and whether it is held.
func (m *Mirror) Version(group string) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.groups[group]
	if s == nil {
		return 0, false
	}
	return s.Version, true
}

// Groups returns the groups held.
func (m *Mirror) Groups() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.groups))
}

// Drop forgets a group.
func (m *Mirror) Drop(group string) {
	m.mu.Lock()
	delete(m.groups, group)
	m.mu.Unlock()
}

// Apply applies a delta that follows the group's version and returns the
// snapshot after it. It reports false, changing nothing, for a group it
// does not hold, a delta it already has, or a gap (the caller reads the
// snapshot again).
func (m *Mirror) Apply(d Delta) (Snapshot, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.groups[d.Group]
	if s == nil || d.Follows != s.Version {
		return Snapshot{}, false
	}
	byUser := func(u string) (int, bool) {
		return slices.BinarySearchFunc(s.Members, u, func(m Member, u string) int { return strings.Compare(m.User, u) })
	}
	for _, x := range d.Changes {
		if i, ok := byUser(x.User); ok {
			s.Members[i] = x
		} else {
			s.Members = slices.Insert(s.Members, i, x)
		}
	}
	for _, u := range d.Removed {
		if i, ok := byUser(u); ok {
			s.Members = slices.Delete(s.Members, i, i+1)
		}
	}
	s.Version, s.Counts = d.Version, d.Counts
	c := *s
	c.Members = slices.Clone(s.Members)
	return c, true
}
