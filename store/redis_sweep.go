package store

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/presence"
)

// Sweep ends, as node_lost, the sessions of every incarnation whose node
// record is gone, and of every incarnation replaced by a restart of its node
// once the grace of presence.SweepDecision has passed (two thirds of
// NodeTTL). Any node may run it at any time; nodes racing to sweep one
// incarnation give the result of one. Each swept incarnation is reported as
// a NodeLost event.
func (r *Redis) Sweep(ctx context.Context) (int, error) {
	members, err := r.c.SMembers(ctx, r.k.registry()).Result()
	if err != nil {
		return 0, r.fail("sweep", err)
	}
	self := member(r.node, r.Incarnation())
	ended := 0
	for _, m := range members {
		if m == self {
			continue
		}
		node, inc, ok := splitMember(m)
		if !ok {
			continue
		}
		live, err := r.c.Get(ctx, r.k.node(node)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return ended, r.fail("sweep", err)
		}
		r.mu.Lock()
		decision, seen := presence.SweepDecision(inc, live, r.replaced[m], r.now(), r.nodeTTL*2/3)
		if seen.IsZero() {
			delete(r.replaced, m)
		} else {
			r.replaced[m] = seen
		}
		r.mu.Unlock()
		if decision != presence.SweepIncarnation {
			continue
		}
		n, err := r.sweep(ctx, node, inc)
		ended += n
		if err != nil {
			return ended, err
		}
		r.stats.nodesLost.Add(1)
		r.report(Event{Kind: NodeLost, Node: node, Incarnation: inc, Sessions: n})
	}
	r.up()
	return ended, nil
}

// sweep ends every session of one dead incarnation, then forgets it.
func (r *Redis) sweep(ctx context.Context, node, inc string) (int, error) {
	m := member(node, inc)
	users, err := r.c.SMembers(ctx, r.k.nodeUsers(m)).Result()
	if err != nil {
		return 0, r.fail("sweep", err)
	}
	ended := 0
	for _, u := range users {
		n, err := scriptEndNode.Run(ctx, r.c, []string{r.k.user(u)},
			node, inc, string(presence.EndNodeLost), r.auth, r.k.feed(), ms(r.retention)).Int()
		if err != nil {
			return ended, r.fail("sweep", err)
		}
		ended += n
	}
	r.stats.swept.Add(int64(ended))
	if err := r.c.Del(ctx, r.k.nodeUsers(m)).Err(); err != nil {
		return ended, r.fail("sweep", err)
	}
	if err := r.c.SRem(ctx, r.k.registry(), m).Err(); err != nil {
		return ended, r.fail("sweep", err)
	}
	return ended, nil
}

// Tombstone records as offline each user of known (user -> the version
// observers hold) whom Redis no longer has, with a version above the known
// one, so that every node publishes offline instead of keeping a stale
// online. A user Redis has again (a node re-opened a live session first)
// is left alone. It is for after a Reset, once its Settle has passed. It
// returns how many users it recorded.
func (r *Redis) Tombstone(ctx context.Context, known map[string]uint64) (int, error) {
	n := 0
	for user, v := range known {
		w, err := scriptTombstone.Run(ctx, r.c, []string{r.k.user(user)},
			user, strconv.FormatUint(v, 10), r.auth, r.k.feed(), ms(r.retention)).Int()
		if err != nil {
			return n, r.fail("tombstone", err)
		}
		if w == 1 {
			n++
			r.stats.tombstones.Add(1)
		}
	}
	return n, nil
}
