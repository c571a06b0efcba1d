package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
)

// Limits of issue 18 on single packets, wills and unacknowledged messages,
// proven with raw packets and paho clients. TestTopicAliasLimits and
// TestDisconnectSessionExpiryCapped need the mochi capabilities the binary
// sets (node form only, like TestCaps*); the others pass in both forms.

// encode encodes pk for MQTT version v.
func encode(t *testing.T, v byte, pk packets.Packet) []byte {
	t.Helper()
	pk.ProtocolVersion = v
	var buf bytes.Buffer
	var err error
	switch pk.FixedHeader.Type {
	case packets.Connect:
		err = pk.ConnectEncode(&buf)
	case packets.Publish:
		err = pk.PublishEncode(&buf)
	case packets.Subscribe:
		err = pk.SubscribeEncode(&buf)
	default:
		t.Fatalf("encode: type %d", pk.FixedHeader.Type)
	}
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return buf.Bytes()
}

// connectPacket is a CONNECT of version v for clientID, changed by edit.
func connectPacket(v byte, clientID string, edit func(*packets.Packet)) packets.Packet {
	pk := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Connect},
		Connect:     packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 60, ClientIdentifier: clientID},
	}
	if edit != nil {
		edit(&pk)
	}
	return pk
}

// rawConnectAck dials addr, sends pk and returns the connection and the
// decoded CONNACK.
func rawConnectAck(t *testing.T, addr string, v byte, pk packets.Packet) (net.Conn, packets.Packet) {
	t.Helper()
	conn := dialFrom(t, addr, "")
	writeRaw(t, conn, encode(t, v, pk))
	typ, body, err := readPacket(conn, waitTimeout)
	if err != nil || typ != 0x20 {
		t.Fatalf("%s: want CONNACK, got %#x %x: %v", pk.Connect.ClientIdentifier, typ, body, err)
	}
	ack := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack, Remaining: len(body)}, ProtocolVersion: v}
	if err := ack.ConnackDecode(body); err != nil {
		t.Fatalf("decode CONNACK %x: %v", body, err)
	}
	return conn, ack
}

func writeRaw(t *testing.T, conn net.Conn, b []byte) {
	t.Helper()
	_ = conn.SetWriteDeadline(time.Now().Add(waitTimeout))
	if _, err := conn.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// TestTopicAliasLimits: CONNACK announces mqtt.max_topic_aliases, an alias
// above it ends the connection with DISCONNECT 0x94, and a topic name over
// mqtt.max_topic_length with 0x90, before mochi stores or routes it.
func TestTopicAliasLimits(t *testing.T) {
	if embedded() {
		t.Skip("needs the mochi capabilities the binary sets")
	}
	n := startNode(t, nil)
	conn, ack := rawConnectAck(t, n.MQTTAddr(), 5, connectPacket(5, "alias-1", nil))
	if ack.ReasonCode != 0 || ack.Properties.TopicAliasMaximum != 16 {
		t.Fatalf("CONNACK %#x, Topic Alias Maximum %d, want success and 16", ack.ReasonCode, ack.Properties.TopicAliasMaximum)
	}
	// Alias 16 is taken, then used alone.
	pub := func(topic string, alias uint16) []byte {
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish}, TopicName: topic, Payload: []byte("x")}
		if alias > 0 {
			pk.Properties.TopicAlias, pk.Properties.TopicAliasFlag = alias, true
		}
		return encode(t, 5, pk)
	}
	writeRaw(t, conn, pub("alias/a", 16))
	writeRaw(t, conn, pub("", 16))
	writeRaw(t, conn, pub("alias/b", 17))
	got := closedBy(t, conn, waitTimeout, "alias 17")
	if rc, ok := disconnectReason(got); !ok || rc != packets.ErrTopicAliasInvalid.Code {
		t.Errorf("alias 17: got %x, want DISCONNECT 0x94", got)
	}

	// A topic name over max_topic_length (256), without an alias and with one.
	for i, alias := range []uint16{0, 1} {
		conn, _ := rawConnectAck(t, n.MQTTAddr(), 5, connectPacket(5, fmt.Sprintf("alias-long-%d", i), nil))
		writeRaw(t, conn, pub(strings.Repeat("t", 257), alias))
		got := closedBy(t, conn, waitTimeout, "long topic")
		if rc, ok := disconnectReason(got); !ok || rc != packets.ErrTopicNameInvalid.Code {
			t.Errorf("long topic, alias %d: got %x, want DISCONNECT 0x90", alias, got)
		}
	}
	// 3.1.1: closed.
	conn3, _ := rawConnectAck(t, n.MQTTAddr(), 4, connectPacket(4, "alias-long-3", nil))
	writeRaw(t, conn3, encode(t, 4, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish}, TopicName: strings.Repeat("t", 257), Payload: []byte("x")}))
	closedBy(t, conn3, waitTimeout, "3.1.1 long topic")
	if got := n.Stats().Get("topics_refused_total"); got != 3 {
		t.Errorf("topics_refused_total %d, want 3", got)
	}
	// 256 bytes pass.
	c := dial5(t, n.MQTTAddr(), "alias-ok", "")
	if rc := c.publish(t, strings.Repeat("t", 256), "x", 1, false); rc != 0 {
		t.Errorf("a 256-byte topic: PUBACK %#x", rc)
	}
}

