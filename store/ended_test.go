package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// What the lifecycle outputs need of a store: each session's connection
// facts (SessionView.Conn) and the sessions each change ended
// (Aggregate.Ended), through open, takeover, end, reap and a node lost, on
// the feed and on every read.

var testConn = presence.Conn{Username: "alice-login", IP: "192.0.2.7", Port: 1883, Listener: "tcp", ProtoVer: 5, KeepAlive: 30, CleanStart: true, Expiry: 3600}

func connOf(i int) presence.Conn {
	c := testConn
	c.Port += i
	c.IP = fmt.Sprintf("192.0.2.%d", i)
	return c
}

// changeLog records every Changed event as reported, Ended included.
type changeLog struct {
	mu  sync.Mutex
	all []presence.Aggregate
}

func (l *changeLog) report(e Event) {
	if e.Kind != Changed {
		return
	}
	l.mu.Lock()
	l.all = append(l.all, e.Aggregate)
	l.mu.Unlock()
}

func (l *changeLog) take() []presence.Aggregate {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.all
	l.all = nil
	return out
}

// endedBrief writes a change's ended sessions as "id:reason:port,...".
func endedBrief(xs []presence.EndedView) string {
	var b []string
	for _, x := range xs {
		b = append(b, fmt.Sprintf("%s:%s:%d", x.ID, x.Reason, x.Conn.Port))
	}
	return strings.Join(b, ",")
}

