package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// events collects what a store reports: its changes in a testkit.Changes,
// everything else in order.
type events struct {
	testkit.Changes
	mu     sync.Mutex
	others []Event
}

func (e *events) report(ev Event) {
	if ev.Kind == Changed {
		e.Add(ev.Aggregate)
		return
	}
	e.mu.Lock()
	e.others = append(e.others, ev)
	e.mu.Unlock()
}

func newRedisStore(t *testing.T, c redis.UniversalClient, node string) (*Redis, *events) {
	t.Helper()
	col := &events{}
	r := NewRedis(RedisOptions{
		Client: c, Prefix: "t:" + t.Name() + ":", Node: node, Authoritative: []string{"desktop"},
		NodeTTL: 3 * time.Second, Retention: time.Hour, Log: nil, Report: col.report,
	})
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(r.Stop)
	// The firehose: these tests follow every user, as every node did
	// before it listened only to what it needs (redis_listen_test.go).
	if err := r.ListenAll(context.Background()); err != nil {
		t.Fatalf("listen all: %v", err)
	}
	return r, col
}

func waitUser(t *testing.T, col *events, user string, cond func(presence.Aggregate) bool) presence.Aggregate {
	t.Helper()
	return col.WaitFor(t, 10*time.Second, user, "condition", cond)
}