// TestDisconnectSessionExpiryCapped: an MQTT 5 DISCONNECT that raises the
// session expiry above mqtt.max_session_expiry is held to it: the session
// is gone after the cap.
func TestDisconnectSessionExpiryCapped(t *testing.T) {
	if embedded() {
		t.Skip("needs the mochi capabilities the binary sets")
	}
	n := startNode(t, func(c *configs.Config) { c.MQTT.MaxSessionExpiry = configs.Duration(time.Second) })
	one := uint32(1)
	c, _, err := connect5(t, ctDialTCP(t, n.MQTTAddr()), "expiry-raise", "", func(c *paho.Connect) {
		c.CleanStart = false
		c.Properties = &paho.ConnectProperties{SessionExpiryInterval: &one}
	})
	if err != nil {
		t.Fatal(err)
	}
	day := uint32(86400)
	_ = c.Disconnect(&paho.Disconnect{Properties: &paho.DisconnectProperties{SessionExpiryInterval: &day}})
	testkit.Wait(t, 10*time.Second, "the session expired after the cap", func() error {
		if _, ok := clientByID(n.Server, "expiry-raise"); ok {
			return fmt.Errorf("still held")
		}
		return nil
	})
	if got := n.Stats().Get("session_expiry_capped_total"); got != 1 {
		t.Errorf("session_expiry_capped_total %d, want 1", got)
	}
}

// TestWillLimits: a will on $SYS/..., $anything or a topic with a wildcard
// is refused at CONNECT (MQTT 5 0x90, 3.1.1 0x05), and a will's delay is
// held to mqtt.max_will_delay.
func TestWillLimits(t *testing.T) {
	n := startNode(t, func(c *configs.Config) { c.MQTT.MaxWillDelay = configs.Duration(30 * time.Second) })
	will := func(topic string) func(*packets.Packet) {
		return func(pk *packets.Packet) {
			pk.Connect.WillFlag, pk.Connect.WillTopic, pk.Connect.WillPayload = true, topic, []byte("gone")
			pk.Connect.WillRetain = true
		}
	}
	refused := 0
	for _, topic := range []string{"$SYS/will/x", "$share/x", "a/+/b", "a/#", strings.Repeat("w", 257)} {
		for _, v := range []byte{4, 5} {
			_, ack := rawConnectAck(t, n.MQTTAddr(), v, connectPacket(v, fmt.Sprintf("will-bad-%d", refused), will(topic)))
			want := byte(0x90)
			if v == 4 {
				want = 0x05
			}
			if ack.ReasonCode != want {
				t.Errorf("v%d will on %.20q: CONNACK %#x, want %#x", v, topic, ack.ReasonCode, want)
			}
			refused++
		}
	}
	if got := n.Stats().Get("wills_refused_total"); got != int64(refused) {
		t.Errorf("wills_refused_total %d, want %d", got, refused)
	}
	if _, ok := n.Server.Topics.Retained.Get("$SYS/will/x"); ok {
		t.Error("a will was retained on $SYS")
	}
	// A will delay of a day is held to 30 s.
	_, ack := rawConnectAck(t, n.MQTTAddr(), 5, connectPacket(5, "will-delay", func(pk *packets.Packet) {
		will("wills/x")(pk)
		pk.Connect.Clean = false
		pk.Properties.SessionExpiryInterval, pk.Properties.SessionExpiryIntervalFlag = 86400, true
		pk.Connect.WillProperties.WillDelayInterval = 86400
	}))
	if ack.ReasonCode != 0 {
		t.Fatalf("will-delay: CONNACK %#x", ack.ReasonCode)
	}
	cl, ok := clientByID(n.Server, "will-delay")
	if !ok {
		t.Fatal("will-delay not held")
	}
	if d := cl.Properties.Will.WillDelayInterval; d != 30 {
		t.Errorf("will delay %d s, want 30", d)
	}
	if got := n.Stats().Get("will_delay_capped_total"); got != 1 {
		t.Errorf("will_delay_capped_total %d, want 1", got)
	}
}

