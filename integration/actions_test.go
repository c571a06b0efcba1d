package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	mqtt3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// Actions tests (issue 20): the operator's actions through the binary's
// admin API, behind its token, with real MQTT 5 and 3.1.1 clients; a kick
// across two nodes sharing one Redis; the command line run as a process.
// They start the binary themselves (NOT_EMBEDDED); the single-node ones
// use the store INTEGRATION_STORE names.

const actToken = "act-s3cret"

// actStart starts the binary as node id with the admin token, on Redis at
// addr ("" : the store INTEGRATION_STORE names, a Redis of the test's own
// for redis).
func actStart(t *testing.T, id, addr string) *mnProc {
	t.Helper()
	bin := mnBinary(t)
	if addr == "" && os.Getenv("INTEGRATION_STORE") == "redis" {
		addr = redistest.Start(t).Addr()
	}
	args := []string{"--mqtt-addr", "127.0.0.1:0", "--ws-addr", "off", "--admin-addr", "127.0.0.1:0",
		"--node-id", id, "--log-format", "json"}
	env := []string{"PRESENCED_ADMIN_TOKEN=" + actToken}
	if addr != "" {
		args = append(args, "--redis-addr", addr)
		env = append(env, "PRESENCED_REDIS_NODE_TTL="+mnNodeTTL.String(), "PRESENCED_REDIS_SWEEP_INTERVAL="+mnSweep.String())
	}
	p := binStart(t, bin, binEnv(env...), args...)
	started := p.waitLine(t, "presenced started")
	n := &mnProc{id: id, p: p}
	n.mqtt, _ = started["mqtt"].(string)
	n.admin, _ = started["admin"].(string)
	if n.mqtt == "" || n.admin == "" {
		t.Fatalf("node %s: started line %v", id, started)
	}
	return n
}

