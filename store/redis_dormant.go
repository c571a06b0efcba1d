package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/presence"
)

// The dormant sessions (presence/dormant.go) in Redis: end.lua keeps the
// session of a clean end that declared a check-in period as the user's
// dormant session (field dm of its hash) and puts the user in the dormant
// index of its slot (P:dz{<t>}), scored by its due time; open.lua drops it.
// The reaper (ReapDormant, a Task every reap interval) reads the entries of
// every index that are due by Redis's clock and runs dormant.lua on each
// user, which ends the session as missed, or drops or moves the entry when
// it is stale (the user checked in, or slept again). Any node may run it;
// nodes racing on one user give the result of one. The dormant session's
// node does not matter: a sweep of that node does not touch it.

// dormantIdle is how often a node that is not armed (it opened no session
// that declared a check-in period, heard no dormant user and found none in
// the index) looks at the dormant index: a deployment that never uses
// dormancy pays two Redis commands per node per dormantIdle for it, not two
// per reap interval. An armed node reaps every reap interval. A sleeper
// whose node died before any other was armed is found by this look: at
// most dormantIdle late.
const dormantIdle = 30 * time.Second

// dormantChunk is how many due users one pass reads from each index.
const dormantChunk = 512

// dormantLease names the lease of the one node of a Redis Cluster that
// reaps the dormant sessions (each pass reads 16,384 indexes).
const dormantLease = "dormant"

// ReapDormant ends, as missed, the dormant sessions whose due time has
// passed, and returns how many. On a Redis Cluster it reads one index per
// slot, pipelined (one round trip per master), and only on the node that
// holds the dormant lease (kept for three passes, at least 3 s: when that
// node dies, another takes over within that time).
func (r *Redis) ReapDormant(ctx context.Context) (int, error) {
	armed := r.dormantArmed.Load()
	if !armed {
		now := time.Now().UnixNano()
		if last := r.dormantLast.Load(); last != 0 && now-last < int64(dormantIdle) {
			return 0, nil
		}
		r.dormantLast.Store(now)
	}
	if r.k.cluster {
		held, err := r.Lease(ctx, dormantLease, max(3*r.dormantEvery, 3*time.Second))
		if err != nil || !held {
			return 0, err
		}
	}
	now, err := r.c.Time(ctx).Result()
	if err != nil {
		return 0, r.fail("reap dormant", err)
	}
	max := strconv.FormatInt(now.UnixMilli(), 10)
	idx := r.k.allDormantIndexes()
	cmds := make([]*redis.StringSliceCmd, len(idx))
	_, err = r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range idx {
			cmds[i] = p.ZRangeByScore(ctx, k, &redis.ZRangeBy{Min: "-inf", Max: max, Count: dormantChunk})
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, r.fail("reap dormant", err)
	}
	if !armed {
		r.armIfDormant(ctx, cmds)
	}
	missed := 0
	for i, c := range cmds {
		for _, u := range c.Val() {
			if presence.ValidUser(u) != nil {
				_ = r.c.ZRem(ctx, idx[i], u).Err()
				continue
			}
			n, err := scriptDormant.Run(ctx, r.c, append(r.k.commitKeys(u), idx[i]), u, r.auth, ms(r.retention)).Int()
			if err != nil {
				return missed, r.fail("reap dormant", err)
			}
			missed += n
		}
	}
	r.stats.missed.Add(int64(missed))
	r.up()
	return missed, nil
}

// armIfDormant arms the reaper of a node that was not (ReapDormant) when
// the index holds a sleeper: one due now (cmds), or, on a single server,
// any (ZCARD).
func (r *Redis) armIfDormant(ctx context.Context, cmds []*redis.StringSliceCmd) {
	for _, c := range cmds {
		if len(c.Val()) > 0 {
			r.dormantArmed.Store(true)
			return
		}
	}
	if !r.k.cluster {
		if n, err := r.c.ZCard(ctx, r.k.allDormantIndexes()[0]).Result(); err == nil && n > 0 {
			r.dormantArmed.Store(true)
		}
	}
}

// msDuration reads a duration the scripts write as milliseconds (zero for
// anything negative or not a whole number).
func msDuration(v float64) time.Duration {
	if v <= 0 || v > float64(presence.MaxExpect.Milliseconds()) || v != float64(int64(v)) {
		return 0
	}
	return time.Duration(v) * time.Millisecond
}

// nextExpected reads a change's next expected check-in: dormant only.
func (w wireChange) nextExpected() (time.Time, error) {
	if presence.Status(w.St) != presence.Dormant {
		if w.Nx != "" {
			return time.Time{}, fmt.Errorf("feed next_expected %q with status %q", w.Nx, w.St)
		}
		return time.Time{}, nil
	}
	t, err := msString(w.Nx)
	if err != nil || t.IsZero() {
		return time.Time{}, fmt.Errorf("feed dormant next_expected %q", w.Nx)
	}
	return t, nil
}

// decodeDormant reads a user's dormant session (field dm of its hash) into
// u.Dormant, and its next expected check-in into w (when w is dormant).
func decodeDormant(u *presence.User, w *wireChange, raw string) error {
	if raw == "" || raw == "{}" {
		return nil
	}
	var ws wireSession
	if err := json.Unmarshal([]byte(raw), &ws); err != nil {
		return fmt.Errorf("dormant session of %s: %w", u.Name, err)
	}
	s, err := ws.session(u.Name)
	if err != nil {
		return fmt.Errorf("dormant session of %s: %w", u.Name, err)
	}
	s.State = presence.Disconnected
	s.ExpiresAt = msTime(ws.X)
	u.Dormant = &s
	if presence.Status(w.St) == presence.Dormant {
		w.Nx = strconv.FormatInt(s.NextExpected().UnixMilli(), 10)
	}
	return nil
}
