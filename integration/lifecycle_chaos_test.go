package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mqtt3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
)

// The lifecycle chaos test (issue 21): three presenced binaries on a Redis
// Cluster with replicas carry devices that come and go every way (clean
// DISCONNECT, a dropped TCP connection, a takeover by the same client id,
// a takeover battle) while one node is SIGKILLed, a Redis master is killed
// so that its replica takes over, and a node drains. An observer on the
// node that stays records every raw event of the AWS IoT output
// ($aws/events/presence/#, QoS 1). When every device has gone, each
// client id's events must read open, end, open, end … in epoch order:
//   - an inversion is an event whose epoch is below the one before it, an
//     end of an epoch that is not the one open, or an open while another
//     epoch of the client id is still open (a disconnect after the next
//     connect);
//   - a duplicate is the same (client id, epoch, event) twice;
//   - a missing end is a client id whose last event is an open once every
//     device has gone.
// Target: 0 of each. The FIGURES line gives the counts.

// lcChaosEnv turns the AWS IoT output on, in raw mode.
var lcChaosEnv = []string{"PRESENCED_LIFECYCLE_AWS_ENABLED=true", "PRESENCED_LIFECYCLE_AWS_MODE=raw"}

// lcEvent is one AWS IoT lifecycle event as the observer received it.
type lcEvent struct {
	ClientID  string `json:"clientId"`
	EventType string `json:"eventType"`
	Version   uint64 `json:"versionNumber"`
	Reason    string `json:"disconnectReason"`
	Failure   string `json:"connectFailureReason"`
	Timestamp int64  `json:"timestamp"`
}

// lcRecorder keeps every event, in the order received.
type lcRecorder struct {
	mu     sync.Mutex
	events []lcEvent
	bad    []string // payloads that did not decode
}

func (r *lcRecorder) add(topic string, payload []byte) {
	var ev lcEvent
	err := json.Unmarshal(payload, &ev)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || ev.ClientID == "" || !strings.HasSuffix(topic, "/"+ev.ClientID) {
		r.bad = append(r.bad, topic+" "+string(payload))
		return
	}
	r.events = append(r.events, ev)
}

func (r *lcRecorder) snapshot() []lcEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]lcEvent(nil), r.events...)
}

// lcJudgement is what the events of every client id add up to.
type lcJudgement struct {
	events, opens, ends, failed int
	inversions, duplicates      int
	open                        []string // client ids whose last event is an open
	reasons                     map[string]int
	whys                        []string // the first few faults, for the log
}

// lcJudge reads every client id's events in the order received.
func lcJudge(evs []lcEvent) lcJudgement {
	j := lcJudgement{events: len(evs), reasons: map[string]int{}}
	type state struct {
		last uint64 // the highest epoch seen
		open uint64 // the epoch open now (0: none)
		seen map[string]bool
	}
	clients := map[string]*state{}
	fault := func(format string, a ...any) {
		if len(j.whys) < 10 {
			j.whys = append(j.whys, fmt.Sprintf(format, a...))
		}
	}
	for _, ev := range evs {
		if ev.EventType == "connect_failed" {
			j.failed++
			continue
		}
		s := clients[ev.ClientID]
		if s == nil {
			s = &state{seen: map[string]bool{}}
			clients[ev.ClientID] = s
		}
		key := fmt.Sprint(ev.Version, ev.EventType)
		if s.seen[key] {
			j.duplicates++
			fault("%s: %s of epoch %d again", ev.ClientID, ev.EventType, ev.Version)
			continue
		}
		s.seen[key] = true
		switch ev.EventType {
		case "connected":
			j.opens++
			if ev.Version <= s.last || s.open != 0 {
				j.inversions++
				fault("%s: open of epoch %d after epoch %d (open: %d)", ev.ClientID, ev.Version, s.last, s.open)
			}
			s.open = ev.Version
		case "disconnected":
			j.ends++
			j.reasons[ev.Reason]++
			if ev.Version != s.open {
				j.inversions++
				fault("%s: end of epoch %d, the open one is %d", ev.ClientID, ev.Version, s.open)
			} else {
				s.open = 0
			}
		default:
			fault("%s: event %q", ev.ClientID, ev.EventType)
			j.inversions++
		}
		s.last = max(s.last, ev.Version)
	}
	for id, s := range clients {
		if s.open != 0 {
			j.open = append(j.open, id)
		}
	}
	sort.Strings(j.open)
	return j
}

