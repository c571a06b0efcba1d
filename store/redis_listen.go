package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

// The change path of the Redis store: what a node hears.
//
// Every script that commits a user's change SPUBLISHes it (Redis 7 sharded
// pub/sub) on two channels of the user's slot (lua/common.lua): the user's
// own P:c:{user}, and its slot's P:s:{tag}, the firehose (P:s:all on a
// single server). A group's batch goes on P:gb:{group}, in the slot of the
// group's log. A sharded message stays in the shard that owns the slot: no
// global channel is on the path of a change, and a node hears a change
// only if it subscribed to its channel on the master that owns it.
//
// The listener holds what the node listens to (users, groups, or every
// user) and keeps the subscriptions to match: on a Redis Cluster one
// sharded pub/sub connection per master, each subscribed to the channels of
// the slots that master owns, one slot's channels per SSUBSCRIBE (a
// command with channels of two slots fails with CROSSSLOT); on a single
// server or behind Sentinel one connection, many channels per command.
//
// One goroutine (run) changes the subscriptions; each connection has a
// reader (read) that reports the messages and notes the confirmations.
// go-redis would re-subscribe a lost connection by itself, with one
// SSUBSCRIBE of every channel, which a cluster refuses (CROSSSLOT), and
// possibly on a master that no longer owns the slots: so a connection that
// fails, or whose channels the server drops (its slot moved), is closed
// and its channels placed again from the current slot map. Once they are
// heard again, what they carry is read again (reload: the users listened
// to, by pipelined HGETALL; every user for the firehose; a GroupBatch
// without a Delta for each group), so nothing committed while the
// connection was down stays missed.
//
// The membership changes of groups (P:gfeed, rare admin events) and the
// node announcements (P:feed) stay on classic pub/sub for now, on the one
// classic subscription Start makes (redis_load.go).
//
// Locks: listener.mu guards the listener's state and every shard's maps
// and flags; it is never held across a call to Redis (go-redis's PubSub
// has its own lock).

// A subscription connection that carried nothing for the node record's
// TTL (RedisOptions.NodeTTL) is pinged; one that then stays silent as long
// again is lost (a master cut off without a reset): a node hears of it
// within the time its own liveness allows, and a quiet node costs a
// master one PING per connection and node_ttl (at least listenPingMin).
const listenPingMin = time.Second

// listenRetry is how soon a failed subscription, or a reload, is tried
// again.
const listenRetry = 200 * time.Millisecond

// listenBudget is the deadline of one pass of the subscriber.
const listenBudget = 30 * time.Second

// subBatch is the most channels one SSUBSCRIBE carries on a single server
// (a cluster's carries one slot's channels).
const subBatch = 512

var (
	errNotStarted = errors.New("store not started")
	errStopped    = errors.New("store stopped")
)

type targetKind uint8

const (
	userTarget  targetKind = iota + 1 // a user's channel
	slotTarget                        // a slot's channel (the firehose)
	groupTarget                       // a group's channel
)

// target is what a channel brings: what to read again after it was lost.
type target struct {
	kind targetKind
	name string // the user or the group
}

// listener keeps the sharded subscriptions of a Redis store.
type listener struct {
	r      *Redis
	ctx    context.Context // cancelled by Stop
	cancel context.CancelFunc
	wake   chan struct{} // the subscriber has work
	ping   time.Duration // a silent connection is pinged after this (node_ttl)
	// beforePass, when set (tests only, before Start), runs before each
	// pass of the subscriber: a test holds the subscriptions down with it.
	beforePass func()

	mu      sync.Mutex
	running bool
	users   map[string]struct{} // listened to (Listen)
	all     bool                // the firehose (ListenAll)
	want    map[string]target   // the channels that should be subscribed
	dirty   map[string]struct{} // channels whose want changed since the last pass
	where   map[string]*shard   // the channels subscribed (or being), and where
	shards  map[string]*shard   // by master address ("" on a single server)
	reload  map[string]struct{} // channels lost: read again once heard again
	changed chan struct{}       // closed (and replaced) at each change of the state
}

// shard is one sharded pub/sub connection, to one master. Its maps and
// flags are under listener.mu.
type shard struct {
	addr      string
	ps        *redis.PubSub
	confirmed map[string]bool // subscribed, as the server confirmed
	pending   map[string]int  // SSUBSCRIBEs sent, not yet confirmed
	unsubs    map[string]int  // SUNSUBSCRIBEs sent, not yet confirmed
	heard     bool            // the server confirmed a subscription once
	dead      bool            // lost: to be replaced
	closed    bool            // closed by the listener (Stop)
}

