package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

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
		now := r.now()
		doubt := r.doubt(time.Now()) // failoverAt is in the process's clock
		r.mu.Lock()
		decision, seen := presence.SweepDecision(inc, live, doubt, r.replaced[m], now, r.nodeTTL*2/3)
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

// members reads the sets (pipelined: on a cluster, one round trip per
// master) and returns their members.
func (r *Redis) members(ctx context.Context, sets []string) ([]string, error) {
	cmds := make([]*redis.StringSliceCmd, len(sets))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range sets {
			cmds[i] = p.SMembers(ctx, k)
		}
		return nil
	})
	if err != nil {
		return nil, r.fail("sweep", err)
	}
	var users []string
	for _, c := range cmds {
		users = append(users, c.Val()...)
	}
	return users, nil
}

// sweep ends every session of one dead incarnation, then forgets it.
func (r *Redis) sweep(ctx context.Context, node, inc string) (int, error) {
	m := member(node, inc)
	sets := r.k.allNodeUsers(m)
	users, err := r.members(ctx, sets)
	if err != nil {
		return 0, err
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
	if _, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range sets {
			p.Del(ctx, k)
		}
		return nil
	}); err != nil {
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

// Time returns Redis's clock, which every time in the store is written in.
func (r *Redis) Time(ctx context.Context) (time.Time, error) {
	t, err := r.c.Time(ctx).Result()
	if err != nil {
		return time.Time{}, r.fail("time", err)
	}
	return t, nil
}

// Versions returns the version Redis holds for each of users (0: none).
func (r *Redis) Versions(ctx context.Context, users []string) (map[string]uint64, error) {
	cmds := make([]*redis.StringCmd, len(users))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range users {
			cmds[i] = p.HGet(ctx, r.k.user(u), "v")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, r.fail("versions", err)
	}
	out := make(map[string]uint64, len(users))
	for i, c := range cmds {
		v, err := c.Result()
		if errors.Is(err, redis.Nil) {
			out[users[i]] = 0
			continue
		}
		if err != nil {
			return nil, r.fail("versions", err)
		}
		out[users[i]], _ = strconv.ParseUint(v, 10, 64)
	}
	return out, nil
}

// Own returns the live sessions Redis holds of this incarnation, among the
// users it registered, read in one pipelined round. After a failover the
// node compares them with the sessions it holds (tracker.Ghosts): one it no
// longer holds is a session whose end the dead master took with it.
func (r *Redis) Own(ctx context.Context) ([]presence.SessionRef, error) {
	r.mu.Lock()
	inc := r.inc
	users := make([]string, 0, len(r.registered))
	for u := range r.registered {
		users = append(users, u)
	}
	r.mu.Unlock()
	cmds := make([]*redis.Cmd, len(users))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range users {
			cmds[i] = scriptOwn.EvalSha(ctx, p, []string{r.k.user(u)}, r.node, inc)
		}
		return nil
	})
	if err != nil && !isNoScript(err) {
		return nil, r.fail("own", err)
	}
	var out []presence.SessionRef
	for i, c := range cmds {
		res, err := c.StringSlice()
		if isNoScript(err) { // first use on this server (a promoted replica): the slow way
			res, err = scriptOwn.Run(ctx, r.c, []string{r.k.user(users[i])}, r.node, inc).StringSlice()
		}
		if err != nil {
			return nil, r.fail("own", err)
		}
		if len(res)%2 != 0 {
			return nil, fmt.Errorf("own %s: odd reply %v", users[i], res)
		}
		for j := 0; j < len(res); j += 2 {
			e, err := strconv.ParseUint(res[j+1], 10, 64)
			if err != nil || e == 0 {
				return nil, fmt.Errorf("own %s: bad epoch %q", users[i], res[j+1])
			}
			out = append(out, presence.SessionRef{User: users[i], ID: res[j], Epoch: e})
		}
	}
	r.up()
	return out, nil
}