// lcClass is the class of a client id of the chaos test: "solo" (one
// device uses it), "shared" (two devices take it over from each other),
// "battle", or "drain" (the device that stays on node B until it drains).
func lcClass(id string) string {
	switch {
	case id == "chaos-battle":
		return "battle"
	case id == "chaos-drain":
		return "drain"
	case strings.HasSuffix(id, "-d0") && lcSharedUser(id):
		return "shared"
	}
	return "solo"
}

// lcSharedUser: the first id of every fourth user is shared (chaos-u0-d0,
// chaos-u4-d0 …).
func lcSharedUser(id string) bool {
	var u, d int
	if _, err := fmt.Sscanf(id, "chaos-u%d-d%d", &u, &d); err != nil {
		return false
	}
	return d == 0 && u%4 == 0
}

// lcNodes is the set of nodes devices may use; it changes as nodes are
// killed, drained and replaced.
type lcNodes struct {
	mu    sync.Mutex
	addrs []string
}

func (n *lcNodes) set(addrs ...string) {
	n.mu.Lock()
	n.addrs = append([]string(nil), addrs...)
	n.mu.Unlock()
}

func (n *lcNodes) pick(r *rand.Rand) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addrs[r.IntN(len(n.addrs))]
}

// lcDevice runs one client id until ctx ends: it connects to a node, stays
// a while, and ends by a clean DISCONNECT or a dropped connection; two
// devices may share a client id (takeovers). It counts the CONNACKs.
func lcDevice(ctx context.Context, nodes *lcNodes, id, user string, seed uint64, connects *atomic.Int64) {
	r := rand.New(rand.NewPCG(seed, 21))
	for ctx.Err() == nil {
		var conn net.Conn
		var mu sync.Mutex
		lost := make(chan struct{})
		opts := mqtt3.NewClientOptions().AddBroker("tcp://" + nodes.pick(r)).SetClientID(id).SetUsername(user).
			SetProtocolVersion(4).SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).
			SetKeepAlive(2 * time.Second).SetConnectTimeout(waitTimeout).
			SetConnectionLostHandler(func(mqtt3.Client, error) { close(lost) }).
			SetCustomOpenConnectionFn(func(u *url.URL, _ mqtt3.ClientOptions) (net.Conn, error) {
				c, err := net.DialTimeout("tcp", u.Host, waitTimeout)
				mu.Lock()
				conn = c
				mu.Unlock()
				return c, err
			})
		c := mqtt3.NewClient(opts)
		if tok := c.Connect(); !tok.WaitTimeout(waitTimeout) || tok.Error() != nil {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		connects.Add(1)
		select {
		case <-lost: // taken over, drained, or its node died
		case <-ctx.Done():
			c.Disconnect(250)
			return
		case <-time.After(time.Duration(50+r.IntN(250)) * time.Millisecond):
			if r.IntN(3) == 0 {
				mu.Lock()
				if conn != nil {
					conn.Close() // the network drops
				}
				mu.Unlock()
				c.Disconnect(0) // paho's goroutines go; nothing reaches the broker
			} else {
				c.Disconnect(250) // DISCONNECT, flushed within 250 ms
			}
		}
		sleepCtx(ctx, time.Duration(r.IntN(100))*time.Millisecond)
	}
}

