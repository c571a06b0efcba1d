package groups

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

// ReloadFile reads the groups file again and writes it to the store: each
// group of the file gets exactly the file's members, and a group this node
// read from the file before that is no longer in it is deleted. Groups made
// through the admin API are left alone. Every node then reads the changed
// groups from the store (GroupChanged): a removed member stops receiving
// its former mates' presence at once (the Guard asks the roster on every
// delivery), an added one gets their current presence within a second, and
// the kept group topics follow. Without a file it does nothing.
func (s *Stage) ReloadFile() error {
	if s.o.File == "" {
		return nil
	}
	groups, err := roster.LoadFile(s.o.File)
	if err != nil {
		return fmt.Errorf("presenced: groups: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return s.SetGroups(ctx, groups)
}

// SetGroups writes groups (name -> members) to the store as ReloadFile
// does with the file's.
func (s *Stage) SetGroups(ctx context.Context, groups map[string][]string) error {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		if err := s.o.Store.SetGroup(ctx, g, groups[g]); err != nil {
			return fmt.Errorf("presenced: group %s: %w", g, err)
		}
	}
	for g := range s.fileGroups {
		if _, ok := groups[g]; !ok {
			if err := s.o.Store.DeleteGroup(ctx, g); err != nil {
				return fmt.Errorf("presenced: group %s: %w", g, err)
			}
		}
	}
	s.fileGroups = make(map[string]struct{}, len(groups))
	for g := range groups {
		s.fileGroups[g] = struct{}{}
	}
	s.o.Log.Info("groups file written to the store", "groups", len(groups))
	return nil
}

// Changed queues a group to be read again from the store ("": all), on a
// GroupChanged event.
func (s *Stage) Changed(group string) {
	s.readMu.Lock()
	s.dirty[group] = struct{}{}
	s.readMu.Unlock()
	wake(s.readWake)
}

// readChanged reads the changed groups from the store into the roster
// (handing the membership changes to the pump), and the watched groups to
// resync from the group log; what fails is tried again.
func (s *Stage) readChanged() error {
	s.readMu.Lock()
	dirty, resyncs, listens := s.dirty, s.resyncs, s.listens
	s.dirty, s.resyncs, s.listens = make(map[string]struct{}), make(map[string]struct{}), make(map[string]bool)
	s.readMu.Unlock()
	if len(listens) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := s.applyListens(ctx, listens)
		cancel()
		if err != nil {
			s.readMu.Lock()
			maps.Copy(s.resyncs, resyncs) // hear first: read them once heard
			maps.Copy(s.dirty, dirty)
			s.readMu.Unlock()
			return err
		}
	}
	err := s.readGroups(dirty)
	if err != nil {
		s.readMu.Lock()
		maps.Copy(s.dirty, dirty)
		s.readMu.Unlock()
	}
	if e := s.readSnapshots(resyncs); e != nil {
		err = e
		s.readMu.Lock()
		maps.Copy(s.resyncs, resyncs)
		s.readMu.Unlock()
	}
	if err != nil {
		s.o.Log.Debug("groups not read; trying again", "err", err)
	}
	return err
}

// readGroups reads the named groups ("" for all) and applies them.
func (s *Stage) readGroups(names map[string]struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.applyMu.Lock()
	var changes []roster.Change
	if _, all := names[""]; all {
		groups, err := s.o.Store.AllGroups(ctx)
		if err != nil {
			s.applyMu.Unlock()
			return err
		}
		// The claims held and the roster are read and set under claimsMu,
		// which Claim holds while it records a claim and adds its user: a
		// claim is either in what is set here or added after it.
		s.claimsMu.Lock()
		held := s.heldClaimsLocked()
		for g := range held {
			groups[g] = withClaimed(groups[g], held[g])
		}
		changes = s.index.Replace(groups)
		s.claimsMu.Unlock()
	} else {
		for _, g := range slices.Sorted(maps.Keys(names)) {
			members, ok, err := s.o.Store.Members(ctx, g)
			if err != nil {
				s.applyMu.Unlock()
				return err
			}
			s.claimsMu.Lock() // as above
			if claimed := s.heldClaimsLocked()[g]; len(claimed) > 0 {
				members, ok = withClaimed(members, claimed), true
			}
			changes = append(changes, s.index.SetMembers(g, members, ok)...)
			s.claimsMu.Unlock()
		}
	}
	s.applyMu.Unlock()
	s.unwatchDeleted()
	if len(changes) == 0 {
		return nil
	}
	select {
	case s.joins <- changes:
	case <-s.stop:
	}
	return nil
}