// ackless subscribes a raw MQTT 5 client with a persistent session to
// filter at QoS 1; it reads everything and acknowledges nothing. It returns
// the connection and a channel closed when the server closes it.
func ackless(t *testing.T, addr, clientID, filter string) (net.Conn, <-chan struct{}) {
	t.Helper()
	conn, ack := rawConnectAck(t, addr, 5, connectPacket(5, clientID, func(pk *packets.Packet) {
		pk.Connect.Clean = false
		pk.Properties.SessionExpiryInterval, pk.Properties.SessionExpiryIntervalFlag = 3600, true
	}))
	if ack.ReasonCode != 0 {
		t.Fatalf("%s: CONNACK %#x", clientID, ack.ReasonCode)
	}
	writeRaw(t, conn, encode(t, 5, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 1,
		Filters: packets.Subscriptions{{Filter: filter, Qos: 1}}}))
	if typ, body, err := readPacket(conn, waitTimeout); err != nil || typ != 0x90 {
		t.Fatalf("%s: want SUBACK, got %#x %x: %v", clientID, typ, body, err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		buf := make([]byte, 64<<10)
		for {
			_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
			if _, err := conn.Read(buf); err != nil {
				return
			}
		}
	}()
	return conn, closed
}

// heldBytes returns the topic and payload bytes of clientID's session's
// unacknowledged messages, and how many.
func heldBytes(t *testing.T, n *testNode, clientID string) (int, int) {
	cl, ok := clientByID(n.Server, clientID)
	if !ok {
		t.Fatalf("%s: no session", clientID)
	}
	var b int
	all := cl.State.Inflight.GetAll(false)
	for _, pk := range all {
		b += len(pk.TopicName) + len(pk.Payload)
	}
	return b, len(all)
}

