package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/notify"
	"github.com/presenced/presenced/webhook"
)

// Presence-gated notify (docs/notify.md), end to end: real brokers (two
// on one Redis with INTEGRATION_STORE=redis, so that a message crosses
// nodes; one with the memory store), real MQTT clients, and a real HTTP
// server receiving the pushes.
//
// The pushes go through the webhooks (package webhook): an endpoint whose
// events name "notify", a real HTTP server, signed batches.

// notifyGrace is the nodes' presence.offline_grace.
const notifyGrace = 2 * time.Second

// receivedPush is one push the HTTP receiver got.
type receivedPush struct {
	webhook.Event
	data struct {
		Topic, Payload, Encoding, Reason string
		QueuedAt                         time.Time `json:"queued_at"`
	}
	at time.Time
}

// pushReceiver is a local HTTP server that records the notify events
// POSTed to it.
type pushReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	pushes []receivedPush
}

func startPushReceiver(t *testing.T) *pushReceiver {
	r := &pushReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct{ Events []webhook.Event }
		if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.Header.Get("Presenced-Signature") == "" {
			http.Error(w, "unsigned", http.StatusBadRequest)
			return
		}
		now := time.Now()
		r.mu.Lock()
		for _, ev := range body.Events {
			p := receivedPush{Event: ev, at: now}
			_ = json.Unmarshal(ev.Data, &p.data)
			r.pushes = append(r.pushes, p)
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *pushReceiver) list() []receivedPush {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.pushes)
}

// of returns the pushes for user.
func (r *pushReceiver) of(user string) []receivedPush {
	var out []receivedPush
	for _, p := range r.list() {
		if p.User == user {
			out = append(out, p)
		}
	}
	return out
}

// notifyNodes starts the nodes of a notify test: with Redis two, node-a
// and node-b, on one Redis server; else one. Notify is on, the grace is
// notifyGrace (the rest of the pacing off), "svc" is a service account,
// and the pushes go to rec.
func notifyNodes(t *testing.T, rec *pushReceiver) []*testNode {
	t.Helper()
	// A password file: without authentication every connection of the
	// binary is a service account.
	pwfile := filepath.Join(t.TempDir(), "passwd")
	users := map[string]string{}
	for _, u := range []string{"svc", "alice", "bob", "carol", "dave", "erin"} {
		users[u] = notifyPassword(u)
	}
	for i := range flapUsers {
		users[flapUser(i)] = notifyPassword(flapUser(i))
	}
	writePasswordFile(t, pwfile, users)
	cfg := nodeConfig(t, pacingOff, func(c *configs.Config) {
		c.Auth.PasswordFile = pwfile
		// Forty devices connect at once at the start of the flapping run:
		// the checks that wait their turn must not be taken for guesses.
		c.Auth.Passwords.FailureBurst = 10_000
		c.Auth.Passwords.Concurrency = 64
		c.Auth.Passwords.QueueWait = configs.Duration(waitTimeout)
		grace := configs.Duration(notifyGrace)
		c.Presence.OfflineGrace = &grace
		c.Presence.Observers = []string{"svc"}
		c.Notify.Enabled = true
		c.Webhooks.Endpoints = []configs.WebhookEndpoint{{Name: "push", URL: rec.srv.URL, Secret: "notify-test-secret",
			Events: []string{"notify"}, MaxWait: configs.Duration(50 * time.Millisecond)}}
	})
	nodes := []*testNode{startConfigured(t, cfg)}
	if os.Getenv("INTEGRATION_STORE") == "redis" {
		cfg.NodeID = "node-b"
		nodes = append(nodes, startConfigured(t, cfg))
	}
	return nodes
}

// notifyPassword is user's password in the notify tests.
func notifyPassword(user string) string { return user + "-Secret-21" }

// flapUsers are TestNotifyFlapping's users, flapUser(i) each.
const flapUsers = 100

func flapUser(i int) string { return fmt.Sprintf("flap%02d", i) }