// actDo sends a request to an admin address with the token (unless token
// is ""), and header pairs; it returns the code and the body.
func actDo(t *testing.T, admin, token, method, path, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := mnHTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// actSessions reads a user's sessions with the token.
func actSessions(t *testing.T, admin, user string) mnSessions {
	t.Helper()
	code, body := actDo(t, admin, actToken, "GET", "/api/v1/users/"+user+"/sessions", "")
	var s mnSessions
	if code != 200 || json.Unmarshal([]byte(body), &s) != nil {
		t.Fatalf("sessions of %s: %d %s", user, code, body)
	}
	return s
}

// actWaitEnded waits until admin shows user's session id ended as reason.
func actWaitEnded(t *testing.T, admin, user, id string, reason presence.EndReason) {
	t.Helper()
	testkit.Wait(t, waitTimeout, user+"/"+id+" ended as "+string(reason), func() error {
		s := actSessions(t, admin, user)
		e, ok := mnEnded(s, id)
		for _, l := range s.Live {
			if l.ID == id {
				ok = false
			}
		}
		return testkit.Why(ok && e.EndReason == reason, fmt.Sprintf("live %+v, ended %+v", s.Live, s.Ended))
	})
}

// actDisconnected waits for the server's DISCONNECT to an MQTT 5 client,
// checks its reason code, and returns when it came.
func actDisconnected(t *testing.T, c *client5, code byte) time.Time {
	t.Helper()
	select {
	case d := <-c.gone:
		if d.ReasonCode != code {
			t.Errorf("DISCONNECT reason 0x%02X, want 0x%02X", d.ReasonCode, code)
		}
		return d.at
	case <-time.After(waitTimeout):
		t.Fatalf("no DISCONNECT within %v", waitTimeout)
	}
	return time.Time{}
}

// actMetric returns the value of a metric line ("name{labels}") on /metrics.
func actMetric(t *testing.T, admin, series string) string {
	t.Helper()
	_, body := actDo(t, admin, actToken, "GET", "/metrics", "")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// v3DialLost connects an MQTT 3.1.1 client and returns a channel closed
// when it loses its connection.
func v3DialLost(t *testing.T, addr, clientID, user string) (mqtt3.Client, chan struct{}) {
	t.Helper()
	lost := make(chan struct{})
	opts := mqtt3.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(clientID).SetUsername(user).
		SetProtocolVersion(4).SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).
		SetKeepAlive(30 * time.Second).SetConnectTimeout(waitTimeout).
		SetConnectionLostHandler(func(mqtt3.Client, error) { close(lost) })
	c := mqtt3.NewClient(opts)
	v3Wait(t, "connect "+clientID, c.Connect())
	t.Cleanup(func() {
		if c.IsConnected() {
			c.Disconnect(0)
		}
	})
	return c, lost
}

// A kick ends a session as kicked: an MQTT 5 client gets DISCONNECT 0x98
// (or the code asked for), a 3.1.1 client is closed; every session of a
// user at once; refused without the token and cross-site; logged once
// with who asked, and counted.
func TestActionsKick(t *testing.T) {
	n := actStart(t, "A", "")
	phone := dial5(t, n.mqtt, "alice-phone", "alice")
	tablet := dial5(t, n.mqtt, "alice-tablet", "alice")
	_, oldLost := v3DialLost(t, n.mqtt, "alice-old", "alice")
	testkit.Wait(t, waitTimeout, "alice's three sessions", func() error {
		s := actSessions(t, n.admin, "alice")
		return testkit.Why(len(s.Live) == 3, fmt.Sprintf("%+v", s.Live))
	})

	// Refused: without the token, with a wrong one, cross-site.
	for _, c := range []struct {
		name, token string
		header      []string
		code        int
	}{
		{"no token", "", nil, 401},
		{"wrong token", "nope", nil, 401},
		{"cross-site (Origin)", actToken, []string{"Origin", "https://evil.example"}, 403},
		{"cross-site (Sec-Fetch-Site)", actToken, []string{"Sec-Fetch-Site", "cross-site"}, 403},
	} {
		if code, body := actDo(t, n.admin, c.token, "POST", "/api/v1/users/alice/kick", "", c.header...); code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.code)
		}
	}
	if len(actSessions(t, n.admin, "alice").Live) != 3 {
		t.Fatal("a refused kick ended a session")
	}

	// One session, the default code.
	code, body := actDo(t, n.admin, actToken, "POST", "/api/v1/users/alice/sessions/alice-phone/kick", "", "X-Presenced-Operator", "ops-jo")
	if code != 202 || strings.TrimSpace(body) != `{"kicked":1}` {
		t.Fatalf("kick alice-phone: %d %s", code, body)
	}
	actDisconnected(t, phone, 0x98)
	actWaitEnded(t, n.admin, "alice", "alice-phone", presence.EndKicked)
	line := n.p.waitLine(t, "admin action")
	if line["action"] != "kick" || line["by"] != "ops-jo" || line["user"] != "alice" || line["client"] != "alice-phone" || line["remote"] == nil {
		t.Errorf("log line: %v", line)
	}

	// Every session of the user; the MQTT 5 one with the code asked for.
	code, body = actDo(t, n.admin, actToken, "POST", "/api/v1/users/alice/kick", `{"reason_code":135}`)
	if code != 202 || strings.TrimSpace(body) != `{"kicked":2}` {
		t.Fatalf("kick alice: %d %s", code, body)
	}
	actDisconnected(t, tablet, 0x87)
	select {
	case <-oldLost:
	case <-time.After(waitTimeout):
		t.Fatal("the MQTT 3.1.1 client is still connected")
	}
	actWaitEnded(t, n.admin, "alice", "alice-tablet", presence.EndKicked)
	actWaitEnded(t, n.admin, "alice", "alice-old", presence.EndKicked)
	if line := n.p.waitLine(t, "admin action"); line["action"] != "kick_user" || line["by"] != "admin-token" {
		t.Errorf("log line: %v", line)
	}

	// Nothing left to kick; a session never seen.
	for _, path := range []string{"/api/v1/users/alice/kick", "/api/v1/users/alice/sessions/alice-phone/kick", "/api/v1/users/nobody/kick"} {
		if code, body := actDo(t, n.admin, actToken, "POST", path, ""); code != 404 {
			t.Errorf("%s: %d %s, want 404", path, code, body)
		}
	}
	// The tracker counts an end once the store has taken it, after the
	// admin API shows it ended: the count comes a moment later.
	testkit.Wait(t, waitTimeout, "the kicked ends counted", func() error {
		got := actMetric(t, n.admin, `presenced_session_ends_total{reason="kicked"}`)
		v, err := strconv.ParseFloat(got, 64)
		return testkit.Why(err == nil && v >= 3, fmt.Sprintf("%q, want 3", got))
	})
	for series, want := range map[string]string{
		`presenced_admin_actions_total{action="kick"}`:      "1",
		`presenced_admin_actions_total{action="kick_user"}`: "1",
		`presenced_session_ends_total{reason="kicked"}`:     "3",
		// The 404s; the 401s and 403s are the token's and Site's.
		`presenced_admin_actions_refused_total{action="kick"}`:      "1",
		`presenced_admin_actions_refused_total{action="kick_user"}`: "2",
	} {
		if got := actMetric(t, n.admin, series); got != want {
			t.Errorf("%s = %q, want %s", series, got, want)
		}
	}
}

