package store

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/presenced/presenced/presence"
)

// ErrUnavailable wraps every failure to reach Redis. Callers retry.
var ErrUnavailable = errors.New("redis unavailable")

var (
	//go:embed lua/common.lua
	luaCommon string
	//go:embed lua/open.lua
	luaOpen string
	//go:embed lua/end.lua
	luaEnd string
	//go:embed lua/update.lua
	luaUpdate string
	//go:embed lua/account.lua
	luaAccount string
	//go:embed lua/refresh.lua
	luaRefresh string
	//go:embed lua/reap.lua
	luaReap string
	//go:embed lua/end_node.lua
	luaEndNode string
	//go:embed lua/tombstone.lua
	luaTombstone string
)

// script runs common.lua followed by one operation through EVALSHA, falling
// back to EVAL on NOSCRIPT (redis.Script).
func script(op string) *redis.Script { return redis.NewScript(luaCommon + "\n" + op) }

var (
	scriptOpen      = script(luaOpen)
	scriptEnd       = script(luaEnd)
	scriptUpdate    = script(luaUpdate)
	scriptAccount   = script(luaAccount)
	scriptRefresh   = script(luaRefresh)
	scriptReap      = script(luaReap)
	scriptEndNode   = script(luaEndNode)
	scriptTombstone = script(luaTombstone)
)

// RedisOptions configure a Redis store.
type RedisOptions struct {
	Client        redis.UniversalClient
	Prefix        string
	Node          string
	Authoritative []string
	NodeTTL       time.Duration // the node record's TTL
	Retention     time.Duration // how long an offline user is kept
	Log           zerolog.Logger
	// OnReset is called (from the heartbeat goroutine) when Redis lost this
	// node's record: it restarted empty, or this node was cut off longer
	// than NodeTTL and the others ended its sessions. The node must open
	// all its live sessions again; it has a new incarnation by then.
	OnReset func()
	// Known returns the version each user's retained presence has on this
	// node, for the users Redis may have lost.
	Known func() map[string]uint64
}

// Redis is the shared store: many nodes, one truth. Each operation is one
// Lua script on one user's hash (one slot). Liveness is renewed per node, not
// per packet or per session: a node record with a TTL, refreshed every
// NodeTTL/3 with one SET; when it is gone the other nodes end the
// incarnation's sessions as node_lost (Reap).
type Redis struct {
	c         redis.UniversalClient
	k         keys
	node      string
	auth      string
	nodeTTL   time.Duration
	retention time.Duration
	log       zerolog.Logger
	onReset   func()
	known     func() map[string]uint64

	mu         sync.Mutex
	inc        string               // this node's incarnation
	registered map[string]struct{}  // users in this incarnation's set
	replaced   map[string]time.Time // incarnations seen replaced by a restart, and since when
	feed       func(presence.Presence)
	started    bool

	down     atomic.Bool // Redis unreachable (readiness: degraded)
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	ps       *redis.PubSub
	kick     chan struct{} // an immediate heartbeat, after an outage

	Stats RedisStats
}

// RedisStats are counts read with atomic loads.
type RedisStats struct {
	Outages    atomic.Int64 // transitions to unreachable
	Resets     atomic.Int64 // times this node's record was found lost
	NodesLost  atomic.Int64 // dead incarnations swept
	Swept      atomic.Int64 // sessions ended as node_lost by this node
	Tombstones atomic.Int64 // users Redis lost, recorded offline
	FeedErrors atomic.Int64 // undecodable feed messages
	Reloads    atomic.Int64 // full loads after a (re)subscription
}