// dialNotify connects user with its password.
func dialNotify(t *testing.T, addr, clientID, user string) *client5 {
	t.Helper()
	return dial5(t, addr, clientID, user, withPassword(notifyPassword(user)))
}

// last is the node the users connect to: the other one with Redis.
func last(nodes []*testNode) *testNode { return nodes[len(nodes)-1] }

// subscribeNotify subscribes c to user's notify topic at QoS 1 and returns
// the SUBACK's reason code.
func subscribeNotify(t *testing.T, c *client5, user string) byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sa, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "presence/notify/" + user, QoS: 1}}})
	if sa != nil && len(sa.Reasons) == 1 {
		return sa.Reasons[0]
	}
	t.Fatalf("subscribe: %v", err)
	return 0
}

// waitOnline waits until the store, as node n reads it, has a live session
// of user.
func waitOnline(t *testing.T, n *testNode, user string) {
	t.Helper()
	testkit.Wait(t, waitTimeout, user+"'s session in the store", func() error {
		u, _, err := n.Presence.User(context.Background(), user)
		if err != nil {
			return err
		}
		return testkit.Why(len(u.Sessions) > 0, "no live session")
	})
}

// waitOffline waits until the store has ended every session of user.
func waitOffline(t *testing.T, n *testNode, user string) {
	t.Helper()
	testkit.Wait(t, waitTimeout, user+"'s sessions ended in the store", func() error {
		u, _, err := n.Presence.User(context.Background(), user)
		if err != nil {
			return err
		}
		return testkit.Why(len(u.Sessions) == 0 && !u.LastSeen.IsZero(), fmt.Sprintf("%d live", len(u.Sessions)))
	})
}

// expectMessage waits for a message on c and checks it.
func expectMessage(t *testing.T, c *client5, topic, payload string, within time.Duration) time.Time {
	t.Helper()
	select {
	case m := <-c.msgs:
		if m.Topic != topic || string(m.Payload) != payload {
			t.Fatalf("got %s %q, want %s %q", m.Topic, m.Payload, topic, payload)
		}
		return time.Now()
	case <-time.After(within):
		t.Fatalf("no message on %s within %v", topic, within)
	}
	return time.Time{}
}