// TestInflightBytesBound: a client that reads large QoS 1 messages but
// never acknowledges them is disconnected when its unacknowledged bytes
// reach mqtt.max_inflight_bytes, and its persistent session holds no more
// than that while offline: the live heap stays bounded.
func TestInflightBytesBound(t *testing.T) {
	const limit = 1 << 20
	n := startNode(t, func(c *configs.Config) {
		c.MQTT.MaxPacketSize = 128 << 10
		c.MQTT.MaxInflightBytes = limit
	})
	_, closed := ackless(t, n.MQTTAddr(), "ackless", "big/#")
	pub := dial5(t, n.MQTTAddr(), "big-pub", "")
	payload := string(bytes.Repeat([]byte("p"), 64<<10))
	before := testkit.LiveHeap()
	const msgs = 1000 // 62.5 MiB
	for i := 0; i < msgs; i++ {
		if rc := pub.publish(t, "big/x", payload, 1, false); rc != 0 {
			t.Fatalf("publish %d: PUBACK %#x", i, rc)
		}
		if i == 100 {
			select {
			case <-closed:
			case <-time.After(waitTimeout):
				t.Error("the ackless client was not disconnected at the byte limit")
			}
		}
	}
	after := testkit.LiveHeap()
	b, held := heldBytes(t, n, "ackless")
	t.Logf("live heap %.1f MiB before, %.1f MiB after %d × 64 KiB; the session holds %d messages, %d bytes",
		mib(int64(before)), mib(int64(after)), msgs, held, b)
	if b > limit {
		t.Errorf("the offline session holds %d bytes, over %d", b, limit)
	}
	if grown := int64(after) - int64(before); grown > 32<<20 {
		t.Errorf("live heap grew %.1f MiB", mib(grown))
	}
	if got := n.Stats().Get("inflight_ended_total"); got != 1 {
		t.Errorf("inflight_ended_total %d, want 1", got)
	}
	if got := n.Stats().Get("inflight_dropped_total"); got < msgs-limit/(64<<10) {
		t.Errorf("inflight_dropped_total %d, want at least %d", got, msgs-limit/(64<<10))
	}
	// It comes back: the held messages are resent, and acknowledged they go.
	c := dial5(t, n.MQTTAddr(), "ackless", "", func(c *paho.Connect) {
		c.CleanStart = false
		h := uint32(3600)
		c.Properties = &paho.ConnectProperties{SessionExpiryInterval: &h}
	})
	testkit.Wait(t, waitTimeout, "the resent messages acknowledged", func() error {
		if _, held := heldBytes(t, n, "ackless"); held != 0 {
			return fmt.Errorf("%d held", held)
		}
		return nil
	})
	c.disconnect()
}

// TestInflightAge: a connection whose oldest unacknowledged message is
// older than mqtt.max_inflight_age is ended.
func TestInflightAge(t *testing.T) {
	age := 2 * time.Second
	n := startNode(t, func(c *configs.Config) { c.MQTT.MaxInflightAge = configs.Duration(age) })
	_, closed := ackless(t, n.MQTTAddr(), "slow-acker", "slow/#")
	pub := dial5(t, n.MQTTAddr(), "slow-pub", "")
	sent := time.Now()
	pub.publish(t, "slow/x", "x", 1, false)
	select {
	case <-closed:
		if d := time.Since(sent); d < age {
			t.Errorf("ended after %v, before max_inflight_age %v", d, age)
		}
	case <-time.After(age + waitTimeout):
		t.Fatal("the client that never acknowledges was not disconnected")
	}
	if got := n.Stats().Get("inflight_ended_total"); got != 1 {
		t.Errorf("inflight_ended_total %d, want 1", got)
	}
}