// An account status set and cleared through the API reaches a real
// subscriber of the user's presence; forget refuses a live user (409),
// then forgets the offline one: its record and retained presence go.
func TestActionsAccountAndForget(t *testing.T) {
	n := actStart(t, "A", "")
	obs := newObserver(t, n.mqtt, "presence/users/bob")
	bob := dial5(t, n.mqtt, "bob-phone", "bob")
	obs.waitStatus("bob", presence.Online)

	code, body := actDo(t, n.admin, actToken, "PUT", "/api/v1/users/bob/account", `{"status":"dnd","text":"focus"}`)
	var a presence.Aggregate
	if code != 200 || json.Unmarshal([]byte(body), &a) != nil || a.Status != presence.DND || a.Text != "focus" {
		t.Fatalf("PUT account: %d %s", code, body)
	}
	obs.waitFor("bob", "dnd (focus)", func(p presence.Aggregate) bool { return p.Status == presence.DND && p.Text == "focus" })
	if s := actSessions(t, n.admin, "bob"); s.Live[0].Status != presence.Online {
		t.Errorf("the session's own status changed: %+v", s.Live)
	}
	for _, bad := range []string{`{"status":"offline"}`, `{"status":"idle"}`, `{}`, `{"text":"a` + "\u202e" + `b"}`} {
		if code, body := actDo(t, n.admin, actToken, "PUT", "/api/v1/users/bob/account", bad); code != 400 {
			t.Errorf("PUT account %s: %d %s, want 400", bad, code, body)
		}
	}
	if code, body := actDo(t, n.admin, actToken, "PUT", "/api/v1/users/nobody/account", `{"status":"away"}`); code != 404 {
		t.Errorf("PUT account of a user never seen: %d %s", code, body)
	}
	code, body = actDo(t, n.admin, actToken, "DELETE", "/api/v1/users/bob/account", "")
	if code != 200 || json.Unmarshal([]byte(body), &a) != nil || a.Status != presence.Online || a.Text != "" {
		t.Fatalf("DELETE account: %d %s", code, body)
	}
	obs.waitFor("bob", "online, no text", func(p presence.Aggregate) bool { return p.Status == presence.Online && p.Text == "" })

	if code, body := actDo(t, n.admin, actToken, "DELETE", "/api/v1/users/bob", ""); code != 409 {
		t.Fatalf("forget bob online: %d %s, want 409", code, body)
	}
	bob.disconnect()
	obs.waitStatus("bob", presence.Offline)
	if code, body := actDo(t, n.admin, "", "DELETE", "/api/v1/users/bob", ""); code != 401 {
		t.Fatalf("forget without the token: %d %s", code, body)
	}
	if code, body := actDo(t, n.admin, actToken, "DELETE", "/api/v1/users/bob", "", "Origin", "https://evil.example"); code != 403 {
		t.Fatalf("forget cross-site: %d %s", code, body)
	}
	if code, body := actDo(t, n.admin, actToken, "DELETE", "/api/v1/users/bob", ""); code != 204 {
		t.Fatalf("forget bob: %d %s", code, body)
	}
	testkit.Wait(t, waitTimeout, "bob forgotten", func() error {
		code, body := actDo(t, n.admin, actToken, "GET", "/api/v1/users/bob", "")
		return testkit.Why(code == 404, fmt.Sprintf("%d %s", code, body))
	})
	if code, _ := actDo(t, n.admin, actToken, "GET", "/api/v1/users/bob/sessions", ""); code != 404 {
		t.Errorf("bob's sessions after the forget: %d", code)
	}
	// The retained message is gone: a new subscriber gets none. Dave's,
	// subscribed to after bob's, fences it: mochi writes the retained
	// messages of one SUBSCRIBE before it reads the next.
	dial5(t, n.mqtt, "dave-phone", "dave")
	late := newObserver(t, n.mqtt, "presence/users/bob")
	late.subscribe("presence/users/dave")
	late.waitStatus("dave", presence.Online)
	if p, ok := late.last("bob"); ok {
		t.Errorf("a new subscriber got bob's presence after the forget: %+v", p)
	}
	if code, _ := actDo(t, n.admin, actToken, "DELETE", "/api/v1/users/bob", ""); code != 404 {
		t.Errorf("forget bob again: %d, want 404", code)
	}
	// bob comes back: a new record, at a version above the old ones.
	before, _ := obs.last("bob")
	dial5(t, n.mqtt, "bob-phone", "bob")
	p := obs.waitStatus("bob", presence.Online)
	if p.Version <= before.Version {
		t.Errorf("bob back at version %d, not above %d", p.Version, before.Version)
	}
	obs.check()
	for series, want := range map[string]string{
		`presenced_admin_actions_total{action="account_set"}`:   "1",
		`presenced_admin_actions_total{action="account_clear"}`: "1",
		`presenced_admin_actions_total{action="forget"}`:        "1",
	} {
		if got := actMetric(t, n.admin, series); got != want {
			t.Errorf("%s = %q, want %s", series, got, want)
		}
	}
}

