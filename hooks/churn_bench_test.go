package hooks_test

import (
	"log/slog"
	"net"
	"sync/atomic"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// countingTracker is a tracker that only counts the events of the hook it
// is given (the rest it takes and drops, as testkit.NopTracker does).
type countingTracker struct {
	testkit.NopTracker
	connects, established, disconnects atomic.Int64
}

func (c *countingTracker) Connect(presence.ConnID, string, string, string, *presence.Activity, presence.Conn) {
	c.connects.Add(1)
}
func (c *countingTracker) Established(presence.ConnID, string) { c.established.Add(1) }
func (c *countingTracker) Disconnect(presence.ConnID, string, presence.EndReason) {
	c.disconnects.Add(1)
}

// BenchmarkHookChurn measures the presence hook's own work for one
// connection's life in the churn scenario, without the broker or a socket:
// OnConnect, OnSessionEstablish and OnSessionEstablished of an MQTT 3.1.1
// client with a user, then OnDisconnect of a clean end, with a tracker
// that only counts what it is told. The client is the same each time
// (mochi's allocations of a new one are the broker's, measured by
// BenchmarkHookCycle/bare); the hook sees a new session every time.
func BenchmarkHookChurn(b *testing.B) {
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	tr := new(countingTracker)
	h := hooks.New(hooks.Options{Prefix: "presence", Server: srv, Tracker: tr, Log: nil})
	client, server := net.Pipe()
	b.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	cl := srv.NewClient(server, "t", "alice-phone", false)
	cl.Properties.Username = []byte("alice")
	cl.Properties.ProtocolVersion = 4
	cl.Properties.Clean = true
	cl.State.Keepalive = 60
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 4,
		Connect: packets.ConnectParams{
			ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 60,
			ClientIdentifier: "alice-phone", UsernameFlag: true, Username: []byte("alice"),
		},
	}
	n := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		if err := h.OnConnect(cl, pk); err != nil {
			b.Fatalf("OnConnect: %v", err)
		}
		h.OnSessionEstablish(cl, pk)
		h.OnSessionEstablished(cl, pk)
		h.OnDisconnect(cl, nil, false)
		n++
	}
	if c, e, d := tr.connects.Load(), tr.established.Load(), tr.disconnects.Load(); c != n || e != n || d != n {
		b.Fatalf("tracker told %d connects, %d established, %d disconnects; want %d of each", c, e, d, n)
	}
	if s := h.Sessions(); s != 0 {
		b.Fatalf("%d sessions left", s)
	}
}
