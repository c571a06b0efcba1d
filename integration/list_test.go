package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// listAnswer is the JSON of GET /api/v1/users.
type listAnswer struct {
	Users  []json.RawMessage   `json:"users"`
	Next   string              `json:"next"`
	Counts presence.ListCounts `json:"counts"`
}

// listAll walks GET /api/v1/users?query on get's admin port, a page of
// limit at a time, and returns every user met by name (failing on a user
// met twice in one walk: these walks run over a table that does not grow).
func listAll(get func(path string) (int, []byte), query string, limit int) (map[string]presence.Aggregate, presence.ListCounts, error) {
	out := map[string]presence.Aggregate{}
	var sum presence.ListCounts
	cursor := ""
	for range 1000 {
		code, body := get(fmt.Sprintf("/api/v1/users?%s&limit=%d&cursor=%s", query, limit, url.QueryEscape(cursor)))
		if code != http.StatusOK {
			return nil, sum, fmt.Errorf("GET /api/v1/users?%s: %d %s", query, code, body)
		}
		var a listAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			return nil, sum, fmt.Errorf("%v: %s", err, body)
		}
		if len(a.Users) > limit {
			return nil, sum, fmt.Errorf("%d users on a page of %d", len(a.Users), limit)
		}
		for _, raw := range a.Users {
			p, err := presence.ParseAggregate(raw)
			if err != nil {
				return nil, sum, fmt.Errorf("%v: %s", err, raw)
			}
			if _, dup := out[p.User]; dup {
				return nil, sum, fmt.Errorf("%s met twice", p.User)
			}
			out[p.User] = p
		}
		sum.Total += a.Counts.Total
		sum.Online += a.Counts.Online
		sum.Away += a.Counts.Away
		sum.Offline += a.Counts.Offline
		if a.Next == "" {
			return out, sum, nil
		}
		cursor = a.Next
	}
	return nil, sum, fmt.Errorf("walk of %q does not end", query)
}

// listWant checks that the walk met exactly the users of want, each with
// its status (and, with node, a session on it).
func listWant(got map[string]presence.Aggregate, want map[string]presence.Status, node string) error {
	var names []string
	for u := range got {
		names = append(names, u)
	}
	slices.Sort(names)
	if len(got) != len(want) {
		return fmt.Errorf("met %v, want %d users", names, len(want))
	}
	for u, st := range want {
		p, ok := got[u]
		if !ok || p.Status != st {
			return fmt.Errorf("%s: %s (met %v), want %s", u, p.Status, ok, st)
		}
		if node != "" && !slices.ContainsFunc(p.Sessions, func(s presence.SessionView) bool { return s.Node == node }) {
			return fmt.Errorf("%s has no session on %s: %+v", u, node, p.Sessions)
		}
	}
	return nil
}

// listOnline waits until the list shows user online: a session that ends
// at once may end before the store ever hears of it (the tracker drops an
// open it has not written yet, as seen with Redis).
func listOnline(t *testing.T, get func(path string) (int, []byte), user string) {
	t.Helper()
	testkit.Wait(t, waitTimeout, user+" listed online", func() error {
		got, _, err := listAll(get, "prefix="+url.QueryEscape(user), 10)
		if err != nil {
			return err
		}
		if p, ok := got[user]; !ok || p.Status != presence.Online {
			return fmt.Errorf("%s: %+v", user, p)
		}
		return nil
	})
}

