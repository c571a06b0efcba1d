package presenced

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
	"github.com/presenced/presenced/store"
)

// Groups: the roster (who belongs to which group) is kept in the store,
// so every node agrees; each node holds it in memory (roster.Index), read
// whole at start and a group again whenever the store reports it changed.
// presence.groups_file is written to the store at start and by ReloadGroups
// (SIGHUP in the binary); the admin API writes single groups. The group
// topics are in grouptopic.go.

// groupsTopic is the prefix of the group topics.
func (p *Plugin) groupsTopic() string { return p.cfg.Presence.TopicPrefix + "/groups/" }

// sees is the Guard's rule for presence/users/{user} under the configured
// visibility.
func (p *Plugin) sees() func(viewer, user string) bool {
	switch p.cfg.Presence.Visibility {
	case configs.VisibilitySelf:
		return func(string, string) bool { return false }
	case configs.VisibilityGroups:
		return p.Roster.Mates
	}
	return nil
}

// seesGroup is the Guard's rule for presence/groups/{group}.
func (p *Plugin) seesGroup() func(viewer, group string) bool {
	switch p.cfg.Presence.Visibility {
	case configs.VisibilitySelf:
		return func(string, string) bool { return false }
	case configs.VisibilityGroups:
		return func(viewer, group string) bool { return p.Roster.Member(group, viewer) }
	}
	return nil
}

// ReloadGroups reads presence.groups_file again and writes it to the store:
// each group of the file gets exactly the file's members, and a group this
// node read from the file before that is no longer in it is deleted. Groups
// made through the admin API are left alone. Every node then reads the
// changed groups from the store (a GroupChanged event): a removed member
// stops receiving its former mates' presence at once (the Guard asks the
// roster on every delivery), an added one gets their current presence
// within a second, and the kept group topics follow.
func (p *Plugin) ReloadGroups() error {
	if p.cfg.Presence.GroupsFile == "" {
		return nil
	}
	groups, err := roster.LoadFile(p.cfg.Presence.GroupsFile)
	if err != nil {
		return fmt.Errorf("presenced: groups: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return p.SetGroups(ctx, groups)
}

// SetGroups writes groups (name -> members) to the store as ReloadGroups
// does with the file's.
func (p *Plugin) SetGroups(ctx context.Context, groups map[string][]string) error {
	p.fileMu.Lock()
	defer p.fileMu.Unlock()
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		if err := p.groups.SetGroup(ctx, g, groups[g]); err != nil {
			return fmt.Errorf("presenced: group %s: %w", g, err)
		}
	}
	for g := range p.fileGroups {
		if _, ok := groups[g]; !ok {
			if err := p.groups.DeleteGroup(ctx, g); err != nil {
				return fmt.Errorf("presenced: group %s: %w", g, err)
			}
		}
	}
	p.fileGroups = make(map[string]struct{}, len(groups))
	for g := range groups {
		p.fileGroups[g] = struct{}{}
	}
	p.log.Info().Int("groups", len(groups)).Msg("groups file written to the store")
	return nil
}

// groupChanged queues a group to be read again from the store ("": all).
func (p *Plugin) groupChanged(group string) {
	p.groupsMu.Lock()
	p.groupsDirty[group] = struct{}{}
	p.groupsMu.Unlock()
	kick(p.groupsKick)
}

// kick wakes a worker without waiting.
func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// worker runs work each time it is kicked, and a second after a run that
// failed, until Stop.
func (p *Plugin) worker(kicked <-chan struct{}, work func() error) {
	defer p.wg.Done()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-kicked:
		case <-retry.C:
		}
		if work() != nil {
			retry.Reset(time.Second)
		}
	}
}

// readChanged reads the changed groups from the store into the roster
// (handing the membership changes to the pump), and the watched groups to
// resync from the group log; what fails is tried again.
func (p *Plugin) readChanged() error {
	p.groupsMu.Lock()
	dirty, resyncs := p.groupsDirty, p.resyncs
	p.groupsDirty, p.resyncs = make(map[string]struct{}), make(map[string]struct{})
	p.groupsMu.Unlock()
	err := p.readGroups(dirty)
	if err != nil {
		p.groupsMu.Lock()
		maps.Copy(p.groupsDirty, dirty)
		p.groupsMu.Unlock()
	}
	if e := p.readSnapshots(resyncs); e != nil {
		err = e
		p.groupsMu.Lock()
		maps.Copy(p.resyncs, resyncs)
		p.groupsMu.Unlock()
	}
	if err != nil {
		p.log.Debug().Err(err).Msg("groups not read; trying again")
	}
	return err
}

// readGroups reads the named groups ("" for all) and applies them.
func (p *Plugin) readGroups(names map[string]struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var changes []roster.Change
	if _, all := names[""]; all {
		groups, err := p.groups.AllGroups(ctx)
		if err != nil {
			return err
		}
		changes = p.Roster.Replace(groups)
	} else {
		for _, g := range slices.Sorted(maps.Keys(names)) {
			members, ok, err := p.groups.Members(ctx, g)
			if err != nil {
				return err
			}
			changes = append(changes, p.Roster.SetMembers(g, members, ok)...)
		}
	}
	p.unwatchDeleted()
	if len(changes) == 0 {
		return nil
	}
	select {
	case p.joins <- changes:
	case <-p.stop:
	}
	return nil
}