// Joined applies membership changes (the pump, from Joins): the kept
// groups follow, and each new pair of mates gets the other's current
// presence on the subscriptions that now may read it. Per group, each
// user's topic is looked up once: a user joining a group of N members
// costs N+1 lookups, and N joining at once (a new group) 2N, not N².
func (s *Stage) Joined(changes []roster.Change) {
	s.board.Joined(changes)
	if s.o.Visibility != ByGroups || s.o.Introduce == nil {
		return
	}
	added := make(map[string]map[string]struct{}) // group -> users who joined it
	for _, c := range changes {
		if c.Added {
			if added[c.Group] == nil {
				added[c.Group] = make(map[string]struct{})
			}
			added[c.Group][c.User] = struct{}{}
		}
	}
	for g, users := range added {
		members, _ := s.index.Members(g)
		for _, m := range members {
			if _, joined := users[m]; joined {
				// Every member's subscriptions may now read m.
				s.o.Introduce(m, func(viewer string) bool { return viewer != m && s.index.Member(g, viewer) })
			} else {
				// Those who joined may now read m.
				s.o.Introduce(m, func(viewer string) bool { _, ok := users[viewer]; return ok })
			}
		}
	}
}

// Claim records the groups a user's token claims (called as the user
// connects; it never waits for the store): the user is added to each group
// claimed, and removed from each group its previous token claimed that this
// one does not. Invalid group names are ignored. The writes are made by a
// worker, the latest claim per user winning; this node's roster has the
// user in the claimed groups at once, so that the user's first SUBSCRIBE,
// right after CONNACK, may already read them (the other nodes follow the
// store).
func (s *Stage) Claim(user string, groups []string) {
	valid := make([]string, 0, len(groups))
	for _, g := range groups {
		if presence.ValidGroup(g) == nil {
			valid = append(valid, g)
		}
	}
	slices.Sort(valid)
	valid = slices.Compact(valid)
	s.claimsMu.Lock() // a read of the store sets the roster under it too (readGroups)
	for _, g := range valid {
		s.index.Add(g, user)
	}
	s.claimsDirty[user] = valid
	s.claimsHeld[user] = valid // in force until written, whatever a read of the store says meanwhile
	s.claimsMu.Unlock()
	wake(s.claimsWake)
}

// heldClaimsLocked returns, per group, the users whose claim of it is not
// yet known written to the store. s.applyMu and s.claimsMu are held.
func (s *Stage) heldClaimsLocked() map[string][]string {
	out := make(map[string][]string)
	for user, groups := range s.claimsHeld {
		for _, g := range groups {
			out[g] = append(out[g], user)
		}
	}
	return out
}

// withClaimed returns members with the claimed users added.
func withClaimed(members, claimed []string) []string {
	out := slices.Clone(members)
	for _, u := range claimed {
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

// written lets go of user's claim of groups once it is written, unless a
// newer claim of the user came meanwhile.
func (s *Stage) written(user string, groups []string) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.claimsMu.Lock()
	defer s.claimsMu.Unlock()
	if _, newer := s.claimsDirty[user]; !newer && slices.Equal(s.claimsHeld[user], groups) {
		delete(s.claimsHeld, user)
	}
}

// writeDirtyClaims writes the claims queued; a failed one is tried again
// unless a newer claim of the same user came meanwhile.
func (s *Stage) writeDirtyClaims() error {
	s.claimsMu.Lock()
	dirty := s.claimsDirty
	s.claimsDirty = make(map[string][]string)
	s.claimsMu.Unlock()
	var failed error
	for user, groups := range dirty {
		err := s.writeClaims(user, groups)
		if err == nil {
			s.written(user, groups)
		}
		if err != nil {
			s.o.Log.Debug("claimed groups not written; trying again", "err", err, "user", user)
			s.claimsMu.Lock()
			if _, newer := s.claimsDirty[user]; !newer {
				s.claimsDirty[user] = groups
			}
			s.claimsMu.Unlock()
			failed = err
		}
	}
	return failed
}

func (s *Stage) writeClaims(user string, groups []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prev, err := s.o.Store.SwapClaims(ctx, user, groups)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if !slices.Contains(prev, g) || !s.index.Member(g, user) {
			if err := s.o.Store.AddMembers(ctx, g, []string{user}); err != nil {
				return err
			}
		}
	}
	for _, g := range prev {
		if !slices.Contains(groups, g) {
			if err := s.o.Store.RemoveMembers(ctx, g, []string{user}); err != nil {
				return err
			}
		}
	}
	return nil
}