// Two nodes on one Redis: a kick asked of B ends a session on A (A does
// it, and logs who asked); a command naming an older epoch never ends the
// newer session with the same client id; a kick of the user ends its
// sessions on both nodes; a forget on A drops B's retained copy.
func TestActionsMultiNodeKick(t *testing.T) {
	srv := redistest.Start(t)
	a := actStart(t, "A", srv.Addr())
	b := actStart(t, "B", srv.Addr())
	obsB := newObserver(t, b.mqtt, "presence/users/alice")
	onA := dial5(t, a.mqtt, "alice-a", "alice")
	onB := dial5(t, b.mqtt, "alice-b", "alice")
	testkit.Wait(t, waitTimeout, "B shows both sessions", func() error {
		return testkit.Why(mnShows(obsB, "alice", presence.Online, "alice-a", "alice-b"))
	})
	old := actSessions(t, b.admin, "alice")

	asked := time.Now()
	code, body := actDo(t, b.admin, actToken, "POST", "/api/v1/users/alice/sessions/alice-a/kick", "", "X-Presenced-Operator", "ops-jo")
	if code != 202 || strings.TrimSpace(body) != `{"kicked":1}` {
		t.Fatalf("kick alice-a through B: %d %s", code, body)
	}
	t.Logf("a kick asked of B reached the client on A %v after the request", actDisconnected(t, onA, 0x98).Sub(asked).Round(time.Microsecond))
	actWaitEnded(t, b.admin, "alice", "alice-a", presence.EndKicked)
	if line := a.p.waitLine(t, "kick asked by another node"); line["kicked"] != true || line["by"] != "ops-jo" {
		t.Errorf("A's log line: %v", line)
	}
	if s := actSessions(t, b.admin, "alice"); len(s.Live) != 1 || s.Live[0].ID != "alice-b" {
		t.Errorf("live after the kick: %+v", s.Live)
	}

	// alice-a comes back on A: a newer epoch. A command naming the old
	// epoch leaves it alone.
	again := dial5(t, a.mqtt, "alice-a", "alice")
	testkit.Wait(t, waitTimeout, "alice-a back", func() error {
		return testkit.Why(mnShows(obsB, "alice", presence.Online, "alice-a", "alice-b"))
	})
	var epoch uint64
	for _, s := range old.Live {
		if s.ID == "alice-a" {
			epoch = s.Epoch
		}
	}
	stale, _ := json.Marshal(map[string]any{"op": "kick", "node": "A", "user": "alice", "id": "alice-a", "epoch": epoch, "code": 0x98, "by": "stale"})
	if err := srv.Client(t).Publish(context.Background(), "presenced:cmd:A", stale).Err(); err != nil {
		t.Fatal(err)
	}
	if line := a.p.waitLine(t, "kick asked by another node"); line["kicked"] != false || line["by"] != "stale" {
		t.Errorf("A's log line of the stale kick: %v", line)
	}
	if s := actSessions(t, a.admin, "alice"); len(s.Live) != 2 {
		t.Fatalf("a stale kick ended a session: live %+v", s.Live)
	}

	// Every session of alice, asked of A: its own and B's.
	code, body = actDo(t, a.admin, actToken, "POST", "/api/v1/users/alice/kick", "")
	if code != 202 || strings.TrimSpace(body) != `{"kicked":2}` {
		t.Fatalf("kick alice through A: %d %s", code, body)
	}
	actDisconnected(t, again, 0x98)
	actDisconnected(t, onB, 0x98)
	actWaitEnded(t, a.admin, "alice", "alice-b", presence.EndKicked)
	obsB.waitStatus("alice", presence.Offline)

	// Forget on A: B, which shows alice to its subscriber, drops it.
	if code, body := actDo(t, a.admin, actToken, "DELETE", "/api/v1/users/alice", ""); code != 204 {
		t.Fatalf("forget alice on A: %d %s", code, body)
	}
	testkit.Wait(t, waitTimeout, "B forgot alice", func() error {
		code, body := actDo(t, b.admin, actToken, "GET", "/api/v1/users/alice", "")
		return testkit.Why(code == 404, fmt.Sprintf("%d %s", code, body))
	})
	obsB.check()
}

