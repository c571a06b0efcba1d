package store

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// BenchmarkMemoryCycle measures the memory store's share of the churn
// scenario's cycle: open a session, set its status, end it cleanly, for a
// user whose record already holds presence.MaxEnded ended sessions (as it
// does after a few cycles), with the feed a node gives it.
func BenchmarkMemoryCycle(b *testing.B) {
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	feed := NewFeed()
	m := NewMemory(presence.Rules{}, now, feed.Push)
	ctx := context.Background()
	away, text := presence.Away, "x"
	cycle := func() {
		s, err := m.Open(ctx, presence.OpenArgs{User: "c1", ID: "c1-d", Node: "bench", TTL: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		ref := presence.SessionRef{User: "c1", ID: "c1-d", Epoch: s.Epoch}
		if err := m.Update(ctx, ref, presence.Update{Status: &away, Text: &text}); err != nil {
			b.Fatal(err)
		}
		if err := m.End(ctx, presence.EndArgs{User: "c1", ID: "c1-d", Epoch: s.Epoch, Reason: presence.EndClean}); err != nil {
			b.Fatal(err)
		}
		feed.Recycle(feed.Take())
	}
	for range presence.MaxEnded {
		cycle()
	}
	b.ReportAllocs()
	for b.Loop() {
		cycle()
	}
}

// BenchmarkMemoryReapIdle measures one pass of the reaper over 5,000 idle
// users, one live session each and none due: what an idle node pays every
// reap interval (a second) for its memory store.
func BenchmarkMemoryReapIdle(b *testing.B) {
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { return clock }
	feed := NewFeed()
	m := NewMemory(presence.Rules{}, now, feed.Push)
	ctx := context.Background()
	for i := range 5000 {
		user := "u" + strconv.Itoa(i)
		if _, err := m.Open(ctx, presence.OpenArgs{User: user, ID: user + "-d", Node: "bench", TTL: time.Hour}); err != nil {
			b.Fatal(err)
		}
	}
	feed.Recycle(feed.Take())
	b.ReportAllocs()
	for b.Loop() {
		if n, err := m.Reap(ctx); err != nil || n != 0 {
			b.Fatalf("reaped %d, %v", n, err)
		}
	}
}
