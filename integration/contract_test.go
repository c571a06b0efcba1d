package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// MQTT 5 reason codes the contract names.
const (
	rcNotAuthorized        = 0x87
	rcPayloadFormatInvalid = 0x99
	rcBadUserNameOrPass    = 0x86
)

// ctDialTCP opens a TCP connection to addr.
func ctDialTCP(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, waitTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	return conn
}

// ctRaw returns every payload the observer received on topic.
func ctRaw(o *observer, topic string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.raw[topic]...)
}

// ctTopics returns every topic the observer received a message on.
func ctTopics(o *observer) []string {
	return ctTopicsBut(o, "")
}

// ctTopicsBut is ctTopics without the topics under prefix ("": none): the
// retained presence/nodes/{node} reaches every observer of presence/#. The
// node's heartbeat, presence/clock, is never listed: it reaches every
// observer of presence/# or # each presence.clock_interval.
func ctTopicsBut(o *observer, prefix string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ts []string
	for k := range o.raw {
		if k != "presence/clock" && (prefix == "" || !strings.HasPrefix(k, prefix)) {
			ts = append(ts, k)
		}
	}
	slices.Sort(ts)
	return ts
}

// ctNext waits for a presence of user newer than after that satisfies cond.
func ctNext(o *observer, user string, after uint64, what string, cond func(presence.Aggregate) bool) presence.Aggregate {
	o.t.Helper()
	return o.waitFor(user, what, func(p presence.Aggregate) bool { return p.Version > after && cond(p) })
}

// ctSince returns the presences of user received after version v.
func ctSince(o *observer, user string, v uint64) []presence.Aggregate {
	var out []presence.Aggregate
	for _, p := range o.history(user) {
		if p.Version > v {
			out = append(out, p)
		}
	}
	return out
}

// ctSet publishes a presence/set with QoS 1 and fails unless it is accepted.
func ctSet(t *testing.T, c *client5, payload string) {
	t.Helper()
	if rc := c.publish(t, "presence/set", payload, 1, false); rc >= 0x80 {
		t.Fatalf("presence/set %s: reason %#x", payload, rc)
	}
}

// ctRetained returns the payloads retained on topic in the broker: in
// mochi's store, and for presence/users/{user} in presence's own (issue
// 23: mochi's holds none of it, which it checks).
func ctRetained(n *testNode, topic string) []string {
	var out []string
	for _, pk := range n.Server.Topics.Messages(topic) {
		if strings.HasPrefix(pk.TopicName, "presence/users/") {
			panic("mochi retains " + pk.TopicName)
		}
		out = append(out, string(pk.Payload))
	}
	if user, ok := strings.CutPrefix(topic, "presence/users/"); ok && !strings.ContainsAny(user, "+#/") {
		if b, ok := n.Presence.Snapshot(user); ok {
			out = append(out, string(b))
		}
	}
	return out
}

// ctClientOpen reports whether the broker still serves the client id.
func ctClientOpen(n *testNode, id string) bool {
	cls := clientsWithID(n.Server, id) // the list is keyed by user-scoped ids
	return len(cls) == 1 && !cls[0].Closed()
}

// ctSessionOf returns the session view with id, if any.
func ctSessionOf(p presence.Aggregate, id string) (presence.SessionView, bool) {
	for _, s := range p.Sessions {
		if s.ID == id {
			return s, true
		}
	}
	return presence.SessionView{}, false
}

