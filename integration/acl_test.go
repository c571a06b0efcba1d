package integration

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	presenced "github.com/presenced/presenced"
	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
)

// startLevelNode is startAuthNode with the node's log at level (the
// binary's default is info).
func startLevelNode(t *testing.T, level slog.Level, edit func(*configs.Config)) *authNode {
	t.Helper()
	cfg := authConfig(t, edit)
	buf := &binBuffer{}
	var w io.Writer = buf
	if testing.Verbose() {
		w = io.MultiWriter(buf, testLogWriter{t})
	}
	n, err := presenced.NewBroker(cfg, slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
	if err != nil {
		t.Fatalf("presenced.NewBroker: %v", err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return &authNode{Broker: n, log: buf}
}

// Ten refused MQTT 5 QoS 1 publishes of 1 MB each (under presence/, which
// is read-only) are answered PUBACK 0x87 and make one info line of a few
// hundred bytes, without a byte of the payload (mochi logged each at error
// with the whole packet: 13 MB). At debug level mochi's own line for each
// carries a summary of the packet, not the packet.
func TestRefusedPublishLogBounded(t *testing.T) {
	for _, c := range []struct {
		level slog.Level
		max   int
	}{{slog.LevelInfo, 1000}, {slog.LevelDebug, 20_000}} {
		t.Run(c.level.String(), func(t *testing.T) {
			n := startLevelNode(t, c.level, nil)
			cl := dial5(t, n.MQTTAddr(), "flood-1", "mallory")
			payload := strings.Repeat("Z", 1_000_000)
			before := len(n.log.String())
			for i := range 10 {
				if rc := cl.publish(t, "presence/users/alice", payload, 1, true); rc != rcNotAuthorized {
					t.Fatalf("publish %d: PUBACK %#x, want %#x", i, rc, rcNotAuthorized)
				}
			}
			logged := n.log.String()[before:]
			// As text, or as JSON's base64 of a []byte.
			if strings.Contains(logged, "ZZZZZZZZ") || strings.Contains(logged, "WlpaWlpaWlpa") {
				t.Errorf("the log holds the payload")
			}
			if len(logged) > c.max {
				t.Errorf("10 refused publishes logged %d bytes, want at most %d", len(logged), c.max)
			}
			lines := n.logLines("publish refused")
			if len(lines) != 1 {
				t.Fatalf("%d \"publish refused\" lines, want 1 (once per client per minute)", len(lines))
			}
			if l := lines[0]; l["client"] != "flood-1" || l["topic"] != "presence/users/alice" || l["level"] != "INFO" {
				t.Errorf("refusal line %v", l)
			}
			if c.level == slog.LevelInfo && bytes.Count([]byte(logged), []byte("\n")) > 2 {
				t.Errorf("log lines:\n%s", logged)
			}
		})
	}
}

// adminReq sends method path to the admin port with Host host ("": the
// address dialled) and the headers given as name, value pairs.
func adminReq(t *testing.T, addr, method, path, host, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The tokenless admin port (the default): a web page's cross-site POST
// (drain) and a request naming a foreign Host (DNS rebinding) get 403 and
// are counted; pprof is not served without a token; a same-origin or
// curl-style request works. Before: the POST drained the node, the foreign
// Host read stats and pprof.
func TestAdminSiteChecks(t *testing.T) {
	n := startAuthNode(t, nil)
	addr := n.AdminAddr()
	_, port, _ := net.SplitHostPort(addr)
	batch := `{"users":["alice"]}`
	for _, c := range []struct {
		name, method, path, host, body string
		headers                        []string
		want                           int
	}{
		{"cross-site drain (Origin)", "POST", "/api/v1/drain", "", "", []string{"Origin", "https://evil.example"}, http.StatusForbidden},
		{"cross-site drain (Sec-Fetch-Site)", "POST", "/api/v1/drain", "", "", []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"same-site drain", "POST", "/api/v1/drain", "", "", []string{"Sec-Fetch-Site", "same-site", "Origin", "http://other.localhost:" + port}, http.StatusForbidden},
		{"rebinding stats", "GET", "/api/v1/stats", "evil.example:" + port, "", nil, http.StatusForbidden},
		{"rebinding user", "GET", "/api/v1/users/alice", "rebind.evil.example", "", nil, http.StatusForbidden},
		{"rebinding pprof", "GET", "/debug/pprof/cmdline", "evil.example:" + port, "", nil, http.StatusForbidden},
		{"pprof without a token", "GET", "/debug/pprof/cmdline", "", "", nil, http.StatusNotFound},
		{"curl stats", "GET", "/api/v1/stats", "", "", nil, http.StatusOK},
		{"localhost stats", "GET", "/api/v1/stats", "localhost:" + port, "", nil, http.StatusOK},
		{"curl batch", "POST", "/api/v1/users/batch", "", batch, nil, http.StatusOK},
		{"same-origin batch", "POST", "/api/v1/users/batch", "", batch, []string{"Sec-Fetch-Site", "same-origin", "Origin", "http://" + addr}, http.StatusOK},
		{"same-origin batch (Origin only)", "POST", "/api/v1/users/batch", "", batch, []string{"Origin", "http://" + addr}, http.StatusOK},
	} {
		if code, body := adminReq(t, addr, c.method, c.path, c.host, c.body, c.headers...); code != c.want {
			t.Errorf("%s: %s %s: %d %s, want %d", c.name, c.method, c.path, code, body, c.want)
		}
	}
	if n.Draining() {
		t.Fatalf("a cross-site request drained the node")
	}
	s := n.Stats()
	if got := s.Of("admin_site_refused_total", "cross_site"); got != 3 {
		t.Errorf("admin_site_refused_total{cross_site} %d, want 3", got)
	}
	if got := s.Of("admin_site_refused_total", "host"); got != 3 {
		t.Errorf("admin_site_refused_total{host} %d, want 3", got)
	}
}

// With a token the Host check is off unless admin.allowed_hosts is set,
// and pprof is served behind the token.
func TestAdminSiteAllowedHosts(t *testing.T) {
	const token = "admin-Token-7f3c9a"
	n := startAuthNode(t, func(c *configs.Config) {
		c.Admin.Token = token
		c.Admin.AllowedHosts = []string{"Presenced.Example.com"}
	})
	addr := n.AdminAddr()
	bearer := []string{"Authorization", "Bearer " + token}
	for _, c := range []struct {
		host string
		path string
		want int
	}{
		{"presenced.example.com", "/api/v1/stats", http.StatusOK},
		{"presenced.example.com:8080", "/debug/pprof/cmdline", http.StatusOK},
		{"evil.example", "/api/v1/stats", http.StatusForbidden},
		{"", "/api/v1/stats", http.StatusOK},
	} {
		if code, body := adminReq(t, addr, "GET", c.path, c.host, "", bearer...); code != c.want {
			t.Errorf("Host %q %s: %d %s, want %d", c.host, c.path, code, body, c.want)
		}
	}
	if code, _ := adminReq(t, addr, "POST", "/api/v1/drain", "", "", append(bearer, "Origin", "https://evil.example")...); code != http.StatusForbidden {
		t.Errorf("cross-site drain with the token: %d, want 403", code)
	}
}

// aclNode starts a node with passwords for alice, bob and ops (a service
// account), anonymous observers allowed, and edit applied.
func aclNode(t *testing.T, edit func(*configs.Config)) *authNode {
	t.Helper()
	pwfile := filepath.Join(t.TempDir(), "passwd")
	writePasswordFile(t, pwfile, map[string]string{"alice": "alice-Secret-1", "bob": "bob-Secret-2", "ops": "ops-Secret-3"})
	return startAuthNode(t, func(c *configs.Config) {
		c.Auth.PasswordFile = pwfile
		c.Auth.AllowAnonymous = true
		c.Presence.Observers = []string{"ops"}
		if edit != nil {
			edit(c)
		}
	})
}

// receivedBefore returns the topics c received up to the first message on
// mark (waiting for it): what a publisher's earlier messages brought, since
// mochi delivers one publisher's messages to a client in order.
func receivedBefore(t *testing.T, c *client5, mark string) []string {
	t.Helper()
	var got []string
	deadline := time.After(waitTimeout)
	for {
		select {
		case m := <-c.msgs:
			if m.Topic == mark {
				return got
			}
			got = append(got, m.Topic)
		case <-deadline:
			t.Fatalf("no message on %s within %v (got %v)", mark, waitTimeout, got)
		}
	}
}

// Without auth.acl_file: an ordinary user and an anonymous observer may
// not subscribe to a filter whose first level is a wildcard, shared or not
// ($share and $SHARE, which mochi treats alike), and receive nothing of
// bob's topics; an anonymous observer may not publish (nor retain) outside
// presence/; a user still publishes and subscribes to named topics; a
// service account reads +/+.
func TestACLDefaultWildcards(t *testing.T) {
	n := aclNode(t, nil)
	addr := n.MQTTAddr()
	alice := dial5(t, addr, "alice-1", "alice", withPassword("alice-Secret-1"))
	anon := dial5(t, addr, "anon-1", "")
	bob := dial5(t, addr, "bob-1", "bob", withPassword("bob-Secret-2"))
	ops := dial5(t, addr, "ops-1", "ops", withPassword("ops-Secret-3"))

	if rc := bob.publish(t, "bob/secret", "retained", 1, true); rc != 0 {
		t.Fatalf("bob's retained publish: PUBACK %#x", rc)
	}
	filters := []string{"$SHARE/g/#", "$share/g/#", "$SHARE/g/+", "$Share/g/+/+", "$share/g/+/secret", "+", "+/+", "+/secret", "#", "+/#"}
	for _, c := range []struct {
		name string
		c    *client5
	}{{"alice", alice}, {"anonymous", anon}} {
		for _, f := range filters {
			if got := subAck(t, c.c, f); got != rcNotAuthorized {
				t.Errorf("%s's %s: SUBACK %#x, want %#x", c.name, f, got, rcNotAuthorized)
			}
		}
		if got := subAck(t, c.c, "mark"); got != rcGrantedQoS1 {
			t.Fatalf("%s's mark: SUBACK %#x", c.name, got)
		}
	}
	if got := subAck(t, ops, "+/+"); got != rcGrantedQoS1 {
		t.Errorf("service account's +/+: SUBACK %#x, want %#x", got, rcGrantedQoS1)
	}
	if rc := bob.publish(t, "bob/secret", "live", 1, false); rc != 0 {
		t.Fatalf("bob's publish: PUBACK %#x", rc)
	}
	if rc := bob.publish(t, "mark", "end", 1, false); rc != 0 {
		t.Fatalf("bob's mark: PUBACK %#x", rc)
	}
	for _, c := range []struct {
		name string
		c    *client5
	}{{"alice", alice}, {"anonymous", anon}} {
		if got := receivedBefore(t, c.c, "mark"); len(got) != 0 {
			t.Errorf("%s received %v", c.name, got)
		}
	}

	if rc := anon.publish(t, "anon/board", "hello", 1, true); rc != rcNotAuthorized {
		t.Errorf("anonymous publish outside presence/: PUBACK %#x, want %#x", rc, rcNotAuthorized)
	}
	if rc := anon.publish(t, "bob/secret", "overwritten", 1, true); rc != rcNotAuthorized {
		t.Errorf("anonymous retained publish on bob/secret: PUBACK %#x, want %#x", rc, rcNotAuthorized)
	}
	if m := n.Server().Topics.Messages("anon/board"); len(m) != 0 {
		t.Errorf("anonymous publish retained: %v", m)
	}
	if m := n.Server().Topics.Messages("bob/secret"); len(m) != 1 || string(m[0].Payload) != "retained" {
		t.Errorf("bob/secret retained: %v", m)
	}
	if rc := alice.publish(t, "alice/x", "mine", 1, false); rc != 0 {
		t.Errorf("alice's publish: PUBACK %#x, want 0", rc)
	}
	if got := subAck(t, alice, "bob/secret"); got != rcGrantedQoS1 {
		t.Errorf("alice's bob/secret (a named topic, allowed without an ACL file): SUBACK %#x", got)
	}
	// "#", "+/#", "$SHARE/g/#" and "$share/g/#" are refused before the
	// topics rule (service accounts only): 6 filters each for alice and
	// the observer.
	s := n.Stats()
	if r, w := s.Of("topic_access_refused_total", "read"), s.Of("topic_access_refused_total", "write"); r != 12 || w != 2 {
		t.Errorf("topic_access_refused_total read %d write %d, want 12 and 2", r, w)
	}
}

// auth.acl_file: patterns with %u and %c, a user's lines, the anonymous
// lines before the first user; refusals are SUBACK and PUBACK 0x87 and
// nothing is delivered; a service account is not bound by it; a reload
// (SIGHUP) applies a new file, and a broken one keeps the old rules.
func TestACLFile(t *testing.T) {
	aclPath := filepath.Join(t.TempDir(), "acl")
	writeAtomic(t, aclPath, []byte(`# anonymous observers
topic read public/#

user alice
topic read reports/#

pattern readwrite users/%u/#
pattern read devices/%c/config
`))
	n := aclNode(t, func(c *configs.Config) { c.Auth.ACLFile = aclPath })
	addr := n.MQTTAddr()
	alice := dial5(t, addr, "alice-1", "alice", withPassword("alice-Secret-1"))
	bob := dial5(t, addr, "bob-1", "bob", withPassword("bob-Secret-2"))
	anon := dial5(t, addr, "anon-1", "")
	ops := dial5(t, addr, "ops-1", "ops", withPassword("ops-Secret-3"))

	for _, c := range []struct {
		who    string
		c      *client5
		filter string
		want   byte
	}{
		{"alice", alice, "users/alice/#", rcGrantedQoS1},
		{"alice", alice, "reports/daily", rcGrantedQoS1},
		{"alice", alice, "devices/alice-1/config", rcGrantedQoS1},
		{"alice", alice, "devices/bob-1/config", rcNotAuthorized},
		{"alice", alice, "users/bob/#", rcNotAuthorized},
		{"alice", alice, "users/+/inbox", rcNotAuthorized},
		{"alice", alice, "$SHARE/g/users/bob/#", rcNotAuthorized},
		{"alice", alice, "$share/g/users/alice/#", rcGrantedQoS1},
		{"alice", alice, "public/news", rcNotAuthorized},
		{"alice", alice, "+", rcNotAuthorized},
		{"anonymous", anon, "public/#", rcGrantedQoS1},
		{"anonymous", anon, "users/bob/#", rcNotAuthorized},
		{"anonymous", anon, "$SHARE/g/#", rcNotAuthorized},
		{"anonymous", anon, "+/+", rcNotAuthorized},
		{"ops", ops, "users/+/#", rcGrantedQoS1},
		{"bob", bob, "users/bob/#", rcGrantedQoS1},
	} {
		if got := subAck(t, c.c, c.filter); got != c.want {
			t.Errorf("%s's %s: SUBACK %#x, want %#x", c.who, c.filter, got, c.want)
		}
	}
	for _, c := range []struct {
		who   string
		c     *client5
		topic string
		want  byte
	}{
		{"bob", bob, "users/bob/inbox", 0},
		{"bob", bob, "users/alice/inbox", rcNotAuthorized},
		{"bob", bob, "reports/daily", rcNotAuthorized},
		{"anonymous", anon, "public/news", rcNotAuthorized},
		{"anonymous", anon, "users/alice/inbox", rcNotAuthorized},
		{"ops", ops, "reports/daily", 0},
	} {
		if rc := c.c.publish(t, c.topic, "x", 1, true); rc != c.want {
			t.Errorf("%s's publish on %s: PUBACK %#x, want %#x", c.who, c.topic, rc, c.want)
		}
	}
	if m := n.Server().Topics.Messages("users/alice/inbox"); len(m) != 0 {
		t.Errorf("a refused publish was retained: %d messages", len(m))
	}
	// alice receives the report and her own topics only; bob's inbox
	// reaches bob (and ops), not alice.
	if got := receivedBefore(t, alice, "reports/daily"); len(got) != 0 {
		t.Errorf("alice received %v before the report", got)
	}

	// A reload: alice may now read public/#; a broken file keeps it.
	writeAtomic(t, aclPath, []byte("user alice\ntopic read public/#\n"))
	if err := n.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := subAck(t, alice, "public/#"); got != rcGrantedQoS1 {
		t.Errorf("alice's public/# after the reload: SUBACK %#x", got)
	}
	if got := subAck(t, alice, "reports/#"); got != rcNotAuthorized {
		t.Errorf("alice's reports/# after the reload: SUBACK %#x, want %#x", got, rcNotAuthorized)
	}
	writeAtomic(t, aclPath, []byte("user alice\ntopic reed public/#\n"))
	if err := n.Reload(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("Reload of a broken file: %v, want an error naming line 2", err)
	}
	if got := subAck(t, alice, "public/x"); got != rcGrantedQoS1 {
		t.Errorf("alice's public/x after a failed reload: SUBACK %#x", got)
	}

	cfg := configs.Defaults()
	cfg.Auth.ACLFile = aclPath
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "auth.acl_file") {
		t.Errorf("auth.acl_file without an authentication method: %v, want refused", err)
	}
}

// With auth.acl_file, a message for alice's persisted session while she is
// offline is judged as hers (not as an anonymous connection's) and waits
// for her.
func TestACLFileOfflineSession(t *testing.T) {
	aclPath := filepath.Join(t.TempDir(), "acl")
	writeAtomic(t, aclPath, []byte("pattern readwrite users/%u/#\n"))
	n := aclNode(t, func(c *configs.Config) { c.Auth.ACLFile = aclPath })
	addr := n.MQTTAddr()
	alice := dial5(t, addr, "alice-1", "alice", withPassword("alice-Secret-1"), withResume(300))
	if got := subAck(t, alice, "users/alice/inbox"); got != rcGrantedQoS1 {
		t.Fatalf("alice's users/alice/inbox: SUBACK %#x", got)
	}
	alice.disconnect()
	testkit.Wait(t, waitTimeout, "alice's connection closed", func() error {
		cl, ok := clientByID(n.Server(), "alice-1")
		return testkit.Why(ok && cl.Closed(), "open")
	})
	ops := dial5(t, addr, "ops-1", "ops", withPassword("ops-Secret-3"))
	if rc := ops.publish(t, "users/alice/inbox", "while away", 1, false); rc != 0 {
		t.Fatalf("ops' publish: PUBACK %#x", rc)
	}
	back := dial5(t, addr, "alice-1", "alice", withPassword("alice-Secret-1"), withResume(300))
	select {
	case m := <-back.msgs:
		if m.Topic != "users/alice/inbox" || string(m.Payload) != "while away" {
			t.Errorf("alice received %s %q", m.Topic, m.Payload)
		}
	case <-time.After(waitTimeout):
		t.Errorf("the message for alice's offline session was not kept")
	}
}
