package integration

import (
	"fmt"
	"testing"
	"time"

	mqtt3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/presenced/presenced/presence"
)

// v3Dial connects an MQTT 3.1.1 client (paho.mqtt.golang, protocol version 4).
func v3Dial(t *testing.T, addr, clientID, user string) mqtt3.Client {
	t.Helper()
	opts := mqtt3.NewClientOptions().
		AddBroker("tcp://" + addr).
		SetClientID(clientID).
		SetUsername(user).
		SetProtocolVersion(4).
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetKeepAlive(30 * time.Second).
		SetConnectTimeout(waitTimeout)
	c := mqtt3.NewClient(opts)
	v3Wait(t, "connect "+clientID, c.Connect())
	t.Cleanup(func() {
		if c.IsConnected() {
			c.Disconnect(0)
		}
	})
	return c
}

// v3Wait waits for a token and fails the test on an error or a timeout.
func v3Wait(t *testing.T, what string, tok mqtt3.Token) {
	t.Helper()
	if !tok.WaitTimeout(waitTimeout) {
		t.Fatalf("%s: no answer within %v", what, waitTimeout)
	}
	if err := tok.Error(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// v3Publish publishes and, for QoS 1, waits for the PUBACK.
func v3Publish(t *testing.T, c mqtt3.Client, topic string, qos byte, payload string) {
	t.Helper()
	v3Wait(t, fmt.Sprintf("publish %s QoS %d", topic, qos), c.Publish(topic, qos, false, payload))
}

// MQTT 3.1.1 clients have presence like MQTT 5 ones: presence/set applies,
// an invalid one is acknowledged and changes nothing, writes to presence
// topics are dropped, and DISCONNECT ends the session as clean.
func TestMQTT311Client(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "#")
	vic := v3Dial(t, n.MQTTAddr(), "vic-laptop", "vic")
	on := obs.waitStatus("vic", presence.Online)
	if len(on.Sessions) != 1 || on.Sessions[0].ID != "vic-laptop" || on.Sessions[0].Node != "node-a" {
		t.Errorf("online: %+v", on)
	}

	v3Publish(t, vic, "presence/set", 1, `{"status":"busy","text":"v3"}`)
	busy := ctNext(obs, "vic", on.Version, "busy/v3", func(p presence.Aggregate) bool {
		return p.Status == presence.Busy && p.Text == "v3"
	})

	// Invalid: acknowledged (3.1.1 has no reason code), not applied, and
	// the connection stays open.
	v3Publish(t, vic, "presence/set", 1, `{"status":"offline","text":"invalid"}`)
	v3Publish(t, vic, "presence/set", 1, `not json`)
	v3Publish(t, vic, "presence/set", 0, `{"status":"sleeping"}`)
	// A QoS 0 write to the read-only namespace is dropped.
	v3Publish(t, vic, "presence/users/vic", 0,
		fmt.Sprintf(`{"user":"vic","status":"dnd","text":"forged","version":%d,"since":null,"last_seen":null,"sessions":[]}`, busy.Version+1_000_000_000))
	if !vic.IsConnectionOpen() || !ctClientOpen(n, "vic-laptop") {
		t.Fatalf("connection closed after the invalid publishes")
	}

	// Marker: the next change the observer sees is exactly this one.
	v3Publish(t, vic, "presence/set", 1, `{"status":"away","text":"marker"}`)
	marker := ctNext(obs, "vic", busy.Version, "away/marker", func(p presence.Aggregate) bool { return p.Text == "marker" })
	if got := ctSince(obs, "vic", busy.Version); len(got) != 1 || got[0].Status != presence.Away || got[0].Version != marker.Version {
		t.Errorf("after the invalid payloads the observer saw %+v, want only away/marker", got)
	}
	if got := n.Stats().Of("status_sets_refused_total", "invalid"); got != 3 {
		t.Errorf("set_rejected %d, want 3", got)
	}
	for _, topic := range ctTopicsBut(obs, "presence/nodes/") {
		if topic != "presence/users/vic" {
			t.Errorf("observer received %q on %s", ctRaw(obs, topic), topic)
		}
	}
	if r := ctRetained(n, "presence/users/vic"); len(r) != 1 {
		t.Errorf("retained on presence/users/vic: %q", r)
	} else if p, err := presence.ParseAggregate([]byte(r[0])); err != nil || p.Version != marker.Version {
		t.Errorf("retained presence of vic %s (%v), want version %d", r[0], err, marker.Version)
	}

	vic.Disconnect(250)
	off := ctNext(obs, "vic", marker.Version, "offline", func(p presence.Aggregate) bool { return p.Status == presence.Offline })
	if off.LastSeen.IsZero() || len(off.Sessions) != 0 {
		t.Errorf("offline: %+v", off)
	}
	_, ended := sessionsOf(t, n, "vic")
	if len(ended) != 1 || ended[0].EndReason != presence.EndClean || ended[0].State != presence.Disconnected {
		t.Errorf("ended: %+v", ended)
	}
	obs.check()
}
