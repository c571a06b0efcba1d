package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors of the Redis store.
var (
	// ErrUnavailable wraps every failure to reach Redis. Callers retry.
	ErrUnavailable = errors.New("redis unavailable")
	// ErrNodeIDInUse: another live node holds this node's id in Redis.
	ErrNodeIDInUse = errors.New("node id in use")
)

// RedisOptions configure a Redis store.
type RedisOptions struct {
	Client        redis.UniversalClient
	Prefix        string
	Node          string
	Authoritative []string
	NodeTTL       time.Duration // the node record's TTL
	Retention     time.Duration // how long an offline user is kept
	Log           *slog.Logger
	// Report receives every event: committed changes (from the change
	// feed and from loads), resets and swept nodes. It must return at once.
	Report func(Event)
	// Now is the clock of the sweep's grace (time.Now when nil). Every time
	// written to Redis is Redis's own.
	Now func() time.Time
}

// Redis is the shared store: many nodes, one truth. Each operation is one
// Lua script on one user's hash (one slot of a cluster), and every script
// that commits a change publishes it in the same step, with SPUBLISH on the
// user's channels in its slot, to the nodes that listen to the user
// (redis_listen.go). Liveness is per node, not per packet or per session: a
// node record with a TTL, refreshed every NodeTTL/3 with one SET, and the
// incarnation's deadline in the registry, a sorted set, pushed ahead by the
// same refresh; the other nodes look only at the incarnations whose
// deadline passed, and sweep the sessions of those whose record is gone as
// node_lost (redis_liveness.go).
//
// The words: a node's record is refreshed; a session's store-side expiry
// is renewed (in bulk, rarely: the backstop); sessions whose expiry passed
// are reaped; the sessions of a dead incarnation are swept.
type Redis struct {
	c         redis.UniversalClient
	k         keys
	node      string
	auth      string
	nodeTTL   time.Duration
	retention time.Duration
	log       *slog.Logger
	report    func(Event)
	now       func() time.Time

	mu         sync.Mutex
	inc        string               // this node's incarnation
	registered map[string]time.Time // users in this incarnation's set, and when they were added
	renewed    map[string]struct{}  // users whose sessions the last Renew renewed
	renewedAt  time.Time            // when the last Renew began
	replaced   map[string]time.Time // incarnations seen replaced by a restart, and since when
	masters    string               // the cluster's slot ranges and their masters, as last seen
	started    bool
	running    atomic.Bool // started, readable without the lock (fail)

	keepBatches atomic.Int64 // batches the group log keeps per group (grouplog.go)

	down atomic.Bool // in an outage (readiness: degraded); out.down, readable without the lock
	// failoverAt is when Redis last answered again after an outage, or a
	// cluster master was last seen replaced (unix ns): for a node_ttl after
	// it, a node record found gone may be Redis's doing (presence.SweepDecision).
	failoverAt atomic.Int64
	out        struct {
		sync.Mutex
		down        bool
		since, last time.Time // the outage's first and latest failed call
		failed      int64     // failed calls in it
	}
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	ps       *redis.PubSub // the classic channels: announcements, group changes
	ls       *listener     // the sharded channels: what the node listens to
	kick     chan struct{} // refresh the record now, after an outage
	// registerNow has the registrar put this incarnation in the registry
	// again (after an open of a user new to it).
	registerNow chan struct{}

	stats redisStats

	ownClient  bool          // the store built c, and closes it on Stop
	sweepEvery time.Duration // the sweep's interval (Tasks)
	reapEvery  time.Duration // the reaper's budget (Tasks)
	reapedAt   time.Time     // when the reaper last ran after a Renew (under mu)
	adoptedAt  atomic.Int64  // when adopt last ran (unix ns)
	older      atomic.Bool   // adopt found incarnations of older nodes
	clock      redisClock    // Redis's clock, as last read (redis_liveness.go)

	nodeRetention time.Duration // how long a node down stays in the node states (0: presence.NodeRetention)
	own           ownWord       // this node's last word recorded (redis_nodes.go)
	dormantEvery  time.Duration // the dormant reaper's interval (Tasks; redis_dormant.go)
	// dormantArmed: this node has a reason to reap dormant sessions at the
	// reaper's pace (it opened a session that declared a check-in period,
	// heard a dormant user, or found dormant sessions in the index);
	// dormantLast is when an unarmed node last looked (redis_dormant.go).
	dormantArmed atomic.Bool
	dormantLast  atomic.Int64
}

