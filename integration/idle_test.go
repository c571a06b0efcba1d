package integration

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// idleNode starts a node whose sessions go idle after 1s without activity,
// except those of label sensor, which never do.
func idleNode(t *testing.T) *testNode {
	t.Helper()
	return startNode(t, func(c *configs.Config) {
		c.Presence.IdleAfter = configs.Duration(time.Second)
		c.Presence.IdleAfterDevices = configs.DeviceDurations{"sensor": 0}
	})
}

// sessionStatus returns the status of the one session of p.
func sessionStatus(p presence.Aggregate) presence.Status {
	if len(p.Sessions) != 1 {
		return ""
	}
	return p.Sessions[0].Status
}

// Server-side idle with real clients. ann only sends PINGREQs (keep-alive
// 2s): she goes idle after idle_after, and a PUBLISH brings her back at
// once, then so does {"activity": true} on presence/set; a status she sets
// while idle wins. sam's label is sensor (0: never) and wes set away: an
// observer never sees either idle.
func TestIdleAfter(t *testing.T) {
	n := idleNode(t)
	o := newObserver(t, n.MQTTAddr(), "presence/users/+")
	ann := dial5(t, n.MQTTAddr(), "ann-phone", "ann", withKeepAlive(2), withDevice("phone"))
	_ = dial5(t, n.MQTTAddr(), "sam-sensor", "sam", withDevice("sensor"))
	wes := dial5(t, n.MQTTAddr(), "wes-laptop", "wes")
	if rc := wes.publish(t, "presence/set", `{"status":"away"}`, 1, false); rc != 0 {
		t.Fatalf("wes away: %#x", rc)
	}
	o.waitStatus("wes", presence.Away)
	online := o.waitStatus("ann", presence.Online)

	// Keep-alive only: idle after about idle_after (checked every 250ms).
	idle := o.waitFor("ann", "idle", func(p presence.Aggregate) bool {
		return p.Status == presence.Idle && sessionStatus(p) == presence.Idle
	})
	// The store's own times: not before idle_after (1 s), and before
	// idle_after counted from her first PINGREQ (at the 2 s keep-alive),
	// which is when an idleness that took a PINGREQ for activity would
	// begin. (The bound was idle_after + 1 s: a check interval is 250 ms,
	// but the checker and the store write run late on a loaded machine.)
	if took := idle.Since.Sub(online.Since); took < time.Second || took >= time.Second+2*time.Second {
		t.Errorf("ann went idle %s after she came online; want idle_after (1s), before idle_after from her first PINGREQ (3s)", took)
	}
	// Her PINGREQ (every 2s; nothing else is sent now) keeps her idle.
	packets := atomic.LoadInt64(&n.Server.Info.PacketsReceived)
	testkit.Wait(t, waitTimeout, "a PINGREQ of ann's", func() error {
		got := atomic.LoadInt64(&n.Server.Info.PacketsReceived) - packets
		return testkit.Why(got >= 1, fmt.Sprintf("%d packets", got))
	})
	if p, _ := o.last("ann"); p.Status != presence.Idle {
		t.Fatalf("ann %s after PINGREQs, want idle (keep-alive is not activity)", p.Status)
	}
	// The tracker counts a write once the store has taken it, after
	// observers may have seen it: the count is taken with its queue empty
	// (tracker_queue_depth drops after the count), so that the idle write
	// is in it.
	trackerIdle(t, n)
	updated := n.Stats().Get("session_updates_total")

	// A PUBLISH anywhere brings her back at once: one store write.
	start := time.Now()
	if rc := ann.publish(t, "app/chat/room1", "hello", 1, false); rc != 0 {
		t.Fatalf("publish: %#x", rc)
	}
	o.waitStatus("ann", presence.Online)
	t.Logf("idle -> online %s after the PUBLISH", time.Since(start))
	// The write is counted a moment after the observer saw it.
	var got int64
	testkit.Wait(t, waitTimeout, "the write that brought ann back counted", func() error {
		got = n.Stats().Get("session_updates_total") - updated
		return testkit.Why(got >= 1, "not counted yet")
	})
	if got != 1 {
		t.Errorf("store writes to bring ann back: %d, want 1", got)
	}

	// Idle again, then an activity ping.
	o.waitStatus("ann", presence.Idle)
	if rc := ann.publish(t, "presence/set", `{"activity":true}`, 1, false); rc != 0 {
		t.Fatalf("activity: %#x", rc)
	}
	o.waitStatus("ann", presence.Online)

	// Idle again, then she sets busy: busy at once, not online first.
	o.waitStatus("ann", presence.Idle)
	if rc := ann.publish(t, "presence/set", `{"status":"busy"}`, 1, false); rc != 0 {
		t.Fatalf("busy: %#x", rc)
	}
	o.waitStatus("ann", presence.Busy)
	h := o.history("ann")
	if prev := h[len(h)-2]; prev.Status != presence.Idle {
		t.Errorf("before busy ann showed %s, want idle (no online in between)", prev.Status)
	}
	// Busy is hers: it stays past another idle_after. A canary that
	// connects now and goes idle shows that idle_after has passed since.
	_ = dial5(t, n.MQTTAddr(), "cat-phone", "cat")
	o.waitStatus("cat", presence.Online)
	o.waitStatus("cat", presence.Idle)
	if p, _ := o.last("ann"); p.Status != presence.Busy {
		t.Errorf("ann %s after idle_after, want busy kept", p.Status)
	}

	for _, u := range []string{"sam", "wes"} {
		for _, p := range o.history(u) {
			if p.Status == presence.Idle || sessionStatus(p) == presence.Idle {
				t.Errorf("%s shown idle: %+v", u, p)
			}
		}
	}
	if p, _ := o.last("sam"); p.Status != presence.Online {
		t.Errorf("sam %s, want online", p.Status)
	}
	if p, _ := o.last("wes"); p.Status != presence.Away {
		t.Errorf("wes %s, want away", p.Status)
	}
	st := n.Stats()
	if st.Get("idle_entered_total") < 3 || st.Get("idle_left_total") < 3 {
		t.Errorf("idle_entered %d idle_left %d, want at least 3 each", st.Get("idle_entered_total"), st.Get("idle_left_total"))
	}
	o.check()
}

// trackerIdle waits until the tracker has no write waiting or being made.
// It counts a write (sessions_opened_total, session_updates_total,
// session_ends_total) and forgets an ended session (sessions) once the
// store has taken the write, which is after observers may have seen it;
// tracker_queue_depth drops only after that, so from then on every write
// made before is counted.
func trackerIdle(t *testing.T, n *testNode) {
	t.Helper()
	testkit.Wait(t, waitTimeout, "the tracker idle", func() error {
		d := n.Stats().Get("tracker_queue_depth")
		return testkit.Why(d == 0, fmt.Sprintf("tracker queue depth %d", d))
	})
}
