package lifecycle

import (
	"net"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/presence"
)

// The hook turns a CONNACK with a failure code into one connect_failed, and
// ignores an accepting CONNACK and every other packet.
func TestRefusalsHook(t *testing.T) {
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	srv := mqtt.New(nil)
	cl := srv.NewClient(a, "t", "dev-1", false)
	cl.Net.Remote = "192.0.2.7:40000"
	cl.Properties.ProtocolVersion = 5
	cl.Properties.Username = []byte("alice")
	var got []presence.LifecycleEvent
	s := New(Options{Broker: &fakeBroker{}, Outputs: []Output{{Dialect: dialectFunc(func(ev presence.LifecycleEvent) { got = append(got, ev) }), Mode: Raw}}})
	at := time.Unix(1000, 0)
	h := &Refusals{Stage: s, Now: func() time.Time { return at }}
	if !h.Provides(mqtt.OnPacketSent) || h.Provides(mqtt.OnConnect) {
		t.Fatal("Provides")
	}
	h.OnPacketSent(cl, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack}}, nil)                                            // accepted
	h.OnPacketSent(cl, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, ReasonCode: 0x87}, nil)                           // not a CONNACK
	h.OnPacketSent(cl, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack}, ReasonCode: packets.ErrQuotaExceeded.Code}, nil) // refused
	s.Start()
	s.Stop()
	if len(got) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(got), got)
	}
	ev := got[0]
	if ev.Kind != presence.LifecycleConnectFailed || ev.Session.ID != "dev-1" || ev.User != "alice" || ev.Session.Conn.IP != "192.0.2.7" ||
		ev.Reason != RefusedThrottle || !ev.At.Equal(at) {
		t.Errorf("event %+v", ev)
	}
}
