package store

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// A feed holds at most one change per user (the highest version) and one
// event per reset or swept incarnation, in the order they first came.
func TestFeedCoalesces(t *testing.T) {
	f := NewFeed()
	ch := func(user string, v uint64) Event {
		return Event{Kind: Changed, Aggregate: presence.Aggregate{User: user, Version: v}}
	}
	f.Push(ch("amy", 1))
	f.Push(ch("bob", 5))
	f.Push(ch("amy", 3))
	f.Push(ch("amy", 2)) // late: the pending 3 stays
	f.Push(Event{Kind: Reset, Settle: time.Second})
	f.Push(Event{Kind: NodeLost, Node: "a", Incarnation: "i1", Sessions: 2})
	f.Push(Event{Kind: Reset, Settle: 2 * time.Second})
	f.Push(Event{Kind: NodeLost, Node: "a", Incarnation: "i1", Sessions: 1})
	if d := f.Depth(); d != 4 {
		t.Fatalf("depth %d, want 4", d)
	}
	select {
	case <-f.Ready():
	default:
		t.Fatal("not ready")
	}
	got := f.Take()
	if len(got) != 4 || got[0].Aggregate.User != "amy" || got[0].Aggregate.Version != 3 ||
		got[1].Aggregate.User != "bob" || got[2].Kind != Reset || got[2].Settle != 2*time.Second ||
		got[3].Kind != NodeLost || got[3].Sessions != 3 {
		t.Fatalf("took %+v", got)
	}
	if f.Depth() != 0 || len(f.Take()) != 0 {
		t.Fatal("not empty after Take")
	}
	f.Push(ch("amy", 1)) // after a Take, a user starts again
	if got := f.Take(); len(got) != 1 || got[0].Aggregate.Version != 1 {
		t.Fatalf("after take: %+v", got)
	}
}

// Node announcements coalesce per node and incarnation: the latest word of
// one run wins, and a restart's announcement is kept apart from the report
// of the run before it.
func TestFeedCoalescesNodeAnnouncements(t *testing.T) {
	f := NewFeed()
	ann := func(node, inc string, st presence.NodeState, n int) Event {
		return Event{Kind: NodeAnnounced, NodeStatus: presence.NodeStatus{Node: node, Incarnation: inc, State: st, Sessions: n}}
	}
	f.Push(ann("A", "1", presence.NodeUp, 3))
	f.Push(ann("B", "1", presence.NodeUp, 1))
	f.Push(ann("A", "1", presence.NodeDraining, 2))
	f.Push(ann("A", "2", presence.NodeUp, 0))
	got := f.Take()
	if len(got) != 3 || got[0].NodeStatus.State != presence.NodeDraining || got[0].NodeStatus.Sessions != 2 ||
		got[1].NodeStatus.Node != "B" || got[2].NodeStatus.Incarnation != "2" {
		t.Fatalf("took %+v", got)
	}
}

// A recycled array holds the events pushed after the following Take,
// cleared of what it held; a batch taken is not touched by later pushes
// until it is handed back.
func TestFeedRecycle(t *testing.T) {
	f := NewFeed()
	ch := func(user string, v uint64) Event {
		return Event{Kind: Changed, Aggregate: presence.Aggregate{User: user, Version: v}}
	}
	f.Push(ch("amy", 1))
	f.Push(ch("bob", 1))
	first := f.Take()
	f.Push(ch("cat", 1)) // not into first: it was not handed back
	if first[0].Aggregate.User != "amy" || first[1].Aggregate.User != "bob" {
		t.Fatalf("first batch changed: %+v", first)
	}
	f.Recycle(first)
	if first[0].Aggregate.User != "" || first[1].Aggregate.User != "" {
		t.Fatalf("recycled events not cleared: %+v", first)
	}
	second := f.Take() // from now on, pushes go into first's array
	if len(second) != 1 || second[0].Aggregate.User != "cat" {
		t.Fatalf("second batch: %+v", second)
	}
	f.Push(ch("dan", 2))
	f.Push(ch("dan", 3))
	third := f.Take()
	if len(third) != 1 || third[0].Aggregate.User != "dan" || third[0].Aggregate.Version != 3 {
		t.Fatalf("after recycle: %+v", third)
	}
	if &third[0] != &first[0] {
		t.Fatal("the recycled array was not reused")
	}
	if second[0].Aggregate.User != "cat" {
		t.Fatalf("second batch changed: %+v", second)
	}
	f.Recycle(second)
	f.Recycle(make([]Event, 0, maxSpare+1)) // a spare is waiting already
	f.Take()
	f.Recycle(make([]Event, 0, maxSpare+1)) // too large: dropped
	f.Take()
	f.Push(ch("eve", 1))
	if got := f.Take(); cap(got) > maxSpare {
		t.Fatalf("kept an array of %d", cap(got))
	}
}

// After a burst's batch, Take gives the users map back to the garbage
// collector (clear would keep its room for good); a small batch's map is
// reused. Coalescing works the same after either.
func TestFeedDropsBurstIndex(t *testing.T) {
	f := NewFeed()
	ch := func(user string, v uint64) Event {
		return Event{Kind: Changed, Aggregate: presence.Aggregate{User: user, Version: v}}
	}
	mapOf := func() uintptr { return reflect.ValueOf(f.users).Pointer() }
	small := mapOf()
	f.Push(ch("amy", 1))
	f.Take()
	if mapOf() != small {
		t.Fatal("a small batch's users map was replaced")
	}
	for i := range 4 * maxSpare {
		f.Push(ch("u"+strconv.Itoa(i), 1))
	}
	if got := f.Take(); len(got) != 4*maxSpare {
		t.Fatalf("took %d, want %d", len(got), 4*maxSpare)
	}
	if mapOf() == small || len(f.users) != 0 {
		t.Fatalf("after a burst of %d the feed kept its users map (%d entries)", 4*maxSpare, len(f.users))
	}
	f.Push(ch("bob", 1))
	f.Push(ch("bob", 2))
	if got := f.Take(); len(got) != 1 || got[0].Aggregate.Version != 2 {
		t.Fatalf("after the burst, bob's changes did not coalesce: %+v", got)
	}
}
