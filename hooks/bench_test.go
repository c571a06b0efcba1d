package hooks_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/delivery"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/internal/testkit"
)

var _ hooks.Tracker = testkit.NopTracker{}

// newServer builds a mochi server the way presenced.NewBroker does: inline client,
// retained messages never purged, and either presence's hooks with an
// authentication hook that lets everyone in, or (presence off: the bare
// broker) mochi's allow-all hook.
func newServer(tb testing.TB, withPresence bool) (*mqtt.Server, *hooks.Presence) {
	tb.Helper()
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumMessageExpiryInterval = 0
	srv := mqtt.New(&mqtt.Options{
		Capabilities: caps,
		InlineClient: true,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if !withPresence {
		if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
			tb.Fatal(err)
		}
		return srv, nil
	}
	if err := srv.AddHook(new(hooks.Authenticator), nil); err != nil {
		tb.Fatal(err)
	}
	for _, h := range []mqtt.Hook{
		hooks.NewDrain(hooks.DrainOptions{Server: srv, Log: nil}),
		hooks.NewLimits(hooks.LimitsOptions{Server: srv, ServerKeepAlive: 60 * time.Second, Log: nil}),
	} {
		if err := srv.AddHook(h, nil); err != nil {
			tb.Fatal(err)
		}
	}
	h := hooks.New(hooks.Options{
		Prefix:  "presence",
		Server:  srv,
		Tracker: testkit.NopTracker{},
		Log:     nil,
	})
	if err := srv.AddHook(h, nil); err != nil {
		tb.Fatal(err)
	}
	d := delivery.NewDelivery(delivery.DeliveryOptions{Prefix: "presence", Server: srv, Log: nil})
	if err := srv.AddHook(d, nil); err != nil {
		tb.Fatal(err)
	}
	if err := srv.AddHook(delivery.NewGuard(delivery.GuardOptions{Delivery: d}), nil); err != nil {
		tb.Fatal(err)
	}
	return srv, h
}

// connect establishes one MQTT 3.1.1 client with a user (so that, with
// presence on, it has a session) over a net.Pipe and returns the client's
// end of the pipe, after CONNACK.
func connect(tb testing.TB, srv *mqtt.Server) net.Conn {
	tb.Helper()
	client, server := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.EstablishConnection("t", server) }()
	tb.Cleanup(func() {
		_ = client.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			tb.Error("the connection did not end")
		}
		_ = srv.Close()
	})

	var buf bytes.Buffer
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 4,
		Connect: packets.ConnectParams{
			ProtocolName:     []byte("MQTT"),
			Clean:            true,
			Keepalive:        60,
			ClientIdentifier: "alice-phone",
			UsernameFlag:     true,
			Username:         []byte("alice"),
		},
	}
	if err := pk.ConnectEncode(&buf); err != nil {
		tb.Fatal(err)
	}
	_ = client.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Write(buf.Bytes()); err != nil {
		tb.Fatalf("write CONNECT: %v", err)
	}
	connack := make([]byte, 4)
	if _, err := io.ReadFull(client, connack); err != nil {
		tb.Fatalf("read CONNACK: %v", err)
	}
	if connack[0] != 0x20 || connack[3] != 0 {
		tb.Fatalf("CONNACK % x: refused", connack)
	}
	_ = client.SetDeadline(time.Time{})
	return client
}

// BenchmarkHookPINGREQ measures what the broker does per PINGREQ of an
// established client — read it, run the hooks that apply, answer PINGRESP —
// with the presence hook and without it (the bare mochi broker). The
// difference is the cost of presence on the heartbeat path.
func BenchmarkHookPINGREQ(b *testing.B) {
	for _, c := range []struct {
		name     string
		presence bool
	}{{"presence", true}, {"bare", false}} {
		b.Run(c.name, func(b *testing.B) {
			srv, _ := newServer(b, c.presence)
			conn := connect(b, srv)
			if n := atomic.LoadInt64(&srv.Info.ClientsConnected); n != 1 {
				b.Fatalf("%d clients connected", n)
			}
			ping := []byte{packets.Pingreq << 4, 0}
			resp := make([]byte, 2)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := conn.Write(ping); err != nil {
					b.Fatalf("write PINGREQ: %v", err)
				}
				if _, err := io.ReadFull(conn, resp); err != nil {
					b.Fatalf("read PINGRESP: %v", err)
				}
				if resp[0] != packets.Pingresp<<4 || resp[1] != 0 {
					b.Fatalf("got % x, want PINGRESP", resp)
				}
			}
		})
	}
}

// BenchmarkOnPublishSet measures the hook's handling of a valid presence/set
// from a connection with a user: identify, parse, hand to the tracker.
func BenchmarkOnPublishSet(b *testing.B) {
	srv, h := newServer(b, true)
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	cl := srv.NewClient(server, "t", "alice-phone", false)
	cl.Properties.Username = []byte("alice")
	cl.Properties.ProtocolVersion = 4
	h.OnSessionEstablish(cl, packets.Packet{}) // the connection gets its session, as after CONNECT
	h.OnSessionEstablished(cl, packets.Packet{})
	pk := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1},
		TopicName:   "presence/set",
		PacketID:    7,
		Payload:     []byte(`{"status":"busy","text":"in a meeting until 3","device":"desk","scope":"session"}`),
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(pk.Payload)))
	n := 0
	for b.Loop() {
		if _, err := h.OnPublish(cl, pk); !errors.Is(err, packets.CodeSuccessIgnore) {
			b.Fatalf("OnPublish: %v", err)
		}
		n++
	}
	if got := h.Stats.SetAccepted.Load(); got != int64(n) {
		b.Fatalf("%d sets accepted, want %d", got, n)
	}
}

