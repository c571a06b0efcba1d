package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// rawClient is an MQTT 3.1.1 client on a raw socket, for clients that
// misbehave on purpose: it writes packets and reads only when told to.
type rawClient struct {
	t    *testing.T
	conn net.Conn
	id   string
}

// dialRaw opens a TCP connection whose receive buffer is rcvbuf bytes (0: the
// system default) and sends CONNECT (user "" connects without a username). It
// reads the CONNACK and fails unless the connection is accepted.
func dialRaw(t *testing.T, addr, clientID, user string, keepalive uint16, rcvbuf int) *rawClient {
	t.Helper()
	d := net.Dialer{Timeout: waitTimeout}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &rawClient{t: t, conn: conn, id: clientID}
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 4,
		Connect: packets.ConnectParams{
			ProtocolName: []byte("MQTT"), Clean: true, Keepalive: keepalive, ClientIdentifier: clientID,
		},
	}
	if user != "" {
		pk.Connect.UsernameFlag, pk.Connect.Username = true, []byte(user)
	}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		t.Fatalf("encode connect: %v", err)
	}
	c.write(buf.Bytes())
	_ = conn.SetReadDeadline(time.Now().Add(waitTimeout))
	ack := make([]byte, 4)
	if _, err := conn.Read(ack); err != nil || ack[0] != 0x20 || ack[3] != 0 {
		t.Fatalf("%s: connack %x: %v", clientID, ack, err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return c
}

func (c *rawClient) write(b []byte) {
	c.t.Helper()
	_ = c.conn.SetWriteDeadline(time.Now().Add(waitTimeout))
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatalf("%s: write: %v", c.id, err)
	}
}

// subscribe sends SUBSCRIBE for filter at qos without waiting for the SUBACK.
func (c *rawClient) subscribe(id uint16, filter string, qos byte) {
	c.t.Helper()
	if err := c.trySubscribe(id, filter, qos); err != nil {
		c.t.Fatalf("%s: write: %v", c.id, err)
	}
}

// trySubscribe is subscribe, returning the error of the write.
func (c *rawClient) trySubscribe(id uint16, filter string, qos byte) error {
	c.t.Helper()
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Subscribe, Qos: 1},
		ProtocolVersion: 4,
		PacketID:        id,
		Filters:         packets.Subscriptions{{Filter: filter, Qos: qos}},
	}
	var buf bytes.Buffer
	if err := pk.SubscribeEncode(&buf); err != nil {
		c.t.Fatalf("encode subscribe: %v", err)
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(waitTimeout))
	_, err := c.conn.Write(buf.Bytes())
	return err
}

// publish sends a QoS 0 PUBLISH.
func (c *rawClient) publish(topic string, payload []byte) {
	c.t.Helper()
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Publish},
		ProtocolVersion: 4,
		TopicName:       topic,
		Payload:         payload,
	}
	var buf bytes.Buffer
	if err := pk.PublishEncode(&buf); err != nil {
		c.t.Fatalf("encode publish: %v", err)
	}
	c.write(buf.Bytes())
}

// subscribed reports whether the broker has indexed a subscription of
// clientID that matches topic.
func subscribed(n *testNode, clientID, topic string) bool {
	for key := range n.Server.Topics.Subscribers(topic).Subscriptions {
		if presence.ClientIDOf(key) == clientID { // keyed by user-scoped ids
			return true
		}
	}
	return false
}

// stalledPacketSize is the mqtt.max_packet_size of the tests with a
// stalledClient: its 8 MiB publish is over the 1 MiB default.
const stalledPacketSize = 16 << 20

// stalledClient connects an observer that never reads: it subscribes to
// a topic of its own (and, when early is set, to presence/users/+ with QoS
// 0), publishes 8 MiB to its own topic, which the broker sends back to it
// through a 4 KiB receive buffer, and reads nothing more. From then on the
// broker's write to it blocks, and mochi's queue for it fills.
func stalledClient(t *testing.T, n *testNode, clientID string, early bool) *rawClient {
	t.Helper()
	a := dialRaw(t, n.MQTTAddr(), clientID, "", 60, 4096)
	acks := 1
	a.subscribe(1, "junk/"+clientID, 0)
	if early {
		a.subscribe(2, "presence/users/+", 0)
		acks++
	}
	_ = a.conn.SetReadDeadline(time.Now().Add(waitTimeout))
	head := make([]byte, 5*acks+1)
	if _, err := io.ReadFull(a.conn, head[:5*acks]); err != nil {
		t.Fatalf("%s: SUBACK: %v", clientID, err)
	}
	a.publish("junk/"+clientID, bytes.Repeat([]byte{'x'}, 8<<20))
	// The broker has begun writing the 8 MiB back once the first byte of
	// the PUBLISH arrives; the rest stays unread, so the write blocks.
	if _, err := io.ReadFull(a.conn, head[5*acks:]); err != nil || head[5*acks]&0xF0 != 0x30 {
		t.Fatalf("%s: want the PUBLISH back, got %x: %v", clientID, head, err)
	}
	return a
}