// The command line, run as a process against the binary: account, user,
// kick, forget; who when the node serves GET /api/v1/users.
func TestActionsCLI(t *testing.T) {
	n := actStart(t, "A", "")
	bin := mnBinary(t)
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = binEnv("PRESENCED_ADMIN_URL=http://"+n.admin, "PRESENCED_ADMIN_TOKEN="+actToken, "USER=cli-tester")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("presenced %v: %v", args, err)
		}
		return code, stdout.String(), stderr.String()
	}
	carol := dial5(t, n.mqtt, "carol-phone", "carol")
	testkit.Wait(t, waitTimeout, "carol online", func() error {
		code, body := actDo(t, n.admin, actToken, "GET", "/api/v1/users/carol", "")
		return testkit.Why(code == 200, body)
	})
	expect := func(args []string, code int, out string) string {
		t.Helper()
		c, stdout, stderr := cli(args...)
		if c != code || !strings.Contains(stdout+stderr, out) {
			t.Errorf("presenced %s: exit %d, want %d; want %q in\nstdout: %s\nstderr: %s", strings.Join(args, " "), c, code, out, stdout, stderr)
		}
		return stdout
	}
	expect([]string{"account", "carol", "away", "back soon"}, 0, "carol is away (back soon)")
	expect([]string{"user", "carol"}, 0, "account")
	expect([]string{"account", "carol", "--clear"}, 0, "carol is online")
	expect([]string{"kick", "carol/carol-phone"}, 0, "kicked 1 session of carol")
	actDisconnected(t, carol, 0x98)
	actWaitEnded(t, n.admin, "carol", "carol-phone", presence.EndKicked)
	out := expect([]string{"user", "carol", "--json"}, 0, `"end_reason":"kicked"`)
	if !json.Valid([]byte(out)) {
		t.Errorf("user --json: not JSON: %s", out)
	}
	expect([]string{"kick", "carol"}, 1, "404")
	expect([]string{"forget", "carol"}, 0, "forgot carol")
	expect([]string{"forget", "carol"}, 1, "404")
	expect([]string{"forget", "carol", "--token", "wrong"}, 1, "401")
	expect([]string{"forget"}, 2, "usage: presenced forget USER")
	if line := n.p.waitLine(t, "admin action"); line["by"] != "cli-tester" {
		t.Errorf("who asked, as logged: %v", line["by"])
	}

	// who reads GET /api/v1/users (the list): carol's gone and dave is
	// listed.
	dial5(t, n.mqtt, "dave-phone", "dave")
	testkit.Wait(t, waitTimeout, "who lists dave", func() error {
		c, stdout, stderr := cli("who", "--prefix", "da")
		return testkit.Why(c == 0 && strings.Contains(stdout, "dave") && !strings.Contains(stdout, "carol"), stdout+stderr)
	})
	expect([]string{"who", "--json", "--status", "online"}, 0, `"user":"dave"`)
}
