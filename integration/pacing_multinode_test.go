package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// pacingEnv turns the offline grace and the disconnect debounce on for a
// node process (binEnv turns them off by default), with flap control off:
// these tests move one device several times on purpose.
var pacingEnv = []string{
	"PRESENCED_PRESENCE_OFFLINE_GRACE=" + testGrace.String(),
	"PRESENCED_PRESENCE_DISCONNECT_DEBOUNCE=" + testDebounce.String(),
}

// mnNothingHeld polls until no node holds anything back from its
// observers: from then on, what they saw is all they will see.
func mnNothingHeld(t *testing.T, nodes ...*mnProc) {
	t.Helper()
	testkit.Wait(t, waitTimeout, "nothing held on any node", func() error {
		for _, n := range nodes {
			code, body := mnGet(n.admin, "/api/v1/held")
			var v struct {
				Held []json.RawMessage `json:"held"`
			}
			if code != 200 || json.Unmarshal(body, &v) != nil {
				return fmt.Errorf("%s: GET /api/v1/held: %d %s", n.id, code, body)
			}
			if len(v.Held) > 0 {
				return fmt.Errorf("%s holds %d", n.id, len(v.Held))
			}
		}
		return nil
	})
}

// A device that drops on node A and comes back on node B within the grace,
// with the same client id or a new one, is never shown offline, on any of
// three nodes sharing Redis, nor one that leaves A cleanly and connects to
// C within the disconnect debounce; neither are the users of a node that is
// SIGKILLed, whose devices come back on the other nodes within 0–1 s with
// new client ids.
func TestGraceMultiNode(t *testing.T) {
	bin := mnBinary(t)
	srv := redistest.Start(t)
	addrs := []string{srv.Addr()}
	a := mnStart(t, bin, "A", addrs, pacingEnv...)
	b := mnStart(t, bin, "B", addrs, pacingEnv...)
	c := mnStart(t, bin, "C", addrs, pacingEnv...)
	nodes := []*mnProc{a, b, c}
	var obs []*observer
	for _, n := range nodes {
		obs = append(obs, newObserver(t, n.mqtt, "presence/users/+"))
	}
	onlineOn := func(user, node, id string) {
		t.Helper()
		for i, o := range obs {
			o.waitFor(user, fmt.Sprintf("online on %s as %s (observer on %s)", node, id, nodes[i].id), func(p presence.Aggregate) bool {
				return p.Status == presence.Online && len(p.Sessions) == 1 && p.Sessions[0].Node == node && p.Sessions[0].ID == id
			})
		}
	}

	// One device moves from A to B, 1 s after its socket dropped.
	for _, newID := range []bool{false, true} {
		user := map[bool]string{false: "mover-same", true: "mover-new"}[newID]
		d := dial5(t, a.mqtt, user+"-1", user)
		onlineOn(user, "A", user+"-1")
		d.drop()
		time.Sleep(time.Second) // the gap being tested (the grace is 2 s)
		id := user + "-1"
		if newID {
			id = user + "-2"
		}
		dial5(t, b.mqtt, id, user)
		onlineOn(user, "B", id)
	}

	// A clean DISCONNECT on A and a new CONNECT on C 100 ms later (an
	// MQTT.js reconnect() moving nodes): within the debounce, never offline.
	// Then a clean leave for good: offline on every node after the debounce.
	d := dial5(t, a.mqtt, "hopper-1", "hopper")
	onlineOn("hopper", "A", "hopper-1")
	d.disconnect()
	time.Sleep(100 * time.Millisecond) // the gap being tested (the debounce is 500 ms)
	d = dial5(t, c.mqtt, "hopper-1", "hopper")
	onlineOn("hopper", "C", "hopper-1")
	left := time.Now()
	d.disconnect()
	for i, o := range obs {
		o.waitStatus("hopper", presence.Offline)
		if took := time.Since(left); took < testDebounce-50*time.Millisecond {
			t.Errorf("observer on %s: the clean leave shown after %v, before the %v debounce", nodes[i].id, took, testDebounce)
		}
	}
	if took := time.Since(left); took > testDebounce+lateMargin {
		t.Errorf("the clean leave shown after %v, want within the debounce + %v", took, lateMargin)
	}
	for i, o := range obs {
		if n := countOffline(o.history("hopper")); n != 1 {
			t.Errorf("observer on %s saw hopper offline %d times, want once (the leave): %s", nodes[i].id, n, statuses(o.history("hopper")))
		}
	}

	// Node A crashes with 20 users; each comes back on B or C with a new
	// client id within a second.
	const crashed = 20
	for i := range crashed {
		u := fmt.Sprintf("crash-%02d", i)
		dial5(t, a.mqtt, u+"-1", u)
	}
	for i := range crashed {
		onlineOn(fmt.Sprintf("crash-%02d", i), "A", fmt.Sprintf("crash-%02d-1", i))
	}
	a.kill(t)
	obs = obs[1:] // A's observer went with it
	var wg sync.WaitGroup
	for i := range crashed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(rand.N(time.Second)) // the devices' own reconnect delays
			to := []*mnProc{b, c}[i%2]
			u := fmt.Sprintf("crash-%02d", i)
			dial5(t, to.mqtt, u+"-2", u)
		}()
	}
	wg.Wait()
	for i := range crashed {
		u := fmt.Sprintf("crash-%02d", i)
		onlineOn(u, []string{"B", "C"}[i%2], u+"-2")
	}
	// A's sessions are swept as node_lost (its record lives 3 s): wait for
	// that, then for the grace of anything it made to pass.
	testkit.Wait(t, waitTimeout, "A's sessions swept", func() error {
		live := mnSessionsOf(t, b.admin, "crash-00").Live
		return testkit.Why(len(live) == 1, fmt.Sprintf("%d live sessions", len(live)))
	})
	mnNothingHeld(t, b, c)
	for i, o := range obs {
		for _, u := range append([]string{"mover-same", "mover-new"}, func() []string {
			var l []string
			for i := range crashed {
				l = append(l, fmt.Sprintf("crash-%02d", i))
			}
			return l
		}()...) {
			for _, p := range o.history(u) {
				if p.Status == presence.Offline {
					t.Errorf("observer on %s saw %s offline (v%d): %s", nodes[i+1].id, u, p.Version, statuses(o.history(u)))
					break
				}
			}
		}
		o.check()
	}
}

