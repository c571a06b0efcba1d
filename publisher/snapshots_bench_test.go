package publisher_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/publisher"
)

// BenchmarkSnapshots measures what a SUBSCRIBE to presence/users/+ costs
// the publisher on a node showing 10,000 users (one op: every user's
// retained payload handed out once), reported per user. Since issue 23 a
// view keeps its payload packed and writes it again here, where before it
// handed out the bytes it held.
func BenchmarkSnapshots(b *testing.B) {
	const users = 10_000
	p := publisher.New(publisher.Options{Prefix: "presence", Broker: new(nopBroker)})
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	for i := range users {
		p.Publish(presence.Aggregate{User: fmt.Sprintf("user-%06d", i), Status: presence.Online, Version: uint64(1e15) + uint64(i), Since: t0,
			Sessions: []presence.SessionView{{ID: "phone", Epoch: 1, Node: "node-a", Device: "phone", Status: presence.Online, ConnectedAt: t0}}})
	}
	b.ReportAllocs()
	n, size := 0, 0
	for b.Loop() {
		p.Snapshots("", true, func(_ string, _ uint64, payload []byte) { n++; size += len(payload) })
	}
	if n != users*b.N || size/n < 200 {
		b.Fatalf("%d snapshots of %d B on average for %d ops, want %d of at least 200 B", n, size/max(n, 1), b.N, users*b.N)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/user")
}
