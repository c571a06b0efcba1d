package store

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/presence"
)

// listen reports what the classic subscription of Start carries: the node
// announcements (P:feed) and the group membership changes (P:gfeed). The
// changes of users and the group batches travel on sharded channels
// (redis_listen.go). After go-redis re-subscribes (a lost connection) every
// group is reported changed: changes may have been missed. An announcement
// missed is made good by the next one (each node announces itself every
// few seconds).
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
			if r.command(m) {
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
				r.log.Error("undecodable message on the feed", "err", err)
				continue
			}
			r.report(e)
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == r.k.groupFeed() {
				r.report(Event{Kind: GroupChanged}) // every group: changes may have been missed
			}
		}
	}
}

// Load implements Store: it reports the current aggregate of every user
// the store listens to (Listener), the same way as the feed's: every user
// with ListenAll (loadAll), else the users given to Listen (loadUsers).
func (r *Redis) Load(ctx context.Context) error {
	all, users := r.ls.listened()
	if all {
		return r.loadAll(ctx)
	}
	return r.loadUsers(ctx, users)
}

// loadUsersChunk is how many users one pipelined round of loadUsers reads.
const loadUsersChunk = 512

// loadUsers reports the current aggregate of each of users (pipelined
// HGETALL, a chunk at a time; on a cluster go-redis sends each master its
// own) as a change. A user Redis does not hold is not reported.
func (r *Redis) loadUsers(ctx context.Context, users []string) error {
	for chunk := range slices.Chunk(users, loadUsersChunk) {
		cmds := make([]*redis.MapStringStringCmd, len(chunk))
		_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, u := range chunk {
				cmds[i] = p.HGetAll(ctx, r.k.user(u))
			}
			return nil
		})
		if err != nil {
			return r.fail("load", err)
		}
		for i, c := range cmds {
			_, p, ok, err := decodeUser(chunk[i], c.Val())
			if err != nil {
				r.stats.feedErrors.Add(1)
				r.log.Error("undecodable user record", "err", err, "user", chunk[i])
				continue
			}
			if ok {
				r.report(Event{Kind: Changed, Aggregate: p})
			}
		}
	}
	r.up()
	return nil
}

// loadAll reports every user record (from every master of a cluster, read
// with SCAN and, a page at a time, pipelined HGETALL) as a change, the same
// way as the feed's: the firehose's load. Offline users older than the
// retention have expired in Redis already.
func (r *Redis) loadAll(ctx context.Context) error {
	var mu sync.Mutex // ForEachMaster scans the masters side by side
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, r.k.userPattern(), 1000).Result()
			if err != nil {
				return err
			}
			if err := r.loadKeys(ctx, c, keys, &mu); err != nil {
				return err
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, r.c)
	}
	return r.fail("load", err)
}

// loadKeys reads the user records of one SCAN page from c in one pipelined
// round trip and reports each (under mu) as a change.
func (r *Redis) loadKeys(ctx context.Context, c redis.Cmdable, keys []string, mu *sync.Mutex) error {
	users := make([]string, 0, len(keys))
	cmds := make([]*redis.MapStringStringCmd, 0, len(keys))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, key := range keys {
			if user, ok := r.k.userOf(key); ok {
				users = append(users, user)
				cmds = append(cmds, p.HGetAll(ctx, key))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, cmd := range cmds {
		_, a, ok, err := decodeUser(users[i], cmd.Val())
		if err != nil {
			r.stats.feedErrors.Add(1)
			r.log.Error("undecodable user record", "err", err, "user", users[i])
			continue
		}
		if ok {
			mu.Lock()
			r.report(Event{Kind: Changed, Aggregate: a})
			mu.Unlock()
		}
	}
	return nil
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
