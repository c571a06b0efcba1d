package groups

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

// leadTick is the least time between two looks of the leader while
// something is left to do (a group to open again after a failed write).
const leadTick = 5 * time.Millisecond

// leadLoop runs the leader's side: it takes or keeps the lease, keeps every
// group of the roster on the Board, and commits the batches due. It sleeps
// until there is something to do: the roster changes, the leader's Board
// gets a pending change (Board.Noted; then until its batch is due), or the
// lease is to be kept (a third of its TTL after the last try). Without a
// group it sleeps until the roster changes. (A 5 ms tick kept a broker
// with groups waking 200 times a second for nothing (issue 23); without
// groups it made a peer's PUBLISH overtake a SUBSCRIBE sent before it: the
// paho test_request_response, issue 18.)
func (s *Stage) leadLoop() {
	defer s.wg.Done()
	wake := time.NewTimer(0) // the first look at once
	defer wake.Stop()
	ttl := s.o.Store.LeaseTTL()
	var l leader
	for {
		if s.index.Len() == 0 && !l.leading {
			wake.Stop()
			select {
			case <-s.stop:
				return
			case <-s.index.Changed():
			}
		} else {
			var noted <-chan struct{} // only the leader cuts batches
			if l.leading {
				noted = s.board.Noted()
			}
			select {
			case <-s.stop:
				return
			case <-wake.C:
			case <-s.index.Changed():
			case <-noted:
			}
		}
		s.looks.Add(1)
		if s.index.Len() == 0 { // no group: nothing to lead, no lease to keep
			if l.leading {
				l.leading = false
				s.lead(false)
				s.o.Log.Info("group topics: no group left to lead")
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), ttl/3)
		if now := time.Now(); now.Sub(l.triedAt) >= ttl/3 {
			s.keepLease(ctx, &l, now, ttl)
		}
		if !l.leading {
			l.gen, l.led = 0, 0
		} else {
			// The generation is read before lead reads the roster: a change
			// in between (leadOnce may reconcile with it) is told next look.
			if gen := s.index.Gen(); gen != l.led || !s.leading.Load() {
				l.led = gen
				s.lead(true) // the members may have changed: the interest follows
			}
			l.gen = s.leadOnce(ttl/3, l.gen)
		}
		cancel()
		wake.Reset(s.nextLook(&l, ttl))
	}
}

// nextLook is how long the leader loop may sleep: until the lease is to be
// kept, and, on the leader, until the next batch is due, or leadTick while
// the roster is not all on the Board yet (a write failed).
func (s *Stage) nextLook(l *leader, ttl time.Duration) time.Duration {
	wait := max(ttl/3-time.Since(l.triedAt), leadTick)
	if !l.leading {
		return wait
	}
	if gen := s.index.Gen(); l.gen != gen || l.led != gen {
		return leadTick
	}
	if d, pending := s.board.Due(); pending {
		wait = min(wait, max(d, leadTick))
	}
	return wait
}

// leader is the leader loop's state.
type leader struct {
	leading          bool
	gen              uint64    // the roster's generation the board was last reconciled with
	led              uint64    // the roster's generation the interest was last told the members of (lead)
	leaseAt, triedAt time.Time // the lease last taken or kept; the last try
}

// keepLease takes or keeps the lease (a third of ttl after the last try).
// A leader that cannot reach the store keeps cutting until the lease
// surely ran out; a commit after it is refused unless it still follows.
func (s *Stage) keepLease(ctx context.Context, l *leader, now time.Time, ttl time.Duration) {
	l.triedAt = now
	ok, err := s.o.Store.Lead(ctx, ttl)
	switch {
	case err != nil && l.leading:
	case err != nil:
	case ok && !l.leading:
		l.leading, l.leaseAt = true, now
		s.o.Log.Info("group topics: this node leads")
	case ok:
		l.leaseAt = now
	case !ok && l.leading:
		l.leading = false
		s.unwatchBoard()
		s.lead(false)
		s.o.Log.Info("group topics: another node leads")
	}
	if err != nil && l.leading && now.Sub(l.leaseAt) >= ttl {
		l.leading = false
		s.unwatchBoard()
		s.lead(false)
	}
}

// lead notes whether this node leads, and tells Options.Lead the members
// it needs (every group's) or none.
func (s *Stage) lead(on bool) {
	s.leading.Store(on)
	if s.o.Lead == nil {
		return
	}
	if !on {
		s.o.Lead(nil)
		return
	}
	seen := make(map[string]struct{})
	var members []string
	for _, g := range s.index.Groups() {
		m, _ := s.index.Members(g)
		for _, u := range m {
			if _, ok := seen[u]; !ok {
				seen[u] = struct{}{}
				members = append(members, u)
			}
		}
	}
	s.o.Lead(members)
}