// Publishing under presence/ (other than presence/set by a user) is refused:
// MQTT 5 QoS 1 gets PUBACK 0x87, QoS 0 is dropped, with or without retain.
// Nothing is delivered and the retained presence does not change.
func TestPresenceNamespaceIsReadOnly(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "#")
	dev := dial5(t, n.MQTTAddr(), "ann-phone", "ann", withDevice("phone"))
	on := obs.waitStatus("ann", presence.Online)

	forged := func(topic string) string {
		return fmt.Sprintf(`{"user":"ann","status":"dnd","text":"forged %s","version":%d,"since":"2030-01-01T00:00:00.000Z","last_seen":null,"sessions":[]}`,
			topic, on.Version+1_000_000_000)
	}
	topics := []string{"presence/users/ann", "presence/users/x", "presence/groups/g", "presence", "presence/users"}
	for _, retain := range []bool{false, true} {
		for _, topic := range topics {
			if rc := dev.publish(t, topic, forged(topic), 1, retain); rc != rcNotAuthorized {
				t.Errorf("QoS 1 publish to %s (retain %v): reason %#x, want %#x", topic, retain, rc, rcNotAuthorized)
			}
			if rc := dev.publish(t, topic, forged(topic), 2, retain); rc != rcNotAuthorized {
				t.Errorf("QoS 2 publish to %s (retain %v): reason %#x, want %#x", topic, retain, rc, rcNotAuthorized)
			}
			dev.publish(t, topic, forged(topic), 0, retain)
		}
	}
	// An observer (no username) may not write presence/set either.
	if rc := obs.c.publish(t, "presence/set", `{"status":"dnd","text":"forged by observer"}`, 1, false); rc != rcNotAuthorized {
		t.Errorf("observer's presence/set: reason %#x, want %#x", rc, rcNotAuthorized)
	}
	if !ctClientOpen(n, "ann-phone") {
		t.Fatalf("device disconnected after refused publishes")
	}

	// Marker: a real change published after every forged message.
	ctSet(t, dev, `{"text":"marker"}`)
	marker := ctNext(obs, "ann", on.Version, "marker", func(p presence.Aggregate) bool { return p.Text == "marker" })

	if h := ctSince(obs, "ann", on.Version); len(h) != 1 || h[0].Version != marker.Version {
		t.Errorf("observer saw after the online presence: %+v, want only the marker", h)
	}
	for _, p := range obs.history("ann") {
		if p.Status == presence.DND || strings.Contains(p.Text, "forged") {
			t.Errorf("forged presence delivered: %+v", p)
		}
	}
	for _, topic := range ctTopicsBut(obs, "presence/nodes/") {
		if topic != "presence/users/ann" {
			t.Errorf("observer received %q on %s", ctRaw(obs, topic), topic)
		}
	}
	for _, topic := range append(topics, "presence/set") {
		if topic == "presence/users/ann" {
			continue
		}
		if r := ctRetained(n, topic); len(r) != 0 {
			t.Errorf("retained on %s: %q", topic, r)
		}
	}

	// A fresh observer still gets the broker's JSON, at the marker's version.
	late := newObserver(t, n.MQTTAddr(), "presence/users/ann")
	snap := late.waitFor("ann", "snapshot", func(p presence.Aggregate) bool { return true })
	if snap.Version != marker.Version || snap.Status != presence.Online || snap.Text != "marker" {
		t.Errorf("retained snapshot: %+v, want version %d", snap, marker.Version)
	}
	if r := ctRetained(n, "presence/users/ann"); len(r) != 1 || strings.Contains(r[0], "forged") {
		t.Errorf("retained on presence/users/ann: %q", r)
	}
	obs.check()
	late.check()
}

