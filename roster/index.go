package roster

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Change is one membership change: user joined (Added) or left group.
type Change struct {
	Group, User string
	Added       bool
}

// Index is who belongs to which group, in memory, read on every delivery
// (Mates) and written rarely (a groups file, the admin API, the store's
// events). Its methods may be called from any goroutine.
type Index struct {
	gen     atomic.Uint64 // counts the changes
	changed chan struct{} // signalled (not blocking, 1 kept) at every change
	mu      sync.RWMutex
	members map[string]map[string]struct{} // group -> users; a group may be empty
	of      map[string]map[string]struct{} // user -> groups
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{members: make(map[string]map[string]struct{}), of: make(map[string]map[string]struct{}), changed: make(chan struct{}, 1)}
}

// Changed is signalled after a change (one signal is kept for a reader
// that was busy): a reader that waits on it needs no timer to notice.
func (x *Index) Changed() <-chan struct{} { return x.changed }

// bump counts a change and signals it. x.mu is held.
func (x *Index) bump() {
	x.gen.Add(1)
	select {
	case x.changed <- struct{}{}:
	default:
	}
}

// Mates reports whether a and b share a group (a user is not its own mate
// unless it is in a group).
func (x *Index) Mates(a, b string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ga, gb := x.of[a], x.of[b]
	if len(gb) < len(ga) {
		ga, gb = gb, ga
	}
	for g := range ga {
		if _, ok := gb[g]; ok {
			return true
		}
	}
	return false
}

// Has reports whether group exists (it may be empty).
func (x *Index) Has(group string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, ok := x.members[group]
	return ok
}

// Member reports whether user is in group.
func (x *Index) Member(group, user string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, ok := x.members[group][user]
	return ok
}

// GroupsOf returns user's groups, sorted.
func (x *Index) GroupsOf(user string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return sorted(x.of[user])
}

// Members returns group's members, sorted, and whether the group exists.
func (x *Index) Members(group string) ([]string, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	m, ok := x.members[group]
	return sorted(m), ok
}

// Groups returns every group's name, sorted.
func (x *Index) Groups() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]string, 0, len(x.members))
	for g := range x.members {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// Gen changes with every change of the index.
func (x *Index) Gen() uint64 { return x.gen.Load() }

// Len returns the number of groups.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.members)
}

// Size returns the number of members of group.
func (x *Index) Size(group string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.members[group])
}

// Create makes group exist, empty if it did not; it reports whether it is
// new.
func (x *Index) Create(group string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.bump()
	if _, ok := x.members[group]; ok {
		return false
	}
	x.members[group] = make(map[string]struct{})
	return true
}

// Add puts users in group (creating it) and returns the changes made.
func (x *Index) Add(group string, users ...string) []Change {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.bump()
	var out []Change
	for _, u := range users {
		if x.add(group, u) {
			out = append(out, Change{Group: group, User: u, Added: true})
		}
	}
	if x.members[group] == nil {
		x.members[group] = make(map[string]struct{})
	}
	return out
}

// Remove takes users out of group and returns the changes made.
func (x *Index) Remove(group string, users ...string) []Change {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.bump()
	var out []Change
	for _, u := range users {
		if x.remove(group, u) {
			out = append(out, Change{Group: group, User: u})
		}
	}
	return out
}

// Delete removes group and returns its members' removals.
func (x *Index) Delete(group string) []Change {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.bump()
	var out []Change
	for _, u := range sorted(x.members[group]) {
		x.remove(group, u)
		out = append(out, Change{Group: group, User: u})
	}
	delete(x.members, group)
	return out
}

// SetMembers makes group hold exactly members, or removes it when it does
// not exist, and returns the changes made (removals first).
func (x *Index) SetMembers(group string, members []string, exists bool) []Change {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.bump()
	var out []Change
	want := set(members)
	for _, u := range sorted(x.members[group]) {
		if _, ok := want[u]; !ok || !exists {
			x.remove(group, u)
			out = append(out, Change{Group: group, User: u})
		}
	}
	if !exists {
		delete(x.members, group)
		return out
	}
	if x.members[group] == nil {
		x.members[group] = make(map[string]struct{})
	}
	for _, u := range sorted(want) {
		if x.add(group, u) {
			out = append(out, Change{Group: group, User: u, Added: true})
		}
	}
	return out
}

// Replace makes the index hold exactly groups (name -> members) and returns
// the changes made, groups in name order, removals first.
func (x *Index) Replace(groups map[string][]string) []Change {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.bump()
	var out []Change
	for _, g := range sorted(keys(x.members)) {
		want := set(groups[g])
		for _, u := range sorted(x.members[g]) {
			if _, ok := want[u]; !ok {
				x.remove(g, u)
				out = append(out, Change{Group: g, User: u})
			}
		}
		if _, ok := groups[g]; !ok {
			delete(x.members, g)
		}
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	slices.Sort(names)
	for _, g := range names {
		if x.members[g] == nil {
			x.members[g] = make(map[string]struct{})
		}
		users := slices.Clone(groups[g])
		slices.Sort(users)
		for _, u := range slices.Compact(users) {
			if x.add(g, u) {
				out = append(out, Change{Group: g, User: u, Added: true})
			}
		}
	}
	return out
}

func (x *Index) add(group, user string) bool {
	m := x.members[group]
	if m == nil {
		m = make(map[string]struct{})
		x.members[group] = m
	}
	if _, ok := m[user]; ok {
		return false
	}
	m[user] = struct{}{}
	g := x.of[user]
	if g == nil {
		g = make(map[string]struct{})
		x.of[user] = g
	}
	g[group] = struct{}{}
	return true
}

func (x *Index) remove(group, user string) bool {
	m := x.members[group]
	if _, ok := m[user]; !ok {
		return false
	}
	delete(m, user)
	g := x.of[user]
	delete(g, group)
	if len(g) == 0 {
		delete(x.of, user)
	}
	return true
}

func sorted(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func keys[V any](m map[string]V) map[string]struct{} {
	out := make(map[string]struct{}, len(m))
	for k := range m {
		out[k] = struct{}{}
	}
	return out
}

func set(users []string) map[string]struct{} {
	out := make(map[string]struct{}, len(users))
	for _, u := range users {
		out[u] = struct{}{}
	}
	return out
}