// NewRedis returns a Redis store; Start begins its background work.
func NewRedis(o RedisOptions) *Redis {
	return &Redis{
		c: o.Client, k: keys{prefix: o.Prefix}, node: o.Node,
		auth: strings.Join(o.Authoritative, ","), nodeTTL: o.NodeTTL, retention: o.Retention,
		log: o.Log, onReset: o.OnReset, known: o.Known,
		inc:        newIncarnation(),
		registered: make(map[string]struct{}),
		replaced:   make(map[string]time.Time),
		stop:       make(chan struct{}),
		kick:       make(chan struct{}, 1),
	}
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

// Ready reports whether Redis answers (false: degraded).
func (r *Redis) Ready() bool { return !r.down.Load() }

// fail sorts an error: a script's stale answer is not an outage; anything
// from the connection is, and is logged once per outage.
func (r *Redis) fail(op string, err error) error {
	if err == nil {
		r.up()
		return nil
	}
	if r.down.CompareAndSwap(false, true) {
		r.Stats.Outages.Add(1)
		r.log.Warn().Err(err).Str("op", op).Msg("redis unreachable: presence changes are held and written when it answers")
	}
	return fmt.Errorf("%s: %w: %v", op, ErrUnavailable, err)
}

func (r *Redis) up() {
	if r.down.CompareAndSwap(true, false) {
		r.log.Info().Msg("redis answers again")
		select { // check the node record now: Redis may have come back empty
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// Watch implements node.Store.
func (r *Redis) Watch(fn func(presence.Presence)) {
	r.mu.Lock()
	r.feed = fn
	r.mu.Unlock()
}

func (r *Redis) emit(p presence.Presence) {
	r.mu.Lock()
	fn := r.feed
	r.mu.Unlock()
	if fn != nil {
		fn(p)
	}
}

// Start registers this incarnation, writes the node record and subscribes
// to the change feed; it returns once the subscription is confirmed, so a
// Load after it misses nothing. It fails when Redis does not answer.
func (r *Redis) Start(ctx context.Context) error {
	if err := r.loadScripts(ctx); err != nil {
		return err
	}
	if err := r.register(ctx); err != nil {
		return err
	}
	if _, err := r.heartbeat(ctx); err != nil {
		return err
	}
	r.ps = r.c.Subscribe(ctx, r.k.feed())
	if _, err := r.ps.Receive(ctx); err != nil { // the subscription confirmation
		_ = r.ps.Close()
		return r.fail("subscribe", err)
	}
	r.mu.Lock()
	r.started = true
	r.mu.Unlock()
	r.wg.Add(2)
	go r.listen()
	go r.beat()
	return nil
}

// Stop stops the background work and waits for it. It does not close the
// client (its owner does).
func (r *Redis) Stop() {
	r.stopOnce.Do(func() {
		close(r.stop)
		if r.ps != nil {
			_ = r.ps.Close()
		}
		r.wg.Wait()
	})
}

var allScripts = []*redis.Script{scriptOpen, scriptEnd, scriptUpdate, scriptAccount, scriptRefresh, scriptReap, scriptEndNode, scriptTombstone}

// loadScripts loads every script on every master, so that pipelined EVALSHA
// (Renew) does not meet NOSCRIPT. Run still falls back to EVAL after a Redis
// restart.
func (r *Redis) loadScripts(ctx context.Context) error {
	load := func(ctx context.Context, c redis.Scripter) error {
		for _, s := range allScripts {
			if err := s.Load(ctx, c).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	} else {
		err = load(ctx, r.c)
	}
	return r.fail("script load", err)
}

func (r *Redis) register(ctx context.Context) error {
	r.mu.Lock()
	m := member(r.node, r.inc)
	r.mu.Unlock()
	return r.fail("register", r.c.SAdd(ctx, r.k.registry(), m).Err())
}

// heartbeat refreshes the node record; lost reports that it was gone (not
// on the first beat): Redis restarted empty or this node was swept.
func (r *Redis) heartbeat(ctx context.Context) (lost bool, err error) {
	r.mu.Lock()
	inc, first := r.inc, !r.started
	r.mu.Unlock()
	old, err := r.c.SetArgs(ctx, r.k.node(r.node), inc, redis.SetArgs{TTL: r.nodeTTL, Get: true}).Result()
	if errors.Is(err, redis.Nil) {
		err, old = nil, ""
	}
	if err != nil {
		return false, r.fail("heartbeat", err)
	}
	r.up()
	return !first && old != inc, nil
}

// beat runs the heartbeat every NodeTTL/3 and handles a lost record.
func (r *Redis) beat() {
	defer r.wg.Done()
	t := time.NewTicker(r.nodeTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		case <-r.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.nodeTTL/3)
		lost, err := r.heartbeat(ctx)
		if err == nil && lost {
			r.reset(ctx)
		}
		cancel()
	}
}

// reset starts a new incarnation and has the node open its sessions again;
// after a grace (the other nodes re-assert theirs at their next heartbeat)
// it records as offline the users Redis lost.
func (r *Redis) reset(ctx context.Context) {
	r.Stats.Resets.Add(1)
	r.mu.Lock()
	r.inc = newIncarnation()
	r.registered = make(map[string]struct{})
	r.mu.Unlock()
	r.log.Warn().Str("node", r.node).Msg("redis lost this node's record (restarted empty, or this node was cut off): opening every session again")
	if err := r.register(ctx); err != nil {
		return // the next beat finds the record missing again and retries
	}
	if _, err := r.heartbeat(ctx); err != nil {
		return
	}
	if r.onReset != nil {
		r.onReset()
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTimer(r.nodeTTL/3 + time.Second)
		defer t.Stop()
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.reconcile(ctx)
	}()
}

// reconcile writes a tombstone for each user this node shows whom Redis no
// longer has.
func (r *Redis) reconcile(ctx context.Context) {
	if r.known == nil {
		return
	}
	for user, v := range r.known() {
		n, err := scriptTombstone.Run(ctx, r.c, []string{r.k.user(user)},
			user, strconv.FormatUint(v, 10), r.auth, r.k.feed(), ms(r.retention)).Int()
		if err != nil {
			_ = r.fail("tombstone", err)
			return
		}
		if n == 1 {
			r.Stats.Tombstones.Add(1)
		}
	}
}

// listen applies the change feed. After go-redis re-subscribes (a lost
// connection), it reloads everything: messages may have been missed.
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
			p, err := decodeChange([]byte(m.Payload))
			if err != nil {
				r.Stats.FeedErrors.Add(1)
				r.log.Error().Err(err).Msg("undecodable change on the feed")
				continue
			}
			r.emit(p)
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				r.reload()
			}
		}
	}
}

