package hooks

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/connack"
)

// clientFrom returns a client of srv with no socket, connecting from
// remote.
func clientFrom(srv *mqtt.Server, id, remote string) *mqtt.Client {
	cl := srv.NewClient(nil, "t", id, false)
	cl.Net.Remote = remote
	cl.Properties.ProtocolVersion = 4
	return cl
}

func TestKeepAlive(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name            string
		asked           uint16
		server, ceiling time.Duration
		want            uint16
		capped, set     bool
	}{
		{"asked, no limits", 30, 0, 0, 30, false, false},
		{"0 and no server keep-alive", 0, 0, 0, 0, false, false},
		{"0 gets the server's", 0, 60 * s, 0, 60, false, true},
		{"0 gets the server's, held to the ceiling (not counted)", 0, 60 * s, 45 * s, 45, false, true},
		{"under the ceiling", 30, 60 * s, 45 * s, 30, false, false},
		{"at the ceiling", 45, 0, 45 * s, 45, false, false},
		{"over the ceiling", 600, 60 * s, 45 * s, 45, true, true},
	}
	for _, tt := range tests {
		ka, capped, set := keepAlive(tt.asked, tt.server, tt.ceiling)
		if ka != tt.want || capped != tt.capped || set != tt.set {
			t.Errorf("%s: keepAlive = %d, capped %v, set %v; want %d, %v, %v", tt.name, ka, capped, set, tt.want, tt.capped, tt.set)
		}
	}
}

// OnConnect sets the keep-alive it decides, and counts a cap.
func TestLimitsKeepAlive(t *testing.T) {
	srv := mqtt.New(nil)
	l := NewLimits(LimitsOptions{ServerKeepAlive: time.Minute, MaxKeepAlive: 2 * time.Minute})
	zero, long, ok := clientFrom(srv, "a", "10.0.0.1:1"), clientFrom(srv, "b", "10.0.0.1:2"), clientFrom(srv, "c", "10.0.0.1:3")
	for cl, asked := range map[*mqtt.Client]uint16{zero: 0, long: 3600, ok: 30} {
		if err := l.OnConnect(cl, packets.Packet{Connect: packets.ConnectParams{Keepalive: asked}}); err != nil {
			t.Fatal(err)
		}
	}
	if zero.State.Keepalive != 60 || !zero.State.ServerKeepalive {
		t.Errorf("keep-alive 0: %d (server keep-alive %v), want 60", zero.State.Keepalive, zero.State.ServerKeepalive)
	}
	if long.State.Keepalive != 120 || !long.State.ServerKeepalive {
		t.Errorf("keep-alive 3600: %d (server keep-alive %v), want 120", long.State.Keepalive, long.State.ServerKeepalive)
	}
	if ok.State.ServerKeepalive {
		t.Errorf("keep-alive 30 changed to %d", ok.State.Keepalive)
	}
	if got := l.Stats.KeepAliveCapped.Load(); got != 1 {
		t.Errorf("keepalive capped %d, want 1", got)
	}
}

// The limit holds against CONNECTs that are never established; a
// connection closed before it was established stops counting when the
// limit is next applied, an established one at its OnDisconnect; an exempt
// address has no limit, and one address does not limit another.
func TestLimitsPerAddress(t *testing.T) {
	srv := mqtt.New(nil)
	l := NewLimits(LimitsOptions{MaxPerAddress: 2, Unlimited: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}, Log: nil})
	connect := func(cl *mqtt.Client) error { return l.OnConnect(cl, packets.Packet{}) }
	const busy = "10.0.0.1"
	c1, c2 := clientFrom(srv, "c1", busy+":1"), clientFrom(srv, "c2", busy+":2")
	for _, cl := range []*mqtt.Client{c1, c2} {
		if err := connect(cl); err != nil {
			t.Fatalf("%s: %v", cl.ID, err)
		}
	}
	// Neither is established (a flood of CONNECTs): the third is refused.
	if err := connect(clientFrom(srv, "c3", busy+":3")); !errors.Is(err, errPerAddress) {
		t.Fatalf("third CONNECT while two wait: %v, want refused", err)
	}
	if got := l.Stats.PerAddress.Load(); got != 1 {
		t.Fatalf("refused per address %d, want 1", got)
	}
	// c1 is closed without ever being established (a later hook refused
	// it, say): it no longer counts.
	c1.Stop(errors.New("refused by a later hook"))
	c4 := clientFrom(srv, "c4", busy+":4")
	if err := connect(c4); err != nil {
		t.Fatalf("CONNECT after one was refused later: %v", err)
	}
	// c2 is established, then closed: it counts until its OnDisconnect.
	l.OnSessionEstablished(c2, packets.Packet{})
	c2.Stop(nil)
	l.Tidy()
	if err := connect(clientFrom(srv, "c5", busy+":5")); !errors.Is(err, errPerAddress) {
		t.Fatalf("CONNECT while an established connection has not ended: %v, want refused", err)
	}
	l.OnDisconnect(c2, nil, true)
	l.OnDisconnect(c2, nil, true) // twice changes nothing
	if err := connect(clientFrom(srv, "c6", busy+":6")); err != nil {
		t.Fatalf("CONNECT after one ended: %v", err)
	}
	if got := l.counted(busy); got != 2 {
		t.Fatalf("counted %d, want 2 (c4, c6)", got)
	}
	// Another address, and an exempt one (IPv4-mapped too).
	if err := connect(clientFrom(srv, "o", "10.0.0.2:1")); err != nil {
		t.Fatalf("another address: %v", err)
	}
	for i, remote := range []string{"10.9.0.1:1", "10.9.0.1:2", "10.9.0.1:3", "[::ffff:10.9.0.1]:4"} {
		if err := connect(clientFrom(srv, "e", remote)); err != nil {
			t.Fatalf("exempt connection %d: %v", i, err)
		}
	}
	if got := l.Stats.PerAddress.Load(); got != 2 {
		t.Fatalf("refused per address %d, want 2", got)
	}
}

