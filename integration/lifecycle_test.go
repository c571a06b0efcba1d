package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// rawConnect opens a TCP connection, sends CONNECT (MQTT 3.1.1) and reads
// the CONNACK, then leaves the socket open and silent.
func rawConnect(t *testing.T, addr, clientID, user string, keepalive uint16) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, waitTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 4,
		Connect: packets.ConnectParams{
			ProtocolName: []byte("MQTT"), Clean: true, Keepalive: keepalive,
			ClientIdentifier: clientID, UsernameFlag: true, Username: []byte(user),
		},
	}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		t.Fatalf("encode: %v", err)
	}
	if _, err := conn.Write(buf.Bytes()); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(waitTimeout))
	ack := make([]byte, 4)
	if _, err := conn.Read(ack); err != nil || ack[0] != 0x20 || ack[3] != 0 {
		t.Fatalf("connack %x: %v", ack, err)
	}
	return conn
}

func sessionsOf(t *testing.T, n *testNode, user string) (live, ended []presence.Session) {
	t.Helper()
	code, body := adminGet(t, n, "/api/v1/users/"+user+"/sessions")
	if code != 200 {
		t.Fatalf("sessions of %s: %d %s", user, code, body)
	}
	var v struct {
		Live  []presence.Session `json:"live"`
		Ended []presence.Session `json:"ended"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("sessions: %v", err)
	}
	return v.Live, v.Ended
}

// A client that connects with keep-alive 2 and then says nothing, its socket
// left open, is offline within 1.5 × keep-alive + 1 s, ended as timeout.
func TestSilentDeathDetected(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	start := time.Now()
	rawConnect(t, n.MQTTAddr(), "sam-sensor", "sam", 2)
	obs.waitStatus("sam", presence.Online)
	off := obs.waitStatus("sam", presence.Offline)
	elapsed := time.Since(start)
	if limit := 3*time.Second + time.Second; elapsed > limit {
		t.Fatalf("offline after %v, want within %v", elapsed, limit)
	}
	if off.LastSeen.IsZero() || len(off.Sessions) != 0 {
		t.Fatalf("offline presence: %+v", off)
	}
	_, ended := sessionsOf(t, n, "sam")
	if len(ended) != 1 || ended[0].EndReason != presence.EndTimeout || ended[0].State != presence.Expired {
		t.Fatalf("ended sessions: %+v", ended)
	}
	t.Logf("silent death detected after %v (keep-alive 2 s)", elapsed)
	obs.check()
}

// A clean DISCONNECT ends the session at once, as clean.
func TestCleanDisconnect(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	c := dial5(t, n.MQTTAddr(), "carol-phone", "carol", withDevice("phone"))
	on := obs.waitStatus("carol", presence.Online)
	if len(on.Sessions) != 1 || on.Sessions[0].Device != "phone" || on.Sessions[0].Node != "node-a" || on.Sessions[0].ID != "carol-phone" {
		t.Fatalf("online presence: %+v", on)
	}
	if !on.LastSeen.IsZero() {
		t.Fatalf("online presence has last_seen %v", on.LastSeen)
	}
	c.disconnect()
	off := obs.waitStatus("carol", presence.Offline)
	if off.LastSeen.IsZero() || off.Since != off.LastSeen {
		t.Fatalf("offline presence: %+v", off)
	}
	_, ended := sessionsOf(t, n, "carol")
	if len(ended) != 1 || ended[0].EndReason != presence.EndClean || ended[0].State != presence.Disconnected {
		t.Fatalf("ended: %+v", ended)
	}
	obs.check()
}

// Two devices keep the user online until the last one leaves.
func TestTwoDevicesOnlineUntilLastLeaves(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	phone := dial5(t, n.MQTTAddr(), "dan-phone", "dan", withDevice("phone"))
	obs.waitFor("dan", "one session", func(p presence.Aggregate) bool { return p.Status == presence.Online && len(p.Sessions) == 1 })
	laptop := dial5(t, n.MQTTAddr(), "dan-laptop", "dan", withDevice("laptop"))
	obs.waitFor("dan", "two sessions", func(p presence.Aggregate) bool { return len(p.Sessions) == 2 })
	phone.drop()
	p := obs.waitFor("dan", "one session left", func(p presence.Aggregate) bool { return len(p.Sessions) == 1 })
	if p.Status != presence.Online || p.Sessions[0].Device != "laptop" {
		t.Fatalf("after the phone dropped: %+v", p)
	}
	laptop.disconnect()
	obs.waitStatus("dan", presence.Offline)
	for _, h := range obs.history("dan")[1:] {
		if h.Status == presence.Offline && len(h.Sessions) == 0 && h.Version != obs.history("dan")[len(obs.history("dan"))-1].Version {
			t.Fatalf("offline shown while a device was live: %+v", h)
		}
	}
	_, ended := sessionsOf(t, n, "dan")
	if len(ended) != 2 || ended[0].EndReason != presence.EndClean || ended[1].EndReason != presence.EndNetwork {
		t.Fatalf("ended: %+v", ended)
	}
	obs.check()
}

// A reconnect with the same client id takes the session over: a new epoch,
// takeover recorded for the old one, and no observer ever sees offline. The
// old connection's will (the classic retained "offline") is not sent.
func TestTakeoverNeverShowsOffline(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "#")
	dial5(t, n.MQTTAddr(), "erin-phone", "erin", withWill("presence/users/erin", "offline", true))
	// A will outside the presence prefix: mochi would send it on takeover.
	dial5(t, n.MQTTAddr(), "erin-watch", "erin", withWill("devices/erin-watch", "dead", false))
	p1 := obs.waitFor("erin", "two sessions", func(p presence.Aggregate) bool { return len(p.Sessions) == 2 })
	dial5(t, n.MQTTAddr(), "erin-phone", "erin", withWill("presence/users/erin", "offline", true))
	dial5(t, n.MQTTAddr(), "erin-watch", "erin")
	p2 := obs.waitFor("erin", "new epochs", func(p presence.Aggregate) bool {
		return len(p.Sessions) == 2 && p.Sessions[0].Epoch > p1.Sessions[1].Epoch && p.Sessions[1].Epoch > p1.Sessions[1].Epoch
	})
	if p2.Status != presence.Online {
		t.Fatalf("after takeover: %+v", p2)
	}
	testkit.Wait(t, waitTimeout, "old session ended as takeover", func() error {
		_, ended := sessionsOf(t, n, "erin")
		return testkit.Why(len(ended) == 2 && ended[0].EndReason == presence.EndTakeover && ended[1].EndReason == presence.EndTakeover,
			fmt.Sprintf("ended %+v", ended))
	})
	// Ask for a fresh retained snapshot: still online, still JSON.
	late := newObserver(t, n.MQTTAddr(), "presence/users/erin")
	late.waitFor("erin", "snapshot", func(p presence.Aggregate) bool { return p.Version == p2.Version && p.Status == presence.Online })
	for _, h := range obs.history("erin") {
		if h.Status != presence.Online {
			t.Fatalf("observer saw %s during a takeover", h.Status)
		}
	}
	if got := n.Stats().Get("wills_suppressed_total"); got != 2 {
		t.Errorf("wills suppressed: %d, want 2", got)
	}
	obs.mu.Lock()
	if w := obs.raw["devices/erin-watch"]; len(w) != 0 {
		t.Errorf("taken-over connection's will delivered: %q", w)
	}
	for _, raw := range obs.raw["presence/users/erin"] {
		if raw == "offline" {
			t.Errorf("raw will delivered")
		}
	}
	obs.mu.Unlock()
	obs.check()
}