func newListener(r *Redis) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{
		r: r, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), ping: max(r.nodeTTL, listenPingMin),
		users: make(map[string]struct{}),
		want:  make(map[string]target), dirty: make(map[string]struct{}),
		where: make(map[string]*shard), shards: make(map[string]*shard),
		reload: make(map[string]struct{}), changed: make(chan struct{}),
	}
}

// start runs the subscriber (Start).
func (l *listener) start() {
	l.mu.Lock()
	l.running = true
	l.mu.Unlock()
	l.r.wg.Add(1)
	go l.run()
}

func (l *listener) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// changedLocked wakes whoever waits on the state (await).
func (l *listener) changedLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// wantLocked sets whether ch should be subscribed.
func (l *listener) wantLocked(ch string, t target, on bool) {
	if _, ok := l.want[ch]; ok == on {
		return
	}
	if on {
		l.want[ch] = t
	} else {
		delete(l.want, ch)
	}
	l.dirty[ch] = struct{}{}
}

// coverLocked is the channel that brings user's changes now.
func (l *listener) coverLocked(user string) string {
	if l.all {
		return l.r.k.slotChannel(user)
	}
	return l.r.k.userChannel(user)
}

// change applies fn to the state under the lock, has the subscriber make
// the subscriptions match, and returns what fn returned.
func (l *listener) change(fn func() []string) ([]string, error) {
	l.mu.Lock()
	if !l.running {
		l.mu.Unlock()
		return nil, errNotStarted
	}
	chs := fn()
	l.changedLocked()
	l.mu.Unlock()
	l.kick()
	return chs, nil
}

// await waits until done holds (called under the lock, at each change).
func (l *listener) await(ctx context.Context, done func() bool) error {
	for {
		l.mu.Lock()
		ok, ch := done(), l.changed
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: not subscribed: %w", ErrUnavailable, ctx.Err())
		case <-l.r.stop:
			return errStopped
		}
	}
}

// heardLocked reports whether ch, if still wanted, is subscribed as the
// server confirmed, with nothing in flight.
func (l *listener) heardLocked(ch string) bool {
	if _, ok := l.want[ch]; !ok {
		return true // no longer wanted (a concurrent change): nothing to wait for
	}
	s := l.where[ch]
	return s != nil && !s.dead && !s.closed && s.confirmed[ch] && s.pending[ch] == 0 && s.unsubs[ch] == 0
}

// silentLocked reports whether ch, unless wanted again, is neither
// subscribed nor in flight on any connection.
func (l *listener) silentLocked(ch string) bool {
	if _, ok := l.want[ch]; ok {
		return true // wanted again (a concurrent change)
	}
	if l.where[ch] != nil {
		return false
	}
	for _, s := range l.shards {
		if !s.dead && !s.closed && (s.confirmed[ch] || s.pending[ch] > 0 || s.unsubs[ch] > 0) {
			return false
		}
	}
	return true
}

// allOf returns a condition for await: ok holds for every channel of chs.
// It goes on from where it stopped the time before (a firehose waits for
// 16384 channels): a channel lost once heard is read again once heard
// again (the subscriber's reload), so it need not be waited for.
func allOf(chs []string, ok func(string) bool) func() bool {
	i := 0
	return func() bool {
		for ; i < len(chs); i++ {
			if !ok(chs[i]) {
				return false
			}
		}
		return true
	}
}