// presence/set sets the session's and the account's status and text; the
// aggregate follows the rules; the message itself is consumed.
func TestSetStatus(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "#")
	phone := dial5(t, n.MQTTAddr(), "fay-phone", "fay", withDevice("phone"))
	p := obs.waitStatus("fay", presence.Online)

	ctSet(t, phone, `{"status":"away","text":"lunch"}`)
	p = ctNext(obs, "fay", p.Version, "away/lunch", func(p presence.Aggregate) bool {
		return p.Status == presence.Away && p.Text == "lunch"
	})
	if s, ok := ctSessionOf(p, "fay-phone"); !ok || s.Status != presence.Away {
		t.Errorf("phone session after away: %+v", p.Sessions)
	}

	// phone online + desktop (authoritative) busy -> busy.
	ctSet(t, phone, `{"status":"online","text":""}`)
	p = ctNext(obs, "fay", p.Version, "online again", func(p presence.Aggregate) bool {
		return p.Status == presence.Online && p.Text == ""
	})
	desktop := dial5(t, n.MQTTAddr(), "fay-desktop", "fay", withDevice("desktop"))
	p = ctNext(obs, "fay", p.Version, "two sessions", func(p presence.Aggregate) bool { return len(p.Sessions) == 2 })
	if p.Status != presence.Online {
		t.Errorf("phone and desktop online: %+v", p)
	}
	ctSet(t, desktop, `{"status":"busy","text":"meeting"}`)
	p = ctNext(obs, "fay", p.Version, "busy from the desktop", func(p presence.Aggregate) bool { return p.Status == presence.Busy })
	if p.Text != "meeting" {
		t.Errorf("busy from the authoritative desktop: text %q, want meeting", p.Text)
	}
	if s, ok := ctSessionOf(p, "fay-phone"); !ok || s.Status != presence.Online {
		t.Errorf("phone session while the desktop is busy: %+v", p.Sessions)
	}

	// phone idle + laptop online -> online (the most available session).
	desktop.disconnect()
	p = ctNext(obs, "fay", p.Version, "desktop gone", func(p presence.Aggregate) bool { return len(p.Sessions) == 1 })
	dial5(t, n.MQTTAddr(), "fay-laptop", "fay", withDevice("laptop"))
	p = ctNext(obs, "fay", p.Version, "laptop online", func(p presence.Aggregate) bool { return len(p.Sessions) == 2 })
	ctSet(t, phone, `{"status":"idle"}`)
	p = ctNext(obs, "fay", p.Version, "phone idle", func(p presence.Aggregate) bool {
		s, ok := ctSessionOf(p, "fay-phone")
		return ok && s.Status == presence.Idle
	})
	if p.Status != presence.Online {
		t.Errorf("phone idle, laptop online: status %s, want online", p.Status)
	}

	// Account scope overrides, and clears.
	ctSet(t, phone, `{"scope":"account","status":"dnd","text":"focus"}`)
	p = ctNext(obs, "fay", p.Version, "account dnd", func(p presence.Aggregate) bool { return p.Status == presence.DND })
	if p.Text != "focus" {
		t.Errorf("account dnd: text %q, want focus", p.Text)
	}
	ctSet(t, phone, `{"scope":"account","status":"online"}`)
	p = ctNext(obs, "fay", p.Version, "override cleared", func(p presence.Aggregate) bool { return p.Status != presence.DND })
	if p.Status != presence.Online || p.Text != "focus" {
		t.Errorf("account status cleared: %s/%q, want online/focus (the account text stays)", p.Status, p.Text)
	}
	ctSet(t, phone, `{"scope":"account","text":""}`)
	p = ctNext(obs, "fay", p.Version, "account text cleared", func(p presence.Aggregate) bool { return p.Text != "focus" })
	if p.Status != presence.Online || p.Text != "" {
		t.Errorf("account text cleared: %s/%q, want online/\"\"", p.Status, p.Text)
	}

	// The device label can change.
	ctSet(t, phone, `{"device":"tablet"}`)
	p = ctNext(obs, "fay", p.Version, "device tablet", func(p presence.Aggregate) bool {
		s, ok := ctSessionOf(p, "fay-phone")
		return ok && s.Device == "tablet"
	})
	if s, _ := ctSessionOf(p, "fay-phone"); s.Status != presence.Idle {
		t.Errorf("device change altered the status: %+v", s)
	}

	// presence/set is consumed: never delivered (the observer has seen every
	// change above, each published after the sets), never retained.
	if r := ctRaw(obs, "presence/set"); len(r) != 0 {
		t.Errorf("presence/set delivered to an observer on #: %q", r)
	}
	late := newObserver(t, n.MQTTAddr(), "presence/set")
	late.subscribe("presence/users/fay")
	late.waitFor("fay", "snapshot", func(q presence.Aggregate) bool { return q.Version == p.Version })
	// Marker: a change the aggregate shows (the phone's text would not: the
	// laptop, more available, decides the text).
	ctSet(t, phone, `{"device":"marker"}`)
	late.waitFor("fay", "marker", func(q presence.Aggregate) bool {
		s, ok := ctSessionOf(q, "fay-phone")
		return ok && s.Device == "marker"
	})
	if r := ctRaw(late, "presence/set"); len(r) != 0 {
		t.Errorf("presence/set delivered to a new subscriber: %q", r)
	}
	if r := ctRetained(n, "presence/set"); len(r) != 0 {
		t.Errorf("retained on presence/set: %q", r)
	}
	obs.check()
	late.check()
}

