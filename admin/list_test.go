package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/store"
)

// listSource is fakeSource with a memory store's List over 250 users, one
// in five online (on node "a").
func listSource(t *testing.T) (Source, *store.Memory) {
	t.Helper()
	m := store.NewMemory(presence.NewRules(nil), time.Now, func(store.Event) {})
	ctx := context.Background()
	for i := range 250 {
		u := fmt.Sprintf("u%03d", i)
		s, err := m.Open(ctx, presence.OpenArgs{User: u, ID: "c", Node: "a", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if i%5 != 0 {
			if err := m.End(ctx, presence.EndArgs{User: u, ID: "c", Epoch: s.Epoch, Reason: presence.EndClean}); err != nil {
				t.Fatal(err)
			}
		}
	}
	src, _ := fakeSource(false)
	src.List = m.List
	return src, m
}

type listBody struct {
	Users    []json.RawMessage   `json:"users"`
	Next     string              `json:"next"`
	Counts   presence.ListCounts `json:"counts"`
	Examined int                 `json:"examined"`
}

// GET /api/v1/users walks every user, a page at a time, each as its
// retained JSON, with the counts of the page's window.
func TestListPages(t *testing.T) {
	src, m := listSource(t)
	h := Handler(src)
	var seen []string
	cursor := ""
	for pages := 1; ; pages++ {
		w := do(h, "GET", "/api/v1/users?limit=100&cursor="+url.QueryEscape(cursor), "")
		var b listBody
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &b) != nil {
			t.Fatalf("page %d: %d %s", pages, w.Code, w.Body.String())
		}
		if len(b.Users) > 100 || b.Counts.Total != len(b.Users) {
			t.Fatalf("page %d: %d users, counts %+v", pages, len(b.Users), b.Counts)
		}
		for _, raw := range b.Users {
			p, err := presence.ParseAggregate(raw)
			if err != nil {
				t.Fatal(err)
			}
			want, _, _ := m.Get(context.Background(), p.User)
			if string(raw) != string(want.AppendJSON(nil)) {
				t.Fatalf("%s: %s, want the retained JSON %s", p.User, raw, want.AppendJSON(nil))
			}
			seen = append(seen, p.User)
		}
		if b.Next == "" {
			if pages != 3 {
				t.Fatalf("%d pages", pages)
			}
			break
		}
		cursor = b.Next
	}
	if len(seen) != 250 {
		t.Fatalf("%d users", len(seen))
	}
	w := do(h, "GET", "/api/v1/users?status=online&status=away,dnd&limit=1000", "")
	var b listBody
	if json.Unmarshal(w.Body.Bytes(), &b) != nil || len(b.Users) != 50 || b.Counts.Online != 50 || b.Counts.Offline != 200 || b.Next != "" {
		t.Fatalf("online: %d %+v", len(b.Users), b.Counts)
	}
	if w := do(h, "GET", "/api/v1/users/u000", ""); w.Code != 404 {
		t.Fatalf("one user still served by Retained: %d", w.Code) // fakeSource knows only alice
	}
}

// Hostile or wrong queries are refused, each with its code.
func TestListRefuses(t *testing.T) {
	src, _ := listSource(t)
	h := Handler(src)
	cases := []struct{ query, want string }{
		{"limit=1001", "400"}, {"limit=0", "400"}, {"limit=-5", "400"}, {"limit=abc", "400"}, {"limit=99999999999999999999", "400"},
		{"status=bogus", "400"}, {"status=online,", "400"}, {"status=" + strings.Repeat("online&status=", 20) + "online", "400"},
		{"cursor=garbage", "400"}, {"cursor=m%21%21", "400"}, {"cursor=" + strings.Repeat("m", 5000), "400"},
		{"group=%24SYS", "400"}, {"prefix=%FF", "400"}, {"node=" + strings.Repeat("n", 300), "400"},
		{"group=nosuch", "404"},
		{"prefix=*", "200"}, {"node=zz", "200"},
	}
	for _, c := range cases {
		if w := do(h, "GET", "/api/v1/users?"+c.query, ""); fmt.Sprint(w.Code) != c.want {
			t.Errorf("%.60s: %d, want %s: %s", c.query, w.Code, c.want, w.Body.String())
		}
	}
	src.List = func(context.Context, presence.ListQuery) (presence.ListPage, error) {
		return presence.ListPage{}, errors.New("redis unavailable")
	}
	if w := do(Handler(src), "GET", "/api/v1/users", ""); w.Code != 503 {
		t.Fatalf("store down: %d", w.Code)
	}
	src.List = nil
	if w := do(Handler(src), "GET", "/api/v1/users", ""); w.Code != 404 {
		t.Fatalf("without List: %d", w.Code)
	}
}
