package presenced

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

// The group topics, presence/groups/{group}, are the same on every node:
//
//   - One node, the leader (a lease in the store; with the memory store, the
//     node itself), keeps every group on its Board and cuts the batches, at
//     most one per window per group. It commits each to the group log
//     (store.GroupLog), which holds every group's snapshot at its latest
//     version and refuses a batch that does not follow it, so two leaders
//     can never fork a group's history; a refused leader reads the group
//     back and goes on from there.
//   - The log announces each batch to every node (a GroupBatch event). Each
//     node applies it to its Mirror, for the groups watched there, and,
//     under groupMu, retains the new snapshot as the topic's retained
//     message, then publishes the delta. A subscriber therefore gets the
//     snapshot at some version, then every delta after it, with
//     consecutive versions.
//   - A node that misses a batch (a gap) reads the group's snapshot from
//     the log, retains it and publishes it live: a message with "members"
//     is a snapshot, and replaces what the subscriber holds.
//   - A group is watched on a node from its first subscription there: the
//     node reads the group's snapshot from the log into its Mirror and
//     retains it before mochi reads the retained messages for that
//     subscription.
//
// A new leader takes over when the lease of the old one runs out (at most
// redis.node_ttl after it died); meanwhile the user topics go on, and the
// group topics pause. Without any group nobody leads, and the lease costs
// Redis nothing; with groups, keeping it costs the leader one script (three
// commands) every third of redis.node_ttl, and every other node one (two
// commands) as often.

// leadLoop runs the leader's side: it takes or keeps the lease, keeps every
// group of the roster on the Board, and commits the batches due.
func (p *Plugin) leadLoop() {
	defer p.wg.Done()
	tick := time.NewTicker(leadTick)
	defer tick.Stop()
	ttl := p.leaseTTL()
	var gen uint64 // the roster's generation the board was last reconciled with
	var leading bool
	var leaseAt, triedAt time.Time // the lease last taken or kept; the last try
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		if p.Roster.Len() == 0 { // no group: nothing to lead, no lease to keep
			if leading {
				leading = false
				p.log.Info().Msg("group topics: no group left to lead")
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), ttl/3)
		if now := time.Now(); now.Sub(triedAt) >= ttl/3 {
			triedAt = now
			ok, err := p.glog.Lead(ctx, ttl)
			switch {
			case err != nil && leading:
				// Keep cutting until the lease surely ran out; a commit
				// after it is refused unless it still follows.
			case err != nil:
			case ok && !leading:
				leading, leaseAt = true, now
				p.log.Info().Msg("group topics: this node leads")
			case ok:
				leaseAt = now
			case !ok && leading:
				leading = false
				for _, g := range p.Board.Groups() {
					p.Board.Unwatch(g)
				}
				p.log.Info().Msg("group topics: another node leads")
			}
			if err != nil && leading && now.Sub(leaseAt) >= ttl {
				leading = false
				for _, g := range p.Board.Groups() {
					p.Board.Unwatch(g)
				}
			}
		}
		if !leading {
			gen = 0
		}
		if leading {
			gen = p.leadOnce(ctx, gen)
		}
		cancel()
	}
}

// leaseTTL is how long the leader's lease lives: the node TTL with Redis.
func (p *Plugin) leaseTTL() time.Duration {
	if p.cfg.redisConfigured() || p.redisC != nil {
		return p.cfg.Redis.NodeTTL.D()
	}
	return 3 * time.Second
}

// leadTick is how often the leader looks for batches due: a batch is cut
// at most this long after its window ends.
const leadTick = 5 * time.Millisecond

// leadOnce, when the roster changed since gen, opens the groups the Board
// does not keep yet and drops the deleted ones; then it commits the batches
// due. It returns the roster's generation it reconciled with.
func (p *Plugin) leadOnce(ctx context.Context, gen uint64) uint64 {
	if now := p.Roster.Gen(); now != gen {
		kept := p.Board.Groups()
		for _, g := range p.Roster.Groups() {
			if _, ok := slices.BinarySearch(kept, g); !ok {
				if err := p.openGroup(ctx, g); err != nil {
					return gen
				}
			}
		}
		for _, g := range kept {
			if !p.Roster.Has(g) {
				p.Board.Unwatch(g)
				if err := p.glog.DropGroup(ctx, g); err != nil {
					return gen
				}
			}
		}
		gen = now
	}
	for _, d := range p.Board.Cut() {
		ok, err := p.glog.CommitBatch(ctx, d)
		if err != nil {
			// Not committed: read the group back and cut again from there.
			p.Board.Unwatch(d.Group)
			return 0
		}
		if !ok {
			p.log.Warn().Str("group", d.Group).Uint64("follows", d.Follows).Msg("group batch refused: the log moved on; read again")
			p.Board.Unwatch(d.Group)
			gen = 0
		}
	}
	return gen
}

