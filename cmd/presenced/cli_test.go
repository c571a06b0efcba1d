package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeAdmin answers the admin API's contract (issue 20) for the operator's
// commands, and records each request as "METHOD escaped-path?query body
// | token | operator".
type fakeAdmin struct {
	mu   sync.Mutex
	reqs []string
}

const cliToken = "s3cret"

func (f *fakeAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, fmt.Sprintf("%s %s %s | %s | %s", r.Method, r.URL.RequestURI(), body, r.Header.Get("Authorization"), r.Header.Get("X-Presenced-Operator")))
	f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+cliToken {
		w.WriteHeader(401)
		_, _ = w.Write([]byte(`{"error":"a bearer token is required (admin.token)"}`))
		return
	}
	user := func(name, status string, nodes ...string) string {
		var ss []string
		for i, n := range nodes {
			ss = append(ss, fmt.Sprintf(`{"id":"c%d","epoch":%d,"node":%q,"device":"","status":%q,"connected_at":"2026-12-02T01:00:00Z"}`, i, i+1, n, status))
		}
		return fmt.Sprintf(`{"user":%q,"status":%q,"text":"","version":7,"since":"2026-12-02T01:00:00Z","last_seen":null,"sessions":[%s]}`, name, status, strings.Join(ss, ","))
	}
	counts := `"counts":{"total":3,"online":2,"away":0,"dnd":0,"offline":1}`
	q := r.URL.Query()
	switch {
	case r.Method == "GET" && r.URL.Path == "/api/v1/users" && q.Get("cursor") == "":
		fmt.Fprintf(w, `{"users":[%s,%s],"next":"p2",%s}`, user("alice", "online", "A", "B"), user("bob", "online", "A"), counts)
	case r.Method == "GET" && r.URL.Path == "/api/v1/users" && q.Get("cursor") == "p2":
		fmt.Fprintf(w, `{"users":[%s],"next":"",%s}`, user("carol", "offline"), counts)
	case r.Method == "GET" && r.URL.Path == "/api/v1/users/alice":
		_, _ = w.Write([]byte(user("alice", "online", "A")))
	case r.Method == "GET" && r.URL.Path == "/api/v1/users/alice/sessions":
		_, _ = w.Write([]byte(`{"user":"alice","account":{},"live":[{"user":"alice","id":"c0","epoch":1,"node":"A","status":"online","state":"active","connected_at":"2026-12-02T01:00:00Z"}],"ended":[{"user":"alice","id":"old","epoch":1,"node":"B","status":"online","state":"disconnected","end_reason":"kicked","ended_at":"2026-12-02T00:59:00Z"}],"held":null}`))
	case r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/kick") && strings.HasPrefix(r.URL.Path, "/api/v1/users/alice/"):
		w.WriteHeader(202)
		n := 2
		if strings.Contains(r.URL.Path, "/sessions/") {
			n = 1
		}
		fmt.Fprintf(w, `{"kicked":%d}`, n)
	case r.Method == "PUT" && r.URL.Path == "/api/v1/users/alice/account":
		_, _ = w.Write([]byte(`{"user":"alice","status":"dnd","text":"focus","version":8,"since":"2026-12-02T01:00:00Z","last_seen":null,"sessions":[]}`))
	case r.Method == "DELETE" && r.URL.Path == "/api/v1/users/alice/account":
		_, _ = w.Write([]byte(user("alice", "online")))
	case r.Method == "DELETE" && r.URL.Path == "/api/v1/users/carol":
		w.WriteHeader(204)
	case r.Method == "DELETE" && r.URL.Path == "/api/v1/users/alice":
		w.WriteHeader(409)
		_, _ = w.Write([]byte(`{"error":"the user has live sessions"}`))
	default:
		w.WriteHeader(404)
		_, _ = w.Write([]byte(`{"error":"user never seen"}`))
	}
}

func (f *fakeAdmin) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.reqs
	f.reqs = nil
	return out
}

