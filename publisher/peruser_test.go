package publisher_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"

	"github.com/presenced/presenced/delivery"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/publisher"
)

// TestBytesPerUser measures what a node holds per user shown: the
// publisher's views and whatever mochi keeps of them (issue 23: nothing),
// over users online with one session each, through a real mochi server
// with no subscriber, and holds it to issue 23's target (at most 600 B a
// user; 146 B measured, 163 B while the views map held views inline). It
// shows 20,000 users; with PRESENCE_BYTES_PER_USER=1 (go test -run
// TestBytesPerUser -v ./publisher/) 100,000, the figure of bench/README.md.
func TestBytesPerUser(t *testing.T) {
	n := 20_000
	if os.Getenv("PRESENCE_BYTES_PER_USER") != "" {
		n = 100_000
	}
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	d := delivery.NewDelivery(delivery.DeliveryOptions{Prefix: "presence", Server: srv})
	p := publisher.New(publisher.Options{Prefix: "presence", Broker: delivery.NewOutlet(srv, d)})
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		p.Publish(presence.Aggregate{User: fmt.Sprintf("user-%06d", i), Status: presence.Online, Version: uint64(1e15) + uint64(i), Since: t0,
			Sessions: []presence.SessionView{{ID: "phone", Epoch: 1, Node: "node-a", Device: "phone", Status: presence.Online, ConnectedAt: t0}}})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	payload, _ := p.Get("user-000001")
	perUser := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(n)
	t.Logf("held per user: %d B (heap in use after GC; payload %d B); users %d, mochi retained %d",
		perUser, len(payload), p.Users(), srv.Topics.Retained.Len())
	if p.Users() != n || srv.Topics.Retained.Len() != 0 {
		t.Fatalf("%d users shown, mochi retains %d: want %d and 0", p.Users(), srv.Topics.Retained.Len(), n)
	}
	if perUser > 600 {
		t.Fatalf("a node holds %d B per user shown, want at most 600 (issue 23)", perUser)
	}
	runtime.KeepAlive(p)
	runtime.KeepAlive(srv)
}