// reload loads every user again after a re-subscription, retrying until it
// succeeds (the command pool may still be backing off when the subscription
// connection is back). Redis counts as up again only then.
func (r *Redis) reload() {
	r.Stats.Reloads.Add(1)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := r.Load(ctx, r.emit)
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

// ensureRegistered adds user to this incarnation's set before its first
// session is opened, so that a crash right after the open leaves nothing the
// sweep cannot find.
func (r *Redis) ensureRegistered(ctx context.Context, user string) error {
	r.mu.Lock()
	_, ok := r.registered[user]
	m := member(r.node, r.inc)
	r.mu.Unlock()
	if ok {
		return nil
	}
	// The incarnation too: Redis may have restarted empty since this node
	// last registered, and an incarnation missing from the registry would
	// never be swept.
	if err := r.c.SAdd(ctx, r.k.registry(), m).Err(); err != nil {
		return r.fail("register", err)
	}
	if err := r.c.SAdd(ctx, r.k.nodeUsers(m), user).Err(); err != nil {
		return r.fail("register user", err)
	}
	r.mu.Lock()
	if member(r.node, r.inc) == m {
		r.registered[user] = struct{}{}
	}
	r.mu.Unlock()
	return nil
}

// Open implements node.Store.
func (r *Redis) Open(ctx context.Context, a presence.OpenArgs) (presence.Session, error) {
	if err := a.Validate(); err != nil {
		return presence.Session{}, fmt.Errorf("open %s/%s: %w", a.User, a.ID, err)
	}
	if err := r.ensureRegistered(ctx, a.User); err != nil {
		return presence.Session{}, err
	}
	inc := r.Incarnation()
	res, err := scriptOpen.Run(ctx, r.c, []string{r.k.user(a.User)},
		a.User, a.ID, r.node, inc, a.Device, string(a.Status), a.Text, ms(a.TTL),
		r.auth, r.k.feed(), ms(r.retention)).StringSlice()
	if err != nil {
		return presence.Session{}, r.fail("open", err)
	}
	r.up()
	if len(res) != 3 {
		return presence.Session{}, fmt.Errorf("open %s/%s: unexpected reply %q", a.User, a.ID, res)
	}
	epoch, err := strconv.ParseUint(res[0], 10, 64)
	if err != nil {
		return presence.Session{}, fmt.Errorf("open: epoch %q: %w", res[0], err)
	}
	c, _ := msString(res[1])
	x, _ := msString(res[2])
	st := a.Status
	if st == "" {
		st = presence.Online
	}
	return presence.Session{User: a.User, ID: a.ID, Epoch: epoch, Node: r.node, Device: a.Device, Status: st, Text: a.Text,
		State: presence.Active, ConnectedAt: c, LastHeartbeat: c, ExpiresAt: x}, nil
}

func staleOr(op string, ref presence.SessionRef, n int) error {
	if n == 1 {
		return nil
	}
	return fmt.Errorf("%s %s/%s: %w: epoch %d is not the live one", op, ref.User, ref.ID, presence.ErrStaleEpoch, ref.Epoch)
}

// End implements node.Store.
func (r *Redis) End(ctx context.Context, a presence.EndArgs) error {
	if !a.Reason.Valid() {
		return fmt.Errorf("end %s/%s: %w: reason %q", a.User, a.ID, presence.ErrBadTransition, a.Reason)
	}
	n, err := scriptEnd.Run(ctx, r.c, []string{r.k.user(a.User)},
		a.ID, strconv.FormatUint(a.Epoch, 10), string(a.Reason), flag(a.LastWords != nil), deref(a.LastWords),
		r.auth, r.k.feed(), ms(r.retention)).Int()
	if err != nil {
		return r.fail("end", err)
	}
	r.up()
	return staleOr("end", presence.SessionRef{User: a.User, ID: a.ID, Epoch: a.Epoch}, n)
}

// Update implements node.Store.
func (r *Redis) Update(ctx context.Context, ref presence.SessionRef, upd presence.Update) error {
	probe := presence.Session{User: ref.User, ID: ref.ID, Epoch: 1, State: presence.Active}
	if _, err := probe.Update(1, upd); err != nil { // the same checks as the memory store
		return fmt.Errorf("update %s/%s: %w", ref.User, ref.ID, err)
	}
	args := append([]any{ref.ID, strconv.FormatUint(ref.Epoch, 10)}, updateArgs(upd)...)
	args = append(args, r.auth, r.k.feed(), ms(r.retention))
	n, err := scriptUpdate.Run(ctx, r.c, []string{r.k.user(ref.User)}, args...).Int()
	if err != nil {
		return r.fail("update", err)
	}
	r.up()
	return staleOr("update", ref, n)
}

// SetAccount implements node.Store.
func (r *Redis) SetAccount(ctx context.Context, user string, upd presence.AccountUpdate) error {
	if err := presence.ValidUser(user); err != nil {
		return fmt.Errorf("set account: %w", err)
	}
	if _, err := (presence.User{Name: user}).SetAccount(upd); err != nil {
		return fmt.Errorf("set account %s: %w", user, err)
	}
	err := scriptAccount.Run(ctx, r.c, []string{r.k.user(user)},
		user, flag(upd.Status != nil), deref(upd.Status), flag(upd.Text != nil), deref(upd.Text),
		r.auth, r.k.feed(), ms(r.retention)).Err()
	if err != nil {
		return r.fail("set account", err)
	}
	r.up()
	return nil
}

// Renew implements node.Store: one pipelined round of epoch-checked
// refreshes. It then reaps, by expiry only, the users of this incarnation's
// set that the node no longer holds (the backstop against a lost session).
func (r *Redis) Renew(ctx context.Context, _ string, refs []presence.SessionRef, ttl time.Duration) ([]presence.SessionRef, error) {
	held := make(map[string]struct{}, len(refs))
	cmds := make([]*redis.Cmd, len(refs))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, ref := range refs {
			held[ref.User] = struct{}{}
			cmds[i] = scriptRefresh.EvalSha(ctx, p, []string{r.k.user(ref.User)}, ref.ID, strconv.FormatUint(ref.Epoch, 10), ms(ttl))
		}
		return nil
	})
	if err != nil && !isNoScript(err) {
		return nil, r.fail("renew", err)
	}
	var stale []presence.SessionRef
	for i, c := range cmds {
		n, err := c.Int()
		if isNoScript(err) { // first use on this server: run it once the slow way
			n, err = scriptRefresh.Run(ctx, r.c, []string{r.k.user(refs[i].User)}, refs[i].ID, strconv.FormatUint(refs[i].Epoch, 10), ms(ttl)).Int()
		}
		if err != nil {
			return nil, r.fail("renew", err)
		}
		if n == 0 {
			stale = append(stale, refs[i])
		}
	}
	r.up()
	users, err := r.c.SMembers(ctx, r.k.nodeUsers(member(r.node, r.Incarnation()))).Result()
	if err != nil {
		return stale, r.fail("renew", err)
	}
	for _, u := range users {
		if _, ok := held[u]; ok {
			continue
		}
		if err := scriptReap.Run(ctx, r.c, []string{r.k.user(u)}, r.auth, r.k.feed(), ms(r.retention)).Err(); err != nil {
			return stale, r.fail("reap", err)
		}
	}
	return stale, nil
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// Reap implements node.Store: it sweeps the incarnations whose node record
// is gone, ending their sessions as node_lost. Any node may run it at any
// time; nodes racing to sweep one incarnation give the result of one.
func (r *Redis) Reap(ctx context.Context) (int, error) {
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
		if live == inc {
			continue
		}
		if live != "" && !r.replacedLongAgo(m) {
			// The node restarted: its new incarnation owns the record. Its
			// devices are reconnecting, and each new session takes the old
			// one over in the same step; sweeping now would show them
			// offline in between. Wait two thirds of node_ttl: with the
			// sweeps on either side, the old sessions still end within
			// node_ttl + sweep_interval of the restart, as for a crash.
			continue
		}
		n, err := r.sweep(ctx, node, inc)
		ended += n
		if err != nil {
			return ended, err
		}
		r.Stats.NodesLost.Add(1)
		r.log.Info().Str("node", node).Str("incarnation", inc).Int("sessions", n).Msg("node lost: its sessions ended")
	}
	r.up()
	return ended, nil
}