// Invalid presence/set payloads are refused with PUBACK 0x99 (MQTT 5, QoS 1)
// and change nothing; the connection stays open. With QoS 0 they are dropped.
func TestInvalidSetPayloads(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	dev := dial5(t, n.MQTTAddr(), "gus-phone", "gus", withDevice("phone"))
	ctSet(t, dev, `{"status":"away","text":"before"}`)
	before := obs.waitFor("gus", "away/before", func(p presence.Aggregate) bool { return p.Text == "before" })

	invalid := []struct{ name, payload string }{
		{"not JSON", `status: busy`},
		{"JSON array", `[{"status":"busy"}]`},
		{"unknown field", `{"status":"busy","mood":"happy"}`},
		{"unknown status", `{"status":"sleeping"}`},
		{"offline", `{"status":"offline"}`},
		{"idle at account scope", `{"scope":"account","status":"idle"}`},
		{"text of 257 bytes", `{"text":"` + strings.Repeat("x", 257) + `"}`},
		{"payload over 1 KiB", `{"status":"busy","text":"short"}` + strings.Repeat(" ", 1024)},
		{"invalid UTF-8", "{\"status\":\"busy\",\"text\":\"\xff\xfe\"}"},
	}
	for _, tc := range invalid {
		if rc := dev.publish(t, "presence/set", tc.payload, 1, false); rc != rcPayloadFormatInvalid {
			t.Errorf("%s: reason %#x, want %#x", tc.name, rc, rcPayloadFormatInvalid)
		}
		if !ctClientOpen(n, "gus-phone") {
			t.Fatalf("%s: the node closed the connection", tc.name)
		}
	}
	// QoS 0: dropped silently.
	for _, tc := range invalid {
		dev.publish(t, "presence/set", tc.payload, 0, false)
	}
	// Marker: the next presence the observer gets is exactly this change.
	ctSet(t, dev, `{"status":"busy","text":"after"}`)
	after := ctNext(obs, "gus", before.Version, "busy/after", func(p presence.Aggregate) bool { return p.Text == "after" })
	got := ctSince(obs, "gus", before.Version)
	if len(got) != 1 || got[0].Status != presence.Busy || got[0].Text != "after" || got[0].Version != after.Version {
		t.Fatalf("after the invalid payloads the observer saw %+v, want only busy/after", got)
	}
	if !ctClientOpen(n, "gus-phone") {
		t.Fatalf("the node closed the connection")
	}
	// The QoS 0 publishes were read before the marker, on the same connection.
	if got := n.Stats().Of("status_sets_refused_total", "invalid"); got != int64(2*len(invalid)) {
		t.Errorf("set_rejected %d, want %d", got, 2*len(invalid))
	}
	_, body := adminGet(t, n, "/api/v1/users/gus")
	if p, err := presence.ParseAggregate(body); err != nil || p.Version != after.Version {
		t.Errorf("admin presence %s (%v), want version %d", body, err, after.Version)
	}
	obs.check()
}

// An invalid presence/set with QoS 2 must be answered within the QoS 2 flow
// (PUBREC, reason 0x99), not with a PUBACK, which the client cannot match to
// its publish; and it changes nothing.
func TestInvalidSetQoS2(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	dev := dial5(t, n.MQTTAddr(), "otto-phone", "otto")
	on := obs.waitStatus("otto", presence.Online)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	resp, err := dev.Publish(ctx, &paho.Publish{Topic: "presence/set", Payload: []byte(`{"status":"offline"}`), QoS: 2})
	if err != nil {
		t.Errorf("QoS 2 invalid presence/set: %v (want PUBREC %#x)", err, rcPayloadFormatInvalid)
	} else if resp.ReasonCode != rcPayloadFormatInvalid {
		t.Errorf("QoS 2 invalid presence/set: reason %#x, want %#x", resp.ReasonCode, rcPayloadFormatInvalid)
	}
	if rc := dev.publish(t, "presence/set", `{"status":"away","text":"marker"}`, 2, false); rc >= 0x80 {
		t.Fatalf("QoS 2 valid presence/set: reason %#x", rc)
	}
	marker := ctNext(obs, "otto", on.Version, "marker", func(p presence.Aggregate) bool { return p.Text == "marker" })
	if got := ctSince(obs, "otto", on.Version); len(got) != 1 || got[0].Version != marker.Version || got[0].Status != presence.Away {
		t.Errorf("observer saw %+v, want only away/marker", got)
	}
	obs.check()
}