// unwatchBoard empties the leader's board.
func (s *Stage) unwatchBoard() {
	for _, g := range s.board.Groups() {
		s.board.Unwatch(g)
	}
}

// leadOnce, when the roster changed since gen, opens the groups the Board
// does not keep yet and drops the deleted ones; then it commits the batches
// due. It returns the roster's generation it reconciled with. Each store
// call has its own deadline (each): opening a large group must not eat the
// time of the commits after it (a commit that times out has the group
// read back and opened again, which, sharing one deadline, could time out
// the next commit the same way for ever).
func (s *Stage) leadOnce(each time.Duration, gen uint64) uint64 {
	call := func(fn func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), each)
		defer cancel()
		return fn(ctx)
	}
	if now := s.index.Gen(); now != gen {
		kept := s.board.Groups()
		for _, g := range s.index.Groups() {
			if _, ok := slices.BinarySearch(kept, g); !ok {
				if err := call(func(ctx context.Context) error { return s.openGroup(ctx, g) }); err != nil {
					return gen
				}
			}
		}
		for _, g := range kept {
			if !s.index.Has(g) {
				s.board.Unwatch(g)
				if err := call(func(ctx context.Context) error { return s.o.Store.DropGroup(ctx, g) }); err != nil {
					return gen
				}
			}
		}
		gen = now
	}
	for _, d := range s.board.Cut() {
		var ok bool
		err := call(func(ctx context.Context) (err error) { ok, err = s.o.Store.CommitBatch(ctx, d); return err })
		if err != nil {
			// Not committed: read the group back and cut again from there.
			s.board.Unwatch(d.Group)
			return 0
		}
		if !ok {
			s.o.Log.Warn("group batch refused: the log moved on; read again", "group", d.Group, "follows", d.Follows)
			s.board.Unwatch(d.Group)
			gen = 0
		}
	}
	return gen
}

// openGroup puts a group on the leader's Board at the version the log
// holds (or opens the log at version 1), then notes every member's current
// presence and membership, so the next batch carries what changed since.
func (s *Stage) openGroup(ctx context.Context, group string) error {
	fresh, ok := s.board.Watch(group)
	if !ok {
		return nil // deleted meanwhile
	}
	held, err := s.o.Store.OpenGroup(ctx, fresh)
	if err != nil {
		s.board.Unwatch(group)
		return err
	}
	if held.Version == fresh.Version && sameMembers(held, fresh) {
		return nil
	}
	s.board.Load(held)
	members, _ := s.index.Members(group)
	var changes []roster.Change
	for _, m := range held.Members {
		if _, ok := slices.BinarySearch(members, m.User); !ok {
			changes = append(changes, roster.Change{Group: group, User: m.User})
		}
	}
	for _, u := range members {
		if !slices.ContainsFunc(held.Members, func(m roster.Member) bool { return m.User == u }) {
			changes = append(changes, roster.Change{Group: group, User: u, Added: true})
		}
	}
	s.board.Joined(changes)
	for _, u := range members {
		if shown, ok := s.o.Presence.Current(u); ok {
			s.board.NoteShown(u, shown)
		}
	}
	return nil
}

// sameMembers reports whether two snapshots show the same members.
func sameMembers(a, b roster.Snapshot) bool {
	x, _ := json.Marshal(a.Members)
	y, _ := json.Marshal(b.Members)
	return string(x) == string(y)
}

// Apply applies a committed batch to this node's group topic (the pump, on
// a GroupBatch event, in the log's order): the snapshot after it is
// retained, then the delta published. A batch that does not follow what
// the node holds (missed batches) has the group read again; a nil one
// (batches may have been missed) every watched group.
func (s *Stage) Apply(d *roster.Delta) {
	if d == nil {
		for _, g := range s.mirror.Groups() {
			s.resync(g)
		}
		return
	}
	var (
		ok, watched bool
		held        uint64
	)
	s.step(func(t Topics) {
		s.serveResumes(t, d.Group) // up to the version held, before the batch after it
		var snap roster.Snapshot
		if snap, ok = s.mirror.Apply(*d); ok {
			s.dlog.Append(*d)
			s.advance(t, snap, nil, d)
		}
		held, watched = s.mirror.Version(d.Group)
	})
	if !ok && watched && d.Version > held {
		s.resync(d.Group)
	}
}

