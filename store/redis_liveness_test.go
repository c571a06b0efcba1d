package store

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// liveIncarnations registers n live incarnations of nodes live-0 … live-n-1
// as their stores do at start (record claimed, registered, deadline set),
// with a TTL that outlasts the test, and no background work: nothing but
// the sweep measured talks to Redis meanwhile.
func liveIncarnations(t *testing.T, c redis.UniversalClient, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		r := NewRedis(RedisOptions{Client: c, Prefix: prefix, Node: fmt.Sprintf("live-%d", i), NodeTTL: time.Hour, Report: func(Event) {}})
		if err := r.claim(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.register(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// commandCalls sums INFO commandstats over servers (redistest's Calls),
// leaving out what a cluster client asks about the cluster.
func commandCalls(t *testing.T, servers []*redistest.Server) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, s := range servers {
		for cmd, n := range s.Calls(t) {
			out[cmd] += n
		}
	}
	for _, cmd := range []string{"info", "cluster|slots", "cluster|shards", "cluster|nodes", "command", "command|docs", "ping"} {
		delete(out, cmd)
	}
	return out
}

// sweepCost registers n live incarnations under a prefix of their own and
// returns the commands one sweep that finds nothing to do makes, summed
// over servers.
func sweepCost(t *testing.T, c redis.UniversalClient, servers []*redistest.Server, n int) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	prefix := fmt.Sprintf("t:%s:%d:", t.Name(), n)
	liveIncarnations(t, c, prefix, n)
	sweeper := NewRedis(RedisOptions{Client: c, Prefix: prefix, Node: "sweeper", NodeTTL: time.Hour, Report: func(Event) {}})
	if err := sweeper.register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sweeper.Sweep(ctx); err != nil { // the first adopts, and reads Redis's clock
		t.Fatal(err)
	}
	before := commandCalls(t, servers)
	got, err := sweeper.Sweep(ctx)
	if err != nil || got != 0 {
		t.Fatalf("%d live: sweep ended %d (%v)", n, got, err)
	}
	made := map[string]int64{}
	for cmd, v := range commandCalls(t, servers) {
		if d := v - before[cmd]; d > 0 {
			made[cmd] = d
		}
	}
	if registered, _ := c.ZCard(ctx, sweeper.k.registry()).Result(); registered != int64(n+1) {
		t.Fatalf("%d registered, want %d", registered, n+1)
	}
	return made
}

// The sweep's cost does not grow with the number of live nodes: with 3 and
// with 30 live incarnations registered, a sweep that finds nothing to do is
// one ZRANGEBYSCORE, counted by Redis (INFO commandstats, which would count
// those run inside a script too). Before the deadlines it was an SMEMBERS
// and a GET per other node: 4 and 31. On a single server and on a
// 3-master cluster.
func TestRedisSweepCostFlat(t *testing.T) {
	want := map[string]int64{"zrangebyscore": 1}
	t.Run("server", func(t *testing.T) {
		srv := redistest.Start(t)
		c := srv.Client(t)
		for _, n := range []int{3, 30} {
			made := sweepCost(t, c, []*redistest.Server{srv}, n)
			t.Logf("%d live incarnations: a sweep made %v", n, made)
			if !maps.Equal(made, want) {
				t.Errorf("%d live incarnations: a sweep made %v, want %v whatever the count of nodes", n, made, want)
			}
		}
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t, 3)
		c := cl.Client(t)
		for _, n := range []int{3, 30} {
			made := sweepCost(t, c, cl.Nodes(), n)
			t.Logf("%d live incarnations: a sweep made %v", n, made)
			if !maps.Equal(made, want) {
				t.Errorf("%d live incarnations: a sweep made %v, want %v whatever the count of nodes", n, made, want)
			}
		}
	})
}