// apply changes what is listened to (set, under the lock), then waits
// until the channels set returned are heard (or silent: done).
func (l *listener) apply(ctx context.Context, op string, set func() []string, done func(chs []string) func() bool) error {
	chs, err := l.change(set)
	if err == nil {
		err = l.await(ctx, done(chs))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

func (l *listener) heard(chs []string) func() bool  { return allOf(chs, l.heardLocked) }
func (l *listener) silent(chs []string) func() bool { return allOf(chs, l.silentLocked) }

// setUsers adds users to those listened to (on) or takes them out, and
// returns the channels that bring their changes now.
func (l *listener) setUsers(users []string, on bool) func() []string {
	return func() []string {
		chs := make([]string, len(users))
		for i, u := range users {
			ch := l.r.k.userChannel(u)
			if on {
				l.users[u] = struct{}{}
				if !l.all { // a firehose hears the user on its slot's channel
					l.wantLocked(ch, target{userTarget, u}, true)
				}
				ch = l.coverLocked(u)
			} else {
				delete(l.users, u)
				l.wantLocked(ch, target{}, false)
			}
			chs[i] = ch
		}
		return chs
	}
}

// setGroups sets whether the batches of groups are listened to, and
// returns their channels.
func (l *listener) setGroups(groups []string, on bool) func() []string {
	return func() []string {
		chs := make([]string, len(groups))
		for i, g := range groups {
			chs[i] = l.r.k.groupChannel(g)
			l.wantLocked(chs[i], target{groupTarget, g}, on)
		}
		return chs
	}
}

// Listen implements Listener.
func (r *Redis) Listen(ctx context.Context, users []string) error {
	if len(users) == 0 {
		return nil
	}
	if err := r.ls.apply(ctx, "listen", r.ls.setUsers(users, true), r.ls.heard); err != nil {
		return err
	}
	return r.loadUsers(ctx, users)
}

// Unlisten implements Listener.
func (r *Redis) Unlisten(ctx context.Context, users []string) error {
	if len(users) == 0 {
		return nil
	}
	return r.ls.apply(ctx, "unlisten", r.ls.setUsers(users, false), r.ls.silent)
}

// ListenAll implements Listener: every slot's channel (on each master the
// slots it owns), then every user (Load: a SCAN of every master).
func (r *Redis) ListenAll(ctx context.Context) error {
	l := r.ls
	set := func() []string {
		l.all = true
		for u := range l.users {
			l.wantLocked(r.k.userChannel(u), target{}, false)
		}
		chs := r.k.slotChannels()
		for _, ch := range chs {
			l.wantLocked(ch, target{kind: slotTarget}, true)
		}
		return chs
	}
	if err := l.apply(ctx, "listen all", set, l.heard); err != nil {
		return err
	}
	return r.loadAll(ctx)
}

// UnlistenAll implements Listener: the users' own channels are subscribed
// before the slots' are left, on the same connection (the same master), so
// the users listened to are heard throughout.
func (r *Redis) UnlistenAll(ctx context.Context) error {
	l := r.ls
	var users []string
	set := func() []string {
		l.all = false
		for u := range l.users {
			ch := r.k.userChannel(u)
			l.wantLocked(ch, target{userTarget, u}, true)
			users = append(users, ch)
		}
		chs := r.k.slotChannels()
		for _, ch := range chs {
			l.wantLocked(ch, target{}, false)
		}
		return chs
	}
	return l.apply(ctx, "unlisten all", set, func(slots []string) func() bool {
		heard, silent := l.heard(users), l.silent(slots)
		return func() bool { return heard() && silent() }
	})
}

// ListenGroups implements GroupLog.
func (r *Redis) ListenGroups(ctx context.Context, groups []string) error {
	if len(groups) == 0 {
		return nil
	}
	return r.ls.apply(ctx, "listen groups", r.ls.setGroups(groups, true), r.ls.heard)
}

// UnlistenGroups implements GroupLog.
func (r *Redis) UnlistenGroups(ctx context.Context, groups []string) error {
	if len(groups) == 0 {
		return nil
	}
	return r.ls.apply(ctx, "unlisten groups", r.ls.setGroups(groups, false), r.ls.silent)
}

// listened returns what Load reads: every user, or those listened to.
func (l *listener) listened() (all bool, users []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.all {
		return true, nil
	}
	users = make([]string, 0, len(l.users))
	for u := range l.users {
		users = append(users, u)
	}
	slices.Sort(users)
	return false, users
}

// --- the subscriber ---

// run makes the subscriptions match what is listened to, each time that
// changes or a connection is lost, and reads again what a lost connection
// may have missed; it retries what failed every listenRetry.
func (l *listener) run() {
	defer l.r.wg.Done()
	retry := time.NewTimer(listenRetry)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-l.r.stop:
			l.closeAll()
			return
		case <-l.wake:
		case <-retry.C:
		}
		if l.beforePass != nil {
			l.beforePass()
		}
		ctx, cancel := context.WithTimeout(l.ctx, listenBudget)
		again := l.pass(ctx)
		cancel()
		if again {
			retry.Reset(listenRetry)
		}
	}
}