// A will on presence/set with a text is the session's last words, shown when
// it dies uncleanly; a clean DISCONNECT does not apply it. Wills under the
// prefix are never delivered raw.
func TestLastWords(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "#")
	will := withWill("presence/set", `{"text":"battery died"}`, false)

	dev := dial5(t, n.MQTTAddr(), "hal-phone", "hal", withDevice("phone"), will)
	on := obs.waitStatus("hal", presence.Online)
	dev.drop()
	off := ctNext(obs, "hal", on.Version, "offline", func(p presence.Aggregate) bool { return p.Status == presence.Offline })
	if off.Text != "battery died" || off.LastSeen.IsZero() || len(off.Sessions) != 0 {
		t.Errorf("offline after the drop: %+v, want text \"battery died\" and a last_seen", off)
	}

	dev = dial5(t, n.MQTTAddr(), "hal-phone", "hal", withDevice("phone"), will)
	on = ctNext(obs, "hal", off.Version, "online again", func(p presence.Aggregate) bool { return p.Status == presence.Online })
	if on.Text != "" {
		t.Errorf("online again: text %q, want \"\"", on.Text)
	}
	dev.disconnect()
	off = ctNext(obs, "hal", on.Version, "offline", func(p presence.Aggregate) bool { return p.Status == presence.Offline })
	if off.Text != "" || off.LastSeen.IsZero() {
		t.Errorf("offline after a clean disconnect: %+v, want text \"\" (will not applied)", off)
	}
	_, ended := sessionsOf(t, n, "hal")
	if len(ended) != 2 || ended[0].EndReason != presence.EndClean || ended[1].EndReason != presence.EndNetwork {
		t.Errorf("ended: %+v", ended)
	}

	// The classic pattern: a retained "offline" will on one's own topic.
	ivy := dial5(t, n.MQTTAddr(), "ivy-phone", "ivy", withWill("presence/users/ivy", "offline", true))
	obs.waitStatus("ivy", presence.Online)
	ivy.drop()
	ivyOff := obs.waitStatus("ivy", presence.Offline)
	late := newObserver(t, n.MQTTAddr(), "presence/users/ivy")
	snap := late.waitFor("ivy", "snapshot", func(presence.Aggregate) bool { return true })
	if snap.Version != ivyOff.Version || snap.Status != presence.Offline {
		t.Errorf("retained snapshot of ivy: %+v, want the offline presence %d", snap, ivyOff.Version)
	}

	for _, o := range []*observer{obs, late} {
		for _, topic := range ctTopicsBut(o, "presence/nodes/") {
			for _, raw := range ctRaw(o, topic) {
				if raw == "offline" || raw == `{"text":"battery died"}` {
					t.Errorf("raw will delivered on %s: %q", topic, raw)
				}
			}
			if !strings.HasPrefix(topic, "presence/users/") {
				t.Errorf("observer received %q on %s", ctRaw(o, topic), topic)
			}
		}
	}
	if r := ctRetained(n, "presence/users/ivy"); len(r) != 1 || r[0] == "offline" {
		t.Errorf("retained on presence/users/ivy: %q", r)
	}
	if r := ctRetained(n, "presence/set"); len(r) != 0 {
		t.Errorf("retained on presence/set: %q", r)
	}
	obs.check()
	late.check()
}

// A client that asks for keep-alive 0 is given the server keep-alive, in the
// CONNACK (MQTT 5), and is held to it.
func TestServerKeepAlive(t *testing.T) {
	n := startNode(t, nil)
	_, ack, err := connect5(t, ctDialTCP(t, n.MQTTAddr()), "kai-phone", "kai", withKeepAlive(0))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if ka := ack.Properties.ServerKeepAlive; ka == nil || *ka != 60 {
		t.Errorf("CONNACK server keep-alive %v, want 60", ka)
	}

	n3 := startNode(t, func(c *configs.Config) { c.MQTT.ServerKeepAlive = configs.Duration(3 * time.Second) })
	_, ack, err = connect5(t, ctDialTCP(t, n3.MQTTAddr()), "kai-tablet", "kai", withKeepAlive(0))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if ka := ack.Properties.ServerKeepAlive; ka == nil || *ka != 3 {
		t.Errorf("CONNACK server keep-alive %v, want 3", ka)
	}

	obs := newObserver(t, n3.MQTTAddr(), "presence/users/+")
	start := time.Now()
	rawConnect(t, n3.MQTTAddr(), "lou-sensor", "lou", 0)
	obs.waitStatus("lou", presence.Online)
	off := obs.waitStatus("lou", presence.Offline)
	if limit := 3*time.Second*3/2 + time.Second; time.Since(start) > limit {
		t.Fatalf("offline after %v, want within %v", time.Since(start), limit)
	}
	if time.Since(start) < 3*time.Second {
		t.Errorf("offline after %v, before the keep-alive of 3 s passed", time.Since(start))
	}
	if off.LastSeen.IsZero() {
		t.Errorf("offline presence: %+v", off)
	}
	_, ended := sessionsOf(t, n3, "lou")
	if len(ended) != 1 || ended[0].EndReason != presence.EndTimeout {
		t.Errorf("ended: %+v", ended)
	}
	obs.check()
}

