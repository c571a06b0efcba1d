package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/presence"
)

// listUsers is the population of the list tests: user i is online on n1
// (i%4 == 0), away on n2 (1), dnd by its account on n1 (2), or offline
// (3); group "vip" holds every tenth user, and one user who never came.
const listUsers = 240

func listStatus(i int) presence.Status {
	return []presence.Status{presence.Online, presence.Away, presence.DND, presence.Offline}[i%4]
}

func listName(i int) string { return fmt.Sprintf("u%03d", i) }

// fillList writes the population through the store's own operations;
// the users on node n2 through s2 (a Redis store writes its own node).
func fillList(t *testing.T, s, s2 Store) {
	t.Helper()
	ctx := context.Background()
	var vip []string
	for i := range listUsers {
		u := listName(i)
		node, s := "n1", s
		if i%4 == 1 {
			node, s = "n2", s2
		}
		ss, err := s.Open(ctx, presence.OpenArgs{User: u, ID: u + "-c", Node: node, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ref := presence.SessionRef{User: u, ID: ss.ID, Epoch: ss.Epoch}
		switch i % 4 {
		case 1:
			away := presence.Away
			err = s.Update(ctx, ref, presence.Update{Status: &away})
		case 2:
			dnd := presence.DND
			err = s.SetAccount(ctx, u, presence.AccountUpdate{Status: &dnd})
		case 3:
			err = s.End(ctx, presence.EndArgs{User: u, ID: ss.ID, Epoch: ss.Epoch, Reason: presence.EndClean})
		}
		if err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			vip = append(vip, u)
		}
	}
	if err := s.SetGroup(ctx, "vip", append(vip, "nobody")); err != nil {
		t.Fatal(err)
	}
}

// walk lists every page of q, checking each page, and returns the users in
// the order met, the summed counts and the number of pages.
func walk(t *testing.T, s Store, q presence.ListQuery) ([]presence.Aggregate, presence.ListCounts, int) {
	t.Helper()
	var all []presence.Aggregate
	var sum presence.ListCounts
	pages := 0
	for {
		page, err := s.List(context.Background(), q)
		if err != nil {
			t.Fatalf("list %+v: %v", q, err)
		}
		pages++
		limit := q.Limit
		if limit == 0 {
			limit = presence.ListDefault
		}
		if len(page.Users) > limit {
			t.Fatalf("page of %d users, limit %d", len(page.Users), limit)
		}
		seen := map[string]bool{}
		for _, p := range page.Users {
			if seen[p.User] {
				t.Fatalf("%s twice on one page", p.User)
			}
			seen[p.User] = true
		}
		all = append(all, page.Users...)
		c := page.Counts
		sum.Total += c.Total
		sum.Online += c.Online
		sum.Idle += c.Idle
		sum.Away += c.Away
		sum.Busy += c.Busy
		sum.DND += c.DND
		sum.Offline += c.Offline
		if page.Next == "" {
			return all, sum, pages
		}
		if pages > 10*listUsers {
			t.Fatalf("walk of %+v does not end", q)
		}
		q.Cursor = page.Next
	}
}

func names(ps []presence.Aggregate) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.User
	}
	return out
}

// expect returns the users of the population that keep.
func expect(keep func(i int) bool) []string {
	var out []string
	for i := range listUsers {
		if keep(i) {
			out = append(out, listName(i))
		}
	}
	return out
}

