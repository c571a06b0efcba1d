package integration

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/presence"
)

// Grace from the last sign of life (issue 22, item 1), end to end with
// real clients over TCP, at the default 5 s grace and a 2 s keep-alive.
const (
	lsGrace     = 5 * time.Second
	lsKeepAlive = 2                      // seconds
	lsEarly     = 100 * time.Millisecond // how early a change may be shown: timers and polls, never a rule
	// lsSeenSlack is how far after the last packet a silent device's
	// last_seen may be: half of mochi's 3 s read deadline, when a last_seen
	// of the detection instead of the packet would be (it was 500 ms, which
	// is the broker reading the packet late on a loaded machine).
	lsSeenSlack = 1500 * time.Millisecond
)

func lastSignOn(c *configs.Config) {
	g, d := configs.Duration(lsGrace), configs.Duration(testDebounce)
	c.Presence.OfflineGrace, c.Presence.DisconnectDebounce = &g, &d
}

// ping sends a PINGREQ on a raw MQTT connection and reads its PINGRESP: a
// packet the broker has read. It returns when the PINGREQ was written.
func ping(t *testing.T, conn net.Conn) time.Time {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	at := time.Now()
	if _, err := conn.Write([]byte{0xC0, 0x00}); err != nil {
		t.Fatalf("PINGREQ: %v", err)
	}
	resp := make([]byte, 2)
	if _, err := io.ReadFull(conn, resp); err != nil || resp[0] != 0xD0 {
		t.Fatalf("PINGRESP %x: %v", resp, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return at
}

// TestGraceFromLastSign: a device that goes silent (its socket left open)
// is shown offline max(1.5 × keep-alive, grace) after its last packet, not
// the deadline plus the grace, with last_seen that packet's time and reason
// timeout; a socket closed or reset keeps the whole grace (reason network);
// a DISCONNECT the debounce (reason clean).
func TestGraceFromLastSign(t *testing.T) {
	n := startNode(t, lastSignOn)
	deadline := hooks.ReadDeadline(lsKeepAlive) // mochi's 1.5 × keep-alive: 3 s
	t.Run("silent", func(t *testing.T) {
		t.Parallel()
		obs := newObserver(t, n.MQTTAddr(), "presence/users/ls-silent")
		conn := rawConnect(t, n.MQTTAddr(), "ls-silent-sensor", "ls-silent", lsKeepAlive)
		obs.waitStatus("ls-silent", presence.Online)
		ping(t, conn)
		last := ping(t, conn) // then silence: the socket stays open
		off := obs.waitStatus("ls-silent", presence.Offline)
		took := time.Since(last)
		want := max(deadline, lsGrace)
		if took < want-lsEarly || took >= deadline+lsGrace {
			t.Errorf("offline shown %v after the last packet, want %v (not the %v of deadline + grace)", took, want, deadline+lsGrace)
		}
		if d := off.LastSeen.Sub(last); d < -5*time.Millisecond || d > lsSeenSlack {
			t.Errorf("last_seen %v is %v after the last packet (%v)", off.LastSeen, d, last)
		}
		if off.Reason != presence.EndTimeout {
			t.Errorf("reason %q, want timeout", off.Reason)
		}
		t.Logf("silent death shown %v after the last packet; last_seen %v after it (keep-alive %d s, grace %v)",
			took, off.LastSeen.Sub(last), lsKeepAlive, lsGrace)
		obs.check()
	})
	t.Run("network", func(t *testing.T) {
		t.Parallel()
		obs := newObserver(t, n.MQTTAddr(), "presence/users/ls-net")
		c := dial5(t, n.MQTTAddr(), "ls-net-phone", "ls-net")
		obs.waitStatus("ls-net", presence.Online)
		start := time.Now()
		c.drop()
		off := obs.waitStatus("ls-net", presence.Offline)
		took := time.Since(start)
		if took < lsGrace-lsEarly || took > lsGrace+lateMargin {
			t.Errorf("offline shown %v after the drop, want the whole %v grace", took, lsGrace)
		}
		// The drop's time, not the grace's end: the grace ran from it.
		if d := off.LastSeen.Sub(start); d < -5*time.Millisecond || took-d < lsGrace-5*time.Millisecond {
			t.Errorf("last_seen %v is %v after the drop, less than the %v grace before it was shown (%v)", off.LastSeen, d, lsGrace, took)
		}
		if off.Reason != presence.EndNetwork {
			t.Errorf("reason %q, want network", off.Reason)
		}
		t.Logf("network end shown %v after the drop", took)
		obs.check()
	})
	t.Run("clean", func(t *testing.T) {
		t.Parallel()
		obs := newObserver(t, n.MQTTAddr(), "presence/users/ls-clean")
		c := dial5(t, n.MQTTAddr(), "ls-clean-phone", "ls-clean")
		obs.waitStatus("ls-clean", presence.Online)
		start := time.Now()
		c.disconnect()
		off := obs.waitStatus("ls-clean", presence.Offline)
		if took := time.Since(start); took < testDebounce-lsEarly || took > testDebounce+lateMargin {
			t.Errorf("offline shown %v after the DISCONNECT, want the %v debounce", took, testDebounce)
		}
		if off.Reason != presence.EndClean {
			t.Errorf("reason %q, want clean", off.Reason)
		}
		obs.check()
	})
}

// TestGraceFlakyLink: a user whose connection keeps dropping is never shown
// offline while the flap grace holds it; what is shown meanwhile carries
// "link":"flaky", and its final offline too, with the reason.
func TestGraceFlakyLink(t *testing.T) {
	n := startNode(t, func(c *configs.Config) {
		g, ends := configs.Duration(300*time.Millisecond), 2
		c.Presence.OfflineGrace = &g
		c.Presence.Flap.Ends = &ends
		c.Presence.Flap.Window = configs.Duration(time.Minute)
		c.Presence.Flap.Grace = configs.Duration(3 * time.Second)
	})
	const user = "flaky"
	obs := newObserver(t, n.MQTTAddr(), "presence/users/"+user)
	offlines := func() int {
		k := 0
		for _, a := range obs.history(user) {
			if a.Status == presence.Offline {
				k++
			}
		}
		return k
	}
	var c *client5
	var epoch uint64
	for i := range 4 {
		c = dial5(t, n.MQTTAddr(), user+"-laptop", user)
		a := obs.waitFor(user, "online again", func(a presence.Aggregate) bool {
			return a.Status == presence.Online && len(a.Sessions) == 1 && a.Sessions[0].Epoch > epoch
		})
		epoch = a.Sessions[0].Epoch
		// The 2nd end made the user flap: every return after it is flagged.
		if wantFlaky := i >= 2; (a.Link == presence.LinkFlaky) != wantFlaky {
			t.Errorf("return %d: link %q, want flaky %v", i, a.Link, wantFlaky)
		}
		if i == 3 {
			break
		}
		c.drop()
		if i == 0 { // the first outage is shown: nothing flaps yet
			if off := obs.waitStatus(user, presence.Offline); off.Link != "" || off.Reason != presence.EndNetwork {
				t.Errorf("first offline: link %q reason %q, want no link, network", off.Link, off.Reason)
			}
		}
		time.Sleep(800 * time.Millisecond) // the outage being tested, beyond the 300 ms grace
	}
	if k := offlines(); k != 1 {
		t.Fatalf("offline shown %d times, want once (before the user flapped): %s", k, statuses(obs.history(user)))
	}
	raw := obs.rawOf("presence/users/" + user)
	if last := raw[len(raw)-1]; !strings.Contains(last, `"link":"flaky"`) {
		t.Errorf("the shown payload %s has no flaky link", last)
	}
	c.drop()
	off := obs.waitStatus(user, presence.Offline)
	if off.Link != presence.LinkFlaky || off.Reason != presence.EndNetwork {
		t.Errorf("final offline: link %q reason %q, want flaky, network", off.Link, off.Reason)
	}
	obs.check()
}

// rawOf returns every payload the observer received on topic.
func (o *observer) rawOf(topic string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.raw[topic]...)
}