// watch is the Groups hook's Watch: a subscription to a group topic by
// one who may read it keeps the group.
func (p *Plugin) watch(cl *mqtt.Client, filter string) {
	group, ok := p.groupFilter(filter)
	if !ok {
		return
	}
	if viewer, service := p.Hook.Viewer(cl); !service {
		if rule := p.seesGroup(); rule != nil && !rule(viewer, group) {
			return
		}
	}
	p.watchGroup(group)
}

// joined applies membership changes (from the pump): the kept groups
// follow, and each new pair of mates gets the other's current presence on
// the subscriptions that now may read it. Per group, each user's topic is
// looked up once: a user joining a group of N members costs N+1 lookups,
// and N joining at once (a new group) 2N, not N².
func (p *Plugin) joined(changes []roster.Change) {
	p.Board.Joined(changes)
	if p.cfg.Presence.Visibility != configs.VisibilityGroups {
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
		members, _ := p.Roster.Members(g)
		for _, m := range members {
			if _, joined := users[m]; joined {
				// Every member's subscriptions may now read m.
				p.introduce(m, func(viewer string) bool { return viewer != m && p.Roster.Member(g, viewer) })
			} else {
				// Those who joined may now read m.
				p.introduce(m, func(viewer string) bool { _, ok := users[viewer]; return ok })
			}
		}
	}
}

// introduce sends user's current presence to the subscriptions to it of the
// viewers who now may read it (they could not before).
func (p *Plugin) introduce(user string, now func(viewer string) bool) {
	var to []*mqtt.Client
	subs := p.srv.Topics.Subscribers(p.Publisher.Topic(user))
	for id := range subs.Subscriptions {
		cl, ok := p.srv.Clients.Get(id)
		if !ok {
			continue
		}
		if u, service := p.Hook.Viewer(cl); !service && u != "" && now(u) {
			to = append(to, cl)
		}
	}
	if len(to) > 0 {
		p.Publisher.Resend(user, p.broker.resend(user, to))
	}
}

// groupFilter returns the group of a presence/groups/{group} filter without
// wildcards.
func (p *Plugin) groupFilter(filter string) (string, bool) {
	g, ok := strings.CutPrefix(filter, p.groupsTopic())
	return g, ok && g != "" && !strings.ContainsAny(g, "/+#")
}

// GroupSizes returns every group's name and size.
func (p *Plugin) GroupSizes() map[string]int {
	out := make(map[string]int)
	for _, g := range p.Roster.Groups() {
		out[g] = p.Roster.Size(g)
	}
	return out
}

// Groups is where the groups are kept (the store): the admin API writes
// through it, and every node follows.
func (p *Plugin) Groups() store.Groups { return p.groups }

// ClaimGroups records the groups a user's token claims (called as the user
// connects; it never waits for the store): the user is added to each group
// claimed, and removed from each group its previous token claimed that this
// one does not. Invalid group names are ignored. The writes are made by a
// worker, the latest claim per user winning; this node's roster has the
// user in the claimed groups at once, so that the user's first SUBSCRIBE,
// right after CONNACK, may already read them (the other nodes follow the
// store).
func (p *Plugin) ClaimGroups(user string, groups []string) {
	valid := make([]string, 0, len(groups))
	for _, g := range groups {
		if presence.ValidGroup(g) == nil {
			valid = append(valid, g)
		}
	}
	slices.Sort(valid)
	valid = slices.Compact(valid)
	for _, g := range valid {
		p.Roster.Add(g, user)
	}
	p.claimsMu.Lock()
	p.claimsDirty[user] = valid
	p.claimsMu.Unlock()
	kick(p.claimsKick)
}

// writeDirtyClaims writes the claims queued; a failed one is tried again
// unless a newer claim of the same user came meanwhile.
func (p *Plugin) writeDirtyClaims() error {
	p.claimsMu.Lock()
	dirty := p.claimsDirty
	p.claimsDirty = make(map[string][]string)
	p.claimsMu.Unlock()
	var failed error
	for user, groups := range dirty {
		if err := p.writeClaims(user, groups); err != nil {
			p.log.Debug().Err(err).Str("user", user).Msg("claimed groups not written; trying again")
			p.claimsMu.Lock()
			if _, newer := p.claimsDirty[user]; !newer {
				p.claimsDirty[user] = groups
			}
			p.claimsMu.Unlock()
			failed = err
		}
	}
	return failed
}

func (p *Plugin) writeClaims(user string, groups []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prev, err := p.claims.SwapClaims(ctx, user, groups)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if !slices.Contains(prev, g) || !p.Roster.Member(g, user) {
			if err := p.groups.AddMembers(ctx, g, []string{user}); err != nil {
				return err
			}
		}
	}
	for _, g := range prev {
		if !slices.Contains(groups, g) {
			if err := p.groups.RemoveMembers(ctx, g, []string{user}); err != nil {
				return err
			}
		}
	}
	return nil
}
