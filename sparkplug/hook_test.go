package sparkplug

import (
	"errors"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

const discardTopic = "$SYS/discarded"

func testHook(drop bool, now *time.Time) *Hook {
	return New(Options{DropStaleDeaths: drop, DiscardTopic: discardTopic, Now: func() time.Time { return *now },
		Edges: EdgesOptions{Max: 10, ForgetAfter: time.Hour}})
}

func client(id string, version byte) *mqtt.Client {
	cl := &mqtt.Client{ID: id}
	cl.Properties.ProtocolVersion = version
	return cl
}

func publish(topic string, qos byte, payload []byte) packets.Packet {
	return packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos}, TopicName: topic, Payload: payload}
}

func will(topic string, payload []byte) mqtt.Will {
	return mqtt.Will{TopicName: topic, Payload: payload, Qos: 1, Flag: 1}
}

// The hook's decisions, without a broker: a stale NDEATH will is dropped
// (rewritten to the discard topic) or flagged; a published one is
// acknowledged and dropped, or flagged; the live one passes untouched.
func TestHookStaleDeaths(t *testing.T) {
	now := t0
	for _, drop := range []bool{true, false} {
		h := testHook(drop, &now)
		a, b := client("edge-a", 5), client("edge-b", 5)
		for _, c := range []struct {
			cl  *mqtt.Client
			seq uint64
		}{{a, 0}, {b, 1}} {
			if _, err := h.OnPublish(c.cl, publish("spBv1.0/G/NBIRTH/E", 0, nbirth(c.seq))); err != nil {
				t.Fatalf("NBIRTH: %v", err)
			}
		}
		w, err := h.OnWill(a, will("spBv1.0/G/NDEATH/E", ndeath(0)))
		if err != nil {
			t.Fatal(err)
		}
		pk, perr := h.OnPublish(a, publish("spBv1.0/G/NDEATH/E", 1, ndeath(0)))
		if drop {
			if w.TopicName != discardTopic || w.Payload != nil || w.Retain || w.Qos != 0 {
				t.Errorf("dropped stale will: %+v", w)
			}
			if !errors.Is(perr, packets.CodeSuccessIgnore) {
				t.Errorf("dropped stale publish: %v", perr)
			}
		} else {
			if w.TopicName != "spBv1.0/G/NDEATH/E" || len(w.User) != 1 || w.User[0] != (packets.UserProperty{Key: StaleProperty, Val: "1"}) {
				t.Errorf("flagged stale will: %+v", w)
			}
			if perr != nil || len(pk.Properties.User) != 1 || pk.Properties.User[0].Val != "1" {
				t.Errorf("flagged stale publish: %+v, %v", pk.Properties.User, perr)
			}
		}
		live, _ := h.OnWill(b, will("spBv1.0/G/NDEATH/E", ndeath(1)))
		if live.TopicName != "spBv1.0/G/NDEATH/E" || len(live.User) != 0 || string(live.Payload) != string(ndeath(1)) {
			t.Errorf("live will changed: %+v", live)
		}
		wantDropped := int64(0)
		if drop {
			wantDropped = 2
		}
		if s := &h.Stats; s.Births.Load() != 2 || s.Deaths.Load() != 3 || s.StaleDeaths.Load() != 2 || s.StaleDropped.Load() != wantDropped {
			t.Errorf("drop %v: births %d deaths %d stale %d dropped %d", drop, s.Births.Load(), s.Deaths.Load(), s.StaleDeaths.Load(), s.StaleDropped.Load())
		}
	}
}

// $sparkplug/ is the server's: a QoS 0 publish is dropped, a 3.1.1 QoS 1
// one acknowledged and dropped, a will sent nowhere; the inline client (the
// hook's own certificates) passes.
func TestHookReservedNamespace(t *testing.T) {
	now := t0
	h := testHook(false, &now)
	if _, err := h.OnPublish(client("c", 5), publish("$sparkplug/certificates/spBv1.0/G/NBIRTH/E", 0, nil)); !errors.Is(err, packets.ErrRejectPacket) {
		t.Errorf("QoS 0: %v", err)
	}
	if _, err := h.OnPublish(client("c", 4), publish("$sparkplug/x", 1, nil)); !errors.Is(err, packets.CodeSuccessIgnore) {
		t.Errorf("3.1.1 QoS 1: %v", err)
	}
	if w, _ := h.OnWill(client("c", 4), will("$sparkplug/x", []byte("x"))); w.TopicName != discardTopic {
		t.Errorf("will: %+v", w)
	}
	inline := client("inline", 5)
	inline.Net.Inline = true
	if _, err := h.OnPublish(inline, publish("$sparkplug/certificates/spBv1.0/G/NBIRTH/E", 1, nil)); err != nil {
		t.Errorf("inline: %v", err)
	}
	if n := h.Stats.WritesRefused.Load(); n != 3 {
		t.Errorf("refused %d, want 3", n)
	}
}

// The connection that published a birth ends: its edge node is dead from
// then, and forgotten ForgetAfter later.
func TestHookForgetsEndedEdges(t *testing.T) {
	now := t0
	h := testHook(false, &now)
	a := client("edge-a", 5)
	h.OnPublish(a, publish("spBv1.0/G/NBIRTH/E", 0, nbirth(4)))
	h.OnDisconnect(a, nil, true)
	now = now.Add(time.Hour)
	h.OnPublish(client("other", 5), publish("spBv1.0/G/NBIRTH/F", 0, []byte{0xff})) // malformed: counted, tracked without bdSeq
	if n, f := h.Edges(); n != 1 || f != 1 {
		t.Fatalf("edges %d forgotten %d, want E forgotten, F tracked", n, f)
	}
	if h.Stats.Malformed.Load() != 1 {
		t.Fatalf("malformed %d", h.Stats.Malformed.Load())
	}
	if w, _ := h.OnWill(a, will("spBv1.0/G/NDEATH/E", ndeath(3))); w.TopicName != "spBv1.0/G/NDEATH/E" || len(w.User) != 0 {
		t.Fatalf("a will of a forgotten edge node is judged: %+v", w)
	}
}

// A PUBLISH outside Sparkplug costs the hook two prefix checks.
func BenchmarkHookOtherTopic(b *testing.B) {
	now := t0
	h := testHook(true, &now)
	cl := client("c", 5)
	pk := publish("factory/line1/temperature", 0, []byte("21"))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = h.OnPublish(cl, pk)
		h.OnPublished(cl, pk)
	}
}
