package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// groupsContract runs the same checks on any Groups; changed reports the
// groups announced since the last call (on this store's own feed).
func groupsContract(t *testing.T, g Groups, changed func() []string) {
	t.Helper()
	ctx := context.Background()
	check := func(group string, want []string, exists bool) {
		t.Helper()
		m, ok, err := g.Members(ctx, group)
		if err != nil || ok != exists || !slices.Equal(m, want) {
			t.Fatalf("%s: members %v exists %v (%v), want %v %v", group, m, ok, err, want, exists)
		}
	}
	if err := g.SetGroup(ctx, "team", []string{"bob", "ann"}); err != nil {
		t.Fatal(err)
	}
	check("team", []string{"ann", "bob"}, true)
	if err := g.AddMembers(ctx, "team", []string{"cat", "ann"}); err != nil {
		t.Fatal(err)
	}
	check("team", []string{"ann", "bob", "cat"}, true)
	if err := g.RemoveMembers(ctx, "team", []string{"bob", "zed"}); err != nil {
		t.Fatal(err)
	}
	check("team", []string{"ann", "cat"}, true)
	if err := g.SetGroup(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	check("empty", nil, true)
	if err := g.AddMembers(ctx, "new", []string{"dan"}); err != nil {
		t.Fatal(err)
	}
	all, err := g.AllGroups(ctx)
	if err != nil || len(all) != 3 || !slices.Equal(all["team"], []string{"ann", "cat"}) || len(all["empty"]) != 0 || !slices.Equal(all["new"], []string{"dan"}) {
		t.Fatalf("all groups %v %v", all, err)
	}
	if err := g.DeleteGroup(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	check("team", nil, false)
	if all, _ := g.AllGroups(ctx); len(all) != 2 {
		t.Fatalf("after delete: %v", all)
	}
	testkit.Wait(t, 5*time.Second, "every change announced", func() error {
		got := changed()
		slices.Sort(got)
		got = slices.Compact(got)
		return testkit.Why(slices.Equal(got, []string{"empty", "new", "team"}), "announced ["+strings.Join(got, ",")+"]")
	})
}

func TestMemoryGroups(t *testing.T) {
	feed := NewFeed()
	m := NewMemory(presence.NewRules(nil), time.Now, feed.Push)
	var seen []string
	groupsContract(t, m, func() []string {
		for _, e := range feed.Take() {
			if e.Kind == GroupChanged {
				seen = append(seen, e.Group)
			}
		}
		return slices.Clone(seen)
	})
}

// With Redis, a change made through one node's store is announced to
// another's (the group feed), and a Cluster keeps each group in its slot.
func TestRedisGroups(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := newRedisStore(t, srv.Client(t), "n1")
	_, colB := newRedisStore(t, srv.Client(t), "n2")
	groupsContract(t, a, colB.groupsAnnounced)
}

func TestRedisClusterGroups(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	a, _ := newRedisStore(t, cl.Client(t), "n1")
	_, colB := newRedisStore(t, cl.Client(t), "n2")
	groupsContract(t, a, colB.groupsAnnounced)
}

// groupsAnnounced returns the groups a store reported changed.
func (e *events) groupsAnnounced() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.others {
		if ev.Kind == GroupChanged && ev.Group != "" {
			out = append(out, ev.Group)
		}
	}
	return out
}

func claimsContract(t *testing.T, c Claims) {
	t.Helper()
	ctx := context.Background()
	steps := []struct{ set, prev []string }{
		{[]string{"a", "b"}, nil},
		{[]string{"b"}, []string{"a", "b"}},
		{nil, []string{"b"}},
		{[]string{"c"}, nil},
	}
	for i, s := range steps {
		prev, err := c.SwapClaims(ctx, "alice", s.set)
		slices.Sort(prev)
		if err != nil || !slices.Equal(prev, s.prev) {
			t.Fatalf("step %d: previous %v (%v), want %v", i, prev, err, s.prev)
		}
	}
	if prev, _ := c.SwapClaims(ctx, "bob", nil); len(prev) != 0 {
		t.Fatalf("bob's claims leaked: %v", prev)
	}
}

func TestMemoryClaims(t *testing.T) {
	claimsContract(t, NewMemory(presence.NewRules(nil), time.Now, NewFeed().Push))
}

func TestRedisClaims(t *testing.T) {
	r, _ := newRedisStore(t, redistest.Start(t).Client(t), "n1")
	claimsContract(t, r)
}