// Each command sends the request the contract names, with the token and
// who asks, and prints a table (or the JSON).
func TestCLI(t *testing.T) {
	f := &fakeAdmin{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(cliToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PRESENCED_ADMIN_URL=" + srv.URL, "PRESENCED_ADMIN_TOKEN=" + cliToken, "USER=jo"}
	cases := []struct {
		name  string
		args  []string
		env   []string
		code  int
		reqs  []string // prefixes of the requests, in order
		out   []string // in stdout
		noOut []string
	}{
		{"who: every page, a table", []string{"who"}, env, 0,
			[]string{"GET /api/v1/users?limit=1000  | Bearer s3cret | jo", "GET /api/v1/users?cursor=p2&limit=1000"},
			[]string{"USER", "alice", "online", "A,B", "carol", "offline", "3 users (counts: total 3, online 2, away 0, dnd 0, offline 1)"}, nil},
		{"who: filters, JSON", []string{"who", "--status", "online,away", "--node", "A", "--prefix", "al", "--group", "team", "--json", "--max", "2"}, env, 0,
			[]string{"GET /api/v1/users?group=team&limit=2&node=A&prefix=al&status=online&status=away "},
			[]string{`"users":[{"user":"alice"`, `"counts":{"total":3`}, []string{"carol"}},
		{"user: a table of its sessions", []string{"user", "alice"}, env, 0,
			[]string{"GET /api/v1/users/alice ", "GET /api/v1/users/alice/sessions "},
			[]string{"status", "online", "live sessions: 1", "CLIENT ID", "c0", "ended sessions: 1", "kicked"}, nil},
		{"user: JSON", []string{"user", "--json", "alice"}, env, 0, nil, []string{`{"presence":{"user":"alice"`, `"sessions":{"user":"alice"`}, nil},
		{"user never seen", []string{"user", "nobody"}, env, 1, []string{"GET /api/v1/users/nobody "}, nil, nil},
		{"kick a user", []string{"kick", "alice"}, env, 0, []string{`POST /api/v1/users/alice/kick {"reason_code":152} | Bearer s3cret | jo`}, []string{"kicked 2 sessions of alice"}, nil},
		{"kick a session with a slash in its id", []string{"kick", "alice/tab/1", "--reason-code", "135"}, env, 0,
			[]string{`POST /api/v1/users/alice/sessions/tab%2F1/kick {"reason_code":135}`}, []string{"kicked 1 session of alice"}, nil},
		{"kick: the token from a file, the operator given", []string{"kick", "--operator", "ops", "alice"}, []string{"PRESENCED_ADMIN_URL=" + srv.URL, "PRESENCED_ADMIN_TOKEN_FILE=" + tokFile}, 0,
			[]string{`POST /api/v1/users/alice/kick {"reason_code":152} | Bearer s3cret | ops`}, nil, nil},
		{"kick without a token", []string{"kick", "alice"}, []string{"PRESENCED_ADMIN_URL=" + srv.URL}, 1, []string{"POST /api/v1/users/alice/kick"}, nil, nil},
		{"kick: flags win over the environment", []string{"kick", "alice", "--admin", strings.TrimPrefix(srv.URL, "http://"), "--token", "wrong"}, env, 1, []string{"POST /api/v1/users/alice/kick {\"reason_code\":152} | Bearer wrong"}, nil, nil},
		{"account set", []string{"account", "alice", "dnd", "focus"}, env, 0, []string{`PUT /api/v1/users/alice/account {"status":"dnd","text":"focus"}`}, []string{"alice is dnd (focus), version 8"}, nil},
		{"account cleared", []string{"account", "alice", "--clear"}, env, 0, []string{"DELETE /api/v1/users/alice/account "}, []string{"alice is online"}, nil},
		{"forget", []string{"forget", "carol"}, env, 0, []string{"DELETE /api/v1/users/carol "}, []string{"forgot carol"}, nil},
		{"forget a live user", []string{"forget", "alice"}, env, 1, []string{"DELETE /api/v1/users/alice "}, nil, nil},
		{"usage: kick without a user", []string{"kick"}, env, 2, nil, nil, nil},
		{"usage: kick alice/", []string{"kick", "alice/"}, env, 2, nil, nil, nil},
		{"usage: account with --clear and a status", []string{"account", "alice", "away", "--clear"}, env, 2, nil, nil, nil},
		{"usage: who with an argument", []string{"who", "alice"}, env, 2, nil, nil, nil},
		{"usage: a bad flag", []string{"forget", "--force", "carol"}, env, 2, nil, nil, nil},
		{"usage: a bad admin URL", []string{"forget", "carol", "--admin", "ftp://x"}, env, 2, nil, nil, nil},
		{"help", []string{"kick", "-h"}, env, 0, nil, []string{"usage: presenced kick USER[/CLIENT_ID]", "--admin URL"}, nil},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(c.args, c.env, &stdout, &stderr)
		reqs := f.requests()
		if code != c.code {
			t.Errorf("%s: exit %d, want %d; stdout %s; stderr %s", c.name, code, c.code, stdout.String(), stderr.String())
		}
		if len(reqs) != len(c.reqs) && c.reqs != nil {
			t.Errorf("%s: requests %q, want %d", c.name, reqs, len(c.reqs))
		}
		for i, want := range c.reqs {
			if i >= len(reqs) || !strings.HasPrefix(reqs[i], want) {
				t.Errorf("%s: request %d: %q, want it to start with %q", c.name, i, reqs, want)
			}
		}
		for _, want := range c.out {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("%s: stdout lacks %q:\n%s", c.name, want, stdout.String())
			}
		}
		for _, not := range c.noOut {
			if strings.Contains(stdout.String(), not) {
				t.Errorf("%s: stdout has %q:\n%s", c.name, not, stdout.String())
			}
		}
		if c.code == 1 && !strings.Contains(stderr.String(), "presenced "+c.args[0]+": ") {
			t.Errorf("%s: stderr %q does not say what failed", c.name, stderr.String())
		}
		if c.code == 2 && !strings.Contains(stderr.String(), "usage: presenced "+c.args[0]) {
			t.Errorf("%s: stderr %q has no usage", c.name, stderr.String())
		}
	}
}

// An API that does not answer is an error (exit 1) that names it.
func TestCLINoAPI(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"who", "--admin", addr, "--timeout", "2s"}, nil, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), addr) {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	// A broken answer is an error too, not a panic.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"users":7}`)) }))
	defer bad.Close()
	stderr.Reset()
	if code := run([]string{"who", "--admin", bad.URL}, nil, &stdout, &stderr); code != 1 {
		t.Errorf("a broken answer: exit %d, stderr %q", code, stderr.String())
	}
}