// The admin port: health, 404 for a user never seen, and the retained
// payload byte for byte.
func TestAdminPort(t *testing.T) {
	n := startNode(t, nil)
	if code, body := adminGet(t, n, "/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz: %d %s", code, body)
	}
	if code, body := adminGet(t, n, "/api/v1/users/nobody"); code != http.StatusNotFound {
		t.Errorf("GET /api/v1/users/nobody: %d %s", code, body)
	}
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	dev := dial5(t, n.MQTTAddr(), "jan-phone", "jan", withDevice("phone"))
	on := obs.waitStatus("jan", presence.Online)
	ctSet(t, dev, `{"status":"busy","text":"quote \" and ü and \u2028"}`)
	p := ctNext(obs, "jan", on.Version, "busy", func(p presence.Aggregate) bool { return p.Status == presence.Busy })

	var body []byte
	testkit.Wait(t, waitTimeout, "admin version matches the observer's", func() error {
		var code int
		code, body = adminGet(t, n, "/api/v1/users/jan")
		if code != http.StatusOK {
			return fmt.Errorf("GET: %d %s", code, body)
		}
		a, err := presence.ParseAggregate(body)
		return testkit.Why(err == nil && a.Version == p.Version, fmt.Sprintf("admin v%d (%v), observer v%d", a.Version, err, p.Version))
	})
	raw := ctRaw(obs, "presence/users/jan")
	if last := raw[len(raw)-1]; last != string(body) {
		t.Errorf("admin body differs from the retained payload:\nadmin    %s\nretained %s", body, last)
	}
	// A fresh subscriber's retained copy is the same bytes too.
	late := newObserver(t, n.MQTTAddr(), "presence/users/jan")
	late.waitFor("jan", "snapshot", func(q presence.Aggregate) bool { return q.Version == p.Version })
	if r := ctRaw(late, "presence/users/jan"); len(r) != 1 || r[0] != string(body) {
		t.Errorf("retained copy %q, admin %s", r, body)
	}
	obs.check()
	late.check()
}

// dialWS connects an MQTT 5 client over WebSocket (subprotocol mqtt).
func dialWS(t *testing.T, addr, clientID, user string, opts ...connectOpt) *client5 {
	t.Helper()
	conn, _, err := wsDial("ws://"+addr+"/mqtt", nil, "")
	if err != nil {
		t.Fatalf("websocket dial %s: %v", addr, err)
	}
	c, ack, err := connect5(t, conn, clientID, user, opts...)
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("connect over websocket: %v (%+v)", err, ack)
	}
	return c
}

// MQTT over WebSocket is presence like MQTT over TCP.
func TestWebSocketClient(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	conn, _, err := wsDial("ws://"+n.WSAddr()+"/mqtt", nil, "")
	if err != nil {
		t.Fatalf("websocket dial %s: %v", n.WSAddr(), err)
	}
	if p := conn.(*testkit.WSConn).WS.Subprotocol(); p != "mqtt" {
		t.Errorf("subprotocol %q, want mqtt", p)
	}
	c, ack, err := connect5(t, conn, "kim-browser", "kim", withDevice("browser"))
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("connect over websocket: %v (%+v)", err, ack)
	}
	on := obs.waitStatus("kim", presence.Online)
	if len(on.Sessions) != 1 || on.Sessions[0].Device != "browser" || on.Sessions[0].ID != "kim-browser" {
		t.Errorf("online over websocket: %+v", on)
	}
	ctSet(t, c, `{"status":"away"}`)
	ctNext(obs, "kim", on.Version, "away", func(p presence.Aggregate) bool { return p.Status == presence.Away })
	c.disconnect()
	obs.waitStatus("kim", presence.Offline)
	_, ended := sessionsOf(t, n, "kim")
	if len(ended) != 1 || ended[0].EndReason != presence.EndClean {
		t.Errorf("ended: %+v", ended)
	}
	obs.check()
}

// With identity.user_from client_id, "bob/phone" is user bob on device phone,
// and a client id without the separator only observes.
func TestIdentityFromClientID(t *testing.T) {
	n := startNode(t, func(c *configs.Config) { c.Identity.UserFrom = configs.UserFromClientID })
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	watcher := dial5(t, n.MQTTAddr(), "watcher", "")
	bob := dial5(t, n.MQTTAddr(), "bob/phone", "")
	on := obs.waitStatus("bob", presence.Online)
	if len(on.Sessions) != 1 || on.Sessions[0].ID != "bob/phone" || on.Sessions[0].Device != "phone" {
		t.Errorf("bob online: %+v", on)
	}
	if rc := watcher.publish(t, "presence/set", `{"status":"busy"}`, 1, false); rc != rcNotAuthorized {
		t.Errorf("watcher's presence/set: reason %#x, want %#x", rc, rcNotAuthorized)
	}
	// Marker: bob's change comes after the watcher connected and published.
	ctSet(t, bob, `{"text":"marker"}`)
	ctNext(obs, "bob", on.Version, "marker", func(p presence.Aggregate) bool { return p.Text == "marker" })
	if code, body := adminGet(t, n, "/api/v1/users/watcher"); code != http.StatusNotFound {
		t.Errorf("GET /api/v1/users/watcher: %d %s", code, body)
	}
	if got := n.Stats().Get("sessions"); got != 1 {
		t.Errorf("tracked connections: %d, want 1 (bob/phone only)", got)
	}
	for _, u := range ctTopics(obs) {
		if u != "presence/users/bob" {
			t.Errorf("observer received presence on %s: %q", u, ctRaw(obs, u))
		}
	}
	obs.check()
}