// TestRetainedLimits: retained messages outside the presence prefix are
// capped per user and in total, in count and bytes: an MQTT 5 QoS 1 one
// over a cap gets PUBACK 0x97 and is not kept, a QoS 0 one is delivered
// but not retained; clearing and replacing free room; presence's own are
// not counted.
func TestRetainedLimits(t *testing.T) {
	n := startNode(t, func(c *configs.Config) {
		c.MQTT.MaxPacketSize = 4096
		c.MQTT.MaxRetained = 5
		c.MQTT.MaxRetainedPerUser = 3
		c.MQTT.MaxRetainedBytes = 8192
		c.MQTT.MaxRetainedBytesPerUser = 4096
	})
	alice := dial5(t, n.MQTTAddr(), "ret-alice", "alice")
	bob := dial5(t, n.MQTTAddr(), "ret-bob", "bob")
	carol := dial5(t, n.MQTTAddr(), "ret-carol", "carol")
	kept := func(topic string) bool { _, ok := n.Server.Topics.Retained.Get(topic); return ok }
	for i := 1; i <= 3; i++ {
		if rc := alice.publish(t, fmt.Sprintf("r/a/%d", i), "x", 1, true); rc != 0 {
			t.Fatalf("alice %d: PUBACK %#x", i, rc)
		}
	}
	// A fourth of alice's: over max_retained_per_user.
	if rc := alice.publish(t, "r/a/4", "x", 1, true); rc != packets.ErrQuotaExceeded.Code {
		t.Errorf("alice's fourth: PUBACK %#x, want 0x97", rc)
	}
	// Replacing one of hers passes; clearing one makes room.
	if rc := alice.publish(t, "r/a/1", "y", 1, true); rc != 0 {
		t.Errorf("alice replaces: PUBACK %#x", rc)
	}
	alice.publish(t, "r/a/3", "", 1, true)
	if rc := alice.publish(t, "r/a/4", "x", 1, true); rc != 0 {
		t.Errorf("alice's fourth after a clear: PUBACK %#x", rc)
	}
	// Bytes per user: 4096 in topic and payload.
	big := strings.Repeat("b", 3000)
	if rc := bob.publish(t, "r/b/1", big, 1, true); rc != 0 {
		t.Fatalf("bob 1: PUBACK %#x", rc)
	}
	if rc := bob.publish(t, "r/b/2", big, 1, true); rc != packets.ErrQuotaExceeded.Code {
		t.Errorf("bob over his bytes: PUBACK %#x, want 0x97", rc)
	}
	// In total: alice 3 + bob 1 = 4 of 5; carol's second is over.
	if rc := carol.publish(t, "r/c/1", "x", 1, true); rc != 0 {
		t.Fatalf("carol 1: PUBACK %#x", rc)
	}
	if rc := carol.publish(t, "r/c/2", "x", 1, true); rc != packets.ErrQuotaExceeded.Code {
		t.Errorf("carol over the total: PUBACK %#x, want 0x97", rc)
	}
	// QoS 0 over a cap: delivered, not retained.
	sub := dial5(t, n.MQTTAddr(), "ret-sub", "sub")
	if _, err := sub.Subscribe(context.Background(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "r/c/#"}}}); err != nil {
		t.Fatal(err)
	}
	carol.publish(t, "r/c/3", "q0", 0, true)
	for delivered := false; !delivered; {
		select {
		case m := <-sub.msgs:
			delivered = m.Topic == "r/c/3"
		case <-time.After(waitTimeout):
			t.Fatal("the QoS 0 message over the cap was not delivered")
		}
	}
	for topic, want := range map[string]bool{"r/a/1": true, "r/a/3": false, "r/a/4": true, "r/b/1": true, "r/b/2": false,
		"r/c/1": true, "r/c/2": false, "r/c/3": false} {
		if kept(topic) != want {
			t.Errorf("%s retained %v, want %v", topic, !want, want)
		}
	}
	if got := n.Stats().Get("retained_refused_total"); got != 4 {
		t.Errorf("retained_refused_total %d, want 4", got)
	}
	if got := n.Stats().Get("retained_counted"); got != 5 {
		t.Errorf("retained_counted %d, want 5", got)
	}
}

// TestDelayedWillsBound: with mqtt.max_delayed_wills 2, a third delayed will
// waiting on the node is published at once instead of after its delay.
func TestDelayedWillsBound(t *testing.T) {
	n := startNode(t, func(c *configs.Config) { c.MQTT.MaxDelayedWills = 2 })
	sub := dial5(t, n.MQTTAddr(), "dw-sub", "")
	if _, err := sub.Subscribe(context.Background(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "dw/#"}}}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("dw-%d", i)
		conn, ack := rawConnectAck(t, n.MQTTAddr(), 5, connectPacket(5, id, func(pk *packets.Packet) {
			pk.Connect.WillFlag, pk.Connect.WillTopic, pk.Connect.WillPayload = true, "dw/"+id, []byte("gone")
			pk.Connect.WillProperties.WillDelayInterval = 120
			pk.Properties.SessionExpiryInterval, pk.Properties.SessionExpiryIntervalFlag = 3600, true
		}))
		if ack.ReasonCode != 0 {
			t.Fatalf("%s: CONNACK %#x", id, ack.ReasonCode)
		}
		_ = conn.Close() // no DISCONNECT: the will is due
		testkit.Wait(t, waitTimeout, id+" gone", func() error {
			cl, ok := clientByID(n.Server, id)
			return testkit.Why(ok && cl.Closed(), "still open")
		})
	}
	select {
	case m := <-sub.msgs:
		if m.Topic != "dw/dw-3" {
			t.Errorf("will of %s published, want dw-3's", m.Topic)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the third delayed will was not published at once")
	}
	if _, err := testkit.Hold(time.Second, 50*time.Millisecond, func() error {
		return testkit.Why(len(sub.msgs) == 0, "another will published before its delay")
	}); err != nil {
		t.Error(err)
	}
	if got := n.Stats().Get("wills_undelayed_total"); got != 1 {
		t.Errorf("wills_undelayed_total %d, want 1", got)
	}
}