func TestMemoryEndedAndConn(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	log := &changeLog{}
	m := NewMemory(presence.NewRules(nil), clk.Now, log.report)
	ctx := context.Background()
	open := func(id string, conn presence.Conn, ttl time.Duration) presence.Session {
		clk.Advance(time.Millisecond)
		s, err := m.Open(ctx, presence.OpenArgs{User: "alice", ID: id, Node: "n1", TTL: ttl, Conn: conn})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	phone := open("phone", connOf(1), time.Hour)
	if phone.Conn != connOf(1) {
		t.Fatalf("opened session's conn: %+v", phone.Conn)
	}
	desk := open("desk", connOf(2), time.Minute)
	open("phone", connOf(3), time.Hour) // a takeover
	clk.Advance(time.Millisecond)
	if err := m.End(ctx, presence.EndArgs{User: "alice", ID: "desk", Epoch: desk.Epoch, Reason: presence.EndClean}); err != nil {
		t.Fatal(err)
	}
	ch := log.take()
	if len(ch) != 4 {
		t.Fatalf("%d changes", len(ch))
	}
	for i, want := range []string{"", "", "phone:takeover:1884", "desk:clean:1885"} {
		if got := endedBrief(ch[i].Ended); got != want {
			t.Errorf("change %d ended %q, want %q", i, got, want)
		}
	}
	if s := ch[2].Sessions; len(s) != 2 || s[0].Conn != connOf(2) || s[1].Conn != connOf(3) {
		t.Fatalf("sessions after the takeover: %+v", s)
	}
	// The reaper ends what expired, with its facts.
	clk.Advance(2 * time.Hour)
	if n, _ := m.Reap(ctx); n != 1 {
		t.Fatalf("reaped %d", n)
	}
	ch = log.take()
	if len(ch) != 1 || endedBrief(ch[0].Ended) != "phone:timeout:1886" {
		t.Fatalf("reap: %+v", ch)
	}
	// Reads: the last ended, oldest first; Current keeps none.
	if err := m.Load(ctx); err != nil {
		t.Fatal(err)
	}
	ch = log.take()
	if len(ch) != 1 || endedBrief(ch[0].Ended) != "phone:takeover:1884,desk:clean:1885,phone:timeout:1886" {
		t.Fatalf("load: %+v", ch)
	}
	got, _, _ := m.Get(ctx, "alice")
	if endedBrief(got.Ended) != endedBrief(ch[0].Ended) {
		t.Fatalf("get: %s", endedBrief(got.Ended))
	}
	u, _, _ := m.User(ctx, "alice")
	if u.Current.Ended != nil || u.Ended[0].Conn != connOf(3) {
		t.Fatalf("record: %+v", u)
	}
}

func TestMemoryBoundsConn(t *testing.T) {
	log := &changeLog{}
	m := NewMemory(presence.NewRules(nil), time.Now, log.report)
	long := presence.Conn{Username: strings.Repeat("é", 200), Listener: strings.Repeat("l", 100)}
	s, err := m.Open(context.Background(), presence.OpenArgs{User: "bob", ID: "x", TTL: time.Hour, Conn: long})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Conn.Valid() || len(s.Conn.Username) != presence.MaxConnUsername || len(s.Conn.Listener) != presence.MaxConnListener {
		t.Fatalf("conn not bounded: %d %d", len(s.Conn.Username), len(s.Conn.Listener))
	}
}

func TestFeedCoalescesEnded(t *testing.T) {
	f := NewFeed()
	x := func(id string, n int) []presence.EndedView {
		var out []presence.EndedView
		for i := range n {
			out = append(out, presence.EndedView{SessionView: presence.SessionView{ID: fmt.Sprintf("%s%d", id, i)}, Reason: presence.EndClean})
		}
		return out
	}
	first := x("a", 2)
	f.Push(Event{Kind: Changed, Aggregate: presence.Aggregate{User: "u", Version: 1, Ended: first}})
	f.Push(Event{Kind: Changed, Aggregate: presence.Aggregate{User: "u", Version: 3, Ended: x("b", 1)}})
	f.Push(Event{Kind: Changed, Aggregate: presence.Aggregate{User: "u", Version: 2, Ended: x("c", 1)}}) // older: dropped
	f.Push(Event{Kind: Changed, Aggregate: presence.Aggregate{User: "u", Version: 4}})
	evs := f.Take()
	if len(evs) != 1 || evs[0].Aggregate.Version != 4 {
		t.Fatalf("events: %+v", evs)
	}
	var ids []string
	for _, e := range evs[0].Aggregate.Ended {
		ids = append(ids, e.ID)
	}
	if strings.Join(ids, ",") != "a0,a1,b0" {
		t.Fatalf("ended: %v", ids)
	}
	evs[0].Aggregate.Ended[0].ID = "changed"
	if first[0].ID != "a0" {
		t.Fatal("the coalesced change aliases a pushed one")
	}
	// Bounded: the newest MaxEndedCarried, the rest counted.
	for v := range 10 {
		f.Push(Event{Kind: Changed, Aggregate: presence.Aggregate{User: "u", Version: uint64(10 + v), Ended: x(fmt.Sprintf("v%d-", v), 10)}})
	}
	evs = f.Take()
	if n := len(evs[0].Aggregate.Ended); n != presence.MaxEndedCarried || evs[0].Aggregate.Ended[n-1].ID != "v9-9" {
		t.Fatalf("kept %d, last %s", n, evs[0].Aggregate.Ended[n-1].ID)
	}
	if f.EndedDropped() != 100-presence.MaxEndedCarried {
		t.Fatalf("dropped %d", f.EndedDropped())
	}
}

func TestDecodeChangeEndedAndConn(t *testing.T) {
	msg := `{"u":"alice","v":"5","st":"online","tx":"","since":"1000","ls":"","ss":[{"id":"c1","e":"4","n":"n1","d":"","st":"online","c":"2000","un":"al","ip":"10.0.0.7","pt":8883,"l":"tls","pv":4,"ka":60,"cs":true,"se":7}],` +
		`"x":[{"id":"c1","e":"3","n":"n1","d":"phone","st":"idle","c":"1000","r":"takeover","ea":"2000","pv":5},{"id":"c2","e":"2","n":"n2","d":"","st":"online","c":"900","r":"network","ea":"2000"}]}`
	p, _, err := decodeChange([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	want := presence.Conn{Username: "al", IP: "10.0.0.7", Port: 8883, Listener: "tls", ProtoVer: 4, KeepAlive: 60, CleanStart: true, Expiry: 7}
	if p.Sessions[0].Conn != want {
		t.Fatalf("conn %+v", p.Sessions[0].Conn)
	}
	if len(p.Ended) != 2 || p.Ended[0].ID != "c1" || p.Ended[0].Epoch != 3 || p.Ended[0].Reason != presence.EndTakeover ||
		p.Ended[0].Conn.ProtoVer != 5 || p.Ended[0].Device != "phone" || p.Ended[0].Status != presence.Idle ||
		!p.Ended[0].EndedAt.Equal(time.UnixMilli(2000)) || !p.Ended[0].ConnectedAt.Equal(time.UnixMilli(1000)) ||
		p.Ended[1].Reason != presence.EndNetwork {
		t.Fatalf("ended %+v", p.Ended)
	}
	for _, bad := range []string{
		`{"u":"a","v":"5","st":"offline","tx":"","since":"1","ls":"1","ss":{},"x":[{"id":"c1","e":"x","n":"n1","d":"","st":"online","c":"1","r":"clean","ea":"1"}]}`,
		`{"u":"a","v":"5","st":"offline","tx":"","since":"1","ls":"1","ss":{},"x":[{"id":"c1","e":"1","n":"n1","d":"","st":"offline","c":"1","r":"clean","ea":"1"}]}`,
		`{"u":"a","v":"5","st":"offline","tx":"","since":"1","ls":"1","ss":{},"x":[{"id":"c1","e":"1","n":"n1","d":"","st":"online","c":"1","r":"","ea":"1"}]}`,
		`{"u":"a","v":"5","st":"online","tx":"","since":"1","ls":"","ss":[{"id":"c1","e":"1","n":"n1","d":"","st":"online","c":"1","pt":70000}]}`,
	} {
		if _, _, err := decodeChange([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// loggedRedis starts a redis-server and a store on it, node n1, listening
// to every user, its changes in a changeLog.
func loggedRedis(t *testing.T) (*redis.Client, *Redis, *changeLog) {
	t.Helper()
	c := redistest.Start(t).Client(t)
	log := &changeLog{}
	r := NewRedis(RedisOptions{Client: c, Prefix: "t:" + t.Name() + ":", Node: "n1", NodeTTL: 3 * time.Second, Retention: time.Hour, Report: log.report})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	if err := r.ListenAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c, r, log
}

// The same story through Redis: every change carries the sessions it
// ended and every session its facts, on the feed (through a Feed that
// coalesces) and on every read (Load, User, Get).
func TestRedisEndedAndConn(t *testing.T) {
	c, r, log := loggedRedis(t)
	ctx := context.Background()
	open := func(user, id string, conn presence.Conn, ttl time.Duration) presence.Session {
		s, err := r.Open(ctx, presence.OpenArgs{User: user, ID: id, Node: "n1", TTL: ttl, Conn: conn})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// changes waits for n changes of user and returns them.
	changes := func(user string, n int) []presence.Aggregate {
		t.Helper()
		var got []presence.Aggregate
		testkit.Wait(t, 10*time.Second, fmt.Sprintf("%d changes of %s", n, user), func() error {
			for _, a := range log.take() {
				if a.User == user {
					got = append(got, a)
				}
			}
			return testkit.Why(len(got) >= n, fmt.Sprintf("%d so far", len(got)))
		})
		return got
	}
	open("alice", "phone", connOf(1), time.Hour)
	desk := open("alice", "desk", connOf(2), time.Hour)
	open("alice", "phone", connOf(3), time.Hour) // a takeover
	if err := r.End(ctx, presence.EndArgs{User: "alice", ID: "desk", Epoch: desk.Epoch, Reason: presence.EndClean}); err != nil {
		t.Fatal(err)
	}
	ch := changes("alice", 4)
	for i, want := range []string{"", "", "phone:takeover:1884", "desk:clean:1885"} {
		if got := endedBrief(ch[i].Ended); got != want {
			t.Errorf("change %d ended %q, want %q", i, got, want)
		}
	}
	if s := ch[0].Sessions; len(s) != 1 || s[0].Conn != connOf(1) {
		t.Fatalf("first change's session: %+v", s)
	}
	if s := ch[2].Sessions; len(s) != 2 || s[0].Conn != connOf(2) || s[1].Conn != connOf(3) {
		t.Fatalf("sessions after the takeover: %+v", s)
	}
	if x := ch[2].Ended[0]; x.Epoch == 0 || x.ConnectedAt.IsZero() || x.EndedAt.IsZero() || x.Node != "n1" || x.Status != presence.Online {
		t.Fatalf("ended view: %+v", x)
	}
	// A session without facts says none.
	open("bob", "b1", presence.Conn{}, time.Hour)
	if b := changes("bob", 1); b[0].Sessions[0].Conn != (presence.Conn{}) {
		t.Fatalf("bob's conn: %+v", b[0].Sessions[0].Conn)
	}

	// The reaper: a session past its store-side expiry.
	open("carol", "c1", connOf(4), 50*time.Millisecond)
	changes("carol", 1)
	testkit.Wait(t, 10*time.Second, "carol's session reaped", func() error {
		n, err := r.Reap(ctx)
		if err != nil {
			return err
		}
		return testkit.Why(n == 1, "not yet")
	})
	if ch := changes("carol", 1); endedBrief(ch[0].Ended) != "c1:timeout:1887" {
		t.Fatalf("reap: %s", endedBrief(ch[0].Ended))
	}

	// A node lost: every session of its incarnation ends in one change.
	open("dave", "d1", connOf(5), time.Hour)
	open("dave", "d2", connOf(6), time.Hour)
	changes("dave", 2)
	inc := r.Incarnation()
	if n, err := r.endNodeUsers(ctx, "n1", inc, []nodeUser{{user: "dave", set: r.k.nodeUsers(member("n1", inc), "dave")}}); err != nil || n != 2 {
		t.Fatalf("end node: %d %v", n, err)
	}
	if ch := changes("dave", 1); endedBrief(ch[0].Ended) != "d1:node_lost:1888,d2:node_lost:1889" {
		t.Fatalf("end node: %s", endedBrief(ch[0].Ended))
	}

	// Reads: the record's last ended, oldest first, and the facts.
	u, _, err := r.User(ctx, "alice")
	if err != nil || len(u.Sessions) != 1 || u.Sessions[0].Conn != connOf(3) || u.Ended[0].Conn != connOf(2) {
		t.Fatalf("user: %+v %v", u, err)
	}
	got, _, _ := r.Get(ctx, "alice")
	if endedBrief(got.Ended) != "phone:takeover:1884,desk:clean:1885" || got.Sessions[0].Conn != connOf(3) {
		t.Fatalf("get: %s %+v", endedBrief(got.Ended), got.Sessions)
	}
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	loaded := map[string]presence.Aggregate{}
	testkit.Wait(t, 10*time.Second, "the load", func() error {
		for _, a := range log.take() {
			loaded[a.User] = a
		}
		return testkit.Why(len(loaded) == 4, fmt.Sprintf("%d users", len(loaded)))
	})
	if endedBrief(loaded["alice"].Ended) != "phone:takeover:1884,desk:clean:1885" || endedBrief(loaded["dave"].Ended) != "d1:node_lost:1888,d2:node_lost:1889" {
		t.Fatalf("load: %s / %s", endedBrief(loaded["alice"].Ended), endedBrief(loaded["dave"].Ended))
	}

	// Through a feed that coalesces: the sessions every replaced change
	// ended are still there.
	feed := NewFeed()
	log2 := &changeLog{}
	r2 := NewRedis(RedisOptions{Client: c, Prefix: "t:" + t.Name() + ":", Node: "n2", NodeTTL: 3 * time.Second, Retention: time.Hour,
		Report: func(e Event) { feed.Push(e); log2.report(e) }})
	if err := r2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r2.Stop)
	if err := r2.Listen(ctx, []string{"erin"}); err != nil {
		t.Fatal(err)
	}
	var last presence.Session
	for i := range 5 {
		last = open("erin", "e", connOf(10+i), time.Hour) // four takeovers
	}
	if err := r.End(ctx, presence.EndArgs{User: "erin", ID: "e", Epoch: last.Epoch, Reason: presence.EndNetwork}); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, 10*time.Second, "erin's six changes heard", func() error {
		n := 0
		log2.mu.Lock()
		for _, a := range log2.all {
			if a.User == "erin" {
				n++
			}
		}
		log2.mu.Unlock()
		return testkit.Why(n >= 6, fmt.Sprintf("%d", n))
	})
	var ended []string
	for _, e := range feed.Take() {
		if e.Kind == Changed && e.Aggregate.User == "erin" {
			ended = append(ended, endedBrief(e.Aggregate.Ended))
		}
	}
	if len(ended) != 1 || ended[0] != "e:takeover:1893,e:takeover:1894,e:takeover:1895,e:takeover:1896,e:network:1897" {
		t.Fatalf("coalesced: %q", ended)
	}
}

// A record older versions wrote keeps its ended sessions as one JSON list
// in the field ended; this version keeps them one per line in eh, so that
// an end never decodes the history. Both are read, an end folds the list
// into eh (newest first by end time, each session once, at most
// presence.MaxEnded), and a rolling upgrade, where an old node may write
// ended again beside eh, loses nothing.
func TestRedisEndedFromOlderVersion(t *testing.T) {
	c, r, log := loggedRedis(t)
	ctx := context.Background()
	cycle := func(id string, reason presence.EndReason) {
		t.Helper()
		s, err := r.Open(ctx, presence.OpenArgs{User: "alice", ID: id, Node: "n1", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.End(ctx, presence.EndArgs{User: "alice", ID: id, Epoch: s.Epoch, Reason: reason}); err != nil {
			t.Fatal(err)
		}
	}
	history := func() string {
		t.Helper()
		u, ok, err := r.User(ctx, "alice")
		if err != nil || !ok {
			t.Fatalf("user: %v %v", ok, err)
		}
		var ids []string
		for _, s := range u.Ended {
			ids = append(ids, s.ID+":"+string(s.EndReason))
		}
		return strings.Join(ids, ",")
	}
	key := r.k.user("alice")
	// asOld rewrites the record as an older version kept it.
	asOld := func() {
		t.Helper()
		lines, err := c.HGet(ctx, key, "eh").Result()
		if err != nil {
			t.Fatal(err)
		}
		list := "[" + strings.ReplaceAll(lines, "\n", ",") + "]"
		if err := c.HSet(ctx, key, "ended", list).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.HDel(ctx, key, "eh", "er").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		cycle(fmt.Sprintf("d%d", i), presence.EndClean)
	}
	cycle("d3", presence.EndTimeout)
	asOld()
	if got, want := history(), "d3:timeout,d2:clean,d1:clean,d0:clean"; got != want {
		t.Fatalf("an older version's record reads %q, want %q", got, want)
	}
	if a, _, err := r.Get(ctx, "alice"); err != nil || a.Reason != presence.EndTimeout {
		t.Fatalf("an older version's record: offline reason %q (%v), want timeout", a.Reason, err)
	}
	// An account change commits with no end: the offline reason comes
	// from the older list (common.lua offline_reason).
	text := "back soon"
	if err := r.SetAccount(ctx, "alice", presence.AccountUpdate{Text: &text}); err != nil {
		t.Fatal(err)
	}
	if a, _, err := r.Get(ctx, "alice"); err != nil || a.Reason != presence.EndTimeout || a.Text != text {
		t.Fatalf("after an account change: %+v (%v)", a, err)
	}
	testkit.Wait(t, 10*time.Second, "the account change on the feed", func() error {
		for _, a := range log.take() {
			if a.Text == text {
				return testkit.Why(a.Reason == presence.EndTimeout, "its offline reason is "+string(a.Reason))
			}
		}
		return errors.New("not yet")
	})
	// The first end of this version folds the list in.
	cycle("d4", presence.EndKicked)
	if n, err := c.HExists(ctx, key, "ended").Result(); err != nil || n {
		t.Fatalf("the field ended is still there after an end (%v)", err)
	}
	if got, want := history(), "d4:kicked,d3:timeout,d2:clean,d1:clean,d0:clean"; got != want {
		t.Fatalf("after the fold: %q, want %q", got, want)
	}
	// A rolling upgrade: an old node writes ended again, beside eh, with
	// one session newer than all of eh and one eh holds already.
	for i := 5; i < 9; i++ {
		cycle(fmt.Sprintf("d%d", i), presence.EndClean)
	}
	lines, err := c.HGet(ctx, key, "eh").Result()
	if err != nil {
		t.Fatal(err)
	}
	newest := strings.SplitN(lines, "\n", 2)[0]
	late := strings.Replace(strings.Replace(newest, `"d8"`, `"d9"`, 1), `"r":"clean"`, `"r":"network"`, 1)
	late = strings.Replace(late, `"ea":`, `"ea":1`, 1) // ends later than every other
	if late == newest || !strings.Contains(late, `"d9"`) {
		t.Fatalf("cannot make a later session of %s", newest)
	}
	if err := c.HSet(ctx, key, "ended", "["+late+","+newest+"]").Err(); err != nil {
		t.Fatal(err)
	}
	want := "d9:network,d8:clean,d7:clean,d6:clean,d5:clean,d4:kicked,d3:timeout,d2:clean"
	if got := history(); got != want {
		t.Fatalf("both fields read %q, want %q", got, want)
	}
	cycle("d10", presence.EndClean)
	if got, want := history(), "d10:clean,"+strings.Join(strings.Split(want, ",")[:7], ","); got != want {
		t.Fatalf("after the fold of both: %q, want %q", got, want)
	}
	if n, err := c.HExists(ctx, key, "ended").Result(); err != nil || n {
		t.Fatalf("the field ended is still there after an end (%v)", err)
	}
}