// A restarted node's previous incarnation is swept once the grace of
// presence.SweepDecision (two thirds of node_ttl) has passed on the
// sweeper's clock, not before: the restart made its deadline pass at once.
func TestRedisRestartedIncarnationSweptAfterTheGrace(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	old, _ := newRedisStore(t, c, "n")
	if _, err := old.Open(ctx, presence.OpenArgs{User: "ann", ID: "phone", Node: "n", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	old.halt() // a crash
	restarted, _ := newRedisStore(t, c, "n")
	if restarted.Incarnation() == old.Incarnation() {
		t.Fatal("the restart kept the incarnation")
	}
	clock := testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sweeper := NewRedis(RedisOptions{
		Client: c, Prefix: "t:" + t.Name() + ":", Node: "sweeper", NodeTTL: 3 * time.Second,
		Retention: time.Hour, Report: func(Event) {}, Now: clock.Now,
	})
	grace := 2 * time.Second // 2/3 × node_ttl
	for _, step := range []struct {
		advance time.Duration
		want    int
	}{{0, 0}, {grace - time.Millisecond, 0}, {time.Millisecond, 1}} {
		clock.Advance(step.advance)
		if n, err := sweeper.Sweep(ctx); n != step.want || err != nil {
			t.Fatalf("after %v: swept %d sessions (%v), want %d", step.advance, n, err, step.want)
		}
	}
	u, _, _ := sweeper.User(ctx, "ann")
	if len(u.Current.Sessions) != 0 || len(u.Ended) != 1 || u.Ended[0].EndReason != presence.EndNodeLost {
		t.Fatalf("ann: %+v", u)
	}
	m := member("n", restarted.Incarnation())
	if !registered(t, c, sweeper.k, m) {
		t.Fatal("the restarted incarnation left the registry")
	}
	if registered(t, c, sweeper.k, member("n", old.Incarnation())) {
		t.Fatal("the swept incarnation is still registered")
	}
}

// A node cut off from Redis for longer than node_ttl is swept by another,
// and resets when it can reach Redis again: its next refresh finds its
// record gone and its incarnation unregistered, and it takes a new one.
func TestRedisCutOffNodeSweptThenResets(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	cut, cutEvents := newRedisStore(t, c, "cut")
	other, _ := newRedisStore(t, c, "other")
	if _, err := cut.Open(ctx, presence.OpenArgs{User: "bo", ID: "phone", Node: "cut", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	inc := cut.Incarnation()
	cut.halt() // its refreshes stop, as if it could not reach Redis
	start := time.Now()
	swept := 0
	testkit.Wait(t, cut.nodeTTL+10*time.Second, "the cut-off node swept", func() error {
		n, err := other.Sweep(ctx)
		swept += n
		return testkit.Why(err == nil && swept == 1, fmt.Sprintf("%d swept (%v)", swept, err))
	})
	if d := time.Since(start); d < cut.nodeTTL*2/3 {
		t.Fatalf("swept %v after its last refresh, before its record could expire (node_ttl %v)", d, cut.nodeTTL)
	}
	lost, err := cut.refresh(ctx) // back
	if err != nil || !lost {
		t.Fatalf("refresh after the sweep: lost %v, %v", lost, err)
	}
	cut.reset(ctx)
	if cut.Incarnation() == inc || cut.Stats().Resets != 1 {
		t.Fatalf("incarnation %s (was %s), %d resets", cut.Incarnation(), inc, cut.Stats().Resets)
	}
	testkit.Wait(t, 5*time.Second, "a Reset reported", func() error {
		cutEvents.mu.Lock()
		defer cutEvents.mu.Unlock()
		for _, e := range cutEvents.others {
			if e.Kind == Reset {
				return nil
			}
		}
		return fmt.Errorf("events %+v", cutEvents.others)
	})
	for m, want := range map[string]bool{member("cut", inc): false, member("cut", cut.Incarnation()): true} {
		if got := registered(t, c, cut.k, m); got != want {
			t.Errorf("%s: registered %v, want %v", m, got, want)
		}
	}
	if n, err := other.Sweep(ctx); n != 0 || err != nil {
		t.Fatalf("the reset node swept: %d %v", n, err)
	}
}

// An incarnation that a node of an older version registered in its set
// (no deadline) is registered with one at start and swept once it passes
// if its record is gone; a live one is kept.
func TestRedisAdoptsOlderNodes(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	prefix := "t:" + t.Name() + ":"
	k := keys{prefix: prefix}
	// Older nodes: their set and records; one dead (no record), one alive.
	if err := c.SAdd(ctx, k.legacyRegistry(), member("old-dead", "i1"), member("old-live", "i2")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, k.node("old-live"), "i2", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	r, _ := newRedisStore(t, c, "new")
	for _, m := range []string{member("old-dead", "i1"), member("old-live", "i2")} {
		if !registered(t, c, k, m) {
			t.Fatalf("%s not registered after a start", m)
		}
	}
	testkit.Wait(t, r.nodeTTL+10*time.Second, "the dead one swept", func() error {
		if _, err := r.Sweep(ctx); err != nil {
			return err
		}
		old, _ := c.SIsMember(ctx, k.legacyRegistry(), member("old-dead", "i1")).Result()
		return testkit.Why(!registered(t, c, k, member("old-dead", "i1")) && !old, "still registered")
	})
	if !registered(t, c, k, member("old-live", "i2")) {
		t.Fatal("the live old node was swept")
	}
}