// TestPersistentSessionsPerUser: a user holds at most
// mqtt.max_persistent_sessions_per_user persistent sessions, connected or
// not; one more under another client id is refused (MQTT 5 0x97, 3.1.1
// 0x03), its own comes back, a clean one passes, and one let go makes room.
func TestPersistentSessionsPerUser(t *testing.T) {
	n := startNode(t, func(c *configs.Config) { c.MQTT.MaxPersistentPerUser = 2 })
	persistent := func(v byte, id, user string) func(*packets.Packet) {
		return func(pk *packets.Packet) {
			pk.Connect.UsernameFlag, pk.Connect.Username = true, []byte(user)
			pk.Connect.Clean = false
			if v == 5 {
				pk.Properties.SessionExpiryInterval, pk.Properties.SessionExpiryIntervalFlag = 3600, true
			}
		}
	}
	connect := func(v byte, id, user string, edit func(*packets.Packet)) (net.Conn, byte) {
		conn, ack := rawConnectAck(t, n.MQTTAddr(), v, connectPacket(v, id, edit))
		return conn, ack.ReasonCode
	}
	// Two of pat's, left offline.
	for _, id := range []string{"pat-1", "pat-2"} {
		conn, rc := connect(4, id, "pat", persistent(4, id, "pat"))
		if rc != 0 {
			t.Fatalf("%s: CONNACK %#x", id, rc)
		}
		sendDisconnect(t, conn)
	}
	testkit.Wait(t, waitTimeout, "pat's sessions offline", func() error {
		for _, id := range []string{"pat-1", "pat-2"} {
			if cl, ok := clientByID(n.Server, id); !ok || !cl.Closed() {
				return fmt.Errorf("%s not offline and held", id)
			}
		}
		return nil
	})
	if _, rc := connect(4, "pat-3", "pat", persistent(4, "pat-3", "pat")); rc != 0x03 {
		t.Errorf("pat's third, 3.1.1: CONNACK %#x, want 0x03", rc)
	}
	if _, rc := connect(5, "pat-4", "pat", persistent(5, "pat-4", "pat")); rc != packets.ErrQuotaExceeded.Code {
		t.Errorf("pat's third, MQTT 5: CONNACK %#x, want 0x97", rc)
	}
	if _, ok := clientByID(n.Server, "pat-3"); ok {
		t.Error("the refused session is held")
	}
	// Her own comes back; a clean one passes; another user is not counted.
	conn1, rc := connect(4, "pat-1", "pat", persistent(4, "pat-1", "pat"))
	if rc != 0 {
		t.Errorf("pat-1 again: CONNACK %#x", rc)
	}
	if _, rc := connect(4, "pat-clean", "pat", func(pk *packets.Packet) { pk.Connect.UsernameFlag, pk.Connect.Username = true, []byte("pat") }); rc != 0 {
		t.Errorf("a clean session: CONNACK %#x", rc)
	}
	if _, rc := connect(4, "quinn-1", "quinn", persistent(4, "quinn-1", "quinn")); rc != 0 {
		t.Errorf("quinn: CONNACK %#x", rc)
	}
	// pat-1 comes back clean and leaves: its session is let go, room for one.
	sendDisconnect(t, conn1)
	conn1, rc = connect(4, "pat-1", "pat", func(pk *packets.Packet) { pk.Connect.UsernameFlag, pk.Connect.Username = true, []byte("pat") })
	if rc != 0 {
		t.Fatalf("pat-1 clean: CONNACK %#x", rc)
	}
	sendDisconnect(t, conn1)
	testkit.Wait(t, waitTimeout, "pat's third after one let go", func() error {
		conn, rc := connect(4, "pat-5", "pat", persistent(4, "pat-5", "pat"))
		_ = conn.Close()
		return testkit.Why(rc == 0, fmt.Sprintf("CONNACK %#x", rc))
	})
	if got := n.Stats().Get("persistent_sessions_refused_total"); got < 2 {
		t.Errorf("persistent_sessions_refused_total %d, want at least 2", got)
	}
}

