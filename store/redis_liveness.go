package store

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Liveness in O(nodes). The registry is a sorted set (P:deadlines) of the
// incarnations that may hold sessions, each scored by its deadline: when
// its node record expires unless refreshed, on Redis's clock. The refresh
// that rewrites the record (SET … PX node_ttl GET) pushes the deadline a
// node_ttl ahead in the same round trip (ZADD), every NodeTTL/3: two
// commands, as before. A sweep asks only for the incarnations whose
// deadline passed (ZRANGEBYSCORE: one command, almost always answering
// none, however many nodes live) and reads only their records, instead of
// every node's record every interval.
//
// Redis's clock is read with TIME at start and every clockEvery, and
// carried forward on this process's monotonic clock in between
// (redisClock), so neither write nor sweep needs a script: a node whose
// own clock is off moves no deadline. An estimate that is off by a few
// milliseconds only makes a sweep look at an incarnation a little early
// (its record still names it: kept) or late.
var (
	//go:embed lua/unregister.lua
	luaUnregister string
	//go:embed lua/adopt.lua
	luaAdopt string

	scriptUnregister = redis.NewScript(luaUnregister)
	scriptAdopt      = redis.NewScript(luaAdopt)
)

// dueLimit is the most overdue incarnations one sweep looks at; the next
// sweep takes the rest.
const dueLimit = 1000

// adoptEvery is how often a node registers, with a deadline, the
// incarnations that nodes of an older version registered in their set
// (adopt.lua; at start too) while that set holds any (a rolling upgrade),
// and adoptIdle how often it looks once the set was found empty.
const (
	adoptEvery = time.Minute
	adoptIdle  = 10 * time.Minute
)

// clockEvery is how often Redis's clock is read again (and after a
// failover: the new master's clock may differ). Between two reads it is
// carried forward on the monotonic clock, which drifts from it by parts
// per million.
const clockEvery = 10 * time.Minute

// redisClock is Redis's clock as this node last read it (TIME), carried
// forward on the monotonic clock.
type redisClock struct {
	mu   sync.Mutex
	base time.Time // what TIME answered
	at   time.Time // this process's clock then (the middle of the round trip)
}

// now returns Redis's time now, and whether the clock was read less than
// clockEvery ago.
func (c *redisClock) now() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() {
		return time.Time{}, false
	}
	since := time.Since(c.at)
	return c.base.Add(since), since < clockEvery
}

// read returns when the clock was read (unix ns; 0: never).
func (c *redisClock) read() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() {
		return 0
	}
	return c.at.UnixNano()
}

// redisNow returns Redis's time, reading its clock when it was not read
// for clockEvery, or not since Redis last failed over.
func (r *Redis) redisNow(ctx context.Context) (time.Time, error) {
	if t, fresh := r.clock.now(); fresh && r.clock.read() > r.failoverAt.Load() {
		return t, nil
	}
	before := time.Now()
	t, err := r.c.Time(ctx).Result()
	if err != nil {
		return time.Time{}, err
	}
	r.clock.mu.Lock()
	r.clock.base, r.clock.at = t, before.Add(time.Since(before)/2)
	r.clock.mu.Unlock()
	return t, nil
}

// deadline is this incarnation's next deadline (ms on Redis's clock), for a
// write in a pipeline, which cannot wait for TIME: from the clock as last
// read, or this process's own before it ever was.
func (r *Redis) deadline() float64 {
	t, _ := r.clock.now()
	if t.IsZero() {
		t = time.Now()
	}
	return float64(t.Add(r.nodeTTL).UnixMilli())
}

// registerIn queues the registration of member in p, its deadline pushed
// a NodeTTL ahead; the command answers 1 when member was not registered.
func (r *Redis) registerIn(ctx context.Context, p redis.Pipeliner, member string) *redis.IntCmd {
	return p.ZAdd(ctx, r.k.registry(), redis.Z{Score: r.deadline(), Member: member})
}

// register registers this incarnation, its deadline a NodeTTL ahead.
func (r *Redis) register(ctx context.Context) error {
	if _, err := r.redisNow(ctx); err != nil {
		return r.fail("register", err)
	}
	m := member(r.node, r.Incarnation())
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		r.registerIn(ctx, p, m)
		return nil
	})
	return r.fail("register", err)
}

// unregister forgets member: out of the registry (and of the older
// versions' set).
func (r *Redis) unregister(ctx context.Context, m string) error {
	return scriptUnregister.Run(ctx, r.c, r.k.liveness(), m).Err()
}

// markDue makes member's deadline pass now, if it is registered: the
// incarnation stopped (Stop), or this node took its record over (claim).
// The sweepers then decide about it at their next pass, as
// presence.SweepDecision says (a record taken over by a restart waits the
// grace).
func (r *Redis) markDue(ctx context.Context, m string) error {
	return r.c.ZAddXX(ctx, r.k.registry(), redis.Z{Score: 0, Member: m}).Err()
}

// adopt registers the incarnations of nodes of an older version, at most
// once per adoptEvery (adoptIdle when their set was empty) unless force.
func (r *Redis) adopt(ctx context.Context, force bool) error {
	now := time.Now().UnixNano()
	last, every := r.adoptedAt.Load(), adoptIdle
	if r.older.Load() {
		every = adoptEvery
	}
	if !force && now-last < int64(every) || !r.adoptedAt.CompareAndSwap(last, now) {
		return nil
	}
	res, err := scriptAdopt.Run(ctx, r.c, r.k.liveness(), ms(r.nodeTTL)).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("adopt: unexpected reply %v", res)
	}
	if err != nil {
		r.adoptedAt.Store(last) // again at the next sweep
		return err
	}
	n := res[0]
	r.older.Store(res[1] > 0)
	if n > 0 {
		r.log.Info("incarnations registered by nodes of an older version given a deadline", "incarnations", n)
	}
	return nil
}

// due returns the incarnations whose deadline passed, at most dueLimit,
// the longest overdue first, and whether that is all of them.
func (r *Redis) due(ctx context.Context) ([]string, bool, error) {
	now, err := r.redisNow(ctx)
	if err != nil {
		return nil, false, err
	}
	members, err := r.c.ZRangeByScore(ctx, r.k.registry(), &redis.ZRangeBy{
		Min: "-inf", Max: formatMS(now), Count: dueLimit,
	}).Result()
	return members, len(members) < dueLimit, err
}

// formatMS writes t as a score: ms on Redis's clock.
func formatMS(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