// replacedLongAgo reports whether incarnation m has been seen replaced by a
// newer one of its node for at least 2/3 of node_ttl (a local timer: no
// clock is compared with another node's).
func (r *Redis) replacedLongAgo(m string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	first, ok := r.replaced[m]
	if !ok {
		r.replaced[m] = time.Now()
		return false
	}
	return time.Since(first) >= r.nodeTTL*2/3
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
	r.Stats.Swept.Add(int64(ended))
	if err := r.c.Del(ctx, r.k.nodeUsers(m)).Err(); err != nil {
		return ended, r.fail("sweep", err)
	}
	if err := r.c.SRem(ctx, r.k.registry(), m).Err(); err != nil {
		return ended, r.fail("sweep", err)
	}
	r.mu.Lock()
	delete(r.replaced, m)
	r.mu.Unlock()
	return ended, nil
}

// hgetall reads one user's hash.
func (r *Redis) hgetall(ctx context.Context, user string) (map[string]string, error) {
	h, err := r.c.HGetAll(ctx, r.k.user(user)).Result()
	if err != nil {
		return nil, r.fail("read", err)
	}
	return h, nil
}

// Get implements node.Store.
func (r *Redis) Get(ctx context.Context, user string) (presence.Presence, bool, error) {
	h, err := r.hgetall(ctx, user)
	if err != nil {
		return presence.Presence{}, false, err
	}
	_, p, ok, err := decodeUser(user, h)
	return p, ok, err
}

// User implements node.Store.
func (r *Redis) User(ctx context.Context, user string) (presence.User, bool, error) {
	h, err := r.hgetall(ctx, user)
	if err != nil {
		return presence.User{}, false, err
	}
	u, _, ok, err := decodeUser(user, h)
	return u, ok, err
}

// Load implements node.Store: every user record (on every master of a
// cluster), read with SCAN and HGETALL, handed to fn like the feed's changes.
// Offline users older than the retention have expired in Redis already.
func (r *Redis) Load(ctx context.Context, fn func(presence.Presence)) error {
	var fnMu sync.Mutex // ForEachMaster scans the masters side by side
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
				r.log.Error().Err(err).Str("user", user).Msg("undecodable user record")
				continue
			}
			if ok {
				fnMu.Lock()
				fn(p)
				fnMu.Unlock()
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
	if err != nil {
		return r.fail("load", err)
	}
	return nil
}
