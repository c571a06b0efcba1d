package integration

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/testkit"
)

// Issue 18 (a DATA RACE inside mochi under TestMQTTJSReconnectNeverOffline):
// when a connection ends with no read error (a DISCONNECT, or closed by a
// takeover) mochi's read loop writes its will (cl.Properties.Will = Will{},
// server.go:481) without a lock, while a new connection with the same
// client id that takes it over had presence clear that will's flag from
// its own goroutine. Here the old connection sends DISCONNECT at the
// moment the new one connects with its id, many times over; run with
// -race, the detector saw the two writes before. A will must never be
// delivered: neither connection died.
func TestTakeoverRacingDisconnect(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "wills/#")
	const rounds = 200
	disconnect := []byte{0xE0, 0x00} // DISCONNECT, normal (v5: no reason code means 0)
	for r := range rounds {
		id := fmt.Sprintf("racer-%d", r) // one takeover per id: no takeover battle
		old := rawConnectWill(t, n.MQTTAddr(), id, "racer", "wills/"+id)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = old.Write(disconnect)
		}()
		newer := rawConnectWill(t, n.MQTTAddr(), id, "racer", "wills/"+id)
		<-done
		_ = old.Close()
		_, _ = newer.Write(disconnect)
		_ = newer.Close()
		testkit.Wait(t, waitTimeout, "the round's connections gone", func() error {
			_, there := clientByID(n.Server, id)
			return testkit.Why(!there, "still there")
		})
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for topic, got := range obs.raw {
		if len(got) > 0 {
			t.Errorf("%s: %d wills delivered, want none", topic, len(got))
		}
	}
}

// rawConnectWill connects an MQTT 5 client with a will over TCP and reads
// its CONNACK, which must accept.
func rawConnectWill(t *testing.T, addr, clientID, user, willTopic string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, waitTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.Write(connectWillBytes(t, clientID, user, willTopic)); err != nil {
		t.Fatalf("write CONNECT: %v", err)
	}
	first, body, err := readPacket(conn, waitTimeout)
	if err != nil || first != 0x20 || len(body) < 2 || body[1] != 0 {
		t.Fatalf("%s: CONNACK %#x %x %v", clientID, first, body, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn
}

// connectWillBytes encodes an MQTT 5 CONNECT with a username and a QoS 0
// will on willTopic.
func connectWillBytes(t *testing.T, clientID, user, willTopic string) []byte {
	t.Helper()
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 5,
		Connect: packets.ConnectParams{
			ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 60, ClientIdentifier: clientID,
			UsernameFlag: true, Username: []byte(user),
			WillFlag: true, WillTopic: willTopic, WillPayload: []byte("dead"),
		},
	}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		t.Fatalf("encode connect: %v", err)
	}
	return buf.Bytes()
}