type redisStats struct {
	outages, resets, nodesLost, swept, tombstones, feedErrors, reloads, reaped atomic.Int64
	feedMessages, channels, resubscriptions                                    atomic.Int64
	missed                                                                     atomic.Int64 // redis_dormant.go
}

// NewRedis returns a Redis store; Start begins its background work.
func NewRedis(o RedisOptions) *Redis {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	r := &Redis{
		c: o.Client, k: keys{prefix: o.Prefix, cluster: isCluster(o.Client)}, node: o.Node,
		auth: strings.Join(o.Authoritative, ","), nodeTTL: o.NodeTTL, retention: o.Retention,
		log: o.Log, report: o.Report, now: now,
		inc:        newIncarnation(),
		registered: make(map[string]time.Time),
		renewed:    make(map[string]struct{}),
		replaced:   make(map[string]time.Time),
		stop:       make(chan struct{}),
		kick:       make(chan struct{}, 1),

		registerNow: make(chan struct{}, 1),
	}
	r.ls = newListener(r)
	return r
}

// unreachableError is Redis not answering at Start.
type unreachableError struct {
	addrs string
	err   error // wraps ErrUnavailable
}

func (e *unreachableError) Error() string {
	cause := strings.TrimPrefix(e.err.Error(), ErrUnavailable.Error()+": ") // the ping's: "dial tcp ...: connection refused"
	return fmt.Sprintf("redis: cannot reach %s at start: %s (presenced needs Redis at start; it rides out outages after that)", e.addrs, cause)
}

func (e *unreachableError) Unwrap() error { return e.err }

// clientAddrs are the addresses c dials, for messages.
func clientAddrs(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	}
	return "Redis"
}

func isCluster(c redis.UniversalClient) bool {
	_, ok := c.(*redis.ClusterClient)
	return ok
}

func newIncarnation() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(time.Now().UnixMilli(), 36) + "-" + hex.EncodeToString(b[:])
}

// Incarnation returns this node's current incarnation.
func (r *Redis) Incarnation() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inc
}

// settle is how long the other nodes take to open their sessions again,
// or to audit them, after Redis lost some (at their next refresh): a user
// Redis still lacks after it was lost with it (see Tombstone).
func (r *Redis) settle() time.Duration { return r.nodeTTL/3 + time.Second }

// Ready reports whether Redis answers (false: degraded).
func (r *Redis) Ready() bool { return !r.down.Load() }

// Stats implements Store.
func (r *Redis) Stats() Stats {
	s := &r.stats
	return Stats{
		Outages: s.outages.Load(), Resets: s.resets.Load(), NodesLost: s.nodesLost.Load(), Swept: s.swept.Load(),
		Tombstones: s.tombstones.Load(), FeedErrors: s.feedErrors.Load(), Reloads: s.reloads.Load(), Reaped: s.reaped.Load(),
		FeedMessages: s.feedMessages.Load(), Channels: s.channels.Load(), Resubscriptions: s.resubscriptions.Load(),
		Missed: s.missed.Load(),
	}
}

// Retention implements Store: an offline user's keys expire after it.
func (r *Redis) Retention() time.Duration { return r.retention }

// Forget implements Store: Redis expires an offline user's keys itself.
func (r *Redis) Forget(time.Time) int { return 0 }

// Tasks implements Store: the sweep of dead nodes' sessions, pipelined a
// chunk at a time and resumable, with a budget of its own (tens of
// thousands of sessions take longer than one interval), and the reaper of
// this node's sessions that nothing renews any more (the backstop).
func (r *Redis) Tasks() []Task {
	sweep := func(ctx context.Context) error { _, err := r.Sweep(ctx); return err }
	return []Task{
		{Name: "sweep", Every: r.sweepEvery, Budget: max(r.sweepEvery, r.nodeTTL), Run: sweep},
		// The reaper looks at the users the last Renew did not renew, so it
		// runs once after each Renew (which the tracker makes every
		// presence.renew_interval): it looks every sweep interval whether
		// one came since its last run.
		{Name: "reap", Every: r.sweepEvery, Budget: max(r.sweepEvery, r.reapEvery), Run: r.reapAfterRenew},
		// The dormant sessions whose check-in did not come (redis_dormant.go):
		// shown offline at most one reap interval after their due time.
		{Name: "reap_dormant", Every: cmp.Or(r.dormantEvery, time.Second), Budget: max(r.dormantEvery, time.Second), Run: func(ctx context.Context) error {
			_, err := r.ReapDormant(ctx)
			return err
		}},
	}
}

