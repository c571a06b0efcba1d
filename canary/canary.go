package canary

import (
	"context"
	"crypto/tls"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/slo"
)

// Options configure the canary.
type Options struct {
	// Node is this node's id.
	Node string
	// Addr is this node's own MQTT TCP listener, on loopback; TLS is its
	// client configuration when the listener has TLS (nil: plain).
	Addr string
	TLS  *tls.Config
	// Prefix is the presence topic prefix ("presence").
	Prefix string
	// Separator is identity.separator: a client id is user + Separator +
	// plan.
	Separator string
	// Secret is the password the canary's connections present; the
	// binary's authentication admits it for the synthetic users and the
	// observer only.
	Secret []byte
	// Users is how many synthetic users this node runs.
	Users int
	// Interval is each user's cycle: it connects, ends a third of the way
	// through, and connects again at the next cycle.
	Interval time.Duration
	// KeepAlive is the synthetic users' keep-alive; Grace this node's
	// presence.offline_grace. The bound of an end is slo.Bound of both.
	KeepAlive, Grace time.Duration
	// Ends are the end kinds, rotated (each user starts one further).
	Ends []slo.Kind
	// Move asks this node to move one client of a user (a drain of one);
	// nil: drain ends are left out.
	Move func(user, clientID string) bool
	// Nodes lists the ids of the nodes up now (this one's included).
	Nodes func(ctx context.Context) ([]string, error)
	// Acct receives the SLIs the observer measures.
	Acct *slo.Accounting
	Now  func() time.Time
	Log  *slog.Logger
}

// Stats are the canary's own counts, read with atomic loads.
type Stats struct {
	Connections   atomic.Int64 // the canary's connections open now
	Cycles        atomic.Int64 // synthetic sessions connected
	ConnectFailed atomic.Int64 // synthetic sessions that could not connect
	Ended         [4]atomic.Int64
	Late          atomic.Int64 // ends carried out more than a second after their plan (the node was slow or stopped)
	MoveFailed    atomic.Int64 // drain ends the node could not carry out (no such client): reset instead
	Observed      atomic.Int64 // presence messages the observer read
	Reconnects    atomic.Int64 // observer connections lost and made again
	Watched       atomic.Int64 // synthetic users the observer watches now
}

// Canary connects synthetic users to its own node on a schedule, ends
// them every way, and observes the other nodes' synthetic users
// (package doc). Start and Stop own every goroutine: one per user and the
// observer's.
type Canary struct {
	o     Options
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	start sync.Once
	// conns are the connections open now: Stop closes them, so that no
	// goroutine wakes up only to see whether it should stop.
	mu    sync.Mutex
	conns map[*conn]struct{}
	Stats Stats
}

// New returns the canary; Start runs it.
func New(o Options) *Canary {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Move == nil {
		o.Ends = slices.DeleteFunc(slices.Clone(o.Ends), func(k slo.Kind) bool { return k == slo.Drain })
	}
	if len(o.Ends) == 0 {
		o.Ends = []slo.Kind{slo.Clean}
	}
	return &Canary{o: o, stop: make(chan struct{}), conns: make(map[*conn]struct{})}
}

// Start starts the users' goroutines and the observer's.
func (c *Canary) Start() {
	c.start.Do(func() {
		for i := range c.o.Users {
			c.wg.Add(1)
			go c.user(i)
		}
		c.wg.Add(1)
		go c.observe()
	})
}

// Stop ends every connection and waits for the goroutines.
func (c *Canary) Stop() {
	c.once.Do(func() {
		c.mu.Lock()
		close(c.stop)
		for cn := range c.conns {
			_ = cn.close()
		}
		c.mu.Unlock()
	})
	c.wg.Wait()
}

// track registers an open connection; false (and closed) once stopped.
func (c *Canary) track(cn *conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped() {
		_ = cn.close()
		return false
	}
	c.conns[cn] = struct{}{}
	c.Stats.Connections.Add(1)
	return true
}

// untrack forgets a connection (its owner closes it).
func (c *Canary) untrack(cn *conn) {
	c.mu.Lock()
	if _, ok := c.conns[cn]; ok {
		delete(c.conns, cn)
		c.Stats.Connections.Add(-1)
	}
	c.mu.Unlock()
}