// pass is one round of the subscriber; it reports whether to come back.
func (l *listener) pass(ctx context.Context) bool {
	subs, unsubs := l.plan()
	ok := l.subscribe(ctx, subs)
	l.unsubscribe(ctx, unsubs)
	done := l.reloadHeard(ctx)
	return !ok || !done
}

// plan drops the lost connections (their wanted channels are to be placed
// again and read again once heard) and returns the channels to subscribe
// and those to leave.
func (l *listener) plan() (subs []string, unsubs map[*shard][]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lost := false
	for addr, s := range l.shards {
		if s.dead {
			delete(l.shards, addr)
			lost = true
			if s.heard {
				l.r.stats.resubscriptions.Add(1)
			}
		}
	}
	if lost {
		for ch, s := range l.where {
			if !s.dead {
				continue
			}
			delete(l.where, ch)
			if _, ok := l.want[ch]; ok {
				l.reload[ch] = struct{}{}
				l.dirty[ch] = struct{}{}
			}
		}
	}
	unsubs = make(map[*shard][]string)
	for ch := range l.dirty {
		_, wanted := l.want[ch]
		switch s := l.where[ch]; {
		case wanted && s == nil:
			subs = append(subs, ch)
		case !wanted && s != nil:
			unsubs[s] = append(unsubs[s], ch)
		}
	}
	clear(l.dirty)
	return subs, unsubs
}

// split cuts chs into the channels of one command each: on a cluster one
// slot's (a command with two fails with CROSSSLOT), on a single server
// subBatch at most.
func (l *listener) split(chs []string) [][]string {
	if !l.r.k.cluster {
		return slices.Collect(slices.Chunk(chs, subBatch))
	}
	bySlot := make(map[int]int) // slot -> index in out
	var out [][]string
	for _, ch := range chs {
		slot := keySlot(ch)
		i, ok := bySlot[slot]
		if !ok {
			i = len(out)
			bySlot[slot] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], ch)
	}
	return out
}

// batch is the channels of one SSUBSCRIBE, and the master it goes to.
type batch struct {
	addr string
	node *redis.Client // the master's client (cluster), nil on a single server
	chs  []string
}

// batches splits chs into commands, each with the master that owns its
// slot now (from the client's slot map).
func (l *listener) batches(ctx context.Context, chs []string) ([]batch, error) {
	parts := l.split(chs)
	out := make([]batch, 0, len(parts))
	cc, cluster := l.r.c.(*redis.ClusterClient)
	for _, part := range parts {
		b := batch{chs: part}
		if cluster {
			node, err := cc.MasterForKey(ctx, part[0])
			if err != nil {
				return nil, err
			}
			b.addr, b.node = node.Options().Addr, node
		}
		out = append(out, b)
	}
	return out, nil
}

// shardFor returns the connection to addr, opening it (not yet connected:
// the reader or the first subscription connects it) when there is none.
func (l *listener) shardFor(addr string, node *redis.Client) *shard {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.shards[addr]; s != nil {
		return s
	}
	var ps *redis.PubSub
	if node != nil {
		ps = node.SSubscribe(l.ctx) // pinned to that master
	} else {
		ps = l.r.c.SSubscribe(l.ctx)
	}
	s := &shard{addr: addr, ps: ps, confirmed: make(map[string]bool), pending: make(map[string]int), unsubs: make(map[string]int)}
	l.shards[addr] = s
	l.r.wg.Add(1)
	go l.read(s)
	return s
}

// subscribe places chs on the masters that own their slots and subscribes
// them, one slot per command; it reports whether all went out (what did
// not is tried again at the next pass).
func (l *listener) subscribe(ctx context.Context, chs []string) bool {
	if len(chs) == 0 {
		return true
	}
	bs, err := l.batches(ctx, chs)
	if err != nil {
		l.redo(chs)
		_ = l.r.fail("subscribe", err)
		return false
	}
	ok := true
	for _, b := range bs {
		s := l.shardFor(b.addr, b.node)
		l.mu.Lock()
		if s.dead || s.closed {
			l.mu.Unlock()
			l.redo(b.chs)
			ok = false
			continue
		}
		var send []string
		for _, ch := range b.chs {
			if _, wanted := l.want[ch]; !wanted || l.where[ch] != nil {
				continue // changed since the plan; the next pass sees it
			}
			l.where[ch] = s
			s.pending[ch]++
			send = append(send, ch)
		}
		l.mu.Unlock()
		if len(send) == 0 {
			continue
		}
		if err := s.ps.SSubscribe(ctx, send...); err != nil {
			l.lost(s, err)
			ok = false
		}
	}
	return ok
}

