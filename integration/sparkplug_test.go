package integration

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/sparkplug"
)

// spPayload encodes a Sparkplug B payload as an edge node sends it: a
// timestamp, a bdSeq metric (Int64), seq when seq >= 0, and a data metric.
func spPayload(bdSeq uint64, seq int) []byte {
	metric := func(name string, datatype, value uint64) []byte {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendString(m, name)
		m = protowire.AppendTag(m, 4, protowire.VarintType)
		m = protowire.AppendVarint(m, datatype)
		m = protowire.AppendTag(m, 11, protowire.VarintType)
		return protowire.AppendVarint(m, value)
	}
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 1767225600000) // fixed, so that a payload compares equal
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, metric("bdSeq", sparkplug.TypeInt64, bdSeq))
	if seq >= 0 {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, metric("Temperature", sparkplug.TypeInt64, 21))
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(seq))
	}
	return b
}

func nbirthOf(bdSeq uint64) []byte { return spPayload(bdSeq, 0) }
func ndeathOf(bdSeq uint64) []byte { return spPayload(bdSeq, -1) }

// spReader reads what an MQTT client receives, in order, keeping it all.
type spReader struct {
	t    *testing.T
	c    *client5
	seen []*paho.Publish
}

// until reads until a message on topic (with payload, when not nil)
// arrives, and returns it and what came before it.
func (r *spReader) until(topic string, payload []byte) (*paho.Publish, []*paho.Publish) {
	r.t.Helper()
	start := len(r.seen)
	deadline := time.After(waitTimeout)
	for {
		select {
		case m := <-r.c.msgs:
			r.seen = append(r.seen, m)
			if m.Topic == topic && (payload == nil || bytes.Equal(m.Payload, payload)) {
				return m, r.seen[start : len(r.seen)-1]
			}
		case <-deadline:
			r.t.Fatalf("no message on %s within %v; got %v", topic, waitTimeout, topics(r.seen[start:]))
			return nil, nil
		}
	}
}

func topics(ms []*paho.Publish) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Topic
	}
	return out
}

// subscribeAll subscribes c to filters at QoS 1.
func subscribeAll(t *testing.T, c *client5, filters ...string) {
	t.Helper()
	subs := make([]paho.SubscribeOptions, len(filters))
	for i, f := range filters {
		subs[i] = paho.SubscribeOptions{Topic: f, QoS: 1}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sa, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: subs})
	if err != nil {
		t.Fatalf("subscribe %v: %v", filters, err)
	}
	for i, r := range sa.Reasons {
		if r > 2 {
			t.Fatalf("subscribe %s: reason %#x", filters[i], r)
		}
	}
}

// waitStat polls one of the node's figures until it is want.
func waitStat(t *testing.T, n *testNode, name string, want int64) {
	t.Helper()
	testkit.Wait(t, waitTimeout, fmt.Sprintf("%s = %d", name, want), func() error {
		got := n.Stats().Get(name)
		return testkit.Why(got == want, fmt.Sprintf("%s = %d", name, got))
	})
}

// waitGone waits until mochi has let go of a client id: its will, if
// any, was sent before (mochi sends it, then calls OnDisconnect, then
// forgets the client).
func waitGone(t *testing.T, n *testNode, id string) {
	t.Helper()
	testkit.Wait(t, waitTimeout, id+" gone", func() error {
		_, ok := clientByID(n.Server, id)
		return testkit.Why(!ok, id+" still known")
	})
}

func staleFlag(m *paho.Publish) (string, bool) {
	if m.Properties == nil {
		return "", false
	}
	for _, p := range m.Properties.User {
		if p.Key == sparkplug.StaleProperty {
			return p.Value, true
		}
	}
	return "", false
}

const (
	spBirth  = "spBv1.0/G1/NBIRTH/E1"
	spDeath  = "spBv1.0/G1/NDEATH/E1"
	spDBirth = "spBv1.0/G1/DBIRTH/E1/D1"
	spData   = "spBv1.0/G1/NDATA/E1"
	certs    = "$sparkplug/certificates/"
)