// resync queues a watched group to be read again from the log.
func (s *Stage) resync(group string) {
	s.readMu.Lock()
	s.resyncs[group] = struct{}{}
	s.readMu.Unlock()
	wake(s.readWake)
}

// readSnapshots reads watched groups from the log (the reader): each one
// newer than what the node holds is retained and published live, as a
// snapshot. A group watched at version 0 (Watch, or a log that did not
// answer) that the log does not hold yet is opened in it from this node's
// view (any node may: the first one wins, and the leader goes on from the
// log's version).
func (s *Stage) readSnapshots(groups map[string]struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waiting := false
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		var (
			snap    roster.Snapshot
			batches []roster.Logged
			ok      bool
			err     error
		)
		if s.dlog.On() {
			snap, batches, ok, err = s.o.Store.GroupHistory(ctx, g)
		} else {
			snap, ok, err = s.o.Store.GroupSnapshot(ctx, g)
		}
		if err != nil {
			return err
		}
		if held, watched := s.mirror.Version(g); !ok && watched && held == 0 {
			// Only the leader opens a group's log (it shows every
			// member's presence); another node waits for it.
			if !s.leading.Load() {
				waiting = true
				continue
			}
			if fresh, exists := s.freshSnapshot(g); exists {
				if snap, err = s.o.Store.OpenGroup(ctx, fresh); err != nil {
					return err
				}
				ok = true
			}
		}
		if !ok {
			continue
		}
		s.step(func(t Topics) {
			held, _ := s.mirror.Version(g)
			if !s.mirror.Set(snap) {
				return
			}
			s.dlog.Seed(g, snap.Version, batches) // the log's batches up to it (its own no longer lead there)
			var to []*mqtt.Client                 // a resync: every subscriber gets the snapshot live
			if held == 0 {                        // the first here: only those that asked and missed it
				served := s.serveResumes(t, g) // resumes: sent the snapshot, or nothing
				to = make([]*mqtt.Client, 0, len(s.waiting[g]))
				for cl := range s.waiting[g] {
					if !slices.Contains(served, cl) {
						to = append(to, cl)
					}
				}
			} else if n := len(s.resumes[g]); n > 0 { // they get the snapshot live with everyone
				s.Resumes.Fallback[slices.Index(roster.Causes, roster.CauseCold)].Add(int64(n))
				delete(s.resumes, g)
			}
			delete(s.waiting, g)
			s.advance(t, snap, to, snap)
		})
	}
	if waiting {
		return errNoLog
	}
	return nil
}

// errNoLog: a watched group's log does not exist yet; the leader opens it
// (the reader tries again a second later).
var errNoLog = errors.New("groups: the group's log is not open yet: waiting for the leader")

// step runs fn inside one step of the delivery's fence, under topicMu
// (the fence first: see Outlet).
func (s *Stage) step(fn func(t Topics)) {
	s.o.Outlet.Step(func(t Topics) {
		s.topicMu.Lock()
		defer s.topicMu.Unlock()
		fn(t)
	})
}

// advance retains snap as its group topic's retained message and publishes
// live (a delta, or the snapshot itself) in one step (Topics.Advance),
// inside step.
func (s *Stage) advance(t Topics, snap roster.Snapshot, to []*mqtt.Client, live any) {
	b, err := json.Marshal(snap)
	if err != nil {
		s.o.Log.Error("group snapshot", "err", err, "group", snap.Group)
		return
	}
	l, err := json.Marshal(live)
	if err != nil {
		s.o.Log.Error("group message", "err", err, "group", snap.Group)
		return
	}
	if err := t.Advance(s.topics+snap.Group, to, b, l); err != nil {
		s.o.Log.Warn("group topic not published", "err", err, "group", snap.Group)
	}
}

// Watch is the Hook's: a subscription to a group topic, by a connection
// that may read it, keeps the group on this node from now on. It never
// waits on the store: a group not watched yet is marked watched at version
// 0 and its snapshot read by the reader (readSnapshots), then retained and
// delivered live to the subscriptions that asked for it and whose reading
// of the retained messages came first (Topics.Advance), so that each gets
// it once.
func (s *Stage) Watch(cl *mqtt.Client, filter string) {
	group, ok := s.groupFilter(filter)
	if !ok || presence.ValidGroup(group) != nil || !s.index.Has(group) {
		return
	}
	if viewer, service := s.o.Viewer(cl); !service {
		if rule := s.SeesGroup(); rule != nil && !rule(viewer, group) {
			return
		}
	}
	s.topicMu.Lock()
	held, watched := s.mirror.Version(group)
	if !watched {
		s.mirror.Set(roster.Snapshot{Group: group})
		s.listen(group, true)
	}
	if held == 0 {
		if s.waiting[group] == nil {
			s.waiting[group] = make(map[*mqtt.Client]struct{})
		}
		s.waiting[group][cl] = struct{}{} // one entry per connection, however often it subscribes
	}
	s.topicMu.Unlock()
	if held == 0 {
		s.resync(group)
	}
}