// outageQuiet is how long Redis must answer without one failed call for an
// outage to end: during a failover some calls fail while others succeed,
// and the outage is one, logged once when it starts and once when it ends.
const outageQuiet = time.Second

// fail sorts an error: nil means Redis answered; anything else is a failed
// call of an outage, which is logged once, when it starts. With a Redis
// Cluster it also has the slot map read again: after a master died, only
// a new map leads to the replica that took its place.
func (r *Redis) fail(op string, err error) error {
	if err == nil {
		r.up()
		return nil
	}
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background()) // lazy, at most one at a time, with a cooldown
	}
	now := time.Now()
	r.out.Lock()
	r.out.last = now
	r.out.failed++
	start := !r.out.down
	if start {
		r.out.down, r.out.since, r.out.failed = true, now, 1
		r.down.Store(true)
	}
	r.out.Unlock()
	if start {
		r.stats.outages.Add(1)
		if r.running.Load() { // before, Start fails with the error: nothing is held
			r.log.Warn("redis unreachable: presence changes are held and written when it answers", "err", err, "op", op)
		}
	}
	return fmt.Errorf("%s: %w: %v", op, ErrUnavailable, err)
}

// up notes that Redis answered a call. The outage ends once no call has
// failed for outageQuiet; the end is logged with the outage's length.
func (r *Redis) up() {
	if !r.down.Load() {
		return
	}
	now := time.Now()
	r.out.Lock()
	end := r.out.down && now.Sub(r.out.last) >= outageQuiet
	since, failed := r.out.since, r.out.failed
	if end {
		r.out.down = false
		r.down.Store(false)
	}
	r.out.Unlock()
	if !end {
		return
	}
	r.failoverAt.Store(now.UnixNano())
	r.log.Info("redis answers again", "lasted_ms", now.Sub(since).Milliseconds(), "failed_calls", failed)
	select { // check the node record now: Redis may have come back empty
	case r.kick <- struct{}{}:
	default:
	}
	r.report(Event{Kind: Recovered, Settle: r.settle()})
}

// Start claims this node's id, registers this incarnation, writes the node
// record, subscribes to the node announcements and the group changes, and
// starts the listener of the sharded channels; it returns once the
// subscription is confirmed. The changes of users come once listened to
// (Listen, ListenAll: each loads after its subscription is confirmed). It fails
// when Redis does not answer, and with ErrNodeIDInUse when another live
// node runs with the same node id.
//
// Redis must answer at start: when it does not, the error says so, once
// (an outage after the start is ridden out, and logged as one).
func (r *Redis) Start(ctx context.Context) error {
	err := r.start(ctx)
	if errors.Is(err, ErrUnavailable) {
		return &unreachableError{addrs: clientAddrs(r.c), err: err}
	}
	return err
}

func (r *Redis) start(ctx context.Context) error {
	if err := r.c.Ping(ctx).Err(); err != nil {
		// Not r.fail: this is no outage, and nothing is held.
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if err := r.loadScripts(ctx); err != nil {
		return err
	}
	if err := r.claim(ctx); err != nil {
		return err
	}
	if err := r.register(ctx); err != nil {
		return err
	}
	if err := r.adopt(ctx, true); err != nil {
		return r.fail("adopt", err)
	}
	channels := append([]string{r.k.feed(), r.k.groupFeed()}, r.commandChannels()...)
	r.ps = r.c.Subscribe(ctx, channels...)
	for range channels { // the subscriptions' confirmations
		if _, err := r.ps.Receive(ctx); err != nil {
			_ = r.ps.Close()
			return r.fail("subscribe", err)
		}
	}
	r.watchMasters(ctx) // the cluster's masters now: a change is a failover
	r.mu.Lock()
	r.started = true
	r.mu.Unlock()
	r.running.Store(true)
	r.wg.Add(3)
	go r.listen()
	go r.refreshLoop()
	go r.registrar()
	r.ls.start()
	return nil
}

// Stop stops the background work and waits for it, then deletes this
// node's record if it still names this incarnation and makes the
// incarnation's deadline pass, so that a restart with the same id starts at
// once and the other nodes sweep whatever sessions this one could not end.
// It closes the client if the store built it (Open), not one it was given.
func (r *Redis) Stop() {
	if r.halt() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = scriptReleaseRecord.Run(ctx, r.c, []string{r.k.node(r.node)}, r.Incarnation()).Err()
		_ = r.markDue(ctx, member(r.node, r.Incarnation()))
		if r.ownClient {
			_ = r.c.Close()
		}
	}
}