// Tidy forgets the connections closed before they were established, and
// what it kept of their addresses.
func TestLimitsTidy(t *testing.T) {
	srv := mqtt.New(nil)
	l := NewLimits(LimitsOptions{MaxPerAddress: 5})
	var cls []*mqtt.Client
	for i := range 4 {
		cl := clientFrom(srv, "c", "10.0.0."+string(rune('1'+i))+":1")
		if err := l.OnConnect(cl, packets.Packet{}); err != nil {
			t.Fatal(err)
		}
		cls = append(cls, cl)
	}
	l.OnSessionEstablished(cls[0], packets.Packet{})
	for _, cl := range cls {
		cl.Stop(nil)
	}
	l.Tidy()
	l.mu.Lock()
	addrs, conns := len(l.addrs), len(l.conns)
	l.mu.Unlock()
	if addrs != 1 || conns != 1 || l.counted("10.0.0.1") != 1 {
		t.Fatalf("after Tidy: %d addresses, %d connections; want only the established one", addrs, conns)
	}
	l.OnDisconnect(cls[0], nil, true)
	l.mu.Lock()
	addrs, conns = len(l.addrs), len(l.conns)
	l.mu.Unlock()
	if addrs != 0 || conns != 0 {
		t.Fatalf("after its end: %d addresses, %d connections", addrs, conns)
	}
}