// lcWaitFirehose waits until node n hears every user (its lifecycle
// output holds the firehose; on a Redis Cluster subscribing to every
// slot's channel and reading every user takes a while): what a node
// commits before then is not told by n.
func lcWaitFirehose(t *testing.T, n *mnProc) {
	t.Helper()
	testkit.Wait(t, 4*waitTimeout, n.id+" hears every user", func() error {
		resp, err := http.Get("http://" + n.admin + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		return testkit.Why(strings.Contains(string(body), "\npresenced_interest_firehose 1\n"), "presenced_interest_firehose is not 1")
	})
}

func TestLifecycleChaos(t *testing.T) {
	cl := redistest.StartClusterWithReplicas(t, 3, 1)
	bin := mnBinary(t)
	env := append([]string{foCluster}, lcChaosEnv...)
	a := mnStartTTL(t, bin, "A", cl.Addrs(), mnNodeTTL, env...)
	b := mnStartTTL(t, bin, "B", cl.Addrs(), mnNodeTTL, env...)
	c := mnStartTTL(t, bin, "C", cl.Addrs(), mnNodeTTL, env...)
	for _, n := range []*mnProc{a, b, c} {
		lcWaitFirehose(t, n)
	}

	rec := &lcRecorder{}
	opts := mqtt3.NewClientOptions().AddBroker("tcp://" + c.mqtt).SetClientID("chaos-recorder").
		SetProtocolVersion(4).SetCleanSession(true).SetAutoReconnect(false).SetOrderMatters(true).
		SetConnectionLostHandler(func(_ mqtt3.Client, err error) { t.Errorf("the recorder lost its connection: %v", err) })
	obs := mqtt3.NewClient(opts)
	if tok := obs.Connect(); !tok.WaitTimeout(waitTimeout) || tok.Error() != nil {
		t.Fatalf("recorder: connect: %v", tok.Error())
	}
	t.Cleanup(func() { obs.Disconnect(0) })
	if tok := obs.Subscribe("$aws/events/presence/#", 1, func(_ mqtt3.Client, m mqtt3.Message) {
		rec.add(m.Topic(), m.Payload())
	}); !tok.WaitTimeout(waitTimeout) || tok.Error() != nil {
		t.Fatalf("recorder: subscribe: %v", tok.Error())
	}

	nodes := &lcNodes{}
	nodes.set(a.mqtt, b.mqtt, c.mqtt)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var connects, sharedConnects atomic.Int64
	const users, perUser = 12, 2
	for u := range users {
		for d := range perUser {
			id := fmt.Sprintf("chaos-u%d-d%d", u, d)
			devices, count := 1, &connects
			if d == 0 && u%4 == 0 {
				devices, count = 2, &sharedConnects // two devices share the id: takeovers
			}
			for k := range devices {
				wg.Add(1)
				go func() {
					defer wg.Done()
					lcDevice(ctx, nodes, id, fmt.Sprintf("chaos-u%d", u), uint64(u*100+d*10+k), count)
				}()
			}
		}
	}
	// A takeover battle: two devices that take one id over as soon as
	// they are kicked.
	battles := []*battler{battle3(ctx, b.mqtt, "chaos-battle", "chaos-b"), battle3(ctx, c.mqtt, "chaos-battle", "chaos-b")}

	waitEvents := func(n int, what string) {
		t.Helper()
		from := len(rec.snapshot())
		testkit.Wait(t, 4*waitTimeout, what, func() error {
			return testkit.Why(len(rec.snapshot()) >= from+n, fmt.Sprintf("%d events since", len(rec.snapshot())-from))
		})
	}
	waitEvents(50, "events flow before the faults")

	// 1. Node A is SIGKILLed; its sessions end as node_lost once it is
	// swept. A new node takes its place.
	a.kill(t)
	nodes.set(b.mqtt, c.mqtt)
	t.Logf("node A killed")
	waitEvents(50, "events flow after A was killed")
	a2 := mnStartTTL(t, bin, "A2", cl.Addrs(), mnNodeTTL, env...)
	lcWaitFirehose(t, a2)
	nodes.set(a2.mqtt, b.mqtt, c.mqtt)

	// 2. A Redis master is killed; its replica takes over.
	victim := foQuietMaster(t, cl)
	cl.WaitReplicated(t, waitTimeout)
	victim.Kill(t)
	_, promoted := cl.WaitPromoted(t, victim, foPromote)
	t.Logf("master %s killed; replica promoted at %s", victim.Addr(), promoted.UTC().Format("15:04:05.000"))
	waitEvents(50, "events flow after the failover")

	// 3. Node B drains (SIGTERM): its devices are moved off. One device
	// stays on B until then, its open told, so that the drain ends at
	// least one stored session: the others' sessions last 50–300 ms, and
	// all of B's may have ended by the time the drain reaches them.
	drained := mqtt3.NewClient(mqtt3.NewClientOptions().AddBroker("tcp://" + b.mqtt).SetClientID("chaos-drain").SetUsername("chaos-drain").
		SetProtocolVersion(4).SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).SetKeepAlive(2 * time.Second))
	if tok := drained.Connect(); !tok.WaitTimeout(waitTimeout) || tok.Error() != nil {
		t.Fatalf("chaos-drain: connect to B: %v", tok.Error())
	}
	t.Cleanup(func() { drained.Disconnect(0) })
	testkit.Wait(t, 4*waitTimeout, "chaos-drain's open told", func() error {
		for _, ev := range rec.snapshot() {
			if ev.ClientID == "chaos-drain" && ev.EventType == "connected" {
				return nil
			}
		}
		return errors.New("no connected event of chaos-drain yet")
	})
	nodes.set(a2.mqtt, c.mqtt)
	b.term(t, 4*waitTimeout)
	t.Logf("node B drained")
	waitEvents(50, "events flow after B drained")

	// Every device goes.
	cancel()
	wg.Wait()
	for _, bt := range battles {
		<-bt.done
		bt.hold()
	}
	var j lcJudgement
	testkit.Wait(t, 2*mnLossBound+4*waitTimeout, "every client id's last event is an end", func() error {
		j = lcJudge(rec.snapshot())
		return testkit.Why(len(j.open) == 0, fmt.Sprintf("still open: %v", j.open))
	})
	// Each class of client id's opens against its CONNACKs: a connection
	// that ends before its open is written to the store (taken over
	// within milliseconds, as the shared ids and the battle are; on a
	// node killed, or a master lost, before the write) never gets an
	// epoch, so it has no event.
	opens := map[string]int{}
	for _, ev := range rec.snapshot() {
		if ev.EventType == "connected" {
			opens[lcClass(ev.ClientID)]++
		}
	}
	t.Logf("FIGURES lifecycle chaos: %d events (%d opens, %d ends, %d connect_failed); inversions %d, duplicates %d, missing ends %d; end reasons %v",
		j.events, j.opens, j.ends, j.failed, j.inversions, j.duplicates, len(j.open), j.reasons)
	t.Logf("FIGURES lifecycle chaos: opens/CONNACKs: ids of one device %d/%d, ids two devices share %d/%d, the battle's id %d/%d",
		opens["solo"], connects.Load(), opens["shared"], sharedConnects.Load(), opens["battle"], battles[0].connects.Load()+battles[1].connects.Load())
	for _, why := range j.whys {
		t.Logf("  %s", why)
	}
	if j.inversions != 0 || j.duplicates != 0 || len(j.open) != 0 {
		t.Errorf("inversions %d, duplicates %d, missing ends %d: want 0 of each", j.inversions, j.duplicates, len(j.open))
	}
	if len(rec.bad) > 0 {
		t.Errorf("%d events did not decode, e.g. %s", len(rec.bad), rec.bad[0])
	}
	for _, r := range []string{"CLIENT_INITIATED_DISCONNECT", "CONNECTION_LOST", "DUPLICATE_CLIENTID", "SERVER_INITIATED_DISCONNECT"} {
		if j.reasons[r] == 0 {
			t.Errorf("no end with reason %s: the faults were not all exercised (%v)", r, j.reasons)
		}
	}
}