// A user name that cannot stand in a topic level is refused at CONNECT.
func TestBadUserNameRefused(t *testing.T) {
	n := startNode(t, nil)
	for i, user := range []string{"al/ice", "al+ice", "al#ice", "$alice"} {
		_, ack, err := connect5(t, ctDialTCP(t, n.MQTTAddr()), fmt.Sprintf("bad-%d", i), user)
		if err == nil && (ack == nil || ack.ReasonCode < 0x80) {
			t.Errorf("user %q: connected (%+v)", user, ack)
			continue
		}
		if ack != nil && ack.ReasonCode != rcBadUserNameOrPass {
			t.Errorf("user %q: CONNACK reason %#x, want %#x", user, ack.ReasonCode, rcBadUserNameOrPass)
		}
	}
	if got := n.Stats().Of("connect_refusals_total", "bad_identity"); got != 4 {
		t.Errorf("bad_identity %d, want 4", got)
	}
	if got := n.Stats().Get("sessions"); got != 0 {
		t.Errorf("tracked connections: %d, want 0", got)
	}
}

// rndSession is what the test expects of one live session.
type rndSession struct {
	user, device string
	status       presence.Status
	c            *client5
}

// Fifty random changes across three users: every observer sees strictly
// increasing versions per user, and once quiet the observer's last presence
// per user is the admin API's, with exactly the sessions left live.
func TestRandomChangesKeepVersionsOrdered(t *testing.T) {
	n := startNode(t, noBattleDamping) // a seed may take one id over six times
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	users := []string{"ria", "sol", "tom"}
	devices := []string{"phone", "desktop", "laptop", "tablet"}
	statuses := []presence.Status{presence.Online, presence.Idle, presence.Away, presence.Busy, presence.DND}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 42))

	live := map[string]*rndSession{} // by client id
	liveIDs := func() []string {
		ids := make([]string, 0, len(live))
		for id := range live {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids
	}
	nextID := 0
	connect := func(id, user string) {
		dev := devices[rng.IntN(len(devices))]
		c := dial5(t, n.MQTTAddr(), id, user, withDevice(dev))
		live[id] = &rndSession{user: user, device: dev, status: presence.Online, c: c}
	}
	for _, u := range users { // everyone starts somewhere
		connect(fmt.Sprintf("%s-%d", u, nextID), u)
		nextID++
	}
	for i := 0; i < 50; i++ {
		ids := liveIDs()
		op := rng.IntN(6)
		if len(ids) == 0 {
			op = 0
		}
		switch op {
		case 0: // a new device
			u := users[rng.IntN(len(users))]
			connect(fmt.Sprintf("%s-%d", u, nextID), u)
			nextID++
		case 1: // takeover: the same client id connects again
			id := ids[rng.IntN(len(ids))]
			connect(id, live[id].user)
		case 2: // a session-scope set
			s := live[ids[rng.IntN(len(ids))]]
			st := statuses[rng.IntN(len(statuses))]
			dev := devices[rng.IntN(len(devices))]
			ctSet(t, s.c, fmt.Sprintf(`{"status":%q,"text":"t%d","device":%q}`, st, i, dev))
			s.status, s.device = st, dev
		case 3: // an account-scope set
			s := live[ids[rng.IntN(len(ids))]]
			st := []presence.Status{presence.Online, presence.Away, presence.Busy, presence.DND}[rng.IntN(4)]
			ctSet(t, s.c, fmt.Sprintf(`{"scope":"account","status":%q,"text":"a%d"}`, st, i))
		case 4: // the socket drops
			id := ids[rng.IntN(len(ids))]
			live[id].c.drop()
			delete(live, id)
		case 5: // a clean disconnect
			id := ids[rng.IntN(len(ids))]
			live[id].c.disconnect()
			delete(live, id)
		}
	}

	for _, u := range users {
		var want []presence.SessionView
		for _, id := range liveIDs() {
			if s := live[id]; s.user == u {
				want = append(want, presence.SessionView{ID: id, Device: s.device, Status: s.status})
			}
		}
		var body []byte
		testkit.Wait(t, waitTimeout, u+": settled with the live sessions", func() error {
			p, ok := obs.last(u)
			if !ok || len(p.Sessions) != len(want) {
				return fmt.Errorf("observer has %+v, want sessions %+v", p.Sessions, want)
			}
			for _, s := range p.Sessions {
				w, ok := ctSessionOfWant(want, s.ID)
				if !ok || s.Device != w.Device || s.Status != w.Status {
					return fmt.Errorf("observer has %+v, want sessions %+v", p.Sessions, want)
				}
			}
			var code int
			code, body = adminGet(t, n, "/api/v1/users/"+u)
			if code != http.StatusOK {
				return fmt.Errorf("GET: %d %s", code, body)
			}
			a, err := presence.ParseAggregate(body)
			return testkit.Why(err == nil && a.Version == p.Version, fmt.Sprintf("admin v%d (%v), observer v%d", a.Version, err, p.Version))
		})
		p, _ := obs.last(u)
		if len(want) == 0 && p.Status != presence.Offline {
			t.Errorf("%s: no live session but %s", u, p.Status)
		}
		if len(want) > 0 && p.Status == presence.Offline {
			t.Errorf("%s: live sessions but offline", u)
		}
		a, err := presence.ParseAggregate(body)
		if err != nil || !reflect.DeepEqual(a, p) {
			t.Errorf("%s: admin %+v (%v), observer %+v", u, a, err, p)
		}
		raw := ctRaw(obs, "presence/users/"+u)
		if raw[len(raw)-1] != string(body) {
			t.Errorf("%s: admin body %s, last retained %s", u, body, raw[len(raw)-1])
		}
		t.Logf("%s: %d versions seen, final %s with %d sessions", u, len(obs.history(u)), p.Status, len(p.Sessions))
	}
	obs.check()
}

