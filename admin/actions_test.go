package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/presenced/presenced/presence"
)

// fakeActions records the actions asked, and answers like the plugin:
// alice has sessions phone and laptop, carol is offline, anyone else was
// never seen.
type fakeActions struct{ calls []string }

func (f *fakeActions) Kick(_ context.Context, user, id string, code byte, by string) (int, error) {
	f.calls = append(f.calls, fmt.Sprintf("kick %s/%s 0x%02X by %s", user, id, code, by))
	switch {
	case user != "alice":
		return 0, ErrNotFound
	case id == "":
		return 2, nil
	case id == "phone" || id == "laptop":
		return 1, nil
	}
	return 0, ErrNotFound
}

func (f *fakeActions) SetAccount(_ context.Context, user string, upd presence.AccountUpdate, by string) ([]byte, error) {
	f.calls = append(f.calls, fmt.Sprintf("account %s %v %v by %s", user, deref(upd.Status), deref(upd.Text), by))
	if user == "nobody" {
		return nil, ErrNotFound
	}
	return []byte(`{"user":"` + user + `","status":"away"}`), nil
}

func (f *fakeActions) Forget(_ context.Context, user, by string) error {
	f.calls = append(f.calls, "forget "+user+" by "+by)
	switch user {
	case "alice":
		return fmt.Errorf("forget: %w", ErrLive)
	case "carol":
		return nil
	}
	return ErrNotFound
}

func actionSource(act Actions, log *bytes.Buffer) Source {
	src, _ := fakeSource(false)
	src.Actions = act
	src.Counts = new(ActionCounts)
	src.Log = slog.New(slog.NewJSONHandler(log, nil))
	return src
}

func send(h http.Handler, method, path, body string, header ...string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	h.ServeHTTP(w, r)
	return w
}

// Every action answers as the contract says, and reaches Actions with the
// user, the client id, the reason code and who asked.
func TestActions(t *testing.T) {
	f := &fakeActions{}
	var log bytes.Buffer
	src := actionSource(f, &log)
	h := Handler(src)
	cases := []struct {
		name, method, path, body string
		header                   []string
		code                     int
		answer, call             string
	}{
		{"kick one, default code", "POST", "/api/v1/users/alice/sessions/phone/kick", "", nil, 202, `{"kicked":1}`, "kick alice/phone 0x98 by admin-token"},
		{"kick one, code given, operator", "POST", "/api/v1/users/alice/sessions/laptop/kick", `{"reason_code":135}`, []string{OperatorHeader, "jo"}, 202, `{"kicked":1}`, "kick alice/laptop 0x87 by jo"},
		{"kick a client id with a slash", "POST", "/api/v1/users/alice/sessions/a%2Fb/kick", "", nil, 404, "", "kick alice/a/b 0x98 by admin-token"},
		{"kick a user", "POST", "/api/v1/users/alice/kick", "", nil, 202, `{"kicked":2}`, "kick alice/ 0x98 by admin-token"},
		{"kick nobody", "POST", "/api/v1/users/nobody/kick", "", nil, 404, "", "kick nobody/ 0x98 by admin-token"},
		{"account set", "PUT", "/api/v1/users/alice/account", `{"status":"away","text":"lunch"}`, nil, 200, `{"user":"alice","status":"away"}`, "account alice away lunch by admin-token"},
		{"account text only", "PUT", "/api/v1/users/alice/account", `{"text":""}`, nil, 200, "", "account alice <nil>  by admin-token"},
		{"account online clears", "PUT", "/api/v1/users/alice/account", `{"status":"online"}`, nil, 200, "", "account alice online <nil> by admin-token"},
		{"account of nobody", "PUT", "/api/v1/users/nobody/account", `{"status":"dnd"}`, nil, 404, "", "account nobody dnd <nil> by admin-token"},
		{"account cleared", "DELETE", "/api/v1/users/alice/account", "", nil, 200, "", "account alice online  by admin-token"},
		{"forget offline", "DELETE", "/api/v1/users/carol", "", nil, 204, "", "forget carol by admin-token"},
		{"forget while live", "DELETE", "/api/v1/users/alice", "", nil, 409, "", "forget alice by admin-token"},
		{"forget never seen", "DELETE", "/api/v1/users/nobody", "", nil, 404, "", "forget nobody by admin-token"},
	}
	for _, c := range cases {
		f.calls = nil
		w := send(h, c.method, c.path, c.body, c.header...)
		if w.Code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, w.Code, w.Body, c.code)
		}
		if c.answer != "" && strings.TrimSpace(w.Body.String()) != c.answer {
			t.Errorf("%s: answer %s, want %s", c.name, w.Body, c.answer)
		}
		if len(f.calls) != 1 || f.calls[0] != c.call {
			t.Errorf("%s: calls %q, want %q", c.name, f.calls, c.call)
		}
	}
	// Each request logged once, with who asked; the 2xx counted.
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%d log lines for %d actions:\n%s", len(lines), len(cases), log.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &line); err != nil || line["action"] != "kick" || line["by"] != "jo" || line["remote"] == "" || line["user"] != "alice" || line["client"] != "laptop" || line["level"] != "INFO" {
		t.Errorf("log line of the second kick: %s", lines[1])
	}
	counts := map[string]float64{}
	src.Counts.Read(func(v float64, l ...string) { counts[l[0]] = v })
	want := map[string]float64{"kick": 2, "kick_user": 1, "account_set": 3, "account_clear": 1, "forget": 1, "drain": 0}
	for a, n := range want {
		if counts[a] != n {
			t.Errorf("count of %s: %v, want %v (all: %v)", a, counts[a], n, counts)
		}
	}
	refused := map[string]float64{}
	src.Counts.ReadRefused(func(v float64, l ...string) { refused[l[0]] = v })
	wantRefused := map[string]float64{"kick": 1, "kick_user": 1, "account_set": 1, "account_clear": 0, "forget": 2, "drain": 0}
	for a, n := range wantRefused {
		if refused[a] != n {
			t.Errorf("refusals of %s: %v, want %v (all: %v)", a, refused[a], n, refused)
		}
	}
}

