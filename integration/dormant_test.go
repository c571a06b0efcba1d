package integration

import (
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// withExpect declares the device's check-in period (MQTT 5 CONNECT user
// property expect).
func withExpect(v string) connectOpt {
	return func(c *paho.Connect) {
		if c.Properties == nil {
			c.Properties = &paho.ConnectProperties{}
		}
		c.Properties.User = append(c.Properties.User, paho.UserProperty{Key: "expect", Value: v})
	}
}

// committedAt is when a change was committed: its version's wall component
// (a hybrid logical clock, milliseconds x 1000; the store's clock).
func committedAt(p presence.Aggregate) time.Time { return time.UnixMilli(int64(p.Version / 1000)) }

// A device that sleeps by design, with real MQTT 5 clients over TCP: it
// declares expect=2s; its clean DISCONNECT shows it dormant with
// next_expected (its end + 2s); a check-in in time (same client id, then
// another) shows it online, never offline; a check-in that does not come
// shows it offline once next_expected + dormant_margin has passed, within
// one reap interval (and a second of scheduling on a busy machine). A bad
// expect is refused with 0x83, counted.
func TestDormantDevice(t *testing.T) {
	const period = 2 * time.Second
	margin, reap := time.Second, 200*time.Millisecond
	n := startNode(t, func(c *configs.Config) {
		c.Presence.DormantMargin = configs.Duration(margin)
		c.Presence.ReapInterval = configs.Duration(reap)
	})
	o := newObserver(t, n.MQTTAddr(), "presence/users/+")
	dormant := func(what string) presence.Aggregate {
		t.Helper()
		p := o.waitStatus("sensor1", presence.Dormant)
		if len(p.Sessions) != 0 || p.LastSeen.IsZero() || p.NextExpected.Sub(p.LastSeen) != period {
			t.Fatalf("%s: dormant %+v: want no session, next_expected = last_seen + %v", what, p, period)
		}
		return p
	}

	s := dial5(t, n.MQTTAddr(), "s1", "sensor1", withExpect("2s"), withDevice("sensor"))
	o.waitStatus("sensor1", presence.Online)
	s.disconnect()
	dormant("first sleep")

	// Checks in well within its period: online, and dormant again.
	s = dial5(t, n.MQTTAddr(), "s1", "sensor1", withExpect("2s"), withDevice("sensor"))
	o.waitStatus("sensor1", presence.Online)
	s.disconnect()
	dormant("second sleep")
	// Checks in under another client id.
	s = dial5(t, n.MQTTAddr(), "s1-b", "sensor1", withExpect("2s"), withDevice("sensor"))
	o.waitStatus("sensor1", presence.Online)
	s.disconnect()
	last := dormant("third sleep")
	for _, p := range o.history("sensor1") {
		if p.Status == presence.Offline {
			t.Fatalf("shown offline while it slept and checked in: %+v", p)
		}
	}

	// It does not come back: offline, once next_expected + margin passed.
	off := o.waitStatus("sensor1", presence.Offline)
	late := committedAt(off).Sub(last.NextExpected)
	t.Logf("missed check-in shown %v after next_expected (margin %v, reap interval %v)", late, margin, reap)
	if late < margin-time.Millisecond || late > margin+reap+time.Second {
		t.Errorf("missed check-in shown %v after next_expected; want from the margin %v to margin + reap interval %v (+1s)", late, margin, reap)
	}
	if !off.LastSeen.Equal(last.LastSeen) || !off.NextExpected.IsZero() {
		t.Errorf("offline %+v: want last_seen of its last end %v, no next_expected", off, last.LastSeen)
	}
	testkit.Wait(t, waitTimeout, "a missed end counted", func() error {
		return testkit.Why(n.Stats().Of("session_ends_total", "missed") == 1, "not counted")
	})

	// An unclean end of a device that declared a period is offline, as any.
	s = dial5(t, n.MQTTAddr(), "s1", "sensor1", withExpect("2s"))
	o.waitStatus("sensor1", presence.Online)
	s.drop()
	o.waitStatus("sensor1", presence.Offline)

	// A bad expect is refused, counted.
	_, ack, err := connect5(t, ctDialTCP(t, n.MQTTAddr()), "s2", "sensor2", withExpect("hourly"))
	if ack == nil || ack.ReasonCode != 0x83 {
		t.Fatalf("expect=hourly: %+v (%v), want 0x83", ack, err)
	}
	if got := n.Stats().Of("connect_refusals_total", "bad_expect"); got != 1 {
		t.Errorf("bad_expect refusals %d, want 1", got)
	}
	o.check()
}