// 3a of issue 7: a subscriber that never reads its socket must not hold up
// anyone else's presence. It stalls on its own 8 MiB and then subscribes to
// presence/users/+ with QoS 1; a well-behaved observer still sees a new user
// at once, and a new observer still gets its SUBACK and the snapshot.
func TestStalledSubscriberDoesNotFreezePresence(t *testing.T) {
	n := startNode(t, func(c *configs.Config) { c.MQTT.MaxPacketSize = stalledPacketSize })
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	dial5(t, n.MQTTAddr(), "early-phone", "early")
	obs.waitStatus("early", presence.Online)

	a := stalledClient(t, n, "stuck-reader", false)
	// With mochi's own listeners (the embedded form), a QoS 1 subscriber
	// whose socket is stuck stalls every QoS 1 publisher to it, presence's
	// included: mochi writes under the client's lock, and each QoS 1
	// delivery takes that lock. That is mochi's, and presenced's listener
	// is the cure (README). There the stalled client subscribes with QoS 0,
	// which shows that presence itself holds nothing across its SUBACK.
	qos := byte(1)
	if n.form == "embedded" {
		qos = 0
	}
	if err := a.trySubscribe(3, "presence/users/+", qos); err != nil {
		// presenced's listener resets a slow consumer's connection.
		t.Logf("the broker had already disconnected the stalled client: %v", err)
	}
	// Either the broker holds the stalled client with its subscription, or
	// (presenced's listener, whose backlog the 8 MiB overflows) it has
	// already disconnected it as a slow consumer. Both are fine; holding
	// up everyone else is not.
	testkit.Wait(t, waitTimeout, "presence subscription indexed, or the client gone", func() error {
		if subscribed(n, "stuck-reader", "presence/users/anyone") {
			return nil
		}
		if cls := clientsWithID(n.Server, "stuck-reader"); len(cls) == 0 || cls[0].Closed() {
			t.Logf("the broker disconnected the stalled client (slow consumer)")
			return nil
		}
		return fmt.Errorf("not yet")
	})

	start := time.Now()
	dial5(t, n.MQTTAddr(), "victim-phone", "victim")
	testkit.Wait(t, 2*time.Second, "the observer sees victim online", func() error {
		if p, ok := obs.last("victim"); !ok || p.Status != presence.Online {
			return fmt.Errorf("last seen %+v (found %v)", p, ok)
		}
		return nil
	})
	t.Logf("victim shown online %v after connecting, with a stalled subscriber connected", time.Since(start).Round(time.Millisecond))

	// A new observer: SUBACK and the snapshot of both users, promptly.
	late := dial5(t, n.MQTTAddr(), "late-observer", "")
	done := make(chan error, 1)
	go func() { done <- late.subscribeErr("presence/users/+") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("late subscribe: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("no SUBACK within 2 s while a stalled subscriber is connected")
	}
	got := map[string]bool{}
	testkit.Wait(t, 2*time.Second, "snapshot of early and victim", func() error {
		for {
			select {
			case m := <-late.msgs:
				got[strings.TrimPrefix(m.Topic, "presence/users/")] = true
				continue
			default:
			}
			break
		}
		if !got["early"] || !got["victim"] {
			return fmt.Errorf("snapshot so far: %v", got)
		}
		return nil
	})
	obs.check()
}

// 3b of issue 7: a message mochi drops for one subscriber (its queue is
// full) is made good for that subscriber only. With 300 users online and
// nothing changing, a subscriber that never reads must not make anyone else
// receive anything.
func TestDroppedMessagesDoNotStormOthers(t *testing.T) {
	n := startNode(t, func(c *configs.Config) {
		c.MQTT.MaxWritesPending = 16
		c.MQTT.MaxPacketSize = stalledPacketSize
	})
	const users = 300
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	for i := range 3 {
		stalledClient(t, n, fmt.Sprintf("stuck-%d", i), true)
	}
	for i := range users {
		rawConnect(t, n.MQTTAddr(), fmt.Sprintf("u%03d-dev", i), fmt.Sprintf("u%03d", i), 60)
	}
	testkit.Wait(t, waitTimeout, "every user online at the observer", func() error {
		online := 0
		for i := range users {
			if p, ok := obs.last(fmt.Sprintf("u%03d", i)); ok && p.Status == presence.Online {
				online++
			}
		}
		if online != users {
			return fmt.Errorf("%d of %d online", online, users)
		}
		return nil
	})
	before := obs.count()
	// Nothing changes from here on: the observer must receive nothing more.
	// The window is the scenario itself (a resend storm shows within it).
	time.Sleep(2 * time.Second)
	if extra := obs.count() - before; extra != 0 {
		t.Errorf("the observer received %d messages in 2 s while nothing changed (a resend storm)", extra)
	}
	if got := obs.count(); got != users {
		t.Errorf("the observer received %d messages for %d users who each came online once", got, users)
	}
	st := n.Stats()
	t.Logf("%s form: %d presence messages dropped for full queues, %d sent again, %d retained repeats refused, %d slow subscribers disconnected",
		n.form, st.Get("deliveries_dropped_total"), st.Get("deliveries_resent_total"), st.Get("retained_repeats_refused_total"), st.Get("slow_subscribers_disconnected_total"))
	if n.form == "embedded" && st.Get("deliveries_dropped_total") == 0 {
		// mochi's listeners keep the stalled clients, whose queues fill:
		// the test must have made mochi drop, or it proves nothing.
		t.Errorf("no message was dropped for the stalled subscribers")
	}
	obs.check()
}

// count returns how many messages the observer has received.
func (o *observer) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, r := range o.raw {
		n += len(r)
	}
	return n
}