// redo has the next pass look at chs again.
func (l *listener) redo(chs []string) {
	l.mu.Lock()
	for _, ch := range chs {
		l.dirty[ch] = struct{}{}
	}
	l.mu.Unlock()
}

// unsubscribe leaves the channels no longer wanted, one slot per command.
func (l *listener) unsubscribe(ctx context.Context, unsubs map[*shard][]string) {
	for s, chs := range unsubs {
		for _, part := range l.split(chs) {
			l.mu.Lock()
			if s.dead || s.closed {
				l.mu.Unlock()
				break
			}
			var send []string
			for _, ch := range part {
				if _, wanted := l.want[ch]; wanted || l.where[ch] != s {
					continue
				}
				delete(l.where, ch)
				s.unsubs[ch]++
				send = append(send, ch)
			}
			l.mu.Unlock()
			if len(send) == 0 {
				continue
			}
			if err := s.ps.SUnsubscribe(ctx, send...); err != nil {
				l.lost(s, err)
				break
			}
		}
	}
}

// reloadHeard reads again what the channels lost and heard again carry:
// the users (pipelined HGETALL), every user for a slot's channel (the
// firehose), and a GroupBatch without a Delta for each group. It reports
// whether nothing is left to read.
func (l *listener) reloadHeard(ctx context.Context) bool {
	l.mu.Lock()
	for ch := range l.reload {
		if s := l.where[ch]; s != nil && !s.dead && s.pending[ch] > 0 {
			l.mu.Unlock()
			return false // on its way: one read once all are heard (its confirmation wakes the subscriber)
		}
	}
	var chs, users, groups []string
	every, waiting := false, false
	for ch := range l.reload {
		t, ok := l.want[ch]
		if !ok {
			delete(l.reload, ch)
			continue
		}
		if !l.heardLocked(ch) {
			waiting = true
			continue
		}
		delete(l.reload, ch)
		chs = append(chs, ch)
		switch t.kind {
		case userTarget:
			users = append(users, t.name)
		case groupTarget:
			groups = append(groups, t.name)
		case slotTarget:
			every = true
		}
	}
	l.mu.Unlock()
	if len(chs) == 0 {
		return !waiting
	}
	l.r.stats.reloads.Add(1)
	var err error
	if every {
		err = l.r.loadAll(ctx)
	}
	if err == nil && len(users) > 0 {
		slices.Sort(users)
		err = l.r.loadUsers(ctx, users)
	}
	if err != nil {
		l.mu.Lock()
		for _, ch := range chs {
			l.reload[ch] = struct{}{}
		}
		l.mu.Unlock()
		return false
	}
	slices.Sort(groups)
	for _, g := range groups {
		l.r.report(Event{Kind: GroupBatch, Group: g}) // batches may have been missed: read it again
	}
	return !waiting
}

// lost notes that a connection failed (or the server dropped its
// channels): it is closed, and the next pass places its channels again.
func (l *listener) lost(s *shard, err error) {
	l.mu.Lock()
	quiet := s.dead || s.closed
	if !quiet {
		s.dead = true
		l.r.stats.channels.Add(-int64(len(s.confirmed)))
		clear(s.confirmed)
		l.changedLocked()
	}
	l.mu.Unlock()
	_ = s.ps.Close()
	if quiet {
		return
	}
	select {
	case <-l.r.stop:
		return
	default:
	}
	_ = l.r.fail("feed", err)
	l.kick()
}

// closeAll closes every connection (Stop).
func (l *listener) closeAll() {
	l.mu.Lock()
	l.running = false
	shards := make([]*shard, 0, len(l.shards))
	for _, s := range l.shards {
		s.closed = true
		l.r.stats.channels.Add(-int64(len(s.confirmed)))
		clear(s.confirmed)
		shards = append(shards, s)
	}
	clear(l.shards)
	clear(l.where)
	l.changedLocked()
	l.mu.Unlock()
	for _, s := range shards {
		_ = s.ps.Close()
	}
}

// --- a connection's reader ---

