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

// Sweep ends, as node_lost, the sessions of every incarnation whose
// deadline passed and whose node record is gone, and of every incarnation
// replaced by a restart of its node once the grace of
// presence.SweepDecision has passed (two thirds of NodeTTL). It costs one
// command (due.lua) when no deadline passed, however many nodes live; it
// reads the records of the overdue incarnations only. Any node may run it
// at any time; nodes racing to sweep one incarnation give the result of
// one. Each swept incarnation is reported as a NodeLost event.
func (r *Redis) Sweep(ctx context.Context) (int, error) {
	if err := r.adopt(ctx, false); err != nil {
		return 0, r.sweepFailed(err)
	}
	due, complete, err := r.due(ctx)
	if err != nil {
		return 0, r.sweepFailed(err)
	}
	overdue, err := r.overdue(ctx, due)
	if err != nil {
		return 0, err
	}
	now := r.now()
	doubt := r.doubt(time.Now()) // failoverAt is in the process's clock
	r.mu.Lock()
	sweep, seen := presence.SweepOverdue(overdue, complete, doubt, r.replaced, now, r.nodeTTL*2/3)
	r.replaced = seen
	r.mu.Unlock()
	ended := 0
	for _, o := range sweep {
		node, _, _ := splitMember(o.Member)
		n, err := r.sweep(ctx, node, o.Inc)
		ended += n
		if err != nil {
			return ended, err
		}
		r.stats.nodesLost.Add(1)
		r.report(Event{Kind: NodeLost, Node: node, Incarnation: o.Inc, Sessions: n})
	}
	r.up()
	return ended, nil
}

// overdue reads the records of the nodes of the overdue incarnations
// (other than this one), pipelined: on a cluster, one round trip per master.
func (r *Redis) overdue(ctx context.Context, due []string) ([]presence.Overdue, error) {
	self := member(r.node, r.Incarnation())
	var out []presence.Overdue
	var gets []*redis.StringCmd
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range due {
			node, inc, ok := splitMember(m)
			if !ok || m == self {
				continue
			}
			out = append(out, presence.Overdue{Member: m, Inc: inc})
			gets = append(gets, p.Get(ctx, r.k.node(node)))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, r.sweepFailed(err)
	}
	for i, g := range gets {
		live, err := g.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, r.sweepFailed(err)
		}
		out[i].Live = live
	}
	return out, nil
}

// sweepChunk is how many users a sweep ends in one pipelined round trip.
const sweepChunk = 256

// nodeUser is a user in one of an incarnation's sets.
type nodeUser struct{ set, user string }

// members reads the sets (pipelined: on a cluster, one round trip per
// master) and returns their members.
func (r *Redis) members(ctx context.Context, sets []string) ([]nodeUser, error) {
	cmds := make([]*redis.StringSliceCmd, len(sets))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range sets {
			cmds[i] = p.SMembers(ctx, k)
		}
		return nil
	})
	if err != nil {
		return nil, r.sweepFailed(err)
	}
	var users []nodeUser
	for i, c := range cmds {
		for _, u := range c.Val() {
			users = append(users, nodeUser{sets[i], u})
		}
	}
	return users, nil
}

// sweepFailed is r.fail for the sweep, except that the sweep's own
// deadline is no outage: a sweep that runs out of time goes on where it
// stopped at the next pass.
func (r *Redis) sweepFailed(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("sweep: %w", err)
	}
	return r.fail("sweep", err)
}

// sweep ends every session of one dead incarnation, then forgets it. It
// ends its users a pipelined chunk at a time and takes each ended one out
// of the incarnation's sets, so that a sweep stopped by its deadline (or
// an outage) resumes where it stopped instead of starting again.
func (r *Redis) sweep(ctx context.Context, node, inc string) (int, error) {
	m := member(node, inc)
	sets := r.k.allNodeUsers(m)
	users, err := r.members(ctx, sets)
	if err != nil {
		return 0, err
	}
	ended := 0
	for len(users) > 0 {
		chunk := users[:min(sweepChunk, len(users))]
		users = users[len(chunk):]
		n, err := r.endNodeUsers(ctx, node, inc, chunk)
		ended += n
		if err != nil {
			r.stats.swept.Add(int64(ended))
			return ended, err
		}
	}
	r.stats.swept.Add(int64(ended))
	if _, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range sets {
			p.Del(ctx, k)
		}
		return nil
	}); err != nil {
		return ended, r.sweepFailed(err)
	}
	if err := r.unregister(ctx, m); err != nil {
		return ended, r.sweepFailed(err)
	}
	return ended, nil
}

// endNodeUsers ends the sessions of incarnation inc of node held by users,
// in one pipelined round trip; each user leaves the incarnation's set in
// the same script. It returns how many sessions it ended.
func (r *Redis) endNodeUsers(ctx context.Context, node, inc string, users []nodeUser) (int, error) {
	args := func(u nodeUser) ([]string, []any) {
		return append(r.k.commitKeys(u.user), u.set), []any{node, inc, string(presence.EndNodeLost), r.auth, ms(r.retention), u.user}
	}
	cmds := make([]*redis.Cmd, len(users))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range users {
			keys, a := args(u)
			cmds[i] = scriptEndNode.EvalSha(ctx, p, keys, a...)
		}
		return nil
	})
	ended := 0
	for i, c := range cmds {
		n, cerr := c.Int()
		if isNoScript(cerr) { // first use on this server (a promoted replica): the slow way
			keys, a := args(users[i])
			n, cerr = scriptEndNode.Run(ctx, r.c, keys, a...).Int()
		}
		if cerr != nil {
			if err == nil || isNoScript(err) {
				err = cerr
			}
			continue
		}
		ended += n
	}
	if err != nil && !isNoScript(err) {
		return ended, r.sweepFailed(err)
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
		w, err := scriptTombstone.Run(ctx, r.c, r.k.commitKeys(user),
			user, strconv.FormatUint(v, 10), r.auth, ms(r.retention)).Int()
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

// Own returns the live sessions Redis holds of this incarnation, among the
// users it registered, read in one pipelined round, each with its own
// device, status and text. After a failover the node compares them with the
// sessions it holds (tracker.Audit): one it no longer holds is a session
// whose end the dead master took with it; one whose state is not what the
// node last wrote, an update it took.
func (r *Redis) Own(ctx context.Context) ([]presence.StoredSession, error) {
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
	var out []presence.StoredSession
	for i, c := range cmds {
		res, err := c.StringSlice()
		if isNoScript(err) { // first use on this server (a promoted replica): the slow way
			res, err = scriptOwn.Run(ctx, r.c, []string{r.k.user(users[i])}, r.node, inc).StringSlice()
		}
		if err != nil {
			return nil, r.fail("own", err)
		}
		if len(res)%5 != 0 {
			return nil, fmt.Errorf("own %s: reply of %d strings, not five a session", users[i], len(res))
		}
		for j := 0; j < len(res); j += 5 {
			e, err := strconv.ParseUint(res[j+1], 10, 64)
			if err != nil || e == 0 {
				return nil, fmt.Errorf("own %s: bad epoch %q", users[i], res[j+1])
			}
			out = append(out, presence.StoredSession{SessionRef: presence.SessionRef{User: users[i], ID: res[j], Epoch: e},
				Device: res[j+2], Status: presence.Status(res[j+3]), Text: res[j+4]})
		}
	}
	r.up()
	return out, nil
}