// Bound is the detection bound of this node's synthetic users' ends.
func (c *Canary) Bound() time.Duration { return slo.Bound(c.o.KeepAlive, c.o.Grace) }

// sleepUntil waits until t (false: stopped first).
func (c *Canary) sleepUntil(t time.Time) bool {
	d := t.Sub(c.o.Now())
	if d <= 0 {
		select {
		case <-c.stop:
			return false
		default:
			return true
		}
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-c.stop:
		return false
	case <-tm.C:
		return true
	}
}

// ctx is a context that ends when the canary stops.
func (c *Canary) ctx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-c.stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
}

// user runs the i-th synthetic user's cycles, staggered over the interval.
func (c *Canary) user(i int) {
	defer c.wg.Done()
	name := UserName(c.o.Node, i, c.o.Separator)
	next := c.o.Now().Add(c.o.Interval * time.Duration(i) / time.Duration(c.o.Users))
	for cycle := i; ; cycle++ {
		if !c.sleepUntil(next) {
			return
		}
		start := c.o.Now()
		next = start.Add(c.o.Interval)
		kind := c.o.Ends[cycle%len(c.o.Ends)]
		c.session(name, Plan{Kind: kind, End: start.Add(c.o.Interval / 3), Bound: c.Bound(), Cycle: int64(cycle)})
	}
}

// session connects one synthetic session, keeps it alive until its
// plan's end, and ends it as planned.
func (c *Canary) session(user string, p Plan) {
	id := p.ClientID(user, c.o.Separator)
	ctx, cancel := c.ctx()
	cn, err := dial(ctx, c.o.Addr, c.o.TLS, id, user, c.o.Secret, c.o.KeepAlive)
	cancel()
	if err != nil {
		if c.stopped() {
			return
		}
		c.Stats.ConnectFailed.Add(1)
		c.o.Log.Warn("canary: a synthetic user could not connect", "user", user, "err", err)
		return
	}
	if !c.track(cn) {
		return
	}
	defer c.untrack(cn)
	c.Stats.Cycles.Add(1)
	if !c.alive(cn, p.End) {
		_ = cn.close()
		return
	}
	if late := c.o.Now().Sub(p.End); late > time.Second {
		c.Stats.Late.Add(1)
	}
	c.Stats.Ended[slices.Index(slo.Kinds, p.Kind)].Add(1)
	switch p.Kind {
	case slo.Clean:
		_ = cn.disconnect()
	case slo.Reset:
		_ = cn.reset()
	case slo.Silence:
		// Nothing more is sent: the broker closes at 1.5 × the keep-alive.
		c.drainUntil(cn, c.o.Now().Add(missAfter*p.Bound))
		_ = cn.close()
	case slo.Drain:
		if c.o.Move != nil && c.o.Move(user, id) {
			c.drainUntil(cn, c.o.Now().Add(p.Bound))
		} else {
			c.Stats.MoveFailed.Add(1) // the socket is reset instead
		}
		_ = cn.close()
	}
}

// stopped reports whether Stop was called.
func (c *Canary) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// alive pings every three quarters of the keep-alive until end (the
// broker waits 1.5 × it), reading what comes (false: the connection ended,
// or the canary stopped: Stop closes it).
func (c *Canary) alive(cn *conn, end time.Time) bool {
	every := c.o.KeepAlive * 3 / 4
	nextPing := c.o.Now().Add(every)
	for {
		now := c.o.Now()
		if !now.Before(end) {
			return true
		}
		if !now.Before(nextPing) {
			if err := cn.ping(); err != nil {
				return false
			}
			nextPing = now.Add(every)
		}
		if _, err := cn.readUntil(earliest(nextPing, end)); err != nil && !isTimeout(err) {
			return false
		}
	}
}

// drainUntil reads until the broker closes the connection, until
// deadline, or until the canary stops (Stop closes it).
func (c *Canary) drainUntil(cn *conn, deadline time.Time) {
	for c.o.Now().Before(deadline) {
		if _, err := cn.readUntil(deadline); err != nil && !isTimeout(err) {
			return
		}
	}
}

