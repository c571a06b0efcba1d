package store

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"
)

// Liveness in O(nodes): every incarnation has a deadline in one sorted set
// (P:deadlines, in the registry's slot), score = when its record expires on
// Redis's clock, pushed ahead by the same refresh that rewrites the record
// (heartbeat.lua, every NodeTTL/3). A sweep asks only for the incarnations
// whose deadline passed (due.lua: one command, almost always answering
// none) and reads only their records, instead of every node's record every
// interval. The scripts below touch only the registry and the deadlines.
var (
	//go:embed lua/heartbeat.lua
	luaHeartbeat string
	//go:embed lua/due.lua
	luaDue string
	//go:embed lua/unregister.lua
	luaUnregister string
	//go:embed lua/adopt.lua
	luaAdopt string

	scriptHeartbeat  = redis.NewScript(luaHeartbeat)
	scriptDue        = redis.NewScript(luaDue)
	scriptUnregister = redis.NewScript(luaUnregister)
	scriptAdopt      = redis.NewScript(luaAdopt)
)

// dueLimit is the most overdue incarnations one sweep looks at; the next
// sweep takes the rest.
const dueLimit = 1000

// adoptEvery is how often a node gives a deadline to the registered
// incarnations that have none (adopt.lua; at start too): those of nodes of
// an older version, which write no deadline.
const adoptEvery = time.Minute

// register puts this incarnation in the registry and pushes its deadline a
// NodeTTL ahead (heartbeat.lua).
func (r *Redis) register(ctx context.Context) error {
	m := member(r.node, r.Incarnation())
	return r.fail("register", scriptHeartbeat.Run(ctx, r.c, r.k.liveness(), m, ms(r.nodeTTL)).Err())
}

// heartbeat queues heartbeat.lua for member in p (EVALSHA: see beaten).
func (r *Redis) heartbeat(ctx context.Context, p redis.Pipeliner, m string) *redis.Cmd {
	return scriptHeartbeat.EvalSha(ctx, p, r.k.liveness(), m, ms(r.nodeTTL))
}

// beaten is the answer of a heartbeat queued in a pipeline: whether member
// was added to the registry. A server that lost its scripts (a restart, a
// promoted replica) runs it again the slow way.
func (r *Redis) beaten(ctx context.Context, c *redis.Cmd, m string) (bool, error) {
	n, err := c.Int64()
	if isNoScript(err) {
		n, err = scriptHeartbeat.Run(ctx, r.c, r.k.liveness(), m, ms(r.nodeTTL)).Int64()
	}
	return n == 1, err
}

// unregister forgets member: out of the registry and the deadlines.
func (r *Redis) unregister(ctx context.Context, m string) error {
	return scriptUnregister.Run(ctx, r.c, r.k.liveness(), m).Err()
}

// markDue makes member's deadline pass now, if it has one: the incarnation
// stopped (Stop), or this node took its record over (claim). The sweepers
// then decide about it at their next pass, as presence.SweepDecision says
// (a record taken over by a restart waits the grace).
func (r *Redis) markDue(ctx context.Context, m string) error {
	return r.c.ZAddXX(ctx, r.k.deadlines(), redis.Z{Score: 0, Member: m}).Err()
}

// adopt gives a deadline to every registered incarnation without one, at
// most once per adoptEvery unless force.
func (r *Redis) adopt(ctx context.Context, force bool) error {
	now := time.Now().UnixNano()
	last := r.adoptedAt.Load()
	if !force && now-last < int64(adoptEvery) || !r.adoptedAt.CompareAndSwap(last, now) {
		return nil
	}
	n, err := scriptAdopt.Run(ctx, r.c, r.k.liveness(), ms(r.nodeTTL)).Int()
	if err != nil {
		r.adoptedAt.Store(last) // again at the next sweep
		return err
	}
	if n > 0 {
		r.log.Info("registered incarnations without a deadline (nodes of an older version) given one", "incarnations", n)
	}
	return nil
}

// due returns the incarnations whose deadline passed, at most dueLimit,
// and whether that is all of them.
func (r *Redis) due(ctx context.Context) ([]string, bool, error) {
	members, err := scriptDue.Run(ctx, r.c, []string{r.k.deadlines()}, dueLimit).StringSlice()
	return members, len(members) < dueLimit, err
}