func TestNotify(t *testing.T) {
	rec := startPushReceiver(t)
	nodes := notifyNodes(t, rec)
	a, b := nodes[0], last(nodes)
	svc := dialNotify(t, a.MQTTAddr(), "svc-1", "svc")
	total := func(name string) int64 {
		var n int64
		for _, x := range nodes {
			n += x.Stats().Get(name)
		}
		return n
	}

	t.Run("online: delivered, no push", func(t *testing.T) {
		alice := dialNotify(t, b.MQTTAddr(), "alice-phone", "alice")
		if code := subscribeNotify(t, alice, "alice"); code != 1 {
			t.Fatalf("alice's SUBACK %#x", code)
		}
		// Notify asks the store who is online: a message sent before the
		// tracker wrote alice's session is pushed as for an offline user.
		waitOnline(t, a, "alice")
		if code := svc.publish(t, "presence/notify/alice", "hello", 1, false); code != 0 {
			t.Fatalf("svc's PUBACK %#x", code)
		}
		expectMessage(t, alice, "presence/notify/alice", "hello", waitTimeout)
		if p := rec.of("alice"); len(p) != 0 {
			t.Fatalf("pushes for an online user: %+v", p)
		}
		// Someone else's notify topic: refused to read, counted; and a
		// user may not publish there.
		bob := dialNotify(t, b.MQTTAddr(), "bob-phone", "bob")
		if code := subscribeNotify(t, bob, "alice"); code < 0x80 {
			t.Fatalf("bob subscribed to alice's notify topic: %#x", code)
		}
		if n := total("notify_reads_refused_total"); n < 1 {
			t.Errorf("notify_reads_refused_total %d", n)
		}
		if code := bob.publish(t, "presence/notify/alice", "spoof", 1, false); code != 0x87 {
			t.Errorf("bob's publish on alice's notify topic: PUBACK %#x, want 0x87", code)
		}
		if n := total("notify_refused_total"); n != 1 {
			t.Errorf("notify_refused_total %d, want 1", n)
		}
		select {
		case m := <-alice.msgs:
			t.Errorf("alice got %s %q", m.Topic, m.Payload)
		case <-time.After(notifyGrace):
		}
		if p := rec.of("alice"); len(p) != 0 {
			t.Fatalf("pushes for an online user: %+v", p)
		}
	})

	t.Run("offline: one push at once", func(t *testing.T) {
		begin := time.Now()
		svc.publish(t, "presence/notify/carol", "wake up", 1, false)
		testkit.Wait(t, waitTimeout, "carol's push", func() error {
			return testkit.Why(len(rec.of("carol")) == 1, fmt.Sprintf("%d pushes", len(rec.of("carol"))))
		})
		p := rec.of("carol")[0]
		if p.Type != "notify" || p.ID == "" || p.data.Reason != notify.ReasonOffline || p.data.Payload != "wake up" || p.data.Topic != "presence/notify/carol" {
			t.Errorf("push %+v %+v", p.Event, p.data)
		}
		if d := p.at.Sub(begin); d > notifyGrace {
			t.Errorf("an offline user's push came after %v, more than the grace", d)
		}
	})

	t.Run("still offline when the grace ends: one push", func(t *testing.T) {
		dave := dialNotify(t, b.MQTTAddr(), "dave-phone", "dave")
		subscribeNotify(t, dave, "dave")
		// A session dropped before the tracker wrote it is never written
		// (connect and end coalesce), and dave would never have been seen.
		waitOnline(t, b, "dave")
		dave.drop()
		waitOffline(t, b, "dave")
		begin := time.Now()
		svc.publish(t, "presence/notify/dave", "ping", 1, false)
		testkit.Wait(t, notifyGrace+waitTimeout, "dave's push", func() error {
			return testkit.Why(len(rec.of("dave")) == 1, fmt.Sprintf("%d pushes", len(rec.of("dave"))))
		})
		p := rec.of("dave")[0]
		if p.data.Reason != notify.ReasonGraceEnded {
			t.Errorf("reason %q", p.data.Reason)
		}
		t.Logf("dave's push %v after the publish (grace %v, counted from his end)", p.at.Sub(begin).Round(time.Millisecond), notifyGrace)
	})

	t.Run("back within the grace: delivered, no push", func(t *testing.T) {
		erin := dialNotify(t, b.MQTTAddr(), "erin-phone", "erin")
		subscribeNotify(t, erin, "erin")
		// A session dropped before the tracker wrote it is never written
		// (connect and end coalesce), and erin would never have been seen.
		waitOnline(t, b, "erin")
		erin.drop()
		waitOffline(t, b, "erin")
		begin := time.Now()
		svc.publish(t, "presence/notify/erin", "while away", 1, false)
		back := dialNotify(t, a.MQTTAddr(), "erin-phone", "erin") // the other node with Redis
		subscribeNotify(t, back, "erin")
		got := expectMessage(t, back, "presence/notify/erin", "while away", notifyGrace+waitTimeout)
		t.Logf("erin got it %v after the publish", got.Sub(begin).Round(time.Millisecond))
		time.Sleep(notifyGrace) // past the deadline: still no push
		if p := rec.of("erin"); len(p) != 0 {
			t.Errorf("pushes for a user back within the grace: %+v", p)
		}
		if n := total("notify_returned_total"); n < 1 {
			t.Errorf("notify_returned_total %d", n)
		}
	})
}

