package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

// fakeGroups is a Source over one 2,500-member group, recording writes.
func fakeSource(writable bool) (Source, *[]string) {
	var members []roster.Member
	for i := range 2500 {
		members = append(members, roster.Member{User: fmt.Sprintf("u%04d", i), Status: presence.Offline})
	}
	var writes []string
	src := Source{
		Ready: func() bool { return true },
		Retained: func(u string) ([]byte, bool) {
			if u == "alice" {
				return []byte(`{"user":"alice","status":"online"}`), true
			}
			return nil, false
		},
		User:  func(context.Context, string) (presence.User, bool, error) { return presence.User{}, false, nil },
		Stats: func() any { return nil },
		Group: func(g string) (roster.Snapshot, bool) {
			if g != "big" {
				return roster.Snapshot{}, false
			}
			return roster.Snapshot{Group: "big", Version: 7, Members: members, Counts: roster.Counts{Total: len(members)}}, true
		},
		Groups: func() map[string]int { return map[string]int{"big": len(members)} },
	}
	if writable {
		rec := func(op string) func(context.Context, string, []string) error {
			return func(_ context.Context, g string, u []string) error {
				writes = append(writes, op+" "+g+" "+strings.Join(u, ","))
				return nil
			}
		}
		src.SetGroup, src.AddMembers, src.RemoveMembers = rec("set"), rec("add"), rec("rem")
		src.DeleteGroup = func(_ context.Context, g string) error { writes = append(writes, "del "+g); return nil }
	}
	return src, &writes
}

func do(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
	return w
}

// A group's snapshot comes a page at a time: every member exactly once,
// in order, with the version and counts on every page.
func TestGroupPages(t *testing.T) {
	src, _ := fakeSource(false)
	h := Handler(src)
	var seen []string
	after := ""
	for pages := 0; ; pages++ {
		w := do(h, "GET", "/api/v1/groups/big?limit=1000&after="+after, "")
		var page struct {
			roster.Snapshot
			Next string `json:"next"`
		}
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &page) != nil || page.Version != 7 || page.Total != 2500 {
			t.Fatalf("page %d: %d %s", pages, w.Code, w.Body.String()[:min(200, w.Body.Len())])
		}
		for _, m := range page.Members {
			seen = append(seen, m.User)
		}
		if page.Next == "" {
			if pages != 2 {
				t.Fatalf("%d pages, want 3", pages+1)
			}
			break
		}
		after = page.Next
	}
	if len(seen) != 2500 || !slices.IsSorted(seen) || len(slices.Compact(slices.Clone(seen))) != 2500 {
		t.Fatalf("%d members seen", len(seen))
	}
	for _, c := range []struct{ path, want string }{
		{"/api/v1/groups/nope", "404"}, {"/api/v1/groups/big?limit=0", "400"}, {"/api/v1/groups/big?limit=1001", "400"},
	} {
		if w := do(h, "GET", c.path, ""); fmt.Sprint(w.Code) != c.want {
			t.Errorf("%s: %d, want %s", c.path, w.Code, c.want)
		}
	}
}

// Writes answer 403 without a token behind the API, and check names and
// bodies with one.
func TestGroupWrites(t *testing.T) {
	src, _ := fakeSource(false)
	if w := do(Handler(src), "PUT", "/api/v1/groups/team", `{"members":["alice"]}`); w.Code != http.StatusForbidden {
		t.Fatalf("write without a token: %d", w.Code)
	}
	src, writes := fakeSource(true)
	h := Handler(src)
	cases := []struct {
		method, path, body string
		code               int
	}{
		{"PUT", "/api/v1/groups/team", `{"members":["alice","bob"]}`, 204},
		{"POST", "/api/v1/groups/team/members", `{"users":["cat"]}`, 204},
		{"DELETE", "/api/v1/groups/team/members/bob", "", 204},
		{"DELETE", "/api/v1/groups/team", "", 204},
		{"PUT", "/api/v1/groups/$SYS", `{"members":[]}`, 400},
		{"PUT", "/api/v1/groups/team", `{"members":["\u202eecila"]}`, 400},
		{"PUT", "/api/v1/groups/team", `{"members":`, 400},
		{"PUT", "/api/v1/groups/team", `{"members":["` + strings.Repeat("a", maxBody) + `"]}`, 400},
	}
	for _, c := range cases {
		if w := do(h, c.method, c.path, c.body); w.Code != c.code {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, w.Code, w.Body.String(), c.code)
		}
	}
	want := []string{"set team alice,bob", "add team cat", "rem team bob", "del team"}
	if !slices.Equal(*writes, want) {
		t.Fatalf("writes %q, want %q", *writes, want)
	}
}