// testList runs the list's cases on a store filled with fillList. exact
// says whether a walk must meet each user once (the memory store's walk; a
// Redis walk may repeat a user across pages if the table was resized).
func testList(t *testing.T, s, s2 Store, exact bool) {
	fillList(t, s, s2)
	cases := []struct {
		name string
		q    presence.ListQuery
		want []string
	}{
		{"all", presence.ListQuery{Limit: 7}, expect(func(int) bool { return true })},
		{"default limit", presence.ListQuery{}, expect(func(int) bool { return true })},
		{"one a page", presence.ListQuery{Limit: 1, Prefix: "u00"}, expect(func(i int) bool { return i < 10 })},
		{"away", presence.ListQuery{Statuses: []presence.Status{presence.Away}, Limit: 13}, expect(func(i int) bool { return i%4 == 1 })},
		{"online or dnd", presence.ListQuery{Statuses: []presence.Status{presence.Online, presence.DND}, Limit: 50}, expect(func(i int) bool { return i%4 == 0 || i%4 == 2 })},
		{"offline", presence.ListQuery{Statuses: []presence.Status{presence.Offline}, Limit: 1000}, expect(func(i int) bool { return i%4 == 3 })},
		{"node n2", presence.ListQuery{Node: "n2", Limit: 11}, expect(func(i int) bool { return i%4 == 1 })},
		{"node n1", presence.ListQuery{Node: "n1", Limit: 1000}, expect(func(i int) bool { return i%4 == 0 || i%4 == 2 })},
		{"node n1 dnd", presence.ListQuery{Node: "n1", Statuses: []presence.Status{presence.DND}}, expect(func(i int) bool { return i%4 == 2 })},
		{"prefix", presence.ListQuery{Prefix: "u01", Limit: 3}, expect(func(i int) bool { return i >= 10 && i < 20 })},
		{"prefix none", presence.ListQuery{Prefix: "x"}, nil},
		{"prefix glob", presence.ListQuery{Prefix: "*"}, nil},
		{"prefix bracket", presence.ListQuery{Prefix: "u[0]"}, nil},
		{"prefix backslash", presence.ListQuery{Prefix: `u\0`}, nil},
		{"group", presence.ListQuery{Group: "vip", Limit: 4}, expect(func(i int) bool { return i%10 == 0 })},
		{"group online", presence.ListQuery{Group: "vip", Statuses: []presence.Status{presence.Online}, Limit: 2}, expect(func(i int) bool { return i%20 == 0 })},
		{"group prefix", presence.ListQuery{Group: "vip", Prefix: "u1", Limit: 2}, expect(func(i int) bool { return i%10 == 0 && i >= 100 && i < 200 })},
		{"group node", presence.ListQuery{Group: "vip", Node: "n2"}, nil},
		{"busy: nobody", presence.ListQuery{Statuses: []presence.Status{presence.Busy}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, counts, _ := walk(t, s, c.q)
			gotNames := names(got)
			if !exact {
				gotNames = slices.Compact(slices.Sorted(slices.Values(gotNames)))
			}
			sort.Strings(gotNames)
			if !slices.Equal(gotNames, c.want) {
				t.Fatalf("got %d users %v\nwant %d %v", len(gotNames), gotNames, len(c.want), c.want)
			}
			for _, p := range got {
				i := 0
				fmt.Sscanf(p.User, "u%d", &i)
				if p.Status != listStatus(i) {
					t.Fatalf("%s is %s, want %s", p.User, p.Status, listStatus(i))
				}
				if p.Status == presence.Offline && p.Reason != presence.EndClean {
					t.Fatalf("%s is offline for %q, want clean (why the user went)", p.User, p.Reason)
				}
			}
			if exact && len(c.q.Statuses) == 0 && counts.Total != len(c.want) {
				t.Fatalf("counts over the walk: %+v, want total %d", counts, len(c.want))
			}
		})
	}
	t.Run("counts", func(t *testing.T) {
		_, counts, _ := walk(t, s, presence.ListQuery{Statuses: []presence.Status{presence.Away}, Limit: 5})
		want := presence.ListCounts{Total: listUsers, Online: listUsers / 4, Away: listUsers / 4, DND: listUsers / 4, Offline: listUsers / 4}
		if exact && counts != want {
			t.Fatalf("counts %+v, want %+v", counts, want)
		}
		if !exact && (counts.Total < want.Total || counts.Away < want.Away) {
			t.Fatalf("counts %+v, want at least %+v", counts, want)
		}
	})
	t.Run("refused", func(t *testing.T) {
		ctx := context.Background()
		for _, q := range []presence.ListQuery{
			{Limit: presence.ListMax + 1}, {Limit: -1},
			{Statuses: []presence.Status{"bogus"}}, {Statuses: []presence.Status{""}},
			{Group: "bad group\x00"}, {Node: strings.Repeat("n", 300)}, {Prefix: "\xff"},
			{Cursor: "zzz"}, {Cursor: "m!!"}, {Cursor: "g"}, {Cursor: "r" + "AAAA"}, {Cursor: strings.Repeat("m", 2000)},
			{Cursor: encodeCursor('r', "99999:0:0:")}, {Cursor: encodeCursor('r', "-1:0:0:")}, {Cursor: encodeCursor('r', "0:x:0:")},
			{Cursor: encodeCursor('r', "0:0:5000:u001")}, {Cursor: encodeCursor('r', "0:0:0:u001")},
			{Cursor: encodeCursor('r', "0:0:10:")}, {Cursor: encodeCursor('r', "0:0:-1:u")},
			{Cursor: encodeCursor('g', "u001")}, // a group's cursor on the walk of all
		} {
			if _, err := s.List(ctx, q); !errors.Is(err, presence.ErrBadQuery) {
				t.Errorf("%+v: %v, want ErrBadQuery", q, err)
			}
		}
		if _, err := s.List(ctx, presence.ListQuery{Group: "nosuch"}); !errors.Is(err, presence.ErrNoGroup) {
			t.Errorf("no such group: %v", err)
		}
	})
}

