package integration

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// The offline grace and the disconnect debounce, end to end, on one node
// with real clients (the pure rule is table-tested in presence/pace_test.go).
// The times are short so that the tests are: a 2 s grace and a 500 ms
// debounce; what they assert holds for any.
const (
	testGrace    = 2 * time.Second
	testDebounce = 500 * time.Millisecond
)

// pacingOn sets the grace and the debounce of these tests (no dwell, no
// flap control: each has its own test).
func pacingOn(c *configs.Config) {
	g, d := configs.Duration(testGrace), configs.Duration(testDebounce)
	c.Presence.OfflineGrace, c.Presence.DisconnectDebounce = &g, &d
}

// neverOffline fails if the observer saw user offline.
func neverOffline(t *testing.T, obs *observer, user string) {
	t.Helper()
	for _, a := range obs.history(user) {
		if a.Status == presence.Offline {
			t.Fatalf("%s was shown offline (v%d): history %s", user, a.Version, statuses(obs.history(user)))
		}
	}
}

func statuses(h []presence.Aggregate) string {
	s := ""
	for _, a := range h {
		s += fmt.Sprintf(" %s/%d", a.Status, len(a.Sessions))
	}
	return s
}

// heldOf reads what the admin API says is held back of user (nil: nothing).
func heldOf(t *testing.T, n *testNode, user string) map[string]any {
	t.Helper()
	code, body := adminGet(t, n, "/api/v1/users/"+user+"/sessions")
	if code != 200 {
		t.Fatalf("sessions of %s: %d %s", user, code, body)
	}
	var v struct {
		Held map[string]any `json:"held"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("sessions: %v", err)
	}
	return v.Held
}

// waitNothingHeld polls until nothing of user is held back any more: from
// then on, what the observer saw is all it will see of the gap.
func waitNothingHeld(t *testing.T, n *testNode, user string) {
	t.Helper()
	testkit.Wait(t, waitTimeout, user+": nothing held", func() error {
		h := heldOf(t, n, user)
		return testkit.Why(h == nil, fmt.Sprintf("held: %v", h))
	})
}

// A phone that changes network: its socket drops without DISCONNECT, and it
// connects again a second later, with the same client id or with a new one.
// Observers never see it offline; the admin API shows the truth meanwhile:
// the session ended as network, and the user in grace.
func TestGraceHidesAReconnect(t *testing.T) {
	for _, sameID := range []bool{true, false} {
		name := map[bool]string{true: "same-id", false: "new-id"}[sameID]
		t.Run(name, func(t *testing.T) {
			n := startNode(t, pacingOn)
			user := "phone-" + name
			obs := newObserver(t, n.MQTTAddr(), "presence/users/"+user)
			c := dial5(t, n.MQTTAddr(), user+"-1", user, withDevice("phone"))
			first := obs.waitStatus(user, presence.Online)
			c.drop()
			testkit.Wait(t, waitTimeout, "the end recorded", func() error {
				_, ended := sessionsOf(t, n, user)
				return testkit.Why(len(ended) == 1, "not ended yet")
			})
			_, ended := sessionsOf(t, n, user)
			if ended[0].EndReason != presence.EndNetwork {
				t.Fatalf("ended as %s, want network", ended[0].EndReason)
			}
			// The store has the end before this node's pacer has read it
			// from the change feed: the hold shows up a moment later.
			var h map[string]any
			testkit.Wait(t, waitTimeout, "the end held back", func() error {
				h = heldOf(t, n, user)
				return testkit.Why(h != nil, "nothing held yet")
			})
			if h["status"] != "offline" || h["shown"] != "online" || h["reason"] != "network" {
				t.Fatalf("admin: held %v, want offline held as network while online is shown", h)
			}
			// Back a second later (the grace is 2 s).
			time.Sleep(time.Second) // the gap being tested, not a wait for a condition
			id := user + "-1"
			if !sameID {
				id = user + "-2"
			}
			dial5(t, n.MQTTAddr(), id, user, withDevice("phone"))
			back := obs.waitFor(user, "online on the new session", func(a presence.Aggregate) bool {
				return a.Status == presence.Online && len(a.Sessions) == 1 && a.Sessions[0].ID == id && a.Sessions[0].Epoch > first.Sessions[0].Epoch
			})
			waitNothingHeld(t, n, user)
			neverOffline(t, obs, user)
			if !back.Since.Equal(first.Since) {
				t.Errorf("since moved from %v to %v: observers never saw a change of status", first.Since, back.Since)
			}
			if s := n.Stats(); s.Get("blinks_hidden_total") < 1 {
				t.Errorf("blinks_hidden %d, want at least 1", s.Get("blinks_hidden_total"))
			}
			obs.check()
		})
	}
}

// A device that never comes back is shown offline once the grace has
// passed, not before; a clean DISCONNECT after the debounce only. The
// clean end is read first and its network sibling dropped after it, so
// the debounce (500 ms) and not the grace (2 s) is what held it exactly
// when the clean end is shown first: the order of two timers of one node,
// whatever the machine's load.
func TestGraceThenOffline(t *testing.T) {
	n := startNode(t, pacingOn)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	cases := []struct {
		user string
		end  func(c *client5)
		hold time.Duration
	}{
		{"gone-clean", (*client5).disconnect, testDebounce},
		{"gone-net", (*client5).drop, testGrace},
	}
	clients := make([]*client5, len(cases))
	for i, tc := range cases {
		clients[i] = dial5(t, n.MQTTAddr(), tc.user+"-phone", tc.user)
		obs.waitStatus(tc.user, presence.Online)
	}
	starts := make([]time.Time, len(cases))
	for i, tc := range cases {
		starts[i] = time.Now()
		tc.end(clients[i])
		testkit.Wait(t, waitTimeout, tc.user+": the end read", func() error {
			_, ended := sessionsOf(t, n, tc.user)
			return testkit.Why(len(ended) == 1, "not ended yet")
		})
	}
	for i, tc := range cases {
		off := obs.waitStatus(tc.user, presence.Offline)
		seen := time.Now()
		took := seen.Sub(starts[i])
		if took < tc.hold-50*time.Millisecond || took > tc.hold+lateMargin {
			t.Errorf("%s: offline shown after %v, want after %v and within %v", tc.user, took, tc.hold, tc.hold+lateMargin)
		}
		// Last seen is the true end, not the end of the hold: the hold
		// ran from it, so it is at least the hold before the observer saw
		// the change (the store keeps milliseconds).
		if gap := off.LastSeen.Sub(starts[i]); gap < -time.Second {
			t.Errorf("%s: last_seen %v is %v before the end", tc.user, off.LastSeen, -gap)
		}
		if before := seen.Sub(off.LastSeen); before < tc.hold-5*time.Millisecond {
			t.Errorf("%s: last_seen %v is %v before the change was seen, less than the %v hold: not the end", tc.user, off.LastSeen, before, tc.hold)
		}
		t.Logf("%s: offline shown %v after the end (hold %v)", tc.user, took, tc.hold)
	}
	// The clean end, read first and held for the debounce, is shown before
	// the network end held for the grace.
	var order []string
	for _, a := range obs.changes.All() {
		if a.Status == presence.Offline {
			order = append(order, a.User)
		}
	}
	if len(order) != 2 || order[0] != "gone-clean" {
		t.Errorf("offline shown in the order %v, want gone-clean (the debounce) before gone-net (the grace)", order)
	}
	obs.check()
}

// Silent death (a client that stops talking, its socket left open) is shown
// within max(1.5 × keep-alive, grace) + 1 s of its last packet: the grace
// counts from the last sign of life (issue 22), and 1.5 × keep-alive of
// silence already passed it (integration/lastsign_test.go measures it from
// the last packet).
func TestGraceSilentDeath(t *testing.T) {
	n := startNode(t, pacingOn)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	start := time.Now()
	rawConnect(t, n.MQTTAddr(), "sid-sensor", "sid", 2)
	obs.waitStatus("sid", presence.Online)
	obs.waitStatus("sid", presence.Offline)
	took := time.Since(start)
	// Not before max(1.5 × keep-alive, grace); before the deadline plus
	// the grace, which is when a grace counted from the detection would
	// show it.
	if want, wrong := max(3*time.Second, testGrace), 3*time.Second+testGrace; took >= wrong || took < want-100*time.Millisecond {
		t.Fatalf("offline shown after %v, want between max(1.5 × keep-alive, grace) = %v and the %v of deadline + grace", took, want, wrong)
	}
	t.Logf("silent death shown after %v (keep-alive 2 s, grace %v)", took, testGrace)
	obs.check()
}

// An MQTT 5 Will Delay Interval holds the end as long as it asks, up to
// presence.will_delay_max; the will's text shows when it ends.
func TestGraceWillDelay(t *testing.T) {
	n := startNode(t, func(c *configs.Config) {
		pacingOn(c)
		c.Presence.WillDelayMax = configs.Duration(4 * time.Second)
	})
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	for _, tc := range []struct {
		user  string
		delay uint32
		hold  time.Duration
	}{
		{"will-3s", 3, 3 * time.Second},
		{"will-1h", 3600, 4 * time.Second}, // capped
	} {
		delay := tc.delay
		c := dial5(t, n.MQTTAddr(), tc.user+"-dev", tc.user,
			withWill("presence/set", `{"text":"battery died"}`, false),
			func(cp *paho.Connect) { cp.WillProperties = &paho.WillProperties{WillDelayInterval: &delay} })
		obs.waitStatus(tc.user, presence.Online)
		start := time.Now()
		c.drop()
		off := obs.waitStatus(tc.user, presence.Offline)
		took := time.Since(start)
		if took < tc.hold-50*time.Millisecond || took > tc.hold+lateMargin {
			t.Errorf("%s: offline shown after %v, want after %v", tc.user, took, tc.hold)
		}
		if off.Text != "battery died" {
			t.Errorf("%s: text %q, want the will's", tc.user, off.Text)
		}
	}
	obs.check()
}

// Flap control: a user whose connection keeps dropping is shown steady once
// it flaps (presence.flap), and its final state still gets out.
func TestGraceFlapControl(t *testing.T) {
	n := startNode(t, func(c *configs.Config) {
		g, ends := configs.Duration(300*time.Millisecond), 2
		c.Presence.OfflineGrace = &g
		c.Presence.Flap.Ends = &ends
		c.Presence.Flap.Window = configs.Duration(time.Minute)
		c.Presence.Flap.Grace = configs.Duration(3 * time.Second)
	})
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	offlines := func() int {
		k := 0
		for _, a := range obs.history("tunnel") {
			if a.Status == presence.Offline {
				k++
			}
		}
		return k
	}
	// Each outage lasts 800 ms, beyond the 300 ms grace.
	var c *client5
	var epoch uint64
	for i := range 4 {
		c = dial5(t, n.MQTTAddr(), "tunnel-laptop", "tunnel")
		// The new session itself, not the last one still shown while its
		// end is held: a connection dropped before the tracker wrote its
		// open is never written, and the held end would stay the truth.
		a := obs.waitFor("tunnel", "online again", func(a presence.Aggregate) bool {
			return a.Status == presence.Online && len(a.Sessions) == 1 && a.Sessions[0].Epoch > epoch
		})
		epoch = a.Sessions[0].Epoch
		if i == 3 {
			break
		}
		c.drop()
		if i == 0 { // the first outage is shown: nothing flaps yet
			obs.waitStatus("tunnel", presence.Offline)
		}
		time.Sleep(800 * time.Millisecond) // the outage being tested
	}
	if k := offlines(); k != 1 {
		t.Fatalf("offline shown %d times, want once (before the user flapped): %s", k, statuses(obs.history("tunnel")))
	}
	code, body := adminGet(t, n, "/api/v1/held")
	var held struct {
		Flapping []string `json:"flapping"`
	}
	if code != 200 || json.Unmarshal(body, &held) != nil || len(held.Flapping) != 1 || held.Flapping[0] != "tunnel" {
		t.Fatalf("GET /api/v1/held: %d %s, want tunnel flapping", code, body)
	}
	// It goes for good: shown offline after the flap grace, not the grace.
	start := time.Now()
	c.drop()
	obs.waitFor("tunnel", "offline for good", func(a presence.Aggregate) bool {
		return a.Status == presence.Offline && time.Since(start) > 0 && offlines() == 2
	})
	if took := time.Since(start); took < 3*time.Second-50*time.Millisecond || took > 3*time.Second+lateMargin {
		t.Fatalf("final offline shown after %v, want after the 3 s flap grace", took)
	}
	obs.check()
}

// The dwell: a user toggling status quickly is shown at most one change per
// presence.min_dwell, and the settled one gets out.
func TestGraceDwell(t *testing.T) {
	n := startNode(t, func(c *configs.Config) {
		d := configs.Duration(time.Second)
		c.Presence.MinDwell = &d
		c.Presence.SetRate, c.Presence.SetBurst = 100, 100
	})
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	c := dial5(t, n.MQTTAddr(), "toggler-desk", "toggler")
	obs.waitStatus("toggler", presence.Online)
	start := time.Now()
	for _, st := range []string{"dnd", "online", "away", "busy", "dnd", "away"} {
		if rc := c.publish(t, "presence/set", `{"status":"`+st+`"}`, 1, false); rc != 0 {
			t.Fatalf("set %s: %#x", st, rc)
		}
	}
	obs.waitStatus("toggler", presence.Away)
	took := time.Since(start)
	h := obs.history("toggler")
	changes := 0
	for i := 1; i < len(h); i++ {
		if h[i].Status != h[i-1].Status {
			changes++
		}
	}
	// Six sets within milliseconds: the connect's online was a change, so
	// the next one waits out the dwell, replaced meanwhile by newer ones.
	if changes != 1 || h[len(h)-1].Status != presence.Away {
		t.Fatalf("shown %s: %d status changes, want only the settled away", statuses(h), changes)
	}
	if took < 900*time.Millisecond {
		t.Fatalf("the settled status shown %v after the connect's online, want after the 1 s dwell", took)
	}
	obs.check()
}

// A storm is a swell: with presence.publish_rate 20/s (burst 10), 100
// users connecting at once are shown at that rate, not at once, the
// queue's depth is counted, and every user's final state gets out. The
// depth the queue must reach comes from the rate and from how long the
// connects took here, so a busy machine that connects slowly still
// asserts what the pacer held back.
func TestGraceStormIsPaced(t *testing.T) {
	const users, rate, burst = 100, 20, 10
	n := startNode(t, func(c *configs.Config) {
		c.Presence.PublishRate, c.Presence.PublishBurst = rate, burst
		c.MQTT.MaxConnectionsPerAddress = 1000
	})
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	start := time.Now()
	for i := range users {
		u := fmt.Sprintf("storm-%03d", i)
		dial5(t, n.MQTTAddr(), u+"-dev", u)
	}
	connected := time.Since(start)
	for i := range users {
		obs.waitStatus(fmt.Sprintf("storm-%03d", i), presence.Online)
	}
	took := time.Since(start)
	if min := time.Duration(users-burst) * time.Second / rate; took < min-100*time.Millisecond {
		t.Fatalf("%d users shown in %v: faster than the publish rate allows (%v)", users, took, min)
	}
	// While the connects went on, at most burst + rate×connected users
	// could have been shown; the rest waited in the queue. A quarter
	// second more lets the last connects' changes reach the queue.
	held := int64(users - burst - int(rate*(connected+250*time.Millisecond).Seconds()))
	if held < 1 {
		t.Fatalf("the %d connects took %v, longer than the pacer needs to show them all at %d/s: the storm is no storm here", users, connected, rate)
	}
	s := n.Stats()
	if s.Get("publish_queue_depth_max") < held || s.Get("publish_queue_depth") != 0 {
		t.Fatalf("publish queue: depth %d, max %d; want it drained, and at least %d deep during the storm (connects took %v)", s.Get("publish_queue_depth"), s.Get("publish_queue_depth_max"), held, connected)
	}
	t.Logf("%d users connected in %v, shown in %v at publish_rate %d/s; publish queue depth max %d (at least %d)", users, connected.Round(time.Millisecond), took.Round(time.Millisecond), rate, s.Get("publish_queue_depth_max"), held)
	obs.check()
}
