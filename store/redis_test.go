package store

import (
	"context"
	"errors"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/presence"
)

type collected struct {
	mu  sync.Mutex
	all []presence.Presence
}

func (c *collected) add(p presence.Presence) {
	c.mu.Lock()
	c.all = append(c.all, p)
	c.mu.Unlock()
}

func (c *collected) last(user string) (presence.Presence, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.all) - 1; i >= 0; i-- {
		if c.all[i].User == user {
			return c.all[i], true
		}
	}
	return presence.Presence{}, false
}

func newRedisStore(t *testing.T, c redis.UniversalClient, node string) (*Redis, *collected) {
	t.Helper()
	r := NewRedis(RedisOptions{
		Client: c, Prefix: "t:" + t.Name() + ":", Node: node, Authoritative: []string{"desktop"},
		NodeTTL: 3 * time.Second, Retention: time.Hour, Log: zerolog.Nop(),
	})
	col := &collected{}
	r.Watch(col.add)
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(r.Stop)
	return r, col
}

func waitUser(t *testing.T, col *collected, user string, cond func(presence.Presence) bool) presence.Presence {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p, ok := col.last(user); ok && cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			p, _ := col.last(user)
			t.Fatalf("%s: condition not met; last %+v", user, p)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
	p := waitUser(t, col, "alice", func(p presence.Presence) bool { return p.Status == presence.Online })
	if len(p.Sessions) != 1 || p.Sessions[0].Epoch != a.Epoch || p.Sessions[0].Device != "phone" || !p.LastSeen.IsZero() {
		t.Fatalf("after open: %+v", p)
	}
	b := open("alice", "desk", "desktop")
	busy := presence.Busy
	if err := r.Update(ctx, presence.SessionRef{User: "alice", ID: "desk", Epoch: b.Epoch}, presence.Update{Status: &busy}); err != nil {
		t.Fatal(err)
	}
	waitUser(t, col, "alice", func(p presence.Presence) bool { return p.Status == presence.Busy && len(p.Sessions) == 2 })
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
	waitUser(t, col, "alice", func(p presence.Presence) bool { return p.Status == presence.DND && p.Text == "focus" })
	on := presence.Online
	empty := ""
	if err := r.SetAccount(ctx, "alice", presence.AccountUpdate{Status: &on, Text: &empty}); err != nil {
		t.Fatal(err)
	}
	waitUser(t, col, "alice", func(p presence.Presence) bool { return p.Status == presence.Busy && p.Text == "" })
	words := "battery"
	for _, e := range []presence.EndArgs{
		{User: "alice", ID: "desk", Epoch: b.Epoch, Reason: presence.EndClean},
		{User: "alice", ID: "phone", Epoch: a2.Epoch, Reason: presence.EndNetwork, LastWords: &words},
	} {
		if err := r.End(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	off := waitUser(t, col, "alice", func(p presence.Presence) bool { return p.Status == presence.Offline })
	if off.Text != "battery" || off.LastSeen.IsZero() || len(off.Sessions) != 0 || !off.Since.Equal(off.LastSeen) {
		t.Fatalf("offline: %+v", off)
	}
	// Versions strictly increase over the feed; Get and User agree with it.
	col.mu.Lock()
	for i := 1; i < len(col.all); i++ {
		if col.all[i].Version <= col.all[i-1].Version {
			t.Errorf("version %d after %d", col.all[i].Version, col.all[i-1].Version)
		}
	}
	col.mu.Unlock()
	got, ok, err := r.Get(ctx, "alice")
	if err != nil || !ok || got.Version != off.Version || got.Status != presence.Offline || got.Text != "battery" {
		t.Fatalf("Get: %+v %v %v", got, ok, err)
	}
	u, _, _ := r.User(ctx, "alice")
	if len(u.Ended) != 3 || u.Ended[0].EndReason != presence.EndNetwork || u.Ended[2].EndReason != presence.EndTakeover {
		t.Fatalf("ended: %+v", u.Ended)
	}
	// Load gives the same aggregate as the feed.
	var loaded []presence.Presence
	if err := r.Load(ctx, func(p presence.Presence) { loaded = append(loaded, p) }); err != nil {
		t.Fatal(err)
	}
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
	clk := &fakeClock{t: time.Now()}
	m := NewMemory(presence.NewRules([]string{"desktop"}), clk.now)
	mcol := &collected{}
	m.Watch(mcol.add)
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
		clk.advance(time.Millisecond)
		deadline := time.Now().Add(5 * time.Second)
		for redisMs() <= lastMs {
			if time.Now().After(deadline) {
				t.Fatal("Redis TIME did not move")
			}
		}
		u, id := users[rng.Intn(2)], ids[rng.Intn(3)]
		k := key{u, id}
		switch op := rng.Intn(5); {
		case op == 0 || mEpoch[k] == 0:
			a := presence.OpenArgs{User: u, ID: id, Node: "n1", Device: devices[rng.Intn(3)], Status: statuses[rng.Intn(5)], TTL: time.Hour}
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
			if err := m.SetAccount(ctx, u, presence.AccountUpdate{Status: &st, Text: &tx}); err != nil {
				t.Fatal(err)
			}
			if err := r.SetAccount(ctx, u, presence.AccountUpdate{Status: &st, Text: &tx}); err != nil {
				t.Fatal(err)
			}
		default:
			lw := "bye"
			reason := []presence.EndReason{presence.EndClean, presence.EndNetwork}[rng.Intn(2)]
			e1 := m.End(ctx, presence.EndArgs{User: u, ID: id, Epoch: mEpoch[k], Reason: reason, LastWords: &lw})
			e2 := r.End(ctx, presence.EndArgs{User: u, ID: id, Epoch: rEpoch[k], Reason: reason, LastWords: &lw})
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
			if mp.Status != rp.Status || mp.Text != rp.Text || len(mp.Sessions) != len(rp.Sessions) || mp.LastSeen.IsZero() != rp.LastSeen.IsZero() {
				t.Fatalf("step %d %s:\nmemory %+v\nredis  %+v", i, u, mp, rp)
			}
			for j := range mp.Sessions {
				if mp.Sessions[j].ID != rp.Sessions[j].ID || mp.Sessions[j].Status != rp.Sessions[j].Status || mp.Sessions[j].Device != rp.Sessions[j].Device {
					t.Fatalf("step %d %s: sessions differ:\nmemory %+v\nredis  %+v", i, u, mp.Sessions, rp.Sessions)
				}
			}
		}
	}
	_ = col
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
	waitUser(t, col, "carol", func(p presence.Presence) bool { return len(p.Sessions) == 2 })
	dead.Stop() // no more heartbeats; its record expires after NodeTTL
	if n, _ := alive.Reap(ctx); n != 0 {
		t.Fatalf("swept a live node: %d", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	total := 0
	for total < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("dead node not swept (ended %d)", total)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, s := range []*Redis{alive, other} { // racing sweepers
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := s.Reap(ctx)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}()
		}
		wg.Wait()
		time.Sleep(50 * time.Millisecond)
	}
	if total != 2 {
		t.Fatalf("sweepers ended %d sessions, want 2", total)
	}
	waitUser(t, col, "bob", func(p presence.Presence) bool { return p.Status == presence.Offline })
	carol := waitUser(t, col, "carol", func(p presence.Presence) bool { return len(p.Sessions) == 1 })
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
		if stale, err := r.Renew(ctx, "n1", []presence.SessionRef{{User: u, ID: s.ID, Epoch: s.Epoch}}, time.Hour); err != nil || len(stale) != 0 {
			t.Fatalf("renew: %v %v", stale, err)
		}
		if err := r.End(ctx, presence.EndArgs{User: u, ID: s.ID, Epoch: s.Epoch, Reason: presence.EndClean}); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range users {
		waitUser(t, col, u, func(p presence.Presence) bool { return p.Status == presence.Offline })
	}
	n := 0
	if err := r.Load(ctx, func(presence.Presence) { n++ }); err != nil || n != len(users) {
		t.Fatalf("load over the cluster: %d users, %v", n, err)
	}
}
