package hooks_test

import (
	"log/slog"
	"net"
	"sync"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/presence"
)

// factsTracker records the connection facts the hook hands on.
type factsTracker struct {
	recorder
	mu    sync.Mutex
	facts map[string]presence.Conn
}

func (f *factsTracker) Connect(_ presence.ConnID, id, _, _ string, _ *presence.Activity, net presence.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.facts[id] = net
}

// tcpPair returns both ends of a loopback TCP connection and the port the
// server end listens on.
func tcpPair(t *testing.T) (client, server net.Conn, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server, ln.Addr().(*net.TCPAddr).Port
}

// The hook hands the tracker what the store keeps of a connection: its
// username, address, listener and local port, protocol, keep-alive, clean
// start and session expiry (v5 only, capped as the CONNACK will be).
func TestPresenceHandsOnConnectionFacts(t *testing.T) {
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumSessionExpiryInterval = 600
	srv := mqtt.New(&mqtt.Options{Capabilities: caps, Logger: slog.New(slog.DiscardHandler)})
	tr := &factsTracker{facts: map[string]presence.Conn{}}
	h := hooks.New(hooks.Options{Prefix: "presence", Server: srv, Tracker: tr})

	_, server, port := tcpPair(t)
	cl := srv.NewClient(server, "tcp1", "", false)
	cl.ParseConnect("tcp1", packets.Packet{ProtocolVersion: 5, Connect: packets.ConnectParams{
		ClientIdentifier: "alice-phone", Username: []byte("alice"), Clean: true, Keepalive: 45,
	}, Properties: packets.Properties{SessionExpiryInterval: 3600}})
	h.OnSessionEstablish(cl, packets.Packet{})

	v3 := srv.NewClient(nil, "ws", "", false)
	v3.Net.Remote = "[2001:db8::1]:50000"
	v3.ParseConnect("ws", packets.Packet{ProtocolVersion: 4, Connect: packets.ConnectParams{
		ClientIdentifier: "bob-desk", Username: []byte("bob"), Keepalive: 10,
	}, Properties: packets.Properties{SessionExpiryInterval: 3600}})
	h.OnSessionEstablish(v3, packets.Packet{})

	tr.mu.Lock()
	defer tr.mu.Unlock()
	got := tr.facts["alice-phone"]
	want := presence.Conn{Username: "alice", IP: "127.0.0.1", Port: port, Listener: "tcp1", ProtoVer: 5, KeepAlive: 45, CleanStart: true, Expiry: 600}
	if got != want {
		t.Fatalf("v5 facts:\n got %+v\nwant %+v", got, want)
	}
	got = tr.facts["bob-desk"]
	want = presence.Conn{Username: "bob", IP: "2001:db8::1", Listener: "ws", ProtoVer: 4, KeepAlive: 10}
	if got != want {
		t.Fatalf("v3.1.1 facts:\n got %+v\nwant %+v", got, want)
	}
}