// halt stops the background work and waits for it, as a crash would: the
// record stays until it expires. It reports whether this call stopped it.
func (r *Redis) halt() bool {
	stopped := false
	r.stopOnce.Do(func() {
		stopped = true
		close(r.stop)
		r.ls.cancel()
		if r.ps != nil {
			_ = r.ps.Close()
		}
		r.wg.Wait()
	})
	return stopped
}

// claim makes this incarnation the holder of the node's record. A record
// that names another incarnation is either left by a run of this node that
// died (it only counts down) or kept by another live node started with the
// same node id (it refreshes its record every NodeTTL/3, which puts the TTL
// back up to NodeTTL). claim watches the record for a little longer than
// one refresh period: if it is refreshed or changes hands, the id is in use
// and the start fails, naming it; if it counts down below two thirds of
// NodeTTL without a refresh, or expires, the old run is dead and this one
// takes the record over.
func (r *Redis) claim(ctx context.Context) error {
	key, inc := r.k.node(r.node), r.Incarnation()
	const margin = 200 * time.Millisecond
	deadline := time.Now().Add(r.nodeTTL/3 + 2*margin)
	var holder string
	var lastTTL time.Duration
	for {
		ok, err := r.c.SetNX(ctx, key, inc, r.nodeTTL).Result()
		if err != nil {
			return r.fail("claim", err)
		}
		if ok {
			return nil
		}
		h, ttl, err := r.record(ctx, key)
		if err != nil {
			return err
		}
		switch {
		case h == "":
			continue // expired between the two commands: claim it
		case holder != "" && h != holder:
			return fmt.Errorf("%w: node_id %q was taken by incarnation %s while this node was starting; give each node its own --node-id", ErrNodeIDInUse, r.node, h)
		case holder != "" && ttl > lastTTL+margin/2:
			return fmt.Errorf("%w: node_id %q is held by a live node (incarnation %s refreshes its record); give each node its own --node-id", ErrNodeIDInUse, r.node, h)
		case ttl < r.nodeTTL*2/3-margin || time.Now().After(deadline):
			// Not refreshed when it should have been: the holder is dead.
			r.log.Info("taking over the record of a previous run of this node", "node", r.node, "incarnation", h)
			if err := r.c.Set(ctx, key, inc, r.nodeTTL).Err(); err != nil {
				return r.fail("claim", err)
			}
			// The sweepers look at the old run now, and sweep it after the
			// grace (its deadline would pass by itself within 2/3 NodeTTL).
			_ = r.markDue(ctx, member(r.node, h))
			return nil
		}
		holder, lastTTL = h, ttl
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// record reads a node record and its remaining TTL ("" when there is none).
func (r *Redis) record(ctx context.Context, key string) (string, time.Duration, error) {
	var get *redis.StringCmd
	var pttl *redis.DurationCmd
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		pttl = p.PTTL(ctx, key)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", 0, r.fail("claim", err)
	}
	h, err := get.Result()
	if errors.Is(err, redis.Nil) {
		return "", 0, nil
	}
	return h, pttl.Val(), nil
}

// registrar adds this incarnation to the registry whenever an open of a
// user new to it asks (registerNow; many asks coalesce into one ZADD), and
// again every second until that succeeds. The registry is a key of its own
// slot: no connect waits on it.
func (r *Redis) registrar() {
	defer r.wg.Done()
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	pending := false
	for {
		select {
		case <-r.stop:
			return
		case <-r.registerNow:
		case <-retry.C:
			if !pending {
				continue
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.nodeTTL/3)
		pending = r.register(ctx) != nil
		cancel()
	}
}

// refresh rewrites the node record; lost reports that it was gone or named
// another incarnation (after the start): Redis restarted empty, or this node
// was cut off for longer than NodeTTL and swept.
func (r *Redis) refresh(ctx context.Context) (lost bool, err error) {
	r.mu.Lock()
	inc, first := r.inc, !r.started
	r.mu.Unlock()
	m := member(r.node, inc)
	if _, err := r.redisNow(ctx); err != nil { // read again every clockEvery
		return false, r.fail("refresh", err)
	}
	// The registry first, the deadline pushed a NodeTTL ahead, in the same
	// round trip: whether this incarnation was still registered tells a
	// record that Redis lost alone from an incarnation swept, or a Redis
	// that lost everything. (Not a MULTI: the record lives in another slot,
	// and the race's loser is only audited instead of reset, which is right
	// too.)
	var reg *redis.IntCmd
	var set *redis.StatusCmd
	batch := func(p redis.Pipeliner) error {
		reg = r.registerIn(ctx, p, m)
		set = p.SetArgs(ctx, r.k.node(r.node), inc, redis.SetArgs{TTL: r.nodeTTL, Get: true})
		return nil
	}
	_, err = r.c.Pipelined(ctx, batch)
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, r.fail("refresh", err)
	}
	old, err := set.Result()
	if errors.Is(err, redis.Nil) {
		err, old = nil, ""
	}
	if err == nil {
		err = reg.Err()
	}
	if err != nil {
		return false, r.fail("refresh", err)
	}
	added := reg.Val() == 1
	r.up()
	if first || old == inc {
		return false, nil // (a registry that lost this incarnation has it back)
	}
	if old == "" && !added {
		// The record alone was gone: nobody swept this incarnation (a sweep
		// ends by taking it out of the registry). The record expired while
		// this node could not reach it, or was lost with a master that died
		// before its replica had it. It is written again; the sessions are
		// checked against the store (an audit), not reopened.
		r.failoverAt.Store(time.Now().UnixNano())
		r.log.Warn("this node's record was gone (a Redis failover?) but its incarnation was not swept: record written again, sessions audited", "node", r.node)
		r.report(Event{Kind: Recovered, Settle: r.settle()})
		return false, nil
	}
	// Swept, Redis came back empty, or another node took the node id.
	if added {
		_ = r.unregister(ctx, m) // reset registers the new incarnation
	}
	return true, nil
}

// doubt reports whether a node record found gone now may be Redis's doing
// rather than its node's (see presence.SweepDecision): Redis failed over
// less than a node_ttl ago, or this node cannot reach it.
func (r *Redis) doubt(now time.Time) bool {
	return r.down.Load() || now.Sub(time.Unix(0, r.failoverAt.Load())) < r.nodeTTL
}

// watchMasters reads a Redis Cluster's slot map and notes when a master was
// replaced (a failover, planned or not): writes acknowledged by the old one
// may be lost, so it reports Recovered. An error here is not an outage (the
// command goes to any node, maybe the dead one).
func (r *Redis) watchMasters(ctx context.Context) {
	cc, ok := r.c.(*redis.ClusterClient)
	if !ok {
		return
	}
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i].Start < slots[j].Start })
	var b strings.Builder
	for _, s := range slots {
		if len(s.Nodes) > 0 {
			fmt.Fprintf(&b, "%d-%d:%s ", s.Start, s.End, s.Nodes[0].Addr)
		}
	}
	sig := b.String()
	r.mu.Lock()
	changed := r.masters != "" && sig != r.masters
	r.masters = sig
	r.mu.Unlock()
	if changed {
		r.failoverAt.Store(time.Now().UnixNano())
		r.log.Warn("a Redis Cluster master was replaced: sessions audited")
		cc.ReloadState(ctx)
		r.report(Event{Kind: Recovered, Settle: r.settle()})
	}
}