// read reports what one connection receives and notes the confirmations,
// until the connection fails or is closed; it pings a connection that has
// been silent for l.ping.
func (l *listener) read(s *shard) {
	defer l.r.wg.Done()
	pinged := false
	for {
		msg, err := s.ps.ReceiveTimeout(l.ctx, l.ping)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				pinged = true
				if err = s.ps.Ping(l.ctx); err == nil {
					continue
				}
			}
			l.lost(s, err)
			return
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Message:
			l.message(m)
		case *redis.Subscription:
			if !l.confirm(s, m) {
				l.lost(s, fmt.Errorf("the server dropped the subscription to %s (its slot moved)", m.Channel))
				return
			}
		}
	}
}

// confirm notes a subscription or unsubscription the server confirmed; it
// reports false for an unsubscription nobody asked for.
func (l *listener) confirm(s *shard, m *redis.Subscription) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.dead || s.closed {
		return true
	}
	ch := m.Channel
	switch m.Kind {
	case "ssubscribe":
		if s.pending[ch]--; s.pending[ch] <= 0 {
			delete(s.pending, ch)
		}
		s.heard = true
		if !s.confirmed[ch] {
			s.confirmed[ch] = true
			l.r.stats.channels.Add(1)
		}
	case "sunsubscribe":
		if s.unsubs[ch] == 0 {
			return false
		}
		if s.unsubs[ch]--; s.unsubs[ch] == 0 {
			delete(s.unsubs, ch)
		}
		if s.confirmed[ch] {
			delete(s.confirmed, ch)
			l.r.stats.channels.Add(-1)
		}
	default:
		return true
	}
	l.changedLocked()
	if _, ok := l.reload[ch]; ok {
		l.kick() // a lost channel heard again: read again what it carries
	}
	return true
}

// message reports a change (a user's or a slot's channel) or a group's
// batch.
func (l *listener) message(m *redis.Message) {
	r := l.r
	r.stats.feedMessages.Add(1)
	if group, ok := r.k.groupOfChannel(m.Channel); ok {
		var d roster.Delta
		if err := json.Unmarshal([]byte(m.Payload), &d); err != nil || d.Group != group || presence.ValidGroup(d.Group) != nil || d.Version != d.Follows+1 {
			r.stats.feedErrors.Add(1)
			r.log.Error("undecodable group batch", "err", err, "group", group)
			return
		}
		r.report(Event{Kind: GroupBatch, Delta: &d})
		return
	}
	e, err := decodeFeed([]byte(m.Payload))
	if err != nil {
		r.stats.feedErrors.Add(1)
		r.log.Error("undecodable change on the feed", "err", err, "channel", m.Channel)
		return
	}
	if e.Kind == Changed && e.Aggregate.Status == presence.Dormant {
		r.dormantArmed.Store(true) // a sleeper this node may have to reap (redis_dormant.go)
	}
	if e.Kind == Changed {
		user := e.Aggregate.User
		if m.Channel != r.k.userChannel(user) && m.Channel != r.k.slotChannel(user) {
			r.stats.feedErrors.Add(1)
			r.log.Error("a change on another user's channel", "user", user, "channel", m.Channel)
			return
		}
		if limit := r.versionLimit(); e.Aggregate.Version > limit {
			// Not a version a commit writes (presence.NextStamp: Redis's
			// time in µs): forged, or Redis's clock went back. Believe the
			// record, not the message.
			r.stats.feedErrors.Add(1)
			r.log.Error("a change with a version ahead of Redis's clock: reading the record instead", "user", user, "version", e.Aggregate.Version, "limit", limit)
			r.reread(user)
			return
		}
	}
	r.report(e)
}

// versionAhead is how far ahead of Redis's clock a change's version may be
// (versions are Redis's time in µs, one more per change within the same
// µs): a version further ahead is not believed, so a forged message can
// hold a user's real changes back for at most this long.
const versionAhead = 10 * time.Second

// versionLimit is the highest version a change heard now may have: Redis's
// clock as last read (this process's before it ever was) plus versionAhead,
// in µs.
func (r *Redis) versionLimit() uint64 {
	t, _ := r.clock.now()
	if t.IsZero() {
		t = time.Now()
	}
	return uint64(t.Add(versionAhead).UnixMicro())
}

// reread reports user's record as Redis holds it, in place of a change
// that was not believed.
func (r *Redis) reread(user string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	h, err := r.hgetall(ctx, user)
	if err != nil {
		return
	}
	_, p, ok, err := decodeUser(user, h)
	if err != nil {
		r.stats.feedErrors.Add(1)
		r.log.Error("undecodable user record", "err", err, "user", user)
		return
	}
	if ok {
		r.report(Event{Kind: Changed, Aggregate: p})
	}
}