// Without a per-address limit nothing is counted.
func TestLimitsOff(t *testing.T) {
	l := NewLimits(LimitsOptions{})
	if l.Provides(mqtt.OnDisconnect) || l.Provides(mqtt.OnSessionEstablished) {
		t.Fatal("follows connections without a per-address limit")
	}
	srv := mqtt.New(nil)
	for i := range 10 {
		if err := l.OnConnect(clientFrom(srv, "c", "10.0.0.1:"+string(rune('0'+i))), packets.Packet{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.counted("10.0.0.1"); got != 0 {
		t.Fatalf("counted %d without a limit", got)
	}
}

func TestLimitsSubscriptions(t *testing.T) {
	srv := mqtt.New(nil)
	l := NewLimits(LimitsOptions{MaxSubscriptions: 3, MaxTopicLength: 10, MaxTopicLevels: 3})
	cl := clientFrom(srv, "c", "10.0.0.1:1")
	cl.State.Subscriptions.Add("held/1", packets.Subscription{Filter: "held/1"})
	cl.State.Subscriptions.Add("held/2", packets.Subscription{Filter: "held/2"})
	pk := l.OnSubscribe(cl, packets.Packet{Filters: packets.Subscriptions{
		{Filter: "held/1"},        // held already: no new one
		{Filter: "a/b/c/d"},       // 4 levels
		{Filter: "much-too-long"}, // 13 bytes
		{Filter: "new/1"},         // the third
		{Filter: "new/2"},         // a fourth
		{Filter: "new/1"},         // repeated: counted again, over
		{Filter: "exactly-10"},    // 10 bytes, over the count
		{Filter: "held/2"},        // held already
		{Filter: "x/y/z", Qos: 1}, // over the count
	}})
	var got []string
	for _, f := range pk.Filters {
		got = append(got, f.Filter)
	}
	want := []string{"held/1", "", "", "new/1", "", "", "", "held/2", ""}
	if len(got) != len(want) {
		t.Fatalf("filters %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("filters %q, want %q", got, want)
		}
	}
	if n := l.Stats.FiltersRefused.Load(); n != 6 {
		t.Fatalf("filters refused %d, want 6", n)
	}
	// The inline client is never limited.
	inline := srv.NewClient(nil, "inline", "inline", true)
	if pk := l.OnSubscribe(inline, packets.Packet{Filters: packets.Subscriptions{{Filter: "a/b/c/d/e/f"}}}); pk.Filters[0].Filter == "" {
		t.Fatal("the inline client's filter refused")
	}
}

// refuser refuses every CONNECT in OnConnect, as a hook after Limits may
// (presence's for a bad identity): with CONNACK 0x87, 3.1.1's 0x05.
type refuser struct{ mqtt.HookBase }

func (r *refuser) ID() string           { return "refuser" }
func (r *refuser) Provides(b byte) bool { return b == mqtt.OnConnect }
func (r *refuser) OnConnect(cl *mqtt.Client, _ packets.Packet) error {
	connack.Refuse(nil, cl, packets.ErrNotAuthorized, packets.Code{Code: 0x05})
	return errors.New("refused")
}

// newLimitsServer returns a server with Limits (MaxPerAddress 1) and then
// the hooks after.
func newLimitsServer(t *testing.T, after ...mqtt.Hook) (*mqtt.Server, *Limits) {
	t.Helper()
	srv := mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler)})
	l := NewLimits(LimitsOptions{Server: srv, MaxPerAddress: 1, Log: nil})
	for _, h := range append([]mqtt.Hook{l}, after...) {
		if err := srv.AddHook(h, nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, l
}

// pipeConnect runs one MQTT 3.1.1 connection through srv over a net.Pipe
// (remote address "pipe"), and returns its CONNACK return code (-1: none)
// once mochi is done with it. hangUp closes the client's end right after
// the CONNECT, so that the CONNACK cannot be written.
func pipeConnect(t *testing.T, srv *mqtt.Server, id string, hangUp bool) int {
	t.Helper()
	client, server := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.EstablishConnection("t", server) }()
	var buf bytes.Buffer
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 4,
		Connect:         packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 60, ClientIdentifier: id},
	}
	if err := pk.ConnectEncode(&buf); err != nil {
		t.Fatal(err)
	}
	_ = client.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Write(buf.Bytes()); err != nil {
		t.Fatalf("write CONNECT: %v", err)
	}
	rc := -1
	if hangUp {
		_ = client.Close()
	} else {
		ack := make([]byte, 4)
		if _, err := io.ReadFull(client, ack); err == nil {
			rc = int(ack[3])
		}
		if rc == 0 {
			_ = client.Close() // accepted: end it
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("mochi did not end the connection")
	}
	_ = client.Close()
	return rc
}

// mochi tells no hook of a connection that a later hook refused (OnConnect
// error, OnConnectAuthenticate false) or whose CONNACK could not be
// written: the per-address count does not keep it, and the next CONNECT
// from the address is not refused for it.
func TestLimitsRefusedLaterDoesNotCount(t *testing.T) {
	allow := &Authenticator{}
	for _, c := range []struct {
		name   string
		after  []mqtt.Hook
		hangUp bool
		want   int
	}{
		{"a later hook's OnConnect", []mqtt.Hook{&refuser{}}, false, 0x05},
		{"OnConnectAuthenticate false", nil, false, 0x05}, // mochi maps 0x86 to 3.1.1's 0x05
		{"a CONNACK that could not be written", []mqtt.Hook{allow}, true, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, l := newLimitsServer(t, c.after...)
			for i := range 3 {
				if rc := pipeConnect(t, srv, "c", c.hangUp); rc != c.want {
					t.Fatalf("connection %d: CONNACK %#x, want %#x (0x03: refused per address)", i, rc, c.want)
				}
			}
			if got := l.Stats.PerAddress.Load(); got != 0 {
				t.Fatalf("refused per address %d, want 0", got)
			}
			l.Tidy()
			if got := l.counted("pipe"); got != 0 {
				t.Fatalf("counted %d after Tidy, want 0", got)
			}
		})
	}
	// And an established connection counts until it ends.
	srv, l := newLimitsServer(t, allow)
	if rc := pipeConnect(t, srv, "c", false); rc != 0 {
		t.Fatalf("CONNACK %#x, want 0", rc)
	}
	if got := l.counted("pipe"); got != 0 {
		t.Fatalf("counted %d after the connection ended, want 0", got)
	}
}