// groupFilter returns the group of a presence/groups/{group} filter without
// wildcards.
func (s *Stage) groupFilter(filter string) (string, bool) {
	g, ok := strings.CutPrefix(filter, s.topics)
	return g, ok && g != "" && !strings.ContainsAny(g, "/+#")
}

// Unwatch stops keeping group's topic on this node (nobody here watches it
// any more): its retained snapshot is removed, and the store no longer
// reports its batches here.
func (s *Stage) Unwatch(group string) {
	s.step(func(t Topics) {
		s.mirror.Drop(group)
		s.dlog.Forget(group)
		delete(s.waiting, group)
		delete(s.resumes, group)
		t.Clear(s.topics + group)
	})
	s.listen(group, false)
}

// listen queues hearing group's batches here (on) or no longer, for the
// reader: before it reads a snapshot, so that no batch falls between.
func (s *Stage) listen(group string, on bool) {
	s.readMu.Lock()
	s.listens[group] = on
	s.readMu.Unlock()
	wake(s.readWake)
}

// applyListens asks the store to hear (or no longer hear) the groups
// queued; what fails is queued again unless changed meanwhile.
func (s *Stage) applyListens(ctx context.Context, listens map[string]bool) error {
	var on, off []string
	for g, l := range listens {
		if l {
			on = append(on, g)
		} else {
			off = append(off, g)
		}
	}
	err := s.o.Store.ListenGroups(ctx, on)
	if err == nil {
		err = s.o.Store.UnlistenGroups(ctx, off)
	}
	if err != nil {
		s.readMu.Lock()
		for g, l := range listens {
			if _, newer := s.listens[g]; !newer {
				s.listens[g] = l
			}
		}
		s.readMu.Unlock()
	}
	return err
}

// unwatchDeleted stops watching the deleted groups: their topic's
// retained snapshot is removed, so a new subscriber gets nothing.
func (s *Stage) unwatchDeleted() {
	for _, g := range s.mirror.Groups() {
		if s.index.Has(g) {
			continue
		}
		s.step(func(t Topics) {
			s.mirror.Drop(g)
			s.dlog.Forget(g)
			delete(s.waiting, g)
			delete(s.resumes, g)
			t.Clear(s.topics + g)
		})
		s.listen(g, false)
	}
}

// retain stores a snapshot as its group topic's retained message, inside
// step.
func (s *Stage) retain(t Topics, snap roster.Snapshot) {
	b, err := json.Marshal(snap)
	if err != nil {
		s.o.Log.Error("group snapshot", "err", err, "group", snap.Group)
		return
	}
	t.Retain(s.topics+snap.Group, b)
}

// Refresh stores every watched group's snapshot again as retained (mochi
// purges retained messages older than its maximum message expiry), and
// drops the batches past the log's age from it.
func (s *Stage) Refresh() {
	s.dlog.Prune()
	for _, g := range s.mirror.Groups() {
		s.step(func(t Topics) {
			if snap, ok := s.mirror.Get(g); ok && snap.Version > 0 {
				s.retain(t, snap)
			}
		})
	}
}

// Snapshot returns a group's snapshot as the group log holds it (the same
// on every node), false when the group does not exist. A group the leader
// has not opened yet is shown from this node's view, at version 0. It reads
// the store (the admin API's, not the packet path's).
func (s *Stage) Snapshot(group string) (roster.Snapshot, bool) {
	if !s.index.Has(group) {
		return roster.Snapshot{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if snap, ok, err := s.o.Store.GroupSnapshot(ctx, group); err == nil && ok {
		return snap, true
	}
	snap, ok := s.freshSnapshot(group)
	snap.Version = 0
	return snap, ok
}

// freshSnapshot is a group's snapshot from this node's roster and published
// presence, at version 1 (a board of its own: the leader's is not touched).
func (s *Stage) freshSnapshot(group string) (roster.Snapshot, bool) {
	return roster.NewBoard(s.index, time.Hour, s.o.Now, s.o.Presence.Current).Watch(group)
}