func ctSessionOfWant(want []presence.SessionView, id string) (presence.SessionView, bool) {
	for _, w := range want {
		if w.ID == id {
			return w, true
		}
	}
	return presence.SessionView{}, false
}

// A client id that cannot be a session id (over 256 bytes, or with a control
// character) must not give a connection with a user that presence ignores:
// the CONNECT is refused, or the user shows online.
func TestUntrackableClientIDRefused(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	cases := []struct{ user, id string }{
		{"zed", strings.Repeat("z", presence.MaxSessionIDBytes+1)},
		{"yan", "yan\x01phone"},
	}
	var accepted []string
	for _, c := range cases {
		_, ack, err := connect5(t, ctDialTCP(t, n.MQTTAddr()), c.id, c.user)
		if err == nil && ack != nil && ack.ReasonCode < 0x80 {
			accepted = append(accepted, c.user)
		}
	}
	// Marker: a good user connected after them is online.
	dial5(t, n.MQTTAddr(), "max-phone", "max")
	obs.waitStatus("max", presence.Online)
	for _, user := range accepted {
		testkit.Wait(t, 2*time.Second, "user "+user+": CONNECT accepted, so online", func() error {
			p, ok := obs.last(user)
			return testkit.Why(ok && p.Status == presence.Online,
				fmt.Sprintf("presence %+v (tracked connections %d, stats %+v)", p, n.Stats().Get("sessions"), n.Stats()))
		})
	}
	obs.check()
}

// Concurrent CONNECTs with one client id: once they settle, exactly one of
// them is served, and presence shows that one. (Each round is a burst of
// reconnects, as a flapping device makes.)
func TestConcurrentTakeoverKeepsOneSession(t *testing.T) {
	// 180 takeovers of one id: a battle, which damping would end by
	// refusing every newcomer (TestTakeoverBattleIsDamped).
	n := startNode(t, noBattleDamping)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	const burst = 6
	for round := 0; round < 30; round++ {
		clients := make([]*client5, burst)
		var wg sync.WaitGroup
		for i := range burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, ack, err := connect5(t, ctDialTCP(t, n.MQTTAddr()), "rex-phone", "rex", withDevice(fmt.Sprintf("r%d-%d", round, i)))
				if err == nil && ack.ReasonCode == 0 {
					clients[i] = c
				}
			}()
		}
		wg.Wait()
		// Which connections does the broker still serve? A taken-over one
		// was sent DISCONNECT and closed.
		var live []string
		for i, c := range clients {
			if c == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := c.Publish(ctx, &paho.Publish{Topic: "rex/ping", QoS: 1})
			cancel()
			if err == nil {
				live = append(live, fmt.Sprintf("r%d-%d", round, i))
			}
		}
		if len(live) != 1 {
			t.Fatalf("round %d: %d connections with client id rex-phone still served: %v", round, len(live), live)
		}
		testkit.Wait(t, 2*time.Second, fmt.Sprintf("round %d: presence shows the one connection served, %s", round, live[0]), func() error {
			p, _ := obs.last("rex")
			return testkit.Why(len(p.Sessions) == 1 && p.Sessions[0].Device == live[0] && p.Status == presence.Online,
				fmt.Sprintf("presence shows %+v", p.Sessions))
		})
	}
	obs.check()
}