// observe runs the observer: connected as a service account, it follows
// the synthetic users of the other nodes up (its own when it is alone),
// and hands what it is shown to the watcher.
func (c *Canary) observe() {
	defer c.wg.Done()
	w := newWatcher(c.o.Acct, c.o.Separator, c.o.Ends)
	backoff := time.Second
	for first := true; !c.stopped(); first = false {
		if !first {
			c.Stats.Reconnects.Add(1)
			if !c.sleepUntil(c.o.Now().Add(backoff)) {
				return
			}
			backoff = min(backoff*2, 30*time.Second)
		}
		ctx, cancel := c.ctx()
		cn, err := dial(ctx, c.o.Addr, c.o.TLS, ObserverID(c.o.Node, c.o.Separator), "", c.o.Secret, time.Minute)
		cancel()
		if err != nil {
			if !c.stopped() {
				c.o.Log.Warn("canary: the observer could not connect", "err", err)
			}
			continue
		}
		backoff = time.Second
		if !c.track(cn) {
			return
		}
		c.watchLoop(cn, w)
		c.untrack(cn)
		_ = cn.close()
	}
}

// watchLoop reads and ticks on one observer connection until it fails or
// the canary stops.
func (c *Canary) watchLoop(cn *conn, w *watcher) {
	subscribed := map[string]bool{} // topic -> subscribed on this connection
	var pid uint16
	nextID := func() uint16 {
		pid++
		if pid == 0 {
			pid = 1
		}
		return pid
	}
	refreshEvery := min(c.o.Interval/3, 10*time.Second)
	var nextRefresh, nextTick, nextPing time.Time
	for !c.stopped() {
		now := c.o.Now()
		if !now.Before(nextRefresh) {
			if err := c.refresh(cn, w, subscribed, nextID); err != nil {
				return
			}
			nextRefresh = now.Add(refreshEvery)
		}
		if !now.Before(nextTick) {
			w.tick(now)
			nextTick = earliest(now.Add(refreshEvery), w.next(now))
		}
		if !now.Before(nextPing) {
			if err := cn.ping(); err != nil {
				return
			}
			nextPing = now.Add(20 * time.Second)
		}
		pk, err := cn.readUntil(earliest(nextRefresh, nextTick, nextPing))
		switch {
		case isTimeout(err):
			continue
		case err != nil:
			return
		case pk.FixedHeader.Type == packets.Disconnect:
			return
		case pk.FixedHeader.Type != packets.Publish:
			continue
		}
		a, perr := presence.ParseAggregate(pk.Payload)
		if perr != nil {
			continue
		}
		c.Stats.Observed.Add(1)
		w.shown(c.o.Now(), a)
		nextTick = earliest(nextTick, w.next(c.o.Now()))
	}
}

// refresh follows the synthetic users of the nodes up now: the other
// nodes', or this node's own when no other is up.
func (c *Canary) refresh(cn *conn, w *watcher, subscribed map[string]bool, nextID func() uint16) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	nodes, err := c.o.Nodes(ctx)
	cancel()
	if err != nil {
		c.o.Log.Debug("canary: the node list could not be read", "err", err)
		return nil // keep what is followed
	}
	others := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == c.o.Node })
	if len(others) == 0 {
		others = []string{c.o.Node}
	}
	want := map[string]string{} // topic -> user
	for _, n := range others {
		for i := range c.o.Users {
			u := UserName(n, i, c.o.Separator)
			want[c.o.Prefix+"/users/"+u] = u
		}
	}
	var add, drop []string
	for t, u := range want {
		if !subscribed[t] {
			add = append(add, t)
			w.follow(u)
		}
	}
	for t := range subscribed {
		if _, ok := want[t]; !ok {
			drop = append(drop, t)
			w.forget(t[len(c.o.Prefix)+len("/users/"):])
		}
	}
	slices.Sort(add)
	slices.Sort(drop)
	for len(add) > 0 {
		n := min(len(add), 16)
		if err := cn.subscribe(nextID(), add[:n]); err != nil {
			return err
		}
		for _, t := range add[:n] {
			subscribed[t] = true
		}
		add = add[n:]
	}
	if len(drop) > 0 {
		if err := cn.unsubscribe(nextID(), drop); err != nil {
			return err
		}
		for _, t := range drop {
			delete(subscribed, t)
		}
	}
	c.Stats.Watched.Store(int64(len(subscribed)))
	return nil
}

// earliest is the earliest of times.
func earliest(t time.Time, more ...time.Time) time.Time {
	for _, u := range more {
		if u.Before(t) {
			t = u
		}
	}
	return t
}
