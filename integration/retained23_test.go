package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	mqtt3 "github.com/eclipse/paho.mqtt.golang"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// rtSubscribe subscribes c with opts and returns the SUBACK's reasons,
// trying again while mochi refuses the packet identifier as in use by one
// of its own deliveries in flight (see observer.subscribe).
func rtSubscribe(t *testing.T, c *client5, opts ...paho.SubscribeOptions) []byte {
	t.Helper()
	var reasons []byte
	_, err := testkit.Poll(waitTimeout, testkit.Tick, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		sa, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: opts})
		if err != nil && (sa == nil || len(sa.Reasons) == 0 || sa.Reasons[0] != byte(packets.ErrPacketIdentifierInUse.Code)) {
			t.Fatalf("subscribe %+v: %v", opts, err)
		}
		if sa != nil {
			reasons = sa.Reasons
		}
		return err
	})
	if err != nil {
		t.Fatalf("subscribe %+v: %v", opts, err)
	}
	return reasons
}

// rtTake returns the presence/users/... messages c received until a marker
// the server publishes on flush/{id} (c subscribes to it first): mochi
// queues the marker behind everything queued for c before it. The
// retained messages of a SUBSCRIBE are queued after its SUBACK is
// written, before the next packet of c is read: a SUBSCRIBE again to the
// flush topic, acknowledged, comes after them.
func rtTake(t *testing.T, n *testNode, c *client5, id string) []*paho.Publish {
	t.Helper()
	topic := "flush/" + id
	rtSubscribe(t, c, paho.SubscribeOptions{Topic: topic, QoS: 0})
	marker := fmt.Sprint(time.Now().UnixNano())
	if err := n.Server.Publish(topic, []byte(marker), false, 0); err != nil {
		t.Fatal(err)
	}
	var out []*paho.Publish
	deadline := time.After(waitTimeout)
	for {
		select {
		case m := <-c.msgs:
			if m.Topic == topic && string(m.Payload) == marker {
				return out
			}
			if strings.HasPrefix(m.Topic, "presence/users/") {
				out = append(out, m)
			}
		case <-deadline:
			t.Fatalf("%s: no marker within %v", id, waitTimeout)
		}
	}
}

// rtVersions returns "user@version" of each message, sorted, and fails
// unless each has the retain flag and QoS qos.
func rtVersions(t *testing.T, what string, qos byte, ms []*paho.Publish) []string {
	t.Helper()
	var out []string
	for _, m := range ms {
		a, err := presence.ParseAggregate(m.Payload)
		if err != nil {
			t.Fatalf("%s: %s: %v", what, m.Payload, err)
		}
		if !m.Retain || m.QoS != qos {
			t.Errorf("%s: %s retain %v QoS %d, want retain at QoS %d", what, m.Topic, m.Retain, m.QoS, qos)
		}
		out = append(out, fmt.Sprintf("%s@%d", a.User, a.Version))
	}
	sort.Strings(out)
	return out
}

