package integration

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	presenced "github.com/presenced/presenced"
	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
)

const hookSecret = "whsec_integration_9c2e"

// hookEvent is an event as a receiver decodes it (its own type: the
// receiver knows the documented body, not package webhook).
type hookEvent struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	User    string          `json:"user"`
	Version uint64          `json:"version"`
	At      time.Time       `json:"at"`
	Data    json.RawMessage `json:"data"`
}

// hookReceiver is a real HTTP server that verifies each request's
// signature as docs/webhooks.md tells a receiver to, and records the
// events of the requests it accepted.
type hookReceiver struct {
	t   *testing.T
	srv *http.Server
	url string

	mu       sync.Mutex
	events   []hookEvent
	attempts map[string]int
	bad      []string
}

func newHookReceiver(t *testing.T) *hookReceiver {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &hookReceiver{t: t, url: "http://" + l.Addr().String() + "/hooks/presence", attempts: map[string]int{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = r.srv.Serve(l) }()
	t.Cleanup(func() { _ = r.srv.Close(); <-done })
	return r
}

// verifyHook is the check of docs/webhooks.md: t and v1 from the header,
// HMAC-SHA256 of "<t>.<body>", compared in constant time, t within 5
// minutes.
func verifyHook(secret, header string, body []byte) error {
	var ts, sig string
	for _, kv := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("no timestamp in %q", header)
	}
	if d := time.Since(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("timestamp off by %v", d)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac.Sum(nil)) {
		return errors.New("signature mismatch")
	}
	return nil
}