// Hostile or wrong requests are refused before any action: without
// Actions (no token) 403, a bad user, client id, reason code or body 400.
func TestActionsRefused(t *testing.T) {
	f := &fakeActions{}
	var log bytes.Buffer
	h := Handler(actionSource(f, &log))
	none := Handler(actionSource(nil, &log))
	for _, c := range []struct {
		name, method, path, body string
		h                        http.Handler
		code                     int
	}{
		{"no token: kick", "POST", "/api/v1/users/alice/sessions/phone/kick", "", none, 403},
		{"no token: kick user", "POST", "/api/v1/users/alice/kick", "", none, 403},
		{"no token: account", "PUT", "/api/v1/users/alice/account", `{"status":"away"}`, none, 403},
		{"no token: account clear", "DELETE", "/api/v1/users/alice/account", "", none, 403},
		{"no token: forget", "DELETE", "/api/v1/users/carol", "", none, 403},
		{"wildcard user", "POST", "/api/v1/users/%2B/kick", "", h, 400},
		{"user with a slash", "DELETE", "/api/v1/users/a%2Fb", "", h, 400},
		{"user with a NUL", "PUT", "/api/v1/users/a%00b/account", `{"status":"away"}`, h, 400},
		{"over-long user", "DELETE", "/api/v1/users/" + strings.Repeat("u", 5000), "", h, 400},
		{"client id with a control", "POST", "/api/v1/users/alice/sessions/a%01b/kick", "", h, 400},
		{"reason code not a kick's", "POST", "/api/v1/users/alice/kick", `{"reason_code":0}`, h, 400},
		{"reason code 0x8E (takeover)", "POST", "/api/v1/users/alice/kick", `{"reason_code":142}`, h, 400},
		{"reason code over a byte", "POST", "/api/v1/users/alice/kick", `{"reason_code":408}`, h, 400},
		{"reason code negative", "POST", "/api/v1/users/alice/kick", `{"reason_code":-104}`, h, 400},
		{"kick body not JSON", "POST", "/api/v1/users/alice/kick", `{`, h, 400},
		{"kick body unknown field", "POST", "/api/v1/users/alice/kick", `{"code":152}`, h, 400},
		{"account status offline", "PUT", "/api/v1/users/alice/account", `{"status":"offline"}`, h, 400},
		{"account status idle", "PUT", "/api/v1/users/alice/account", `{"status":"idle"}`, h, 400},
		{"account status unknown", "PUT", "/api/v1/users/alice/account", `{"status":"gone"}`, h, 400},
		{"account empty body", "PUT", "/api/v1/users/alice/account", ``, h, 400},
		{"account nothing to set", "PUT", "/api/v1/users/alice/account", `{}`, h, 400},
		{"account text with a bidi control", "PUT", "/api/v1/users/alice/account", `{"text":"a\u202eb"}`, h, 400},
		{"account text too long", "PUT", "/api/v1/users/alice/account", `{"text":"` + strings.Repeat("x", 100_000) + `"}`, h, 400},
		{"account body too large", "PUT", "/api/v1/users/alice/account", `{"text":"` + strings.Repeat("x", 2<<20) + `"}`, h, 400},
		{"account body a list", "PUT", "/api/v1/users/alice/account", `["away"]`, h, 400},
		{"GET on a kick", "GET", "/api/v1/users/alice/kick", "", h, 405},
	} {
		w := send(c.h, c.method, c.path, c.body)
		if w.Code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, w.Code, w.Body.String()[:min(200, w.Body.Len())], c.code)
		}
	}
	if len(f.calls) != 0 {
		t.Errorf("actions reached: %q", f.calls)
	}
	// Each refusal (but the method's, which no action saw) is logged
	// once and counted.
	if n := strings.Count(log.String(), `"msg":"admin action"`); n != 25 {
		t.Errorf("%d refusals logged, want 25:\n%s", n, log.String())
	}
}

