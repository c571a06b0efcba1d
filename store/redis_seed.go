package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/presence"
)

// seedChunk is how many users one pipelined round of SeedOffline writes.
const seedChunk = 2000

// SeedOffline writes users as offline users with a version, exactly as the
// store leaves a user whose one session ended cleanly. It is for the
// benchmark (cmd/presence-bench, scenario join), which needs a store of up to
// millions of users in seconds; nothing in the product calls it.
//
// The first user is written by the store's own scripts (open.lua, then
// end.lua) under node "seed"; its record is then copied to every other user
// with only its name changed (pipelined HSET and PEXPIRE of the retention,
// a chunk at a time: on a cluster go-redis sends each master its own part).
// What the seeding incarnation leaves beside the records (its registry entry
// and its set of users) is removed, so that no node sweeps it. It returns
// the record every user holds (the first user's).
func SeedOffline(ctx context.Context, c redis.UniversalClient, prefix string, users []string, retention time.Duration) (map[string]string, error) {
	if len(users) == 0 {
		return nil, errors.New("seed: no users")
	}
	if retention <= 0 {
		return nil, fmt.Errorf("seed: retention %v", retention)
	}
	r := NewRedis(RedisOptions{Client: c, Prefix: prefix, Node: "seed", NodeTTL: time.Minute, Retention: retention,
		Report: func(Event) {}})
	first := users[0]
	s, err := r.Open(ctx, presence.OpenArgs{User: first, ID: "seed", Node: "seed", TTL: time.Hour})
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	if err := r.End(ctx, presence.EndArgs{User: first, ID: s.ID, Epoch: s.Epoch, Reason: presence.EndClean}); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	inc := r.Incarnation()
	if err := c.ZRem(ctx, r.k.registry(), member("seed", inc)).Err(); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	if err := c.Del(ctx, r.k.nodeUsers(member("seed", inc), first)).Err(); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	rec, err := c.HGetAll(ctx, r.k.user(first)).Result()
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	if rec["name"] != first || rec["st"] != string(presence.Offline) || rec["v"] == "" {
		return nil, fmt.Errorf("seed: the first user's record is not an offline user with a version: %v", rec)
	}
	for chunk := range slices.Chunk(users[1:], seedChunk) {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, u := range chunk {
				fields := make([]any, 0, 2*len(rec))
				for f, v := range rec {
					if f == "name" {
						v = u
					}
					fields = append(fields, f, v)
				}
				key := r.k.user(u)
				p.HSet(ctx, key, fields...)
				p.PExpire(ctx, key, retention)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
	}
	return rec, nil
}
