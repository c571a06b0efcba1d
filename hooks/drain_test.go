package hooks

import (
	"net"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"

	"github.com/presenced/presenced/presence"
)

// quietTracker takes every event and does nothing.
type quietTracker struct{}

func (quietTracker) Connect(presence.ConnID, string, string, string, *presence.Activity) {}
func (quietTracker) Active(presence.ConnID, string)                                      {}
func (quietTracker) WillDelay(presence.ConnID, string, time.Duration)                    {}
func (quietTracker) Established(presence.ConnID, string)                                 {}
func (quietTracker) Set(presence.ConnID, string, string, presence.SetRequest)            {}
func (quietTracker) LastWords(presence.ConnID, string, string)                           {}
func (quietTracker) Disconnect(presence.ConnID, string, presence.EndReason)              {}

// With NodesPrivate, presence/nodes/... is read by service accounts only;
// without it, by everyone.
func TestGuardNodesPrivate(t *testing.T) {
	_, d, _, cls := newDeliveryServer(t, 2)
	user, svc := cls[0], cls[1]
	user.Properties.Username = []byte("alice")
	svc.Properties.Username = []byte("ops")
	h := New(Options{Prefix: "presence", Tracker: quietTracker{}, Log: zerolog.Nop(),
		Service: func(cl *mqtt.Client) bool { return string(cl.Properties.Username) == "ops" }})
	for _, cl := range cls {
		h.OnSessionEstablish(cl, packets.Packet{})
	}
	for _, private := range []bool{false, true} {
		g := NewGuard(GuardOptions{Delivery: d, Presence: h, NodesPrivate: private})
		for _, topic := range []string{"presence/nodes/A", "presence/nodes/#", "presence/nodes/+"} {
			if got := g.OnACLCheck(user, topic, false); got == private {
				t.Errorf("private %v: user reads %s: %v", private, topic, got)
			}
			if !g.OnACLCheck(svc, topic, false) {
				t.Errorf("private %v: service account refused %s", private, topic)
			}
		}
		if !g.OnACLCheck(user, "presence/users/alice", false) {
			t.Errorf("private %v: alice refused her own presence", private)
		}
	}
}

// While draining, every CONNECT is refused, and Move stops a connection
// with ErrDrained (so it ends as drain) after clearing its will.
func TestDrainRefusesAndMoves(t *testing.T) {
	srv := mqtt.New(&mqtt.Options{InlineClient: true})
	h := New(Options{Prefix: "presence", Server: srv, Tracker: quietTracker{}, Log: zerolog.Nop()})
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	go func() { // the client's side: read and drop whatever the broker writes
		buf := make([]byte, 512)
		for {
			if _, err := b.Read(buf); err != nil {
				return
			}
		}
	}()
	cl := srv.NewClient(a, "t", "c1", false)
	cl.Properties.ProtocolVersion = 5
	cl.Properties.Will.Flag = 1
	if err := h.OnConnect(cl, packets.Packet{}); err != nil {
		t.Fatalf("before the drain: %v", err)
	}
	h.Drain("other:1883")
	if !h.Draining() {
		t.Fatal("not draining")
	}
	late := srv.NewClient(nil, "t", "c2", false)
	late.Properties.ProtocolVersion = 4
	if err := h.OnConnect(late, packets.Packet{}); err != ErrDrained || h.Drained.Refused.Load() != 1 {
		t.Fatalf("CONNECT while draining: %v, refused %d", err, h.Drained.Refused.Load())
	}
	if !h.Move(cl) || !cl.Closed() || cl.StopCause() != ErrDrained || cl.Properties.Will.Flag != 0 {
		t.Fatalf("moved: closed %v, cause %v, will flag %d", cl.Closed(), cl.StopCause(), cl.Properties.Will.Flag)
	}
	if h.Move(cl) || h.Drained.Moved.Load() != 1 {
		t.Fatalf("a closed connection moved again (moved %d)", h.Drained.Moved.Load())
	}
}
