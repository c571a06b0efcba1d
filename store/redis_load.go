package store

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

// listen reports the change feed. After go-redis re-subscribes (a lost
// connection), it loads everything again: messages may have been missed.
func (r *Redis) listen() {
	defer r.wg.Done()
	for {
		msg, err := r.ps.Receive(context.Background())
		select {
		case <-r.stop:
			return
		default:
		}
		if err != nil {
			_ = r.fail("feed", err)
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case <-r.stop:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Message:
			if m.Channel == r.k.groupBatches() {
				var d roster.Delta
				if err := json.Unmarshal([]byte(m.Payload), &d); err != nil || presence.ValidGroup(d.Group) != nil || d.Version != d.Follows+1 {
					r.stats.feedErrors.Add(1)
					r.log.Error("undecodable group batch", "err", err)
					continue
				}
				r.report(Event{Kind: GroupBatch, Delta: &d})
				continue
			}
			if m.Channel == r.k.groupFeed() {
				if presence.ValidGroup(m.Payload) != nil {
					r.stats.feedErrors.Add(1)
					r.log.Error("bad group name on the group feed", "group", m.Payload)
					continue
				}
				r.report(Event{Kind: GroupChanged, Group: m.Payload})
				continue
			}
			e, err := decodeFeed([]byte(m.Payload))
			if err != nil {
				r.stats.feedErrors.Add(1)
				r.log.Error("undecodable change on the feed", "err", err)
				continue
			}
			r.report(e)
		case *redis.Subscription:
			switch {
			case m.Kind != "subscribe":
			case m.Channel == r.k.groupFeed():
				r.report(Event{Kind: GroupChanged}) // every group: changes may have been missed
			case m.Channel == r.k.groupBatches():
				r.report(Event{Kind: GroupBatch}) // no delta: batches may have been missed, read the groups again
			default:
				r.reload()
			}
		}
	}
}

// reload loads every user again after a re-subscription, retrying until it
// succeeds (the command pool may still be backing off when the subscription
// connection is back).
func (r *Redis) reload() {
	r.stats.reloads.Add(1)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := r.Load(ctx)
		cancel()
		if err == nil {
			return
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-r.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Load reports every user record (from every master of a cluster, read
// with SCAN and HGETALL) as a change, the same way as the feed's. Offline
// users older than the retention have expired in Redis already.
func (r *Redis) Load(ctx context.Context) error {
	var mu sync.Mutex // ForEachMaster scans the masters side by side
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, r.k.userPattern(), 1000).Iterator()
		for it.Next(ctx) {
			key := it.Val()
			user, ok := r.k.userOf(key)
			if !ok {
				continue
			}
			h, err := c.HGetAll(ctx, key).Result()
			if err != nil {
				return err
			}
			_, p, ok, err := decodeUser(user, h)
			if err != nil {
				r.log.Error("undecodable user record", "err", err, "user", user)
				continue
			}
			if ok {
				mu.Lock()
				r.report(Event{Kind: Changed, Aggregate: p})
				mu.Unlock()
			}
		}
		return it.Err()
	}
	var err error
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, r.c)
	}
	return r.fail("load", err)
}

// hgetall reads one user's hash.
func (r *Redis) hgetall(ctx context.Context, user string) (map[string]string, error) {
	h, err := r.c.HGetAll(ctx, r.k.user(user)).Result()
	if err != nil {
		return nil, r.fail("read", err)
	}
	return h, nil
}

// Get returns a user's current aggregate (tests compare the stores with it).
func (r *Redis) Get(ctx context.Context, user string) (presence.Aggregate, bool, error) {
	h, err := r.hgetall(ctx, user)
	if err != nil {
		return presence.Aggregate{}, false, err
	}
	_, p, ok, err := decodeUser(user, h)
	return p, ok, err
}

// User returns a user's whole record: live and recently ended sessions.
func (r *Redis) User(ctx context.Context, user string) (presence.User, bool, error) {
	h, err := r.hgetall(ctx, user)
	if err != nil {
		return presence.User{}, false, err
	}
	u, _, ok, err := decodeUser(user, h)
	return u, ok, err
}