func TestMemoryList(t *testing.T) {
	m, _, _ := newTestStore()
	testList(t, m, m, true)
}

// A query matching nobody examines at most presence.ListWork records per
// request and answers a cursor to go on with.
func TestMemoryListWorkIsBounded(t *testing.T) {
	m, _, _ := newTestStore()
	n := 2*presence.ListWork + 500
	fillDirect(m, n)
	q := presence.ListQuery{Statuses: []presence.Status{presence.Busy}}
	requests, examined := 0, 0
	for {
		page, err := m.List(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		requests++
		examined += page.Examined
		if page.Examined > presence.ListWork || len(page.Users) != 0 {
			t.Fatalf("request %d examined %d, took %d", requests, page.Examined, len(page.Users))
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	if requests != 3 || examined != n {
		t.Fatalf("%d requests examined %d records, want 3 and %d", requests, examined, n)
	}
}

// fillDirect puts n users straight into m's map (the benchmark's and the
// bounds' population): user i online on node n<i%3> when i is even, else
// offline.
func fillDirect(m *Memory, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		name := fmt.Sprintf("user%07d", i)
		// The store derives a user's aggregate from its record (record.go):
		// an offline user last seen now, or one live session.
		u := presence.User{Name: name, LastEpoch: 1, LastSeen: now}
		if i%2 == 0 {
			u.LastSeen = time.Time{}
			u.Sessions = []presence.Session{{User: name, ID: name + "-c", Epoch: 1, Node: fmt.Sprintf("n%d", i%3),
				Status: presence.Online, State: presence.Active, ConnectedAt: now}}
		}
		if _, ok := m.users[name]; !ok {
			m.indexAdd(name)
		}
		r := pack(u, 1, now)
		m.users[name] = &r
	}
}

func TestRedisList(t *testing.T) {
	c := redistest.Start(t).Client(t)
	r, _ := newRedisStore(t, c, "n1")
	r2, _ := newRedisStore(t, c, "n2")
	testList(t, r, r2, false)
}

func TestRedisClusterList(t *testing.T) {
	c := redistest.StartCluster(t, 3).Client(t)
	r, _ := newRedisStore(t, c, "n1")
	r2, _ := newRedisStore(t, c, "n2")
	testList(t, r, r2, false)
}

// testListWhileAdding walks in small pages while another goroutine adds
// users: every user present before the walk began is met, none twice on a
// page, and the added ones at most once more each than a resize explains.
func testListWhileAdding(t *testing.T, s Store) {
	ctx := context.Background()
	const before, during = 400, 400
	for i := range before {
		if _, err := s.Open(ctx, presence.OpenArgs{User: fmt.Sprintf("a%04d", i), ID: "c", Node: "n1", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range during {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Open(ctx, presence.OpenArgs{User: fmt.Sprintf("b%04d", i), ID: "c", Node: "n1", TTL: time.Hour}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	got, _, pages := walk(t, s, presence.ListQuery{Limit: 9})
	close(stop)
	wg.Wait()
	met := map[string]int{}
	for _, p := range got {
		met[p.User]++
	}
	for i := range before {
		if met[fmt.Sprintf("a%04d", i)] == 0 {
			t.Fatalf("a%04d, present for the whole walk, was missed (%d pages)", i, pages)
		}
	}
	dups := 0
	for _, n := range met {
		dups += n - 1
	}
	if _, exact := s.(*Memory); exact && dups != 0 {
		t.Fatalf("the memory store's walk met %d users twice", dups)
	}
	t.Logf("%d pages, %d users met, %d met twice", pages, len(met), dups)
}

func TestMemoryListWhileAdding(t *testing.T) {
	m, _, _ := newTestStore()
	testListWhileAdding(t, m)
}

func TestRedisListWhileAdding(t *testing.T) {
	r, _ := newRedisStore(t, redistest.Start(t).Client(t), "n1")
	testListWhileAdding(t, r)
}

func TestRedisClusterListWhileAdding(t *testing.T) {
	r, _ := newRedisStore(t, redistest.StartCluster(t, 3).Client(t), "n1")
	testListWhileAdding(t, r)
}