// A Sparkplug aware node, drop_stale_deaths on: births are retained under
// $sparkplug/certificates/ (for a host application subscribed then, and
// for one that subscribes later); an edge node that reconnects with a new
// bdSeq while its old connection lingers has the old connection's NDEATH
// will (bdSeq 0, late) counted and never delivered; its live NDEATH is
// delivered; a client cannot publish under $sparkplug/.
func TestSparkplugStaleDeathDropped(t *testing.T) {
	n := startNode(t, func(c *configs.Config) {
		c.Sparkplug.Enabled = true
		c.Sparkplug.DropStaleDeaths = true
	})
	host := &spReader{t: t, c: dial5(t, n.MQTTAddr(), "scada-1", "scada")}
	subscribeAll(t, host.c, certs+"#", "spBv1.0/#")
	// mochi writes the SUBACK, then looks up the retained messages for
	// the new filters: a certificate retained in between would reach the
	// host twice, once retained. mochi reads a client's packets one at a
	// time, so a second SUBACK proves the first lookup is over.
	subscribeAll(t, host.c, "sync/scada-1")

	edgeA := dial5(t, n.MQTTAddr(), "edge-e1-a", "edge", withWill(spDeath, string(ndeathOf(0)), false))
	edgeA.publish(t, spBirth, string(nbirthOf(0)), 0, false)
	host.until(spBirth, nbirthOf(0))
	if m, _ := host.until(certs+spBirth, nbirthOf(0)); m.Retain {
		t.Errorf("the live copy of a certificate carries retain (want it as a live delivery)")
	}
	dbirth := spPayload(0, 1)
	edgeA.publish(t, spDBirth, string(dbirth), 0, false)
	host.until(certs+spDBirth, dbirth)

	// A host application that subscribes later reads both, retained.
	late := &spReader{t: t, c: dial5(t, n.MQTTAddr(), "scada-2", "scada")}
	subscribeAll(t, late.c, certs+"#")
	want := map[string][]byte{certs + spBirth: nbirthOf(0), certs + spDBirth: dbirth}
	for len(want) > 0 { // retained messages come in no particular order
		select {
		case m := <-late.c.msgs:
			if p, ok := want[m.Topic]; ok && bytes.Equal(p, m.Payload) {
				if !m.Retain {
					t.Errorf("%s: not retained", m.Topic)
				}
				delete(want, m.Topic)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("the late host application lacks %d certificates", len(want))
		}
	}

	// The edge node comes back on a new connection (another client id)
	// while the old one lingers: new will, new birth, bdSeq 1.
	edgeB := dial5(t, n.MQTTAddr(), "edge-e1-b", "edge", withWill(spDeath, string(ndeathOf(1)), false))
	edgeB.publish(t, spBirth, string(nbirthOf(1)), 0, false)
	host.until(certs+spBirth, nbirthOf(1))

	// The old connection is cut: its will, an NDEATH of bdSeq 0, is stale.
	edgeA.drop()
	waitStat(t, n, "sparkplug_stale_deaths_total", 1)
	waitStat(t, n, "sparkplug_stale_deaths_dropped_total", 1)
	waitGone(t, n, "edge-e1-a")
	// A marker after the will: the host reads in order, so a delivered
	// NDEATH would come before it.
	edgeB.publish(t, spData, "marker", 1, false)
	_, before := host.until(spData, []byte("marker"))
	for _, m := range before {
		if m.Topic == spDeath {
			t.Fatalf("the stale NDEATH was delivered: %x", m.Payload)
		}
	}
	// The edge node's device births go on as before.
	edgeB.publish(t, spDBirth, string(spPayload(1, 2)), 0, false)
	host.until(certs+spDBirth, spPayload(1, 2))

	// Nobody publishes under $sparkplug/: MQTT 5 QoS 1 gets 0x87.
	if rc := host.c.publish(t, certs+spBirth, "forged", 1, true); rc != 0x87 {
		t.Errorf("publish under $sparkplug/: reason %#x, want 0x87", rc)
	}
	waitStat(t, n, "sparkplug_writes_refused_total", 1)
	third := &spReader{t: t, c: dial5(t, n.MQTTAddr(), "scada-3", "scada")}
	subscribeAll(t, third.c, certs+"spBv1.0/G1/NBIRTH/+")
	third.until(certs+spBirth, nbirthOf(1))

	// The live connection dies: its NDEATH (bdSeq 1) is delivered, unflagged.
	edgeB.drop()
	m, _ := host.until(spDeath, ndeathOf(1))
	if v, flagged := staleFlag(m); flagged {
		t.Errorf("the live NDEATH is flagged stale (%s)", v)
	}
	s := n.Stats()
	for name, want := range map[string]int64{
		"sparkplug_births_total": 2, "sparkplug_device_births_total": 2, "sparkplug_certificates_total": 4,
		"sparkplug_deaths_total": 2, "sparkplug_stale_deaths_total": 1, "sparkplug_payloads_malformed_total": 0,
		"sparkplug_edge_nodes": 1,
	} {
		if got := s.Get(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}

// drop_stale_deaths off: a stale NDEATH is delivered as it was sent, its
// payload untouched, with the user property sparkplug-stale-death naming
// the live bdSeq; a malformed NBIRTH is retained all the same and counted.
func TestSparkplugStaleDeathFlagged(t *testing.T) {
	n := startNode(t, func(c *configs.Config) { c.Sparkplug.Enabled = true })
	host := &spReader{t: t, c: dial5(t, n.MQTTAddr(), "scada-1", "scada")}
	subscribeAll(t, host.c, certs+"#", "spBv1.0/#")
	// mochi writes the SUBACK, then looks up the retained messages for
	// the new filters: a certificate retained in between would reach the
	// host twice, once retained. mochi reads a client's packets one at a
	// time, so a second SUBACK proves the first lookup is over.
	subscribeAll(t, host.c, "sync/scada-1")

	edgeA := dial5(t, n.MQTTAddr(), "edge-e1-a", "edge", withWill(spDeath, string(ndeathOf(0)), false))
	edgeA.publish(t, spBirth, string(nbirthOf(0)), 0, false)
	// The QoS 0 birth of bdSeq 0 is in before the next connection's: the
	// two connections' packets are read side by side, and a bdSeq 0 birth
	// read last would be the live one, its NDEATH not stale.
	host.until(certs+spBirth, nbirthOf(0))
	edgeB := dial5(t, n.MQTTAddr(), "edge-e1-b", "edge", withWill(spDeath, string(ndeathOf(1)), false))
	edgeB.publish(t, spBirth, string(nbirthOf(1)), 0, false)
	host.until(certs+spBirth, nbirthOf(1))

	edgeA.drop()
	m, _ := host.until(spDeath, ndeathOf(0))
	if v, ok := staleFlag(m); !ok || v != "1" {
		t.Errorf("stale NDEATH delivered with flag %q (%v), want %q", v, ok, "1")
	}
	waitStat(t, n, "sparkplug_stale_deaths_total", 1)
	if got := n.Stats().Get("sparkplug_stale_deaths_dropped_total"); got != 0 {
		t.Errorf("dropped %d with drop_stale_deaths off", got)
	}

	// Another edge node's NBIRTH that is not protobuf: retained, counted.
	edgeC := dial5(t, n.MQTTAddr(), "edge-e2", "edge")
	edgeC.publish(t, "spBv1.0/G1/NBIRTH/E2", "\xff\xff", 0, false)
	host.until(certs+"spBv1.0/G1/NBIRTH/E2", []byte("\xff\xff"))
	waitStat(t, n, "sparkplug_payloads_malformed_total", 1)
}

// The same client id coming back takes the session over: presence sends
// the old connection's will nowhere (a takeover is no death), before this
// hook sees it, so no NDEATH of it reaches anybody, stale or not.
func TestSparkplugTakeover(t *testing.T) {
	n := startNode(t, func(c *configs.Config) {
		c.Sparkplug.Enabled = true
		c.Sparkplug.DropStaleDeaths = true
	})
	host := &spReader{t: t, c: dial5(t, n.MQTTAddr(), "scada-1", "scada")}
	subscribeAll(t, host.c, "spBv1.0/#")
	edgeA := dial5(t, n.MQTTAddr(), "edge-e1", "edge", withWill(spDeath, string(ndeathOf(0)), false))
	edgeA.publish(t, spBirth, string(nbirthOf(0)), 0, false)
	host.until(spBirth, nbirthOf(0))
	edgeB := dial5(t, n.MQTTAddr(), "edge-e1", "edge", withWill(spDeath, string(ndeathOf(1)), false))
	edgeB.publish(t, spBirth, string(nbirthOf(1)), 0, false)
	_, before := host.until(spBirth, nbirthOf(1))
	// mochi is done with the old connection (its will sent, if its read
	// loop sends it: it does not when it sees the connection closed first)
	// once the connections are the host's and the new one's.
	testkit.Wait(t, waitTimeout, "the taken-over connection gone", func() error {
		c := atomic.LoadInt64(&n.Server.Info.ClientsConnected)
		return testkit.Why(c == 2, fmt.Sprintf("%d connected", c))
	})
	edgeB.publish(t, spData, "marker", 1, false)
	_, after := host.until(spData, []byte("marker"))
	for _, m := range append(before, after...) {
		if strings.HasSuffix(m.Topic, "/NDEATH/E1") {
			t.Fatalf("an NDEATH of the taken-over connection was delivered")
		}
	}
	if got := n.Stats().Get("sparkplug_deaths_total"); got != 0 {
		t.Errorf("sparkplug_deaths_total = %d: the cleared will reached the hook", got)
	}
}