// TestNotifyFlapping is the measured figure: 10,000 messages to users whose
// devices drop (no DISCONNECT) and come back within the grace, at random,
// on a random node. Counted: pushes (target 0: every user is always back
// within the grace), and of those the ones while the user was online;
// messages delivered, lost, and the delay each delivered one took.
func TestNotifyFlapping(t *testing.T) {
	if testing.Short() {
		t.Skip("the measured run")
	}
	const (
		users    = flapUsers
		messages = 10_000
	)
	// Messages per second. Each costs its node a store read (with Redis an
	// HGETALL and its decoding), and the webhooks make each node hear every
	// user's changes (the firehose): under the race detector, two nodes on
	// a shared 2-core machine keep up with half the rate.
	rate := 400
	if raceOn {
		rate = 200
	}
	rec := startPushReceiver(t)
	nodes := notifyNodes(t, rec)
	svc := dialNotify(t, nodes[0].MQTTAddr(), "svc-1", "svc")

	type device struct {
		mu     sync.Mutex
		online bool           // connected and subscribed
		spans  [][2]time.Time // when it was online
	}
	type receipt struct {
		seq int
		at  time.Time
	}
	devs := make([]*device, users)
	received := make(chan receipt, messages*2)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var flaps atomic.Int64
	for i := range users {
		d := &device{}
		devs[i] = d
		user := flapUser(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 21))
			// Staggered first connects: the first password check of each
			// user is a bcrypt (then cached), two cores under -race.
			time.Sleep(time.Duration(i) * 40 * time.Millisecond)
			for {
				var c *client5
				// A device down when the run ends comes back all the
				// same, and stays: every device is back within the grace.
				for tries := 0; c == nil; tries++ {
					n := nodes[rng.IntN(len(nodes))]
					conn, err := net.DialTimeout("tcp", n.MQTTAddr(), waitTimeout)
					if err != nil {
						t.Errorf("dial: %v", err)
						return
					}
					cc, ack, err := connect5(t, conn, user+"-phone", user, withPassword(notifyPassword(user)))
					switch {
					case err == nil && ack.ReasonCode == 0:
						c = cc
					case tries < 50 && ack != nil && (ack.ReasonCode == 0x89 || ack.ReasonCode == 0x9F):
						// The password checks are busy (a bcrypt each, two
						// cores under -race): the device tries again.
						_ = conn.Close()
						time.Sleep(100 * time.Millisecond)
					default:
						t.Errorf("connect %s: %v", user, err)
						return
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				_, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "presence/notify/" + user, QoS: 1}}})
				cancel()
				if err != nil {
					t.Errorf("subscribe %s: %v", user, err)
					return
				}
				d.mu.Lock()
				d.online = true
				d.spans = append(d.spans, [2]time.Time{time.Now()})
				d.mu.Unlock()
				up := time.NewTimer(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
				last := false
			read:
				for {
					select {
					case m := <-c.msgs:
						seq, _ := strconv.Atoi(string(m.Payload))
						received <- receipt{seq, time.Now()}
					case <-up.C:
						break read
					case <-stop:
						last = true
						break read
					}
				}
				if last {
					// Stay: what still waits comes to this session.
					for {
						select {
						case m := <-c.msgs:
							seq, _ := strconv.Atoi(string(m.Payload))
							received <- receipt{seq, time.Now()}
						case <-time.After(notifyGrace + time.Second):
							return
						}
					}
				}
				d.mu.Lock()
				d.online = false
				d.spans[len(d.spans)-1][1] = time.Now()
				d.mu.Unlock()
				c.drop()
				flaps.Add(1)
				// What the client read before the drop counts.
			drain:
				for {
					select {
					case m := <-c.msgs:
						seq, _ := strconv.Atoi(string(m.Payload))
						received <- receipt{seq, time.Now()}
					default:
						break drain
					}
				}
				// Back well within the grace.
				time.Sleep(time.Duration(50+rng.IntN(650)) * time.Millisecond)
			}
		}()
	}
	// Every device up once before the first message.
	testkit.Wait(t, waitTimeout+users*40*time.Millisecond, "every device up", func() error {
		n := 0
		for _, d := range devs {
			d.mu.Lock()
			if len(d.spans) > 0 {
				n++
			}
			d.mu.Unlock()
		}
		return testkit.Why(n == users, fmt.Sprintf("%d up", n))
	})
	sent := make([]time.Time, messages)
	userOf := make([]int, messages)
	rng := rand.New(rand.NewPCG(7, 21))
	tick := time.Second / time.Duration(rate)
	begin := time.Now()
	for seq := range messages {
		if wait := begin.Add(time.Duration(seq) * tick).Sub(time.Now()); wait > 0 {
			time.Sleep(wait)
		}
		u := rng.IntN(users)
		userOf[seq] = u
		sent[seq] = time.Now()
		svc.publish(t, "presence/notify/"+flapUser(u), strconv.Itoa(seq), 0, false)
	}
	publishing := time.Since(begin)
	close(stop)
	wg.Wait()
	close(received)

	got := make(map[int]time.Time, messages)
	dups := 0
	var delays []time.Duration
	for r := range received {
		if _, ok := got[r.seq]; ok {
			dups++
			continue
		}
		got[r.seq] = r.at
		delays = append(delays, r.at.Sub(sent[r.seq]))
	}
	slices.Sort(delays)
	pushes := rec.list()
	pushedWhileOnline := 0
	pushed := map[string]bool{}
	reasons := map[string]int{}
	for _, p := range pushes {
		reasons[p.data.Reason]++
		pushed[p.data.Payload] = true
		var u int
		fmt.Sscanf(p.User, "flap%02d", &u)
		d := devs[u]
		d.mu.Lock()
		for _, s := range d.spans {
			// When the node decided the push (the event's at), not when
			// the receiver got it.
			if !s[0].After(p.Event.At) && (s[1].IsZero() || !s[1].Before(p.Event.At)) {
				pushedWhileOnline++
				break
			}
		}
		d.mu.Unlock()
	}
	lost := 0
	for seq := range messages {
		if _, ok := got[seq]; !ok && !pushed[strconv.Itoa(seq)] {
			lost++
		}
	}
	pct := func(q float64) time.Duration {
		if len(delays) == 0 {
			return 0
		}
		return delays[min(len(delays)-1, int(q*float64(len(delays))))]
	}
	var held, returned, delivered int64
	dropped := map[string]int64{}
	for _, n := range nodes {
		st := n.Stats()
		held += st.Get("notify_held_total")
		returned += st.Get("notify_returned_total")
		delivered += st.Get("notify_delivered_total")
		for _, r := range []string{"evicted", "max_pending", "queue_full", "unreceived", "no_webhook"} {
			dropped[r] += st.Of("notify_dropped_total", r)
		}
	}
	t.Logf("notify flapping: published to a subscriber %d; dropped %v; pushes by reason %v", delivered, dropped, reasons)
	t.Logf("notify flapping: %d nodes, %d users, %d flaps, %d messages in %v; delivered %d (dups %d), pushes %d (while online %d), lost %d; held %d, returned %d; added delay p50 %v p99 %v max %v (grace %v)",
		len(nodes), users, flaps.Load(), messages, publishing.Round(time.Millisecond), len(got), dups, len(pushes), pushedWhileOnline, lost,
		held, returned, pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), pct(1).Round(time.Millisecond), notifyGrace)
	// The store is the nodes' view of who is online: with Redis a
	// session's open reaches it a write after the CONNACK, and on a loaded
	// machine a device can be connected (and subscribed, on another node)
	// while the store still says offline when a grace ends. The memory
	// store has no such gap: zero there; with Redis at most 0.1 %.
	allowed := 0
	if len(nodes) > 1 {
		allowed = messages / 1000
	}
	if pushedWhileOnline > allowed {
		t.Errorf("%d pushes while the user was online (at most %d)", pushedWhileOnline, allowed)
	}
	// A message waits at most the grace (its deadline is a grace after it
	// was taken, wherever it waits), then the device's return and one
	// delivery. The delay counts from before the publisher's PUBLISH, so it
	// also holds the return's reconnect and resubscribe, which a loaded
	// machine stretches: the 99th percentile within twice the grace (the
	// slack is the configuration's, not this machine's speed).
	if p := pct(0.99); p > 2*notifyGrace {
		t.Errorf("99th percentile delay %v, over twice the grace %v", p, notifyGrace)
	}
}