// Retained presence/users/{user} is presence's own (issue 23): mochi's
// retained store holds none of it, and a late subscriber, after many
// changes, gets exactly the current version of each user its filter
// matches, once, with the retain flag: exact topics, "+" and "#", an MQTT
// 3.1.1 client too; a shared subscription gets
// none; retain handling 1 only for a new subscription, 2 never.
func TestRetainedServedByPresence(t *testing.T) {
	n := startNode(t, nil)
	ann := dial5(t, n.MQTTAddr(), "ann-phone", "ann")
	dial5(t, n.MQTTAddr(), "bob-phone", "bob")
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	obs.waitStatus("bob", presence.Online)
	for i := range 8 { // within the presence/set rate limit
		ctSet(t, ann, fmt.Sprintf(`{"status":%q,"text":"t%d"}`, []presence.Status{presence.Busy, presence.Away}[i%2], i))
	}
	last := obs.waitFor("ann", "the last change", func(p presence.Aggregate) bool { return p.Text == "t7" })
	bob := obs.waitStatus("bob", presence.Online)
	wantAnn := fmt.Sprintf("ann@%d", last.Version)
	wantBoth := fmt.Sprintf("[%s bob@%d]", wantAnn, bob.Version)
	testkit.Wait(t, waitTimeout, "ann's last version held", func() error {
		a, ok := itRetained(n, "ann")
		return testkit.Why(ok && a.Version == last.Version, fmt.Sprint(a.Version))
	})
	if m := n.Server.Topics.Messages("presence/users/#"); len(m) != 0 {
		t.Fatalf("mochi retains %d presence/users messages", len(m))
	}

	for _, tc := range []struct{ filter, want string }{
		{"presence/users/ann", "[" + wantAnn + "]"},
		{"presence/users/+", wantBoth},
		{"#", wantBoth},
		{"presence/+/ann", "[" + wantAnn + "]"},
		{"$share/g/presence/users/+", "[]"},
	} {
		// (Over WebSocket: TestRetainedOverWebSocket.)
		id := fmt.Sprintf("late-%d", time.Now().UnixNano())
		c := dial5(t, n.MQTTAddr(), id, "")
		rtSubscribe(t, c, paho.SubscribeOptions{Topic: "flush/" + id, QoS: 0})
		if r := rtSubscribe(t, c, paho.SubscribeOptions{Topic: tc.filter, QoS: 1}); len(r) != 1 || r[0] != 1 {
			t.Errorf("%s: SUBACK %v", tc.filter, r)
		}
		if got := fmt.Sprint(rtVersions(t, tc.filter, 1, rtTake(t, n, c, id))); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.filter, got, tc.want)
		}
	}

	// Retain handling: 1 delivers for a new subscription only, 2 never.
	id := fmt.Sprintf("rh-%d", time.Now().UnixNano())
	c := dial5(t, n.MQTTAddr(), id, "")
	rtSubscribe(t, c, paho.SubscribeOptions{Topic: "flush/" + id, QoS: 0})
	rtSubscribe(t, c, paho.SubscribeOptions{Topic: "presence/users/bob", QoS: 1, RetainHandling: 2})
	if got := rtTake(t, n, c, id); len(got) != 0 {
		t.Errorf("retain handling 2: %v", rtVersions(t, "rh 2", 1, got))
	}
	rtSubscribe(t, c, paho.SubscribeOptions{Topic: "presence/users/ann", QoS: 1, RetainHandling: 1})
	if got := fmt.Sprint(rtVersions(t, "rh 1", 1, rtTake(t, n, c, id))); got != "["+wantAnn+"]" {
		t.Errorf("retain handling 1, new: %s", got)
	}
	rtSubscribe(t, c, paho.SubscribeOptions{Topic: "presence/users/ann", QoS: 1, RetainHandling: 1})
	if got := rtTake(t, n, c, id); len(got) != 0 {
		t.Errorf("retain handling 1, existing: %v", rtVersions(t, "rh 1 again", 1, got))
	}

	// MQTT 3.1.1: the retain flag is set on the retained copy, and not on
	// a live one.
	v3 := v3Dial(t, n.MQTTAddr(), "late-v3", "")
	var mu sync.Mutex
	var got []mqtt3.Message
	v3Wait(t, "subscribe", v3.Subscribe("presence/users/ann", 1, func(_ mqtt3.Client, m mqtt3.Message) {
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}))
	testkit.Wait(t, waitTimeout, "the v3 client's retained copy", func() error {
		mu.Lock()
		defer mu.Unlock()
		return testkit.Why(len(got) == 1, fmt.Sprint(len(got)))
	})
	ctSet(t, ann, `{"status":"online","text":"live"}`)
	testkit.Wait(t, waitTimeout, "the v3 client's live copy", func() error {
		mu.Lock()
		defer mu.Unlock()
		return testkit.Why(len(got) == 2, fmt.Sprint(len(got)))
	})
	mu.Lock()
	r0, r1 := got[0], got[1]
	mu.Unlock()
	if a, _ := presence.ParseAggregate(r0.Payload()); !r0.Retained() || a.Version != last.Version {
		t.Errorf("v3 retained copy: retain %v version %d, want %d", r0.Retained(), a.Version, last.Version)
	}
	if a, _ := presence.ParseAggregate(r1.Payload()); r1.Retained() || a.Text != "live" {
		t.Errorf("v3 live copy: retain %v %s", r1.Retained(), r1.Payload())
	}
	if m := n.Server.Topics.Messages("presence/users/#"); len(m) != 0 {
		t.Fatalf("mochi retains %d presence/users messages", len(m))
	}
	obs.check()
}

// Over WebSocket a late subscriber gets the same retained presence. At QoS
// 0: over WebSocket a QoS 1 delivery followed by the client's next
// SUBSCRIBE sometimes leaves that SUBSCRIBE unanswered for good (about one
// run in ten under -race; reproduced at a39fd33, before issue 23, with
// mochi's own retained messages: not this change's; left for an issue of
// its own).
func TestRetainedOverWebSocket(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+") // the node shows the users its subscribers watch
	dial5(t, n.MQTTAddr(), "ann-phone", "ann")
	a := obs.waitStatus("ann", presence.Online)
	testkit.Wait(t, waitTimeout, "ann held", func() error {
		r, ok := itRetained(n, "ann")
		return testkit.Why(ok && r.Version == a.Version, "not yet")
	})
	id := fmt.Sprintf("late-ws-%d", time.Now().UnixNano())
	c := dialWS(t, n.WSAddr(), id, "")
	rtSubscribe(t, c, paho.SubscribeOptions{Topic: "flush/" + id, QoS: 0}, paho.SubscribeOptions{Topic: "presence/users/+", QoS: 0})
	if got, want := fmt.Sprint(rtVersions(t, "websocket", 0, rtTake(t, n, c, id))), fmt.Sprintf("[ann@%d]", a.Version); got != want {
		t.Errorf("websocket: %s, want %s", got, want)
	}
}

// An inline subscription of the embedding program (Plugin.Subscribe) gets
// the retained presence of the users its filter matches, as mochi hands it
// every other topic's retained messages.
func TestRetainedToInlineSubscription(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	dial5(t, n.MQTTAddr(), "ann-phone", "ann")
	a := obs.waitStatus("ann", presence.Online)
	testkit.Wait(t, waitTimeout, "ann held", func() error {
		r, ok := itRetained(n, "ann")
		return testkit.Why(ok && r.Version == a.Version, "not yet")
	})
	var mu sync.Mutex
	var got []string
	err := n.Presence.Subscribe("presence/users/+", 77, func(_ *mqtt.Client, _ packets.Subscription, pk packets.Packet) {
		mu.Lock()
		defer mu.Unlock()
		p, _ := presence.ParseAggregate(pk.Payload)
		got = append(got, fmt.Sprintf("%s@%d retain=%v", p.User, p.Version, pk.FixedHeader.Retain))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Presence.Unsubscribe("presence/users/+", 77) })
	mu.Lock()
	defer mu.Unlock()
	if want := fmt.Sprintf("[ann@%d retain=true]", a.Version); fmt.Sprint(got) != want {
		t.Fatalf("inline subscription got %v, want %s", got, want)
	}
}
