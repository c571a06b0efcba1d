package store

import (
	"context"
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"
)

// Groups are kept in the store, so that every node agrees on them: named
// sets of users. Every change is reported to every node as a GroupChanged
// event naming the group, and each node reads that group again (Members).
// A group may be empty; deleting it removes it.
type Groups interface {
	// SetGroup makes group exist with exactly members.
	SetGroup(ctx context.Context, group string, members []string) error
	// AddMembers puts users in group, creating it.
	AddMembers(ctx context.Context, group string, users []string) error
	// RemoveMembers takes users out of group.
	RemoveMembers(ctx context.Context, group string, users []string) error
	// DeleteGroup removes group.
	DeleteGroup(ctx context.Context, group string) error
	// Members returns group's members, and whether it exists.
	Members(ctx context.Context, group string) ([]string, bool, error)
	// AllGroups returns every group with its members.
	AllGroups(ctx context.Context) (map[string][]string, error)
}

// --- memory ---

// SetGroup implements Groups.
func (m *Memory) SetGroup(_ context.Context, group string, members []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := make(map[string]struct{}, len(members))
	for _, u := range members {
		g[u] = struct{}{}
	}
	m.groupsLocked()[group] = g
	m.report(Event{Kind: GroupChanged, Group: group})
	return nil
}

// AddMembers implements Groups.
func (m *Memory) AddMembers(_ context.Context, group string, users []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	gs := m.groupsLocked()
	g := gs[group]
	if g == nil {
		g = make(map[string]struct{}, len(users))
		gs[group] = g
	}
	for _, u := range users {
		g[u] = struct{}{}
	}
	m.report(Event{Kind: GroupChanged, Group: group})
	return nil
}

// RemoveMembers implements Groups.
func (m *Memory) RemoveMembers(_ context.Context, group string, users []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groupsLocked()[group]
	for _, u := range users {
		delete(g, u)
	}
	m.report(Event{Kind: GroupChanged, Group: group})
	return nil
}

// DeleteGroup implements Groups.
func (m *Memory) DeleteGroup(_ context.Context, group string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.groupsLocked(), group)
	m.report(Event{Kind: GroupChanged, Group: group})
	return nil
}

// Members implements Groups.
func (m *Memory) Members(_ context.Context, group string) ([]string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.groupsLocked()[group]
	return slices.Sorted(maps.Keys(g)), ok, nil
}

// AllGroups implements Groups.
func (m *Memory) AllGroups(_ context.Context) (map[string][]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]string, len(m.groups))
	for name, g := range m.groups {
		out[name] = slices.Sorted(maps.Keys(g))
	}
	return out, nil
}

func (m *Memory) groupsLocked() map[string]map[string]struct{} {
	if m.groups == nil {
		m.groups = make(map[string]map[string]struct{})
	}
	return m.groups
}

// --- Redis ---
//
// A group is a set P:g:{group} (its own slot), listed in the registry
// P:groups. Each change runs one script on the group's key that also
// publishes the group's name on P:gfeed, which every node subscribes to;
// the registry is written next to it (another slot, so not in the same
// step: a registry that missed a group is mended by the next change or
// SetGroup of it, and AllGroups reads only groups whose set exists or that
// exist empty).

func (r *Redis) group(ctx context.Context, op, group string, users []string) error {
	args := make([]any, 0, 3+len(users))
	args = append(args, op, r.k.groupFeed(), group)
	for _, u := range users {
		args = append(args, u)
	}
	if err := scriptGroup.Run(ctx, r.c, []string{r.k.group(group)}, args...).Err(); err != nil {
		return r.fail("group", err)
	}
	var err error
	if op == "del" {
		err = r.c.SRem(ctx, r.k.groups(), group).Err()
	} else {
		err = r.c.SAdd(ctx, r.k.groups(), group).Err()
	}
	if err != nil {
		return r.fail("group registry", err)
	}
	r.up()
	return nil
}

// SetGroup implements Groups.
func (r *Redis) SetGroup(ctx context.Context, group string, members []string) error {
	return r.group(ctx, "set", group, members)
}

// AddMembers implements Groups.
func (r *Redis) AddMembers(ctx context.Context, group string, users []string) error {
	return r.group(ctx, "add", group, users)
}

// RemoveMembers implements Groups.
func (r *Redis) RemoveMembers(ctx context.Context, group string, users []string) error {
	return r.group(ctx, "rem", group, users)
}

// DeleteGroup implements Groups.
func (r *Redis) DeleteGroup(ctx context.Context, group string) error {
	return r.group(ctx, "del", group, nil)
}

// Members implements Groups.
func (r *Redis) Members(ctx context.Context, group string) ([]string, bool, error) {
	m, err := r.c.SMembers(ctx, r.k.group(group)).Result()
	if err != nil {
		return nil, false, r.fail("group", err)
	}
	if len(m) == 0 {
		return nil, false, nil
	}
	m = slices.DeleteFunc(m, func(u string) bool { return u == "" })
	slices.Sort(m)
	return m, true, nil
}

// AllGroups implements Groups.
func (r *Redis) AllGroups(ctx context.Context) (map[string][]string, error) {
	names, err := r.c.SMembers(ctx, r.k.groups()).Result()
	if err != nil {
		return nil, r.fail("groups", err)
	}
	cmds := make([]*redis.StringSliceCmd, len(names))
	_, err = r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, g := range names {
			cmds[i] = p.SMembers(ctx, r.k.group(g))
		}
		return nil
	})
	if err != nil {
		return nil, r.fail("groups", err)
	}
	out := make(map[string][]string, len(names))
	for i, g := range names {
		m := cmds[i].Val()
		if len(m) == 0 {
			continue // deleted (the registry is mended by the next change)
		}
		m = slices.DeleteFunc(m, func(u string) bool { return u == "" })
		slices.Sort(m)
		out[g] = m
	}
	r.up()
	return out, nil
}

// Claims are the groups a user's token claimed when it last connected
// (auth.jwt.groups_claim): SwapClaims stores the new list and returns the
// previous one, so that the node adds the user to the groups newly claimed
// and removes it from those no longer claimed.
type Claims interface {
	SwapClaims(ctx context.Context, user string, groups []string) (prev []string, err error)
}

// SwapClaims implements Claims.
func (m *Memory) SwapClaims(_ context.Context, user string, groups []string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claims == nil {
		m.claims = make(map[string][]string)
	}
	prev := m.claims[user]
	m.claims[user] = slices.Clone(groups)
	return prev, nil
}

// SwapClaims implements Claims.
func (r *Redis) SwapClaims(ctx context.Context, user string, groups []string) ([]string, error) {
	args := make([]any, len(groups))
	for i, g := range groups {
		args[i] = g
	}
	prev, err := scriptClaims.Run(ctx, r.c, []string{r.k.claims(user)}, args...).StringSlice()
	if err != nil {
		return nil, r.fail("claims", err)
	}
	r.up()
	return prev, nil
}