// SIGTERM on one of three nodes: it drains (each device is told to move
// with DISCONNECT 0x8B, at drain.rate), its devices reconnect to the other
// nodes within half a second, and no observer on them sees any user
// offline; the drained sessions end as drain.
func TestGraceDrainThreeNodes(t *testing.T) {
	bin := mnBinary(t)
	srv := redistest.Start(t)
	addrs := []string{srv.Addr()}
	env := append([]string{"PRESENCED_DRAIN_RATE=100"}, pacingEnv...)
	a := mnStart(t, bin, "A", addrs, env...)
	b := mnStart(t, bin, "B", addrs, env...)
	c := mnStart(t, bin, "C", addrs, env...)
	obs := []*observer{newObserver(t, b.mqtt, "presence/users/+"), newObserver(t, c.mqtt, "presence/users/+")}
	const devices = 30
	users := make([]string, devices)
	var wg sync.WaitGroup
	moved := make(chan string, devices)
	for i := range devices {
		users[i] = fmt.Sprintf("deploy-%02d", i)
		d := dial5(t, a.mqtt, users[i]+"-dev", users[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sd := <-d.gone:
				if sd.ReasonCode != 0x8B {
					t.Errorf("%s: DISCONNECT %#x, want 0x8B (server shutting down: no reference configured)", users[i], sd.ReasonCode)
				}
			case <-time.After(waitTimeout):
				t.Errorf("%s: no DISCONNECT from the draining node", users[i])
				return
			}
			time.Sleep(rand.N(500 * time.Millisecond)) // the device's own reconnect delay
			to := []*mnProc{b, c}[i%2]
			dial5(t, to.mqtt, users[i]+"-dev", users[i])
			moved <- users[i]
		}()
	}
	for _, o := range obs {
		for _, u := range users {
			o.waitStatus(u, presence.Online)
		}
	}
	start := time.Now()
	a.term(t, waitTimeout)
	t.Logf("A drained %d devices and exited %v after SIGTERM", devices, time.Since(start).Round(time.Millisecond))
	wg.Wait()
	if len(moved) != devices {
		t.Fatalf("%d of %d devices moved", len(moved), devices)
	}
	for _, o := range obs {
		for i, u := range users {
			o.waitFor(u, "online on its new node", func(p presence.Aggregate) bool {
				return p.Status == presence.Online && len(p.Sessions) == 1 && p.Sessions[0].Node == []string{"B", "C"}[i%2]
			})
		}
	}
	mnNothingHeld(t, b, c)
	offline := 0
	for _, o := range obs {
		for _, u := range users {
			for _, p := range o.history(u) {
				if p.Status == presence.Offline {
					offline++
					t.Errorf("%s shown offline: %s", u, statuses(o.history(u)))
					break
				}
			}
		}
		o.check()
	}
	drained := 0
	for _, u := range users {
		if e, ok := mnEnded(mnSessionsOf(t, b.admin, u), u+"-dev"); ok && e.EndReason == presence.EndDrain && e.Node == "A" {
			drained++
		}
	}
	if drained != devices {
		t.Errorf("%d of %d sessions on A ended as drain", drained, devices)
	}
	t.Logf("offline shown: %d times (users × 2 observers, of %d users); sessions ended as drain: %d", offline, devices, drained)
}

func countOffline(h []presence.Aggregate) int {
	n := 0
	for _, a := range h {
		if a.Status == presence.Offline {
			n++
		}
	}
	return n
}
