package tracker

import (
	"context"
	"testing"

	"github.com/presenced/presenced/presence"
)

// Holder names the connection that holds a session at the epoch the store
// has, and nothing for an older epoch (the same client id connected
// again), another user, or a session that ended: an operator's kick never
// ends a session it did not name.
func TestTrackerHolder(t *testing.T) {
	tr, cs, _, _ := newTestTracker(t)
	tr.Start()
	defer tr.Stop()
	key := presence.ClientKey("alice", "phone")
	epochOf := func() uint64 {
		t.Helper()
		u, _, _ := cs.User(context.Background(), "alice")
		if len(u.Sessions) != 1 {
			t.Fatalf("alice's sessions: %+v", u.Sessions)
		}
		return u.Sessions[0].Epoch
	}
	tr.Connect(1, key, "alice", "", nil, presence.Conn{})
	tr.Established(1, key)
	waitIdle(t, tr)
	first := epochOf()
	if conn, ok := tr.Holder("alice", "phone", first); !ok || conn != 1 {
		t.Fatalf("Holder at the live epoch: %v %v, want connection 1", conn, ok)
	}
	for _, c := range []struct {
		user, id string
		epoch    uint64
	}{{"alice", "phone", first + 1}, {"alice", "phone", 0}, {"bob", "phone", first}, {"alice", "tablet", first}} {
		if conn, ok := tr.Holder(c.user, c.id, c.epoch); ok {
			t.Errorf("Holder(%s, %s, %d) = %v, want none", c.user, c.id, c.epoch, conn)
		}
	}
	// The client id connects again: a newer epoch; the old one holds nothing.
	tr.Connect(2, key, "alice", "", nil, presence.Conn{})
	tr.Disconnect(1, key, presence.EndTakeover)
	tr.Established(2, key)
	waitIdle(t, tr)
	second := epochOf()
	if _, ok := tr.Holder("alice", "phone", first); ok || second == first {
		t.Fatalf("the old epoch %d still held (new %d)", first, second)
	}
	if conn, ok := tr.Holder("alice", "phone", second); !ok || conn != 2 {
		t.Fatalf("Holder at the new epoch: %v %v, want connection 2", conn, ok)
	}
	// Ended: nothing holds it, even before the end is written.
	tr.Disconnect(2, key, presence.EndClean)
	if _, ok := tr.Holder("alice", "phone", second); ok {
		t.Fatal("an ended session still held")
	}
}