// connectRM is an MQTT 5 CONNECT of clientID (with user and password when
// not empty) whose Receive Maximum property is rm, 0 included (mochi's
// encoder leaves a 0 out: it is patched in).
func connectRM(t *testing.T, clientID, user, password string, rm uint16) []byte {
	t.Helper()
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect},
		Connect:    packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30, ClientIdentifier: clientID},
		Properties: packets.Properties{ReceiveMaximum: max(rm, 1)}}
	if user != "" {
		pk.Connect.UsernameFlag, pk.Connect.Username = true, []byte(user)
		pk.Connect.PasswordFlag, pk.Connect.Password = true, []byte(password)
	}
	b := encode(t, 5, pk)
	if rm == 0 {
		i := bytes.Index(b, []byte{0x21, 0, 1})
		if i < 0 {
			t.Fatalf("no receive maximum in %x", b)
		}
		b[i+2] = 0
	}
	return b
}

// refusedRM0 sends a CONNECT with Receive Maximum 0 over conn and fails
// the test unless it gets CONNACK 0x82 (protocol error) and the end of the
// connection; then the same CONNECT with Receive Maximum 5, over again,
// must be accepted.
func refusedRM0(t *testing.T, name string, dial func() net.Conn, clientID, user, password string) {
	t.Helper()
	c := dial()
	defer c.Close()
	if _, err := c.Write(connectRM(t, clientID, user, password, 0)); err != nil {
		t.Fatalf("%s: write: %v", name, err)
	}
	typ, body, err := readPacket(c, waitTimeout)
	if err != nil || typ != 0x20 || len(body) < 2 || body[1] != 0x82 {
		t.Fatalf("%s: receive maximum 0: got %#x %x %v, want CONNACK 0x82", name, typ, body, err)
	}
	if _, _, err := readPacket(c, waitTimeout); err == nil {
		t.Errorf("%s: the connection goes on after the refusal", name)
	}
	ok := dial()
	defer ok.Close()
	if _, err := ok.Write(connectRM(t, clientID, user, password, 5)); err != nil {
		t.Fatalf("%s: write: %v", name, err)
	}
	if typ, body, err := readPacket(ok, waitTimeout); err != nil || typ != 0x20 || len(body) < 2 || body[1] != 0 {
		t.Fatalf("%s: receive maximum 5: got %#x %x %v, want CONNACK 0", name, typ, body, err)
	}
}

// TestCapsReceiveMaximumZero: an MQTT 5 CONNECT with Receive Maximum 0 (a
// protocol error, MQTT 5 §3.1.2.11.3, which mochi decodes as no property)
// is refused with CONNACK 0x82 over TCP and WebSocket, and counted (over
// TLS: TestTLSListeners). Node form only: the listener sees it.
func TestCapsReceiveMaximumZero(t *testing.T) {
	n := startNode(t, nil)
	refusedRM0(t, "tcp", func() net.Conn { return ctDialTCP(t, n.MQTTAddr()) }, "rm-tcp", "", "")
	refusedRM0(t, "ws", func() net.Conn {
		c, resp, err := wsDial("ws://"+n.WSAddr()+"/mqtt", nil, "")
		if err != nil {
			t.Fatalf("ws dial: %v (%s)", err, statusOfResp(resp))
		}
		return c
	}, "rm-ws", "", "")
	if got := n.Stats().Of("connect_refusals_total", "receive_maximum_zero"); got != 2 {
		t.Errorf("connect_refusals_total{receive_maximum_zero} = %d, want 2", got)
	}
}