// openGroup puts a group on the leader's Board at the version the log
// holds (or opens the log at version 1), then notes every member's current
// presence and membership, so the next batch carries what changed since.
func (p *Plugin) openGroup(ctx context.Context, group string) error {
	fresh, ok := p.Board.Watch(group)
	if !ok {
		return nil // deleted meanwhile
	}
	held, err := p.glog.OpenGroup(ctx, fresh)
	if err != nil {
		p.Board.Unwatch(group)
		return err
	}
	if held.Version == fresh.Version && sameMembers(held, fresh) {
		return nil
	}
	p.Board.Load(held)
	members, _ := p.Roster.Members(group)
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
	p.Board.Joined(changes)
	for _, u := range members {
		if s, ok := p.Publisher.Current(u); ok {
			p.Board.NoteShown(u, s)
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

// applyBatch applies a committed batch to this node's group topic (the
// pump calls it, in the log's order): the snapshot after it is retained,
// then the delta published. A batch that does not follow what the node
// holds (missed batches) has the group read again.
func (p *Plugin) applyBatch(d *roster.Delta) {
	if d == nil { // batches may have been missed: read every watched group
		for _, g := range p.Mirror.Groups() {
			p.resync(g)
		}
		return
	}
	p.groupMu.Lock()
	s, ok := p.Mirror.Apply(*d)
	if ok {
		p.retainGroup(s)
		if b, err := json.Marshal(d); err == nil {
			if err := p.srv.Publish(p.groupsTopic()+d.Group, b, false, 1); err != nil {
				p.log.Warn().Err(err).Str("group", d.Group).Msg("group delta not published")
			}
		}
	}
	held, watched := p.Mirror.Version(d.Group)
	p.groupMu.Unlock()
	if !ok && watched && d.Version > held {
		p.resync(d.Group)
	}
}

// resync queues a watched group to be read again from the log.
func (p *Plugin) resync(group string) {
	p.groupsMu.Lock()
	p.resyncs[group] = struct{}{}
	p.groupsMu.Unlock()
	kick(p.groupsKick)
}

// readSnapshots reads watched groups from the log (the group reader calls
// it): each one newer than what the node holds is retained and published
// live, as a snapshot.
func (p *Plugin) readSnapshots(groups map[string]struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		s, ok, err := p.glog.GroupSnapshot(ctx, g)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		p.groupMu.Lock()
		if p.Mirror.Set(s) {
			p.retainGroup(s)
			if b, err := json.Marshal(s); err == nil {
				_ = p.srv.Publish(p.groupsTopic()+g, b, false, 1)
			}
		}
		p.groupMu.Unlock()
	}
	return nil
}

// watchGroup watches group's topic on this node from now on, if the group
// exists and is not watched yet: its snapshot, read from the log, becomes
// the retained message before mochi reads the retained messages for the
// subscription that asked. A group the log does not hold yet is opened in
// it from this node's view (any node may: the first one wins, and the
// leader goes on from the log's version). A log that does not answer
// leaves the group watched empty, at version 0: its next batch has it read
// again.
func (p *Plugin) watchGroup(group string) {
	if presence.ValidGroup(group) != nil || !p.Roster.Has(group) {
		return
	}
	// Looked at under groupMu: a group is marked watched and its snapshot
	// retained in one step under it, so a subscriber that finds the group
	// watched finds its snapshot retained.
	p.groupMu.Lock()
	_, watched := p.Mirror.Version(group)
	p.groupMu.Unlock()
	if watched {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, ok, err := p.glog.GroupSnapshot(ctx, group)
	if err == nil && !ok {
		if fresh, exists := p.freshSnapshot(group); exists {
			s, err = p.glog.OpenGroup(ctx, fresh)
			ok = err == nil
		}
	}
	p.groupMu.Lock()
	defer p.groupMu.Unlock()
	if err != nil || !ok {
		p.Mirror.Set(roster.Snapshot{Group: group})
		return
	}
	if p.Mirror.Set(s) {
		p.retainGroup(s)
	}
}

// unwatchDeleted stops watching the deleted groups: their topic's
// retained snapshot is removed, so a new subscriber gets nothing.
func (p *Plugin) unwatchDeleted() {
	for _, g := range p.Mirror.Groups() {
		if p.Roster.Has(g) {
			continue
		}
		p.groupMu.Lock()
		p.Mirror.Drop(g)
		p.broker.Clear(p.groupsTopic() + g)
		p.groupMu.Unlock()
	}
}

// retainGroup stores a snapshot as its group topic's retained message.
func (p *Plugin) retainGroup(s roster.Snapshot) {
	b, err := json.Marshal(s)
	if err != nil {
		p.log.Error().Err(err).Str("group", s.Group).Msg("group snapshot")
		return
	}
	p.broker.Retain(p.groupsTopic()+s.Group, b)
}

// GroupSnapshot returns a group's snapshot as the group log holds it (the
// same on every node), false when the group does not exist. A group the
// leader has not opened yet is shown from this node's view, at version 0.
func (p *Plugin) GroupSnapshot(group string) (roster.Snapshot, bool) {
	if !p.Roster.Has(group) {
		return roster.Snapshot{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s, ok, err := p.glog.GroupSnapshot(ctx, group); err == nil && ok {
		return s, true
	}
	s, ok := p.freshSnapshot(group)
	s.Version = 0
	return s, ok
}

// freshSnapshot is a group's snapshot from this node's roster and published
// presence, at version 1 (a board of its own: the leader's is not touched).
func (p *Plugin) freshSnapshot(group string) (roster.Snapshot, bool) {
	return roster.NewBoard(p.Roster, time.Hour, p.now, p.Publisher.Current).Watch(group)
}