// The batch query answers every user named, null for the unknown, and
// refuses more than MaxBatch.
func TestBatch(t *testing.T) {
	src, _ := fakeSource(false)
	h := Handler(src)
	users := []string{"alice"}
	for i := range MaxBatch - 1 {
		users = append(users, fmt.Sprintf("x%d", i))
	}
	b, _ := json.Marshal(map[string]any{"users": users})
	w := do(h, "POST", "/api/v1/users/batch", string(b))
	var out struct {
		Users map[string]json.RawMessage `json:"users"`
	}
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &out) != nil || len(out.Users) != MaxBatch ||
		string(out.Users["x0"]) != "null" || !strings.Contains(string(out.Users["alice"]), `"online"`) {
		t.Fatalf("batch: %d, %d users", w.Code, len(out.Users))
	}
	b, _ = json.Marshal(map[string]any{"users": append(users, "y")})
	if w := do(h, "POST", "/api/v1/users/batch", string(b)); w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("batch of %d: %d", MaxBatch+1, w.Code)
	}
	if w := do(h, "POST", "/api/v1/users/batch", `{"users":["a"],"extra":1}`); w.Code != 400 {
		t.Fatalf("unknown field: %d", w.Code)
	}
}

// GET /api/v1/slo answers the canary's SLO, and 404 saying why when the
// canary is off.
func TestSLO(t *testing.T) {
	src, _ := fakeSource(false)
	if w := do(Handler(src), "GET", "/api/v1/slo", ""); w.Code != 404 || !strings.Contains(w.Body.String(), "canary.enabled") {
		t.Fatalf("off: %d %s", w.Code, w.Body.String())
	}
	src.SLO = func() any { return map[string]any{"node": "a", "objective": 0.99} }
	w := do(Handler(src), "GET", "/api/v1/slo", "")
	var got map[string]any
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" || json.Unmarshal(w.Body.Bytes(), &got) != nil || got["objective"] != 0.99 {
		t.Fatalf("on: %d %s", w.Code, w.Body.String())
	}
}

// GET /api/v1/battles lists the battles going on, and an empty list (not
// null) when there are none or no source.
func TestBattles(t *testing.T) {
	src, _ := fakeSource(false)
	if w := do(Handler(src), "GET", "/api/v1/battles", ""); w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"battles":[]}` {
		t.Fatalf("no source: %d %s", w.Code, w.Body.String())
	}
	until := time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC)
	src.Battles = func() []hooks.Battle {
		return []hooks.Battle{{ClientID: "phone", User: "alice", InWindow: 5, Takeovers: 6, Refused: 3, Backoff: "5s", Until: until}}
	}
	w := do(Handler(src), "GET", "/api/v1/battles", "")
	var got struct{ Battles []map[string]any }
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &got) != nil || len(got.Battles) != 1 {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
	b := got.Battles[0]
	if b["client_id"] != "phone" || b["user"] != "alice" || b["takeovers_in_window"] != 5.0 || b["refused"] != 3.0 ||
		b["refused_until"] != "2026-01-01T00:00:05Z" {
		t.Fatalf("battle %v", b)
	}
}