func TestRedisStoreOperations(t *testing.T) {
	srv := redistest.Start(t)
	r, col := newRedisStore(t, srv.Client(t), "n1")
	ctx := context.Background()
	open := func(user, id, device string) presence.Session {
		s, err := r.Open(ctx, presence.OpenArgs{User: user, ID: id, Node: "n1", Device: device, TTL: time.Minute})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return s
	}
	a := open("alice", "phone", "phone")
	p := waitUser(t, col, "alice", func(p presence.Aggregate) bool { return p.Status == presence.Online })
	if len(p.Sessions) != 1 || p.Sessions[0].Epoch != a.Epoch || p.Sessions[0].Device != "phone" || !p.LastSeen.IsZero() {
		t.Fatalf("after open: %+v", p)
	}
	b := open("alice", "desk", "desktop")
	busy := presence.Busy
	if err := r.Update(ctx, presence.SessionRef{User: "alice", ID: "desk", Epoch: b.Epoch}, presence.Update{Status: &busy}); err != nil {
		t.Fatal(err)
	}
	waitUser(t, col, "alice", func(p presence.Aggregate) bool { return p.Status == presence.Busy && len(p.Sessions) == 2 })
	// Takeover of the phone: new epoch, never offline; the old epoch is stale.
	a2 := open("alice", "phone", "phone")
	if a2.Epoch <= b.Epoch {
		t.Fatalf("epochs: %d after %d", a2.Epoch, b.Epoch)
	}
	if err := r.End(ctx, presence.EndArgs{User: "alice", ID: "phone", Epoch: a.Epoch, Reason: presence.EndNetwork}); !errors.Is(err, presence.ErrStaleEpoch) {
		t.Fatalf("stale end: %v", err)
	}
	dnd := presence.DND
	text := "focus"
	if err := r.SetAccount(ctx, "alice", presence.AccountUpdate{Status: &dnd, Text: &text}); err != nil {
		t.Fatal(err)
	}
	waitUser(t, col, "alice", func(p presence.Aggregate) bool { return p.Status == presence.DND && p.Text == "focus" })
	on := presence.Online
	empty := ""
	if err := r.SetAccount(ctx, "alice", presence.AccountUpdate{Status: &on, Text: &empty}); err != nil {
		t.Fatal(err)
	}
	waitUser(t, col, "alice", func(p presence.Aggregate) bool { return p.Status == presence.Busy && p.Text == "" })
	words := "battery"
	for _, e := range []presence.EndArgs{
		{User: "alice", ID: "desk", Epoch: b.Epoch, Reason: presence.EndClean},
		{User: "alice", ID: "phone", Epoch: a2.Epoch, Reason: presence.EndNetwork, LastWords: &words},
	} {
		if err := r.End(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	off := waitUser(t, col, "alice", func(p presence.Aggregate) bool { return p.Status == presence.Offline })
	if off.Text != "battery" || off.LastSeen.IsZero() || len(off.Sessions) != 0 || !off.Since.Equal(off.LastSeen) {
		t.Fatalf("offline: %+v", off)
	}
	// Versions strictly increase over the feed; Get and User agree with it.
	all := col.All()
	for i := 1; i < len(all); i++ {
		if all[i].Version <= all[i-1].Version {
			t.Errorf("version %d after %d", all[i].Version, all[i-1].Version)
		}
	}
	got, ok, err := r.Get(ctx, "alice")
	if err != nil || !ok || got.Version != off.Version || got.Status != presence.Offline || got.Text != "battery" {
		t.Fatalf("Get: %+v %v %v", got, ok, err)
	}
	u, _, _ := r.User(ctx, "alice")
	if len(u.Ended) != 3 || u.Ended[0].EndReason != presence.EndNetwork || u.Ended[2].EndReason != presence.EndTakeover {
		t.Fatalf("ended: %+v", u.Ended)
	}
	// Load gives the same aggregate as the feed.
	before := col.Len()
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	loaded := col.All()[before:] // the load reports like the feed
	if len(loaded) != 1 || loaded[0].Version != off.Version || loaded[0].Text != "battery" || !loaded[0].LastSeen.Equal(off.LastSeen) {
		t.Fatalf("load: %+v", loaded)
	}
	// Bad input changes nothing.
	idle := presence.Idle
	if err := r.SetAccount(ctx, "alice", presence.AccountUpdate{Status: &idle}); !errors.Is(err, presence.ErrBadStatus) {
		t.Fatalf("account idle: %v", err)
	}
	if _, err := r.Open(ctx, presence.OpenArgs{User: "a/b", ID: "x", TTL: time.Minute}); !errors.Is(err, presence.ErrBadName) {
		t.Fatalf("bad user: %v", err)
	}
}

// The Lua aggregation is the Go one: the same random operations on the
// memory store and on Redis give the same status, text and sessions.
func TestRedisMatchesMemory(t *testing.T) {
	srv := redistest.Start(t)
	r, col := newRedisStore(t, srv.Client(t), "n1")
	clk := testkit.NewClock(time.Now())
	m := NewMemory(presence.NewRules([]string{"desktop"}), clk.Now, func(Event) {})
	ctx := context.Background()
	rng := rand.New(rand.NewSource(1))
	users := []string{"u1", "u2"}
	ids := []string{"a", "b", "c"}
	devices := []string{"", "phone", "desktop"}
	statuses := []presence.Status{presence.Online, presence.Idle, presence.Away, presence.Busy, presence.DND}
	type key struct{ user, id string }
	mEpoch, rEpoch := map[key]uint64{}, map[key]uint64{}
	// Both stores must see the steps in distinct milliseconds, in order: the
	// memory store's clock advances 1 ms a step, and each step waits until
	// Redis's TIME has moved to a new millisecond, so that ties on
	// connected_at (broken by id) are the same on both sides.
	rc := srv.Client(t)
	redisMs := func() int64 {
		now, err := rc.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now.UnixMilli()
	}
	lastMs := int64(0) // Redis's millisecond after the previous step's writes
	for i := 0; i < 300; i++ {
		clk.Advance(time.Millisecond)
		testkit.Wait(t, 5*time.Second, "Redis TIME in a new millisecond", func() error {
			return testkit.Why(redisMs() > lastMs, "still the same millisecond")
		})
		u, id := users[rng.Intn(2)], ids[rng.Intn(3)]
		k := key{u, id}
		switch op := rng.Intn(5); {
		case op == 0 || mEpoch[k] == 0:
			a := presence.OpenArgs{User: u, ID: id, Node: "n1", Device: devices[rng.Intn(3)], Status: statuses[rng.Intn(5)], TTL: time.Hour}
			if rng.Intn(3) > 0 { // facts, or none
				a.Conn = presence.Conn{Username: u, IP: fmt.Sprintf("10.0.0.%d", i%250), Port: 1883 + rng.Intn(2), Listener: "tcp",
					ProtoVer: uint8(3 + rng.Intn(3)), KeepAlive: uint16(rng.Intn(120)), CleanStart: rng.Intn(2) == 0, Expiry: uint32(rng.Intn(2) * 3600)}
			}
			if rng.Intn(2) == 0 { // a device that sleeps by design (dormant after a clean end)
				a.Expect, a.Margin = time.Hour, time.Minute
			}
			ms, err1 := m.Open(ctx, a)
			rs, err2 := r.Open(ctx, a)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			mEpoch[k], rEpoch[k] = ms.Epoch, rs.Epoch
		case op == 1:
			st := statuses[rng.Intn(5)]
			tx := []string{"", "x", "y"}[rng.Intn(3)]
			e1 := m.Update(ctx, presence.SessionRef{User: u, ID: id, Epoch: mEpoch[k]}, presence.Update{Status: &st, Text: &tx})
			e2 := r.Update(ctx, presence.SessionRef{User: u, ID: id, Epoch: rEpoch[k]}, presence.Update{Status: &st, Text: &tx})
			if (e1 == nil) != (e2 == nil) {
				t.Fatalf("update: memory %v, redis %v", e1, e2)
			}
		case op == 2:
			st := []presence.Status{presence.Online, presence.Away, presence.Busy, presence.DND}[rng.Intn(4)]
			tx := []string{"", "acct"}[rng.Intn(2)]
			upd := presence.AccountUpdate{Status: &st, Text: &tx}
			randomPrivacy(rng, &upd) // issue 22
			if err := m.SetAccount(ctx, u, upd); err != nil {
				t.Fatal(err)
			}
			if err := r.SetAccount(ctx, u, upd); err != nil {
				t.Fatal(err)
			}
		default:
			lw := "bye"
			reason := []presence.EndReason{presence.EndClean, presence.EndNetwork, presence.EndTimeout}[rng.Intn(3)]
			// A timeout's last sign of life, an hour back: before the
			// session began, so last_seen is its connect in both stores.
			var mSign, rSign time.Time
			if reason == presence.EndTimeout {
				mSign, rSign = clk.Now().Add(-time.Hour), time.Now().Add(-time.Hour)
			}
			e1 := m.End(ctx, presence.EndArgs{User: u, ID: id, Epoch: mEpoch[k], Reason: reason, LastWords: &lw, LastSign: mSign})
			e2 := r.End(ctx, presence.EndArgs{User: u, ID: id, Epoch: rEpoch[k], Reason: reason, LastWords: &lw, LastSign: rSign})
			if (e1 == nil) != (e2 == nil) {
				t.Fatalf("end: memory %v, redis %v", e1, e2)
			}
			mEpoch[k], rEpoch[k] = 0, 0
		}
		lastMs = redisMs()
		for _, u := range users {
			mp, ok1, _ := m.Get(ctx, u)
			rp, ok2, _ := r.Get(ctx, u)
			if ok1 != ok2 {
				t.Fatalf("step %d %s: memory has %v, redis %v", i, u, ok1, ok2)
			}
			if !ok1 {
				continue
			}
			if mp.Status != rp.Status || mp.Text != rp.Text || len(mp.Sessions) != len(rp.Sessions) || mp.LastSeen.IsZero() != rp.LastSeen.IsZero() ||
				mp.Reason != rp.Reason || seenAt(mp) != seenAt(rp) ||
				mp.NextExpected.IsZero() != rp.NextExpected.IsZero() {
				t.Fatalf("step %d %s:\nmemory %+v\nredis  %+v", i, u, mp, rp)
			}
			if !samePrivacyShape(mp.Privacy, rp.Privacy) {
				t.Fatalf("step %d %s: privacy differs:\nmemory %+v\nredis  %+v", i, u, mp.Privacy, rp.Privacy)
			}
			for j := range mp.Sessions {
				if mp.Sessions[j].ID != rp.Sessions[j].ID || mp.Sessions[j].Status != rp.Sessions[j].Status || mp.Sessions[j].Device != rp.Sessions[j].Device ||
					mp.Sessions[j].Conn != rp.Sessions[j].Conn {
					t.Fatalf("step %d %s: sessions differ:\nmemory %+v\nredis  %+v", i, u, mp.Sessions, rp.Sessions)
				}
			}
			// The last ended sessions a read reports, oldest first.
			if len(mp.Ended) != len(rp.Ended) {
				t.Fatalf("step %d %s: ended differ:\nmemory %+v\nredis  %+v", i, u, mp.Ended, rp.Ended)
			}
			for j := range mp.Ended {
				me, re := mp.Ended[j], rp.Ended[j]
				if me.ID != re.ID || me.Reason != re.Reason || me.Status != re.Status || me.Device != re.Device || me.Conn != re.Conn {
					t.Fatalf("step %d %s: ended differ:\nmemory %+v\nredis  %+v", i, u, mp.Ended, rp.Ended)
				}
			}
		}
	}
	_ = col
}

// seenAt says where an offline user's last_seen is in the life of the
// session whose end took them offline (the newest ended): "connect", "end"
// or "between" ("" online or unknown). TestRedisMatchesMemory compares it,
// as the two stores' clocks differ.
func seenAt(a presence.Aggregate) string {
	if a.Status != presence.Offline || len(a.Ended) == 0 {
		return ""
	}
	last := a.Ended[len(a.Ended)-1]
	switch {
	case a.LastSeen.Equal(last.ConnectedAt):
		return "connect"
	case a.LastSeen.Equal(last.EndedAt):
		return "end"
	}
	return "between"
}

// A dead incarnation's sessions end as node_lost: by any node, once.
func TestRedisSweepsLostNode(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	dead, _ := newRedisStore(t, c, "dead")
	alive, col := newRedisStore(t, c, "alive")
	other, _ := newRedisStore(t, c, "other")
	for _, a := range []presence.OpenArgs{
		{User: "bob", ID: "phone", Node: "dead", TTL: time.Hour},
		{User: "carol", ID: "phone", Node: "dead", TTL: time.Hour},
	} {
		if _, err := dead.Open(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := alive.Open(ctx, presence.OpenArgs{User: "carol", ID: "laptop", Node: "alive", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	waitUser(t, col, "carol", func(p presence.Aggregate) bool { return len(p.Sessions) == 2 })
	dead.halt() // a crash: no more refreshes; its record expires after NodeTTL
	if n, _ := alive.Sweep(ctx); n != 0 {
		t.Fatalf("swept a live node: %d", n)
	}
	total := 0
	testkit.Wait(t, 10*time.Second, "the dead node swept", func() error {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, s := range []*Redis{alive, other} { // racing sweepers
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := s.Sweep(ctx)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}()
		}
		wg.Wait()
		return testkit.Why(total >= 2, fmt.Sprintf("%d sessions ended", total))
	})
	if total != 2 {
		t.Fatalf("sweepers ended %d sessions, want 2", total)
	}
	waitUser(t, col, "bob", func(p presence.Aggregate) bool { return p.Status == presence.Offline })
	carol := waitUser(t, col, "carol", func(p presence.Aggregate) bool { return len(p.Sessions) == 1 })
	if carol.Status != presence.Online || carol.Sessions[0].Node != "alive" {
		t.Fatalf("carol: %+v", carol)
	}
	u, _, _ := alive.User(ctx, "bob")
	if u.Ended[0].EndReason != presence.EndNodeLost {
		t.Fatalf("bob ended: %+v", u.Ended)
	}
}

// Every operation's keys live in one slot: the whole life of a user works
// on a 3-master cluster.
func TestRedisCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	r, col := newRedisStore(t, cl.Client(t), "n1")
	ctx := context.Background()
	users := []string{"ann", "ben", "cat", "dan", "eve", "fay", "gus", "hal"}
	for _, u := range users {
		s, err := r.Open(ctx, presence.OpenArgs{User: u, ID: u + "-1", Node: "n1", TTL: time.Hour})
		if err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
		away := presence.Away
		if err := r.Update(ctx, presence.SessionRef{User: u, ID: s.ID, Epoch: s.Epoch}, presence.Update{Status: &away}); err != nil {
			t.Fatal(err)
		}
		if stale, err := r.Renew(ctx, []presence.SessionRef{{User: u, ID: s.ID, Epoch: s.Epoch}}, time.Hour); err != nil || len(stale) != 0 {
			t.Fatalf("renew: %v %v", stale, err)
		}
		if err := r.End(ctx, presence.EndArgs{User: u, ID: s.ID, Epoch: s.Epoch, Reason: presence.EndClean}); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range users {
		waitUser(t, col, u, func(p presence.Aggregate) bool { return p.Status == presence.Offline })
	}
	before := col.Len()
	err := r.Load(ctx)
	if n := col.Len() - before; err != nil || n != len(users) {
		t.Fatalf("load over the cluster: %d users, %v", n, err)
	}
}

// Two nodes with one node id on one Redis: the second refuses to start,
// naming the id, while the first lives. After a crash (the record left to
// expire) a new run with that id waits until the record has missed a
// refresh, then takes it over; after a clean stop it starts at once.
func TestRedisNodeIDInUse(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	first, _ := newRedisStore(t, c, "twin")
	twin := NewRedis(RedisOptions{
		Client: c, Prefix: "t:" + t.Name() + ":", Node: "twin", NodeTTL: 3 * time.Second,
		Retention: time.Hour, Log: nil, Report: func(Event) {},
	})
	start := time.Now()
	err := twin.Start(context.Background())
	if !errors.Is(err, ErrNodeIDInUse) || !strings.Contains(err.Error(), `"twin"`) {
		twin.Stop()
		t.Fatalf("second node with the same id: %v, want ErrNodeIDInUse naming the id", err)
	}
	t.Logf("refused after %v: %v", time.Since(start).Round(time.Millisecond), err)

	first.halt() // a crash
	again := NewRedis(RedisOptions{
		Client: c, Prefix: "t:" + t.Name() + ":", Node: "twin", NodeTTL: 3 * time.Second,
		Retention: time.Hour, Log: nil, Report: func(Event) {},
	})
	start = time.Now()
	if err := again.Start(context.Background()); err != nil {
		t.Fatalf("restart after a crash: %v", err)
	}
	took := time.Since(start)
	t.Logf("restart after a crash claimed the id after %v", took.Round(time.Millisecond))
	if took > 3*time.Second/3+time.Second {
		t.Errorf("restart after a crash took %v, want at most node_ttl/3 + 1 s", took)
	}
	if inc, _ := c.Get(context.Background(), "t:"+t.Name()+":node:twin").Result(); inc != again.Incarnation() {
		t.Errorf("record names %q, want the new incarnation %q", inc, again.Incarnation())
	}
	again.Stop() // clean: the record goes with it
	last := NewRedis(RedisOptions{
		Client: c, Prefix: "t:" + t.Name() + ":", Node: "twin", NodeTTL: 3 * time.Second,
		Retention: time.Hour, Log: nil, Report: func(Event) {},
	})
	start = time.Now()
	if err := last.Start(context.Background()); err != nil {
		t.Fatalf("restart after a clean stop: %v", err)
	}
	defer last.Stop()
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("restart after a clean stop took %v, want it at once", took)
	}
}

// Redis restarted empty: the node's record is gone, and the store reports a
// Reset (with a new incarnation) instead of calling into the node; Tombstone
// then records offline, above the version observers hold, a user Redis lost.
func TestRedisResetAndTombstone(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	r, col := newRedisStore(t, c, "n1")
	ctx := context.Background()
	if _, err := r.Open(ctx, presence.OpenArgs{User: "gil", ID: "phone", Node: "n1", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	on := waitUser(t, col, "gil", func(p presence.Aggregate) bool { return p.Status == presence.Online })
	inc := r.Incarnation()
	// The registrar registers the incarnation off the open's path: let it
	// be done, or it may register it again after the flush, which the store
	// takes (correctly, too) for a partial loss rather than an empty Redis.
	// Let a refresh pass first, which is time enough for it.
	pttl := func(cond func(time.Duration) bool) func() error {
		return func() error {
			d, err := c.PTTL(ctx, "t:"+t.Name()+":node:n1").Result()
			return testkit.Why(err == nil && cond(d), fmt.Sprint(d, err))
		}
	}
	testkit.Wait(t, 10*time.Second, "the record ageing", pttl(func(d time.Duration) bool { return d < 2500*time.Millisecond }))
	testkit.Wait(t, 10*time.Second, "a refresh", pttl(func(d time.Duration) bool { return d > 2900*time.Millisecond }))
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, 10*time.Second, "a Reset reported", func() error {
		col.mu.Lock()
		defer col.mu.Unlock()
		for _, e := range col.others {
			if e.Kind == Reset && e.Settle > 0 {
				return nil
			}
		}
		return fmt.Errorf("events %+v", col.others)
	})
	if r.Incarnation() == inc || r.Stats().Resets != 1 {
		t.Fatalf("incarnation %s (was %s), resets %d", r.Incarnation(), inc, r.Stats().Resets)
	}
	n, err := r.Tombstone(ctx, map[string]uint64{"gil": on.Version})
	if err != nil || n != 1 {
		t.Fatalf("tombstone: %d %v", n, err)
	}
	off := waitUser(t, col, "gil", func(p presence.Aggregate) bool { return p.Status == presence.Offline })
	if off.Version <= on.Version {
		t.Fatalf("tombstone version %d, not above %d", off.Version, on.Version)
	}
	if n, _ := r.Tombstone(ctx, map[string]uint64{"gil": on.Version}); n != 0 {
		t.Fatalf("a second tombstone wrote %d", n)
	}
}

// The per-incarnation user set keeps only the users the node still has a
// session of: one whose sessions all ended leaves it at the next reap.
func TestRedisReapDropsUsersWithoutSessions(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	r, _ := newRedisStore(t, c, "n1")
	ctx := context.Background()
	set := "t:" + t.Name() + ":nu:" + member("n1", r.Incarnation())
	gone, err := r.Open(ctx, presence.OpenArgs{User: "gone", ID: "g", Node: "n1", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := r.Open(ctx, presence.OpenArgs{User: "kept", ID: "k", Node: "n1", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.End(ctx, presence.EndArgs{User: "gone", ID: "g", Epoch: gone.Epoch, Reason: presence.EndClean}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Renew(ctx, []presence.SessionRef{{User: "kept", ID: "k", Epoch: kept.Epoch}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	members, err := c.SMembers(ctx, set).Result()
	if err != nil || len(members) != 1 || members[0] != "kept" {
		t.Fatalf("set %s = %v (%v), want only kept", set, members, err)
	}
	// gone comes back: registered again.
	if _, err := r.Open(ctx, presence.OpenArgs{User: "gone", ID: "g2", Node: "n1", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.SIsMember(ctx, set, "gone").Result(); !ok {
		t.Fatal("a returning user is not in the set")
	}
}

// A node record found gone while Redis was failing over is not its node's
// fault: the sweeper waits, the node writes its record again with the same
// incarnation (no reset, nothing reopened) and is kept. Without doubt a
// gone record is swept at once, as before.
func TestRedisGoneRecordInDoubt(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	a, _ := newRedisStore(t, c, "a")
	b, col := newRedisStore(t, c, "b")
	if _, err := a.Open(ctx, presence.OpenArgs{User: "bob", ID: "phone", Node: "a", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	waitUser(t, col, "bob", func(p presence.Aggregate) bool { return p.Status == presence.Online })
	inc := a.Incarnation()
	record := "t:" + t.Name() + ":node:a"
	if err := c.Del(ctx, record).Err(); err != nil { // lost with a dead master
		t.Fatal(err)
	}
	b.failoverAt.Store(time.Now().UnixNano())
	if n, err := b.Sweep(ctx); n != 0 || err != nil {
		t.Fatalf("swept a node whose record was gone in doubt: %d %v", n, err)
	}
	if lost, err := a.refresh(ctx); lost || err != nil {
		t.Fatalf("refresh: lost %v, %v", lost, err)
	}
	if a.Incarnation() != inc || a.Stats().Resets != 0 {
		t.Fatalf("incarnation %s (was %s), resets %d", a.Incarnation(), inc, a.Stats().Resets)
	}
	if got, _ := c.Get(ctx, record).Result(); got != inc {
		t.Fatalf("record %q, want %q", got, inc)
	}
	b.failoverAt.Store(0)
	if n, err := b.Sweep(ctx); n != 0 || err != nil {
		t.Fatalf("swept a node whose record is back: %d %v", n, err)
	}
	// Gone, its deadline still ahead, without doubt: only Redis separates
	// the two (they are written by one refresh), so it is not swept either.
	a.halt()
	if err := c.Del(ctx, record).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Sweep(ctx); n != 0 || err != nil {
		t.Fatalf("swept a node whose record was gone with its deadline ahead: %d %v", n, err)
	}
	// Gone with its deadline passed (as the record's expiry brings about),
	// without doubt: swept at once.
	pastDeadline(t, c, b, "a", inc)
	if n, err := b.Sweep(ctx); n != 1 || err != nil {
		t.Fatalf("sweep of a gone record without doubt: %d %v", n, err)
	}
	waitUser(t, col, "bob", func(p presence.Aggregate) bool { return p.Status == presence.Offline })
}

// Own lists the live sessions of this incarnation (and of no other node),
// also on a server that lost its scripts (a promoted replica); the audit
// ends those the node no longer holds (tracker.Ghosts chooses them) with the
// epoch-checked End, as timeouts, and keeps the others.
func TestRedisOwnAndGhostEnd(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	r, col := newRedisStore(t, c, "n1")
	r2, _ := newRedisStore(t, c, "n2")
	ghost, err := r.Open(ctx, presence.OpenArgs{User: "gus", ID: "g", Node: "n1", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	held, err := r.Open(ctx, presence.OpenArgs{User: "hal", ID: "h", Node: "n1", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Open(ctx, presence.OpenArgs{User: "gus", ID: "g2", Node: "n2", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	own, err := r.Own(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(own, func(i, j int) bool { return own[i].User < own[j].User })
	want := []presence.StoredSession{{SessionRef: presence.SessionRef{User: "gus", ID: "g", Epoch: ghost.Epoch}, Status: presence.Online},
		{SessionRef: presence.SessionRef{User: "hal", ID: "h", Epoch: held.Epoch}, Status: presence.Online}}
	if !slices.Equal(own, want) {
		t.Fatalf("own %+v, want %+v", own, want)
	}
	if err := r.End(ctx, presence.EndArgs{User: "gus", ID: "g", Epoch: ghost.Epoch, Reason: presence.EndTimeout}); err != nil {
		t.Fatal(err)
	}
	waitUser(t, col, "gus", func(p presence.Aggregate) bool { return len(p.Sessions) == 1 && p.Sessions[0].ID == "g2" })
	u, _, _ := r.User(ctx, "gus")
	if len(u.Ended) != 1 || u.Ended[0].Epoch != ghost.Epoch || u.Ended[0].EndReason != presence.EndTimeout {
		t.Fatalf("gus ended: %+v", u.Ended)
	}
	if hal, _, _ := r.Get(ctx, "hal"); hal.Status != presence.Online {
		t.Fatalf("hal: %+v", hal)
	}
	if own, err := r.Own(ctx); err != nil || len(own) != 1 || own[0].User != "hal" {
		t.Fatalf("own after the end: %+v %v", own, err)
	}
	// Own carries each session's own state, as the node last wrote it.
	away, lunch, desk := presence.Away, "lunch", "desk"
	if err := r.Update(ctx, presence.SessionRef{User: "hal", ID: "h", Epoch: held.Epoch}, presence.Update{Status: &away, Text: &lunch, Device: &desk}); err != nil {
		t.Fatal(err)
	}
	if own, err := r.Own(ctx); err != nil || len(own) != 1 || own[0].Status != presence.Away || own[0].Text != "lunch" || own[0].Device != "desk" {
		t.Fatalf("own after an update: %+v %v", own, err)
	}
}

// An outage is one outage however often calls fail and succeed during it:
// one warning, readiness false throughout, and it ends only once Redis
// has answered for outageQuiet without a failure, with a Recovered event.
func TestRedisOutageIsOne(t *testing.T) {
	srv := redistest.Start(t)
	r, col := newRedisStore(t, srv.Client(t), "n1")
	boom := errors.New("connection refused")
	for range 5 {
		_ = r.fail("open", boom)
		r.up()
		if r.Ready() {
			t.Fatal("ready between failed calls")
		}
	}
	if n := r.Stats().Outages; n != 1 {
		t.Fatalf("outages %d, want 1", n)
	}
	start := time.Now()
	testkit.Wait(t, 5*time.Second, "the outage ended", func() error {
		r.up() // a call that succeeded
		return testkit.Why(r.Ready(), "not ready")
	})
	if d := time.Since(start); d < outageQuiet-50*time.Millisecond {
		t.Fatalf("ended after %v, before the quiet %v", d, outageQuiet)
	}
	testkit.Wait(t, 5*time.Second, "Recovered reported", func() error {
		col.mu.Lock()
		defer col.mu.Unlock()
		for _, e := range col.others {
			if e.Kind == Recovered {
				return nil
			}
		}
		return fmt.Errorf("events %+v", col.others)
	})
}

// On a cluster the sets of users of an incarnation live in their users'
// slots, and a sweep finds every one of them.
func TestRedisClusterSweep(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	ctx := context.Background()
	dead, _ := newRedisStore(t, c, "dead")
	alive, col := newRedisStore(t, c, "alive")
	users := []string{"ann", "ben", "cat", "dan", "eve", "fay", "gus", "hal"}
	for _, u := range users {
		if _, err := dead.Open(ctx, presence.OpenArgs{User: u, ID: u + "-1", Node: "dead", TTL: time.Hour}); err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
	}
	dead.halt()
	if err := c.Del(ctx, "t:"+t.Name()+":node:dead").Err(); err != nil {
		t.Fatal(err)
	}
	pastDeadline(t, c, alive, "dead", dead.Incarnation())
	n, err := alive.Sweep(ctx)
	if err != nil || n != len(users) {
		t.Fatalf("swept %d (%v), want %d", n, err, len(users))
	}
	for _, u := range users {
		waitUser(t, col, u, func(p presence.Aggregate) bool { return p.Status == presence.Offline })
	}
}

// A sweep of many sessions stopped by its deadline is no outage, and the
// next pass goes on where it stopped: the sessions it ended are out of the
// dead incarnation's set.
func TestRedisSweepResumesAfterItsDeadline(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	dead, _ := newRedisStore(t, c, "dead")
	alive, _ := newRedisStore(t, c, "alive")
	const n = 3000
	for i := range n {
		if _, err := dead.Open(ctx, presence.OpenArgs{User: fmt.Sprintf("u%d", i), ID: "d", Node: "dead", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	set := dead.k.allNodeUsers(member("dead", dead.Incarnation()))[0]
	dead.halt()
	outages := alive.Stats().Outages
	total, passes, interrupted := 0, 0, 0
	testkit.Wait(t, 30*time.Second, "the dead node swept", func() error {
		before, err := c.SCard(ctx, set).Result()
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, 15*time.Millisecond)
		got, err := alive.Sweep(pctx)
		cancel()
		total += got
		passes++
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("pass %d: %v, want only the deadline", passes, err)
			}
			interrupted++
			if after, _ := c.SCard(ctx, set).Result(); got > 0 && after != before-int64(got) {
				t.Fatalf("pass %d ended %d sessions but the set went from %d to %d: a next pass starts again", passes, got, before, after)
			}
		}
		return testkit.Why(total >= n && err == nil, fmt.Sprintf("%d of %d ended in %d passes (last: %v)", total, n, passes, err))
	})
	if total != n {
		t.Fatalf("ended %d sessions, want %d", total, n)
	}
	if o := alive.Stats().Outages; o != outages {
		t.Fatalf("the sweep's own deadline counted as %d outages", o-outages)
	}
	if registered(t, c, alive.k, member("dead", dead.Incarnation())) {
		t.Fatalf("the swept incarnation is still registered")
	}
	t.Logf("%d sessions swept in %d passes of 15 ms (%d stopped by the deadline)", n, passes, interrupted)
}

// The mechanism a resumed sweep rests on: ending a chunk of a dead
// incarnation's users takes exactly those users out of its set, in the
// same step as their end.
func TestRedisSweepChunkLeavesTheSet(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	dead, _ := newRedisStore(t, c, "dead")
	alive, _ := newRedisStore(t, c, "alive")
	for i := range 20 {
		if _, err := dead.Open(ctx, presence.OpenArgs{User: fmt.Sprintf("u%d", i), ID: "d", Node: "dead", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	inc := dead.Incarnation()
	set := dead.k.allNodeUsers(member("dead", inc))[0]
	users, err := alive.members(ctx, []string{set})
	if err != nil || len(users) != 20 {
		t.Fatalf("members: %d, %v; want 20", len(users), err)
	}
	n, err := alive.endNodeUsers(ctx, "dead", inc, users[:5])
	if err != nil || n != 5 {
		t.Fatalf("ended %d, %v; want 5", n, err)
	}
	left, _ := c.SMembers(ctx, set).Result()
	if len(left) != 15 {
		t.Fatalf("%d users left in the set, want 15", len(left))
	}
	for _, u := range users[:5] {
		if slices.Contains(left, u.user) {
			t.Fatalf("%s was ended but is still in the set", u.user)
		}
		if a, _, _ := alive.User(ctx, u.user); len(a.Current.Sessions) != 0 {
			t.Fatalf("%s still has sessions: %+v", u.user, a.Current.Sessions)
		}
	}
}

// An open of a user new to the incarnation puts the incarnation back in
// the registry in the same round trip, the single way and in a batch: a
// registry Redis lost (an empty restart not yet noticed) holds it again
// by the time the open returns, so that a crash right after is swept.
func TestRedisOpenRegistersTheIncarnation(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	r, _ := newRedisStore(t, c, "n1")
	m := member("n1", r.Incarnation())
	for i, open := range []func(user string) error{
		func(user string) error {
			_, err := r.Open(ctx, presence.OpenArgs{User: user, ID: "d", Node: "n1", TTL: time.Hour})
			return err
		},
		func(user string) error {
			_, errs := r.Batch(ctx, []presence.Write{{Kind: presence.WriteOpen, Open: presence.OpenArgs{User: user, ID: "d", Node: "n1", TTL: time.Hour}}})
			return errs[0]
		},
	} {
		if err := c.Del(ctx, r.k.registry()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := open(fmt.Sprintf("new%d", i)); err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if !registered(t, c, r.k, m) {
			t.Fatalf("open %d returned with the incarnation not in the registry", i)
		}
	}
}

// pastDeadline makes the deadline of node's incarnation inc pass at once,
// as it does when a dead node's record expires (both are written by one
// refresh): a test that deletes the record by hand to stand for its expiry
// does this too.
func pastDeadline(t *testing.T, c redis.UniversalClient, r *Redis, node, inc string) {
	t.Helper()
	if err := c.ZAdd(context.Background(), r.k.registry(), redis.Z{Score: 0, Member: member(node, inc)}).Err(); err != nil {
		t.Fatal(err)
	}
}

// registered reports whether m is in the registry (a sorted set by
// deadline since issue 17; a set before).
func registered(t *testing.T, c redis.UniversalClient, k keys, m string) bool {
	t.Helper()
	_, err := c.ZScore(context.Background(), k.registry(), m).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return err == nil
}

// randomPrivacy sets upd's privacy keys at random (or leaves them out):
// TestRedisMatchesMemory's account steps.
func randomPrivacy(rng *rand.Rand, upd *presence.AccountUpdate) {
	if rng.Intn(3) == 0 {
		return
	}
	if rng.Intn(2) == 0 {
		on := rng.Intn(2) == 0
		upd.Invisible = &on
	}
	if rng.Intn(2) == 0 {
		m := []presence.LastSeenMode{presence.LastSeenExact, presence.LastSeenQuarter, presence.LastSeenHidden}[rng.Intn(3)]
		upd.LastSeen = &m
	}
}

// samePrivacyShape compares the privacy two stores report: the setting,
// and which of the fixed times are set (each store has its own clock).
func samePrivacyShape(a, b presence.Privacy) bool {
	return a.Invisible == b.Invisible && a.LastSeen == b.LastSeen && a.Since.IsZero() == b.Since.IsZero() && a.Seen.IsZero() == b.Seen.IsZero()
}