func (r *hookReceiver) handle(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts[req.Header.Get("Presenced-Delivery")+"#"+req.Header.Get("Presenced-Attempt")]++
	if err := verifyHook(hookSecret, req.Header.Get("Presenced-Signature"), body); err != nil {
		r.bad = append(r.bad, err.Error())
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var b struct{ Events []hookEvent }
	if err := json.Unmarshal(body, &b); err != nil || req.Header.Get("Content-Type") != "application/json" {
		r.bad = append(r.bad, fmt.Sprintf("body %q: %v", body, err))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.events = append(r.events, b.Events...)
	w.WriteHeader(http.StatusOK)
}

// unique is the events accepted, each id once, first accepted first.
func (r *hookReceiver) unique() []hookEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	var out []hookEvent
	for _, e := range r.events {
		if !seen[e.ID] {
			seen[e.ID] = true
			out = append(out, e)
		}
	}
	return out
}

// waitFor waits for an event of user of type typ and returns it.
func (r *hookReceiver) waitFor(user, typ string) hookEvent {
	r.t.Helper()
	var got hookEvent
	testkit.Wait(r.t, waitTimeout, user+" "+typ, func() error {
		for _, e := range r.unique() {
			if e.User == user && e.Type == typ {
				got = e
				return nil
			}
		}
		return fmt.Errorf("received %s", r.summary())
	})
	return got
}

func (r *hookReceiver) summary() string {
	var s []string
	for _, e := range r.unique() {
		s = append(s, e.Type+":"+e.ID)
	}
	return strings.Join(s, " ")
}

// check: every signature verified, no delivery attempt received twice,
// each user's events in version order.
func (r *hookReceiver) check() {
	r.t.Helper()
	r.mu.Lock()
	for k, n := range r.attempts {
		if n > 1 {
			r.t.Errorf("delivery attempt %s received %d times", k, n)
		}
	}
	if len(r.bad) > 0 {
		r.t.Errorf("bad requests: %v", r.bad)
	}
	r.mu.Unlock()
	last := map[string]uint64{} // per user and family (user.*, session.*): a session event shares its version with the user's
	for _, e := range r.unique() {
		k := e.User + " " + strings.SplitN(e.Type, ".", 2)[0]
		if e.Version < last[k] || (e.Version == last[k] && strings.HasPrefix(e.Type, "user.")) {
			r.t.Errorf("%s: %s (version %d) after version %d", e.User, e.Type, e.Version, last[k])
		}
		last[k] = e.Version
	}
}

// withWebhook points the node's webhooks at url, batching little.
func withWebhook(url string) func(*configs.Config) {
	return func(c *configs.Config) {
		c.Webhooks.Endpoints = []configs.WebhookEndpoint{{Name: "test", URL: url, Secret: hookSecret,
			MaxWait: configs.Duration(20 * time.Millisecond), Timeout: configs.Duration(2 * time.Second),
			RetryBackoff: configs.Duration(20 * time.Millisecond), RetryMaxBackoff: configs.Duration(200 * time.Millisecond)}}
	}
}

// Real MQTT clients go online, change status and go offline on a real
// broker; a real HTTP receiver gets user.online, user.status and
// user.offline, signed, with the data the documentation gives, in order.
func TestWebhook(t *testing.T) {
	r := newHookReceiver(t)
	n := startNode(t, withWebhook(r.url))

	alice := dial5(t, n.MQTTAddr(), "alice-phone", "alice")
	on := r.waitFor("alice", "user.online")
	var d struct {
		Status   string     `json:"status"`
		Sessions int        `json:"sessions"`
		Since    time.Time  `json:"since"`
		LastSeen *time.Time `json:"last_seen"`
	}
	if err := json.Unmarshal(on.Data, &d); err != nil || d.Status != "online" || d.Sessions != 1 || d.Since.IsZero() || d.LastSeen != nil {
		t.Fatalf("user.online data %s (%v)", on.Data, err)
	}
	if on.ID != "alice@"+strconv.FormatUint(on.Version, 10) {
		t.Fatalf("id %q, want user@version", on.ID)
	}
	bob := dial5(t, n.MQTTAddr(), "bob-laptop", "bob")
	r.waitFor("bob", "user.online")
	if rc := alice.publish(t, "presence/set", `{"status":"away","text":"lunch"}`, 1, false); rc != 0 {
		t.Fatalf("presence/set: %#x", rc)
	}
	st := r.waitFor("alice", "user.status")
	if !strings.Contains(string(st.Data), `"status":"away"`) || !strings.Contains(string(st.Data), `"previous_status":"online"`) {
		t.Fatalf("user.status data %s", st.Data)
	}
	alice.disconnect()
	off := r.waitFor("alice", "user.offline")
	if !strings.Contains(string(off.Data), `"last_seen"`) || !strings.Contains(string(off.Data), `"sessions":0`) {
		t.Fatalf("user.offline data %s", off.Data)
	}
	bob.drop()
	r.waitFor("bob", "user.offline")
	r.check()
	testkit.Wait(t, waitTimeout, "the figures", func() error { // counted once the receiver's answer is read
		s := n.Stats()
		return testkit.Why(s.Of("webhook_sent_total", "test") == 5 && s.Get("webhook_lease_held") == 1 && s.Of("webhook_dropped_total", "test") == 0,
			fmt.Sprintf("sent %d, lease %d, dropped %d", s.Of("webhook_sent_total", "test"), s.Get("webhook_lease_held"), s.Of("webhook_dropped_total", "test")))
	})
	if got := len(r.unique()); got != 5 {
		t.Fatalf("%d events, want 5: %s", got, r.summary())
	}
}

// startHookBroker starts a broker of cfg and returns it (stopped at
// cleanup, and stoppable before: Stop is idempotent).
func startHookBroker(t *testing.T, cfg configs.Config) *presenced.Broker {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", cfg.NodeID)
	}
	b, err := presenced.NewBroker(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Stop(ctx)
	})
	return b
}

