package store

import (
	"context"
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