// Users connected with real MQTT clients show in GET /api/v1/users with
// their status, filtered by status and name prefix, a page at a time.
func TestListShowsConnectedUsers(t *testing.T) {
	n := startNode(t, pacingOff)
	get := func(path string) (int, []byte) { return adminGet(t, n, path) }
	want := map[string]presence.Status{}
	for i := range 12 {
		u := fmt.Sprintf("lister%02d", i)
		c := dial5(t, n.MQTTAddr(), u+"-c", u)
		switch i % 3 {
		case 1:
			if rc := c.publish(t, "presence/set", `{"status":"away"}`, 1, false); rc != 0 {
				t.Fatalf("set away: %#x", rc)
			}
			want[u] = presence.Away
		case 2:
			listOnline(t, func(path string) (int, []byte) { return adminGet(t, n, path) }, u) // else the session may end before the store hears of it
			c.disconnect()
			want[u] = presence.Offline
		default:
			want[u] = presence.Online
		}
	}
	testkit.Wait(t, waitTimeout, "every lister listed with its status", func() error {
		got, _, err := listAll(get, "prefix=lister", 5)
		if err != nil {
			return err
		}
		return listWant(got, want, "")
	})
	got, counts, err := listAll(get, "prefix=lister&status=away&status=offline", 3)
	if err != nil {
		t.Fatal(err)
	}
	awayOrOff := map[string]presence.Status{}
	for u, st := range want {
		if st != presence.Online {
			awayOrOff[u] = st
		}
	}
	if err := listWant(got, awayOrOff, ""); err != nil {
		t.Fatal(err)
	}
	if counts.Total != 12 || counts.Online != 4 || counts.Away != 4 || counts.Offline != 4 {
		t.Fatalf("counts over the walk: %+v", counts)
	}
	for _, q := range []string{"limit=1001", "cursor=nonsense", "status=sleepy"} {
		if code, body := get("/api/v1/users?" + q); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", q, code, body)
		}
	}
}

// Two binaries on one Redis: each node lists the users connected to the
// other, with their status and node, from the store (neither node has an
// observer of them), and filters by node.
func TestListMultiNode(t *testing.T) {
	bin := mnBinary(t)
	srv := redistest.Start(t)
	a := mnStart(t, bin, "A", []string{srv.Addr()})
	b := mnStart(t, bin, "B", []string{srv.Addr()})
	onA := map[string]presence.Status{}
	onB := map[string]presence.Status{}
	for i := range 6 {
		u := fmt.Sprintf("ma%d", i)
		dial5(t, a.mqtt, u+"-c", u)
		onA[u] = presence.Online
		u = fmt.Sprintf("mb%d", i)
		c := dial5(t, b.mqtt, u+"-c", u)
		onB[u] = presence.Online
		if i%2 == 1 {
			if rc := c.publish(t, "presence/set", `{"status":"dnd"}`, 1, false); rc != 0 {
				t.Fatalf("set dnd: %#x", rc)
			}
			onB[u] = presence.DND
		}
	}
	gone := dial5(t, b.mqtt, "mgone-c", "mgone")
	listOnline(t, func(path string) (int, []byte) { return mnGet(b.admin, path) }, "mgone") // else the session may end before the store hears of it
	gone.disconnect()
	all := map[string]presence.Status{"mgone": presence.Offline}
	for u, st := range onA {
		all[u] = st
	}
	for u, st := range onB {
		all[u] = st
	}
	for _, n := range []*mnProc{a, b} {
		get := func(path string) (int, []byte) { return mnGet(n.admin, path) }
		testkit.Wait(t, waitTimeout, n.id+" lists every user of both nodes", func() error {
			got, _, err := listAll(get, "", 4)
			if err != nil {
				return err
			}
			return listWant(got, all, "")
		})
		got, _, err := listAll(get, "node=B&prefix=m", 2)
		if err == nil {
			err = listWant(got, onB, "B")
		}
		if err != nil {
			t.Fatalf("%s: node=B: %v", n.id, err)
		}
		got, _, err = listAll(get, "node=A&status=online", 100)
		if err == nil {
			err = listWant(got, onA, "A")
		}
		if err != nil {
			t.Fatalf("%s: node=A online: %v", n.id, err)
		}
		got, _, err = listAll(get, "status=dnd,offline", 1)
		if err == nil {
			want := map[string]presence.Status{"mgone": presence.Offline}
			for u, st := range onB {
				if st == presence.DND {
					want[u] = st
				}
			}
			err = listWant(got, want, "")
		}
		if err != nil {
			t.Fatalf("%s: dnd or offline: %v", n.id, err)
		}
	}
	if code, body := mnGet(a.admin, "/api/v1/users?group=nosuch"); code != http.StatusNotFound || !strings.Contains(string(body), "no such group") {
		t.Fatalf("group=nosuch: %d %s", code, body)
	}
}