// Two nodes on one Redis, both configured with the endpoint: only the
// lease holder sends, though both see every user; when it stops, the other
// takes the lease over and sends what it kept, so that no transition is
// lost, those of the stopped node's own users included.
func TestWebhookTwoNodes(t *testing.T) {
	if os.Getenv("INTEGRATION_STORE") != "redis" {
		t.Skip("two nodes need INTEGRATION_STORE=redis")
	}
	r := newHookReceiver(t)
	cfgA := nodeConfig(t, pacingOff, withWebhook(r.url))
	a := startHookBroker(t, cfgA)
	testkit.Wait(t, waitTimeout, "node-a holds the lease", func() error {
		return testkit.Why(a.Presence().Stats().Get("webhook_lease_held") == 1, "not yet")
	})
	cfgB := cfgA
	cfgB.NodeID = "node-b"
	b := startHookBroker(t, cfgB)
	testkit.Wait(t, waitTimeout, "node-b up, not holding", func() error {
		return testkit.Why(b.Ready() && b.Presence().Stats().Get("webhook_lease_held") == 0, "not yet")
	})

	alice := dial5(t, a.MQTTAddr(), "alice-phone", "alice")
	carol := dial5(t, a.MQTTAddr(), "carol-phone", "carol")
	bob := dial5(t, b.MQTTAddr(), "bob-laptop", "bob")
	for _, u := range []string{"alice", "bob", "carol"} {
		r.waitFor(u, "user.online")
	}
	if rc := alice.publish(t, "presence/set", `{"status":"busy"}`, 1, false); rc != 0 {
		t.Fatalf("presence/set: %#x", rc)
	}
	r.waitFor("alice", "user.status")
	testkit.Wait(t, waitTimeout, "only node-a sent", func() error { // counted once the receiver's answer is read
		sa, sb := a.Presence().Stats(), b.Presence().Stats()
		return testkit.Why(sb.Of("webhook_sent_total", "test") == 0 && sa.Of("webhook_sent_total", "test") == 4,
			fmt.Sprintf("sent: node-a %d, node-b %d", sa.Of("webhook_sent_total", "test"), sb.Of("webhook_sent_total", "test")))
	})
	testkit.Wait(t, waitTimeout, "node-b keeps what it saw", func() error {
		return testkit.Why(b.Presence().Stats().Get("webhook_replay_buffered") >= 4, "not yet")
	})

	// node-a stops: its users end as shutdown; node-b takes the lease over
	// and sends what node-a may not have sent.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	_, _ = alice, carol
	testkit.Wait(t, waitTimeout, "node-b holds the lease", func() error {
		return testkit.Why(b.Presence().Stats().Get("webhook_lease_held") == 1, "not yet")
	})
	r.waitFor("alice", "user.offline")
	r.waitFor("carol", "user.offline")
	bob.disconnect()
	r.waitFor("bob", "user.offline")
	r.check()
	testkit.Wait(t, waitTimeout, "node-b took over once and sent", func() error { // counted once the receiver's answer is read
		sb := b.Presence().Stats()
		return testkit.Why(sb.Get("webhook_lease_takeovers_total") == 1 && sb.Of("webhook_sent_total", "test") >= 3,
			fmt.Sprintf("node-b: takeovers %d, sent %d", sb.Get("webhook_lease_takeovers_total"), sb.Of("webhook_sent_total", "test")))
	})
	if got := len(r.unique()); got != 7 {
		t.Fatalf("%d distinct events, want 7 (3 online, 1 status, 3 offline): %s", got, r.summary())
	}
	t.Logf("events: %s; replayed by node-b: %d", r.summary(), b.Presence().Stats().Get("webhook_replayed_total"))
}

// An endpoint that asks for session events gets each session's open and
// end as observers were shown them, in order, the end with its reason.
func TestWebhookSessionEvents(t *testing.T) {
	r := newHookReceiver(t)
	n := startNode(t, func(c *configs.Config) {
		withWebhook(r.url)(c)
		c.Webhooks.Endpoints[0].Events = []string{"user.online", "session.opened", "session.ended"}
	})
	alice := dial5(t, n.MQTTAddr(), "alice-phone", "alice")
	opened := r.waitFor("alice", "session.opened")
	alice.disconnect()
	ended := r.waitFor("alice", "session.ended")
	var o, e struct {
		ClientID string `json:"client_id"`
		Epoch    uint64 `json:"epoch"`
		Reason   string `json:"reason"`
	}
	if err := json.Unmarshal(opened.Data, &o); err != nil || o.ClientID != "alice-phone" || o.Epoch == 0 {
		t.Fatalf("session.opened data %s (%v)", opened.Data, err)
	}
	if err := json.Unmarshal(ended.Data, &e); err != nil || e.ClientID != "alice-phone" || e.Epoch != o.Epoch || e.Reason != "clean" {
		t.Fatalf("session.ended data %s (%v), want the epoch %d ended clean", ended.Data, err, o.Epoch)
	}
	if ended.Version <= opened.Version {
		t.Fatalf("ended at version %d, opened at %d", ended.Version, opened.Version)
	}
	for _, ev := range r.unique() {
		if ev.Type == "user.offline" {
			t.Fatalf("user.offline sent to an endpoint that did not ask for it: %s", r.summary())
		}
	}
	r.check()
}
