package store

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/presence"
)

// The Redis store's list of users walks the user records with SCAN
// (MATCH on the record keys, <prefix>{<name prefix>*), one master of a
// cluster after the other, in the order of the lowest slot each serves,
// and reads each batch's records with one pipelined HGETALL. There is no
// index to keep: no write is added to a connect. A page costs
// O(COUNT + page) per SCAN call, the request examines at most
// presence.ListWork records; a whole walk is O(N) (with a prefix too: SCAN
// filters after it walks). SCAN's guarantee is the walk's: every user
// present from the first page to the last is returned at least once; one
// added or forgotten meanwhile may or may not be; a user may come twice on
// two pages when Redis resized its table in between (a page never holds a
// user twice). A failover or a resharding in the middle of a walk may
// repeat or miss users of the slots that moved.

// listMasters returns the masters in the order of their lowest slot (the
// one server of a single Redis or Sentinel, as slot 0).
func (r *Redis) listMasters(ctx context.Context) ([]int, error) {
	cc, ok := r.c.(*redis.ClusterClient)
	if !ok {
		return []int{0}, nil
	}
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	lowest := map[string]int{}
	for _, s := range ranges {
		if len(s.Nodes) == 0 {
			continue
		}
		if v, ok := lowest[s.Nodes[0].Addr]; !ok || s.Start < v {
			lowest[s.Nodes[0].Addr] = s.Start
		}
	}
	out := make([]int, 0, len(lowest))
	for _, v := range lowest {
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil
}

// masterOf returns the client of the master serving slot.
func (r *Redis) masterOf(ctx context.Context, slot int) (redis.Cmdable, error) {
	cc, ok := r.c.(*redis.ClusterClient)
	if !ok {
		return r.c, nil
	}
	return cc.MasterForKey(ctx, "{"+slotTag(slot)+"}")
}

// maxScanCount is the largest COUNT of one SCAN call.
const maxScanCount = 1000

// redisPos is a Redis walk's position.
type redisPos struct {
	slot   int    // the lowest slot of the master walked
	cursor uint64 // the SCAN cursor there
	count  int64  // a batch split between pages: the COUNT that read it
	after  string // and the last name taken from it
}

func (p redisPos) String() string {
	return strconv.Itoa(p.slot) + ":" + strconv.FormatUint(p.cursor, 10) + ":" + strconv.FormatInt(p.count, 10) + ":" + p.after
}

func parseRedisPos(s string) (redisPos, error) {
	f := strings.SplitN(s, ":", 4)
	if len(f) != 4 {
		return redisPos{}, fmt.Errorf("%w: undecodable cursor", presence.ErrBadQuery)
	}
	slot, err1 := strconv.Atoi(f[0])
	cur, err2 := strconv.ParseUint(f[1], 10, 64)
	count, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || slot < 0 || slot >= slots || count < 0 || count > maxScanCount ||
		(f[3] == "") != (count == 0) {
		return redisPos{}, fmt.Errorf("%w: undecodable cursor", presence.ErrBadQuery)
	}
	return redisPos{slot: slot, cursor: cur, count: count, after: f[3]}, nil
}

// List implements Store: a page of users, read from Redis (every master of
// a cluster), whichever node holds their sessions. With a group it walks
// the group's members in name order.
func (r *Redis) List(ctx context.Context, q presence.ListQuery) (presence.ListPage, error) {
	if err := q.Validate(); err != nil {
		return presence.ListPage{}, err
	}
	if q.Group != "" {
		members, ok, err := r.Members(ctx, q.Group)
		if err != nil {
			return presence.ListPage{}, err
		}
		if !ok {
			return presence.ListPage{}, fmt.Errorf("%w: %s", presence.ErrNoGroup, q.Group)
		}
		return listMembers(ctx, q, members, r.aggregates)
	}
	var pos redisPos
	if q.Cursor != "" {
		s, err := decodeCursor(q.Cursor, 'r')
		if err != nil {
			return presence.ListPage{}, err
		}
		if pos, err = parseRedisPos(s); err != nil {
			return presence.ListPage{}, err
		}
	}
	page, err := r.listScan(ctx, q, pos)
	if err != nil {
		return presence.ListPage{}, r.fail("list", err)
	}
	return page, nil
}

// listScan walks from pos until the page is full, its work is spent or
// every master has been walked.
func (r *Redis) listScan(ctx context.Context, q presence.ListQuery, pos redisPos) (presence.ListPage, error) {
	masters, err := r.listMasters(ctx)
	if err != nil {
		return presence.ListPage{}, err
	}
	w := presence.ListWindow{Q: q}
	match := globEscape(r.k.prefix) + "{" + globEscape(q.Prefix) + "*"
	work := 0 // SCAN's COUNTs: about the keys walked
	for {
		c, err := r.masterOf(ctx, pos.slot)
		if err != nil {
			return presence.ListPage{}, err
		}
		count := int64(max(w.Room()/2, 10))
		if q.Prefix != "" {
			count = maxScanCount // SCAN returns only the keys that match
		}
		if pos.after != "" {
			count = pos.count // the same batch as the page before
		}
		keys, next, err := c.Scan(ctx, pos.cursor, match, count).Result()
		if err != nil {
			return presence.ListPage{}, err
		}
		work += int(count)
		recs, err := r.aggregates(ctx, usersOf(r.k, keys))
		if err != nil {
			return presence.ListPage{}, err
		}
		sort.Slice(recs, func(i, j int) bool { return recs[i].User < recs[j].User })
		if pos.after != "" { // the rest of a batch split between pages
			i := sort.Search(len(recs), func(i int) bool { return recs[i].User > pos.after })
			recs, pos.after, pos.count = recs[i:], "", 0
		}
		matches := 0
		for _, p := range recs {
			if p.Version != 0 && q.MatchOthers(p) && q.MatchStatus(p) {
				matches++
			}
		}
		if matches > w.Room() && len(w.Page.Users) > 0 { // the batch on the next page, whole
			w.Page.Next = encodeCursor('r', pos.String())
			return w.Page, nil
		}
		for i, p := range recs { // a batch larger than the page is split
			w.Look(p)
			if w.Full() && i < len(recs)-1 {
				pos.after, pos.count = p.User, count
				w.Page.Next = encodeCursor('r', pos.String())
				return w.Page, nil
			}
		}
		pos.cursor = next
		if next == 0 {
			i := sort.SearchInts(masters, pos.slot+1)
			if i == len(masters) {
				return w.Page, nil
			}
			pos.slot = masters[i]
		}
		if w.Full() || work >= presence.ListWork {
			w.Page.Next = encodeCursor('r', pos.String())
			return w.Page, nil
		}
	}
}

// usersOf returns the users of record keys.
func usersOf(k keys, ks []string) []string {
	out := make([]string, 0, len(ks))
	for _, key := range ks {
		if u, ok := k.userOf(key); ok {
			out = append(out, u)
		}
	}
	return out
}

// aggregates reads the current aggregate of each of users in one
// pipelined round (go-redis sends each master of a cluster its own); a
// user without a record, or whose record does not decode, has the zero
// Aggregate.
func (r *Redis) aggregates(ctx context.Context, users []string) ([]presence.Aggregate, error) {
	if len(users) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(users))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range users {
			cmds[i] = p.HGetAll(ctx, r.k.user(u))
		}
		return nil
	})
	if err != nil {
		return nil, r.fail("list", err)
	}
	out := make([]presence.Aggregate, len(users))
	for i, c := range cmds {
		h := c.Val()
		delete(h, "eh") // not part of the aggregate: skip its decoding
		delete(h, "ended")
		_, p, ok, err := decodeUser(users[i], h)
		if err != nil {
			r.stats.feedErrors.Add(1)
			r.log.Error("undecodable user record", "err", err, "user", users[i])
			continue
		}
		if ok {
			out[i] = p
		}
	}
	return out, nil
}