// refreshLoop refreshes the node record every NodeTTL/3 and handles a lost
// record.
func (r *Redis) refreshLoop() {
	defer r.wg.Done()
	t := time.NewTicker(r.nodeTTL / 3)
	defer t.Stop()
	probe := time.NewTicker(outageQuiet / 4) // while in an outage: find its end
	defer probe.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		case <-r.kick:
		case <-probe.C:
			if !r.down.Load() {
				continue
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.nodeTTL/3)
		lost, err := r.refresh(ctx)
		if err == nil && lost {
			r.reset(ctx)
		}
		r.watchMasters(ctx)
		cancel()
	}
}

// reset starts a new incarnation and reports it: the node must open its
// live sessions again. Settle says when the other nodes will have done the
// same (at their next refresh), after which a user Redis still lacks was
// lost with it (see Tombstone).
func (r *Redis) reset(ctx context.Context) {
	r.stats.resets.Add(1)
	r.mu.Lock()
	r.inc = newIncarnation()
	r.registered = make(map[string]time.Time)
	r.mu.Unlock()
	r.log.Warn("redis lost this node's record (restarted empty, or this node was cut off): opening every session again", "node", r.node)
	if err := r.register(ctx); err != nil {
		return // the next refresh finds the record missing again and retries
	}
	if _, err := r.refresh(ctx); err != nil {
		return
	}
	r.report(Event{Kind: Reset, Settle: r.settle()})
}