// subscribeErr subscribes with QoS 1 and returns the error instead of failing.
func (c *client5) subscribeErr(filter string) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}})
	return err
}

// malformedCase is one connection that breaks the protocol on purpose.
type malformedCase struct {
	name string
	// hello, when not zero, is the MQTT version of a valid CONNECT sent
	// first (with user, when set), which must be accepted.
	hello byte
	user  string
	send  []byte
	// halfClose ends the client's side of the stream after send (a
	// truncated packet that will never be completed).
	halfClose bool
}

// malformedCases returns the garbage TestMalformedMQTT throws at a broker.
func malformedCases(t *testing.T) []malformedCase {
	random := make([]byte, 64)
	for i := range random { // deterministic noise, behind a reserved packet type
		random[i] = byte(i*151 + 7)
	}
	random[0] = 0x00
	badName := connectBytes(t, 4, "mal-proto-dev", "mal-proto", 60)
	copy(badName[4:8], "MQTX") // fixed header (2 bytes), name length (2), name
	badLevel := connectBytes(t, 4, "mal-level-dev", "mal-level", 60)
	badLevel[8] = 9
	publish := []byte{0x30, 0x00, 0x00, 0x0C}
	publish = append(append(publish, "presence/set"...), `{"status":"dnd"}`...)
	publish[1] = byte(len(publish) - 2)
	return []malformedCase{
		{name: "random bytes", send: random},
		{name: "an HTTP request", send: []byte("GET / HTTP/1.1\r\nHost: broker\r\n\r\n")},
		{name: "a bad protocol name", send: badName},
		{name: "a bad protocol level", send: badLevel},
		{name: "a remaining length of five bytes", send: []byte{0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0, 0}},
		{name: "an empty CONNECT", send: []byte{0x10, 0x00}},
		{name: "PUBLISH before CONNECT", send: publish},
		{name: "a truncated CONNECT", send: connectBytes(t, 5, "mal-trunc-dev", "mal-trunc", 60)[:9], halfClose: true},
		{name: "a second CONNECT", hello: 5, user: "mal-second", send: connectBytes(t, 5, "mal-second-dev", "mal-second", 60)},
		{name: "a SUBSCRIBE without filters", hello: 4, send: []byte{0x82, 0x02, 0x00, 0x01}},
		{name: "a SUBSCRIBE with reserved flags", hello: 4, send: []byte{0x80, 0x06, 0x00, 0x01, 0x00, 0x01, 'a', 0x00}},
		{name: "a PUBLISH with an invalid UTF-8 topic", hello: 5, user: "mal-utf8", send: []byte{0x30, 0x05, 0x00, 0x02, 0xFF, 0xFE, 0x00}},
		{name: "a PUBLISH with QoS 3", hello: 4, user: "mal-qos", send: []byte{0x36, 0x06, 0x00, 0x01, 'a', 0x00, 0x01, 'x'}},
		{name: "a truncated PUBLISH", hello: 4, user: "mal-short", send: []byte{0x32, 0x40, 0x00, 0x0C, 'p', 'r'}, halfClose: true},
	}
}