// With Site (as the binary serves the API), a web page's cross-site
// action is refused, and a program's passes.
func TestActionsCrossSite(t *testing.T) {
	f := &fakeActions{}
	var log bytes.Buffer
	site := &Site{}
	h := site.Wrap(Handler(actionSource(f, &log)))
	for _, c := range []struct {
		name   string
		header []string
		code   int
	}{
		{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"Origin of another site", []string{"Origin", "https://evil.example"}, 403},
		{"same-origin", []string{"Sec-Fetch-Site", "same-origin"}, 202},
		{"a program (no header)", nil, 202},
	} {
		w := send(h, "POST", "/api/v1/users/alice/kick", "", c.header...)
		if w.Code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, w.Code, w.Body, c.code)
		}
	}
	if len(f.calls) != 2 || site.CrossSite.Load() != 2 {
		t.Errorf("calls %q, cross-site refusals %d: want 2 and 2", f.calls, site.CrossSite.Load())
	}
	// Behind the token, an action without it never runs.
	tok, _ := LoadToken("s3cret", "")
	h = tok.Wrap(Handler(actionSource(f, &log)))
	if w := send(h, "DELETE", "/api/v1/users/carol", ""); w.Code != 401 {
		t.Errorf("no token: %d, want 401", w.Code)
	}
	if w := send(h, "DELETE", "/api/v1/users/carol", "", "Authorization", "Bearer s3cret"); w.Code != 204 {
		t.Errorf("with the token: %d, want 204", w.Code)
	}
}

// An operator's name is logged without control characters and cut short.
func TestOperatorName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "admin-token"},
		{"  ", "admin-token"},
		{"jo\nlevel=ERROR", "jolevel=ERROR"},
		{"a\u202eb", "ab"},
		{strings.Repeat("é", 100), strings.Repeat("é", 64)},
	} {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set(OperatorHeader, c.in)
		if got := operator(r); got != c.want {
			t.Errorf("operator(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The drain is logged and counted as an action.
func TestDrainLogged(t *testing.T) {
	var log bytes.Buffer
	src := actionSource(nil, &log)
	src.Drain = func() bool { return true }
	w := send(Handler(src), "POST", "/api/v1/drain", "", OperatorHeader, "ops-bot")
	if w.Code != 202 || !strings.Contains(log.String(), `"action":"drain"`) || !strings.Contains(log.String(), `"by":"ops-bot"`) {
		t.Errorf("drain: %d, log %s", w.Code, log.String())
	}
	n := 0.0
	src.Counts.Read(func(v float64, l ...string) {
		if l[0] == "drain" {
			n = v
		}
	})
	if n != 1 {
		t.Errorf("drains counted: %v", n)
	}
}
