package roster

import (
	"fmt"
	"slices"
	"testing"
)

func TestIndexMembership(t *testing.T) {
	x := NewIndex()
	if c := x.Add("team", "ann", "bob", "ann"); len(c) != 2 || !c[0].Added {
		t.Fatalf("add: %+v", c)
	}
	x.Add("ops", "bob", "cat")
	x.Create("empty")
	cases := []struct {
		a, b string
		want bool
	}{
		{"ann", "bob", true}, {"bob", "cat", true}, {"ann", "cat", false},
		{"ann", "ann", true}, {"dan", "dan", false}, {"ann", "dan", false},
	}
	for _, c := range cases {
		if got := x.Mates(c.a, c.b); got != c.want {
			t.Errorf("Mates(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	if g := x.GroupsOf("bob"); !slices.Equal(g, []string{"ops", "team"}) {
		t.Fatalf("groups of bob: %v", g)
	}
	if m, ok := x.Members("empty"); !ok || len(m) != 0 {
		t.Fatalf("empty group: %v %v", m, ok)
	}
	if c := x.Remove("ops", "bob", "zed"); len(c) != 1 || c[0] != (Change{Group: "ops", User: "bob"}) {
		t.Fatalf("remove: %+v", c)
	}
	if x.Mates("bob", "cat") {
		t.Fatal("bob and cat still mates")
	}
	if c := x.Delete("team"); len(c) != 2 || x.Has("team") || len(x.GroupsOf("ann")) != 0 {
		t.Fatalf("delete: %+v, groups of ann %v", c, x.GroupsOf("ann"))
	}
	if !slices.Equal(x.Groups(), []string{"empty", "ops"}) {
		t.Fatalf("groups %v", x.Groups())
	}
}

// Replace moves the index to a new whole state and says what changed,
// removals first.
func TestIndexReplace(t *testing.T) {
	x := NewIndex()
	x.Replace(map[string][]string{"team": {"ann", "bob"}, "old": {"cat"}})
	c := x.Replace(map[string][]string{"team": {"bob", "dan", "dan"}, "new": {}})
	want := []Change{{Group: "old", User: "cat"}, {Group: "team", User: "ann"}, {Group: "team", User: "dan", Added: true}}
	if !slices.Equal(c, want) {
		t.Fatalf("changes %+v, want %+v", c, want)
	}
	if !slices.Equal(x.Groups(), []string{"new", "team"}) || x.Mates("ann", "bob") || !x.Mates("bob", "dan") {
		t.Fatalf("after replace: groups %v", x.Groups())
	}
}

// A group of 10,000 members, each also in its own small group: Mates stays
// a lookup in the smaller side.
func TestIndexLarge(t *testing.T) {
	x := NewIndex()
	users := make([]string, 10000)
	for i := range users {
		users[i] = fmt.Sprintf("u%05d", i)
		x.Add(fmt.Sprintf("g%05d", i), users[i])
	}
	x.Add("all", users...)
	if x.Size("all") != 10000 || !x.Mates("u00000", "u09999") || len(x.GroupsOf("u00042")) != 2 {
		t.Fatalf("size %d", x.Size("all"))
	}
}

func BenchmarkIndexMates(b *testing.B) {
	x := NewIndex()
	for i := range 10000 {
		x.Add("all", fmt.Sprintf("u%05d", i))
		x.Add(fmt.Sprintf("g%03d", i%500), fmt.Sprintf("u%05d", i))
	}
	b.ResetTimer()
	for i := range b.N {
		x.Mates("u00001", fmt.Sprintf("u%05d", i%10000))
	}
}

func TestIndexSetMembers(t *testing.T) {
	x := NewIndex()
	x.Add("team", "ann", "bob")
	c := x.SetMembers("team", []string{"bob", "cat"}, true)
	want := []Change{{Group: "team", User: "ann"}, {Group: "team", User: "cat", Added: true}}
	if !slices.Equal(c, want) {
		t.Fatalf("changes %+v, want %+v", c, want)
	}
	if c := x.SetMembers("team", nil, false); len(c) != 2 || x.Has("team") || x.Mates("bob", "cat") {
		t.Fatalf("delete: %+v", c)
	}
	if c := x.SetMembers("empty", nil, true); len(c) != 0 || !x.Has("empty") {
		t.Fatalf("empty group: %+v", c)
	}
}