// 8 of issue 8: malformed MQTT thrown at a live broker. Every connection
// is closed by the broker (after at most a CONNACK refusing it, or for MQTT 5
// a DISCONNECT with an error code); nothing crashes; a well-behaved user
// connected all along stays online and can still set her presence, a new
// client is served, no user of a refused CONNECT ever shows, and no session
// is left behind.
func TestMalformedMQTT(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	wendy := dial5(t, n.MQTTAddr(), "wendy-phone", "wendy")
	obs.waitStatus("wendy", presence.Online)

	for _, tc := range malformedCases(t) {
		conn := dialFrom(t, n.MQTTAddr(), "")
		if tc.hello != 0 {
			id := fmt.Sprintf("mal-%d", time.Now().UnixNano())
			if tc.user != "" {
				id = tc.user + "-dev"
			}
			if rc := hello(t, conn, tc.hello, id, tc.user, 60); rc != 0 {
				t.Fatalf("%s: CONNACK %#x before the garbage", tc.name, rc)
			}
		}
		if _, err := conn.Write(tc.send); err != nil {
			t.Fatalf("%s: write: %v", tc.name, err)
		}
		if tc.halfClose {
			_ = conn.(*net.TCPConn).CloseWrite()
		}
		got := closedBy(t, conn, 5*time.Second, tc.name)
		switch {
		case len(got) == 0:
		case tc.hello == 0 && len(got) >= 4 && got[0] == 0x20 && got[3] != 0:
			// CONNACK refusing it (3.1.1 return code)
		case tc.hello == 5:
			if rc, ok := disconnectReason(got); !ok || rc < 0x80 {
				t.Errorf("%s: received %x, want nothing or a DISCONNECT with an error code", tc.name, got)
			}
		default:
			t.Errorf("%s: received %x, want nothing or a refusing CONNACK", tc.name, got)
		}
		t.Logf("%s: closed by the broker after %x", tc.name, got)
	}

	// wendy was never affected, and still sets her presence.
	ctSet(t, wendy, `{"status":"busy","text":"still here"}`)
	obs.waitFor("wendy", "busy", func(p presence.Aggregate) bool { return p.Text == "still here" })
	dial5(t, n.MQTTAddr(), "walt-phone", "walt")
	obs.waitStatus("walt", presence.Online)
	for _, p := range obs.history("wendy") {
		if p.Status == presence.Offline || len(p.Sessions) != 1 {
			t.Errorf("wendy's presence changed under the garbage: %+v", p)
		}
	}
	for _, u := range []string{"mal-proto", "mal-level", "mal-trunc"} {
		if p, ok := obs.last(u); ok {
			t.Errorf("user %s of a refused CONNECT shown: %+v", u, p)
		}
	}
	// The users whose connections were accepted, then closed for the
	// garbage, are offline, or were never shown: a session that ends within
	// moments may never be written.
	for _, u := range []string{"mal-second", "mal-utf8", "mal-qos", "mal-short"} {
		testkit.Wait(t, waitTimeout, u+" offline or unknown", func() error {
			if p, ok := obs.last(u); ok && p.Status != presence.Offline {
				return fmt.Errorf("shown %+v", p)
			}
			got, found, err := n.Presence.User(context.Background(), u)
			if err != nil {
				return err
			}
			return testkit.Why(!found || len(got.Sessions) == 0, fmt.Sprintf("live sessions %+v", got.Sessions))
		})
	}
	testkit.Wait(t, waitTimeout, "only wendy's and walt's sessions left", func() error {
		s := n.Stats()
		return testkit.Why(s.Get("sessions") == 2 && s.Get("connections") == 3,
			fmt.Sprintf("tracked %d, connections %d", s.Get("sessions"), s.Get("connections")))
	})
	obs.check()
}