// BenchmarkOnPublishActivity measures what server-side idle adds to every
// PUBLISH outside the presence prefix: the hook's OnPublish for an
// established connection with a user, with activity recording off (the
// default, presence.idle_after 0) and on (a lock-free map read, the clock
// and an atomic store). "on-parallel" has every goroutine publish for a
// connection of its own, as connections do.
func BenchmarkOnPublishActivity(b *testing.B) {
	newHook := func(b *testing.B, activity bool) (*hooks.Presence, func(id string) *mqtt.Client) {
		srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
		h := hooks.New(hooks.Options{Prefix: "presence", Server: srv, Tracker: testkit.NopTracker{}, Log: nil, Activity: activity})
		return h, func(id string) *mqtt.Client {
			client, server := net.Pipe()
			b.Cleanup(func() { _ = client.Close(); _ = server.Close() })
			cl := srv.NewClient(server, "t", id, false)
			cl.Properties.Username = []byte("alice")
			cl.Properties.ProtocolVersion = 4
			h.OnSessionEstablish(cl, packets.Packet{})
			h.OnSessionEstablished(cl, packets.Packet{})
			return cl
		}
	}
	pk := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1},
		TopicName:   "app/chat/room1",
		PacketID:    7,
		Payload:     []byte("hello"),
	}
	for _, c := range []struct {
		name     string
		activity bool
	}{{"off", false}, {"on", true}} {
		b.Run(c.name, func(b *testing.B) {
			h, client := newHook(b, c.activity)
			cl := client("alice-phone")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.OnPublish(cl, pk); err != nil {
					b.Fatalf("OnPublish: %v", err)
				}
			}
		})
	}
	b.Run("on-parallel", func(b *testing.B) {
		h, client := newHook(b, true)
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			cl := client(fmt.Sprintf("alice-%d", next.Add(1)))
			for pb.Next() {
				if _, err := h.OnPublish(cl, pk); err != nil {
					b.Errorf("OnPublish: %v", err)
					return
				}
			}
		})
	})
}

// BenchmarkHookCycle measures the churn scenario's cycle on the broker's
// side, over a net.Pipe: an MQTT 3.1.1 client connects (clean, with a
// user), publishes one presence/set (QoS 1, so that the PUBACK says it was
// handled), and disconnects cleanly; an iteration ends when mochi is done
// with the connection. With presence's hooks (the tracker doing nothing)
// and without them (the bare broker): the difference is what the hooks add
// to a connection's life, apart from the store and the retained publishes.
func BenchmarkHookCycle(b *testing.B) {
	var conn, set, disc bytes.Buffer
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 4,
		Connect: packets.ConnectParams{
			ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 60,
			ClientIdentifier: "alice-phone", UsernameFlag: true, Username: []byte("alice"),
		},
	}
	if err := pk.ConnectEncode(&conn); err != nil {
		b.Fatal(err)
	}
	pub := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1},
		TopicName:   "presence/set", PacketID: 7, ProtocolVersion: 4,
		Payload: []byte(`{"status":"away","text":"x"}`),
	}
	if err := pub.PublishEncode(&set); err != nil {
		b.Fatal(err)
	}
	if err := (&packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}, ProtocolVersion: 4}).DisconnectEncode(&disc); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		presence bool
	}{{"presence", true}, {"bare", false}} {
		b.Run(c.name, func(b *testing.B) {
			srv, _ := newServer(b, c.presence)
			b.Cleanup(func() { _ = srv.Close() })
			ack := make([]byte, 4)
			b.ReportAllocs()
			for b.Loop() {
				client, server := net.Pipe()
				done := make(chan error, 1)
				go func() { done <- srv.EstablishConnection("t", server) }()
				_ = client.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := client.Write(conn.Bytes()); err != nil {
					b.Fatalf("write CONNECT: %v", err)
				}
				if _, err := io.ReadFull(client, ack); err != nil || ack[0] != 0x20 || ack[3] != 0 {
					b.Fatalf("CONNACK % x: %v", ack, err)
				}
				if _, err := client.Write(set.Bytes()); err != nil {
					b.Fatalf("write PUBLISH: %v", err)
				}
				if _, err := io.ReadFull(client, ack); err != nil || ack[0] != packets.Puback<<4 {
					b.Fatalf("PUBACK % x: %v", ack, err)
				}
				if _, err := client.Write(disc.Bytes()); err != nil {
					b.Fatalf("write DISCONNECT: %v", err)
				}
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					b.Fatal("the connection did not end")
				}
				_ = client.Close()
			}
		})
	}
}