// TestLifecycleChaosJudge: the judge of the chaos test finds each fault it
// counts (so that the chaos test can fail).
func TestLifecycleChaosJudge(t *testing.T) {
	open := func(id string, v uint64) lcEvent { return lcEvent{ClientID: id, EventType: "connected", Version: v} }
	end := func(id string, v uint64) lcEvent {
		return lcEvent{ClientID: id, EventType: "disconnected", Version: v, Reason: "CONNECTION_LOST"}
	}
	for _, tc := range []struct {
		name                 string
		evs                  []lcEvent
		inv, dup, open, ends int
	}{
		{"in order", []lcEvent{open("a", 1), end("a", 1), open("a", 2), end("a", 2), open("b", 1), end("b", 1)}, 0, 0, 0, 3},
		{"end after the next open", []lcEvent{open("a", 1), open("a", 2), end("a", 1), end("a", 2)}, 2, 0, 0, 2},
		{"duplicate end", []lcEvent{open("a", 1), end("a", 1), end("a", 1)}, 0, 1, 0, 1},
		{"duplicate open", []lcEvent{open("a", 1), open("a", 1), end("a", 1)}, 0, 1, 0, 1},
		{"missing end", []lcEvent{open("a", 1), end("a", 1), open("a", 2)}, 0, 0, 1, 1},
		{"older epoch", []lcEvent{open("a", 2), end("a", 2), open("a", 1), end("a", 1)}, 1, 0, 0, 2},
		{"end never opened", []lcEvent{end("a", 3)}, 1, 0, 0, 1},
	} {
		j := lcJudge(tc.evs)
		if j.inversions != tc.inv || j.duplicates != tc.dup || len(j.open) != tc.open || j.ends != tc.ends {
			t.Errorf("%s: inversions %d duplicates %d open %v ends %d, want %d %d %d %d (%v)",
				tc.name, j.inversions, j.duplicates, j.open, j.ends, tc.inv, tc.dup, tc.open, tc.ends, j.whys)
		}
	}
}
