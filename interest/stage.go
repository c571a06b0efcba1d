package interest

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
)

// Store is what the stage asks of the store: to hear users' changes (and
// report their current aggregates: Listen), or every user's (the firehose),
// and to stop.
type Store interface {
	Listen(ctx context.Context, users []string) error
	Unlisten(ctx context.Context, users []string) error
	ListenAll(ctx context.Context) error
	UnlistenAll(ctx context.Context) error
}

// Groups is what the stage tells the groups stage: a group topic's first
// subscription here (Watch, with the subscriber, which gets the snapshot),
// and a group nobody here watches any more (Unwatch, after the linger).
type Groups interface {
	Watch(cl *mqtt.Client, filter string)
	Unwatch(group string)
}

// Visibility is who reads whose presence (presence.visibility), for what a
// wildcard filter makes a node need.
type Visibility int

// The visibilities.
const (
	Open     Visibility = iota // everyone's: an unrestricted wildcard is a firehose
	Private                    // one's own (service accounts: everyone's)
	ByGroups                   // one's group mates' (service accounts: everyone's)
)

// Options configure the stage.
type Options struct {
	Prefix     string     // the topic prefix, e.g. "presence"
	Visibility Visibility // presence.visibility
	// Linger is how long a user nobody here needs any more is kept
	// (presence.interest_linger); default 60 s.
	Linger time.Duration
	// MaxLingering bounds the users kept lingering (heard, nobody here
	// needing them): past it the longest lingering are forgotten before
	// their linger ends (presence.interest_max_lingering); default
	// 100,000. Without it a client that subscribes to new names and
	// unsubscribes, again and again, makes the node hear every name it
	// ever tried for a linger: as many as it can send in one.
	MaxLingering int
	Now          func() time.Time
	Log          *slog.Logger
	Store        Store
	// Viewer says who reads through a connection: its user ("" for an
	// observer) and whether it is a service account (the presence hook).
	Viewer func(cl *mqtt.Client) (user string, service bool)
	// Mates returns the users who share a group with user (visibility
	// groups: what a wildcard subscriber of user's may read).
	Mates func(user string) []string
	// Shown returns every user the node shows now (the publisher's), and
	// Forget drops what the node shows of users (their retained message,
	// the publisher's and the pacer's state). Forget runs on the worker.
	Shown  func() []string
	Forget func(users []string)
	// Groups follows the group topics' subscriptions; nil: none.
	Groups Groups
	// Nodes is told of every filter granted here that can read a node
	// topic, presence/nodes/{node} (nodes.Nodes.Watch: the node states are
	// read while a subscription here matches one); it must return at once.
	// nil: not told.
	Nodes func(filter string)
}

// Stats are the stage's counts, read with atomic loads.
type Stats struct {
	Watched   atomic.Int64 // users a subscription here (or the leader) needs now
	Heard     atomic.Int64 // users the store is asked to report
	Firehose  atomic.Int64 // 1 while this node hears every user
	Listens   atomic.Int64 // users asked for (each is loaded once heard)
	Forgotten atomic.Int64 // users forgotten after the linger, or before it (Evicted)
	Evicted   atomic.Int64 // of those, forgotten before their linger ended: more than MaxLingering lingered
	Lingering atomic.Int64 // users heard that nobody here needs now
	Failures  atomic.Int64 // store calls that failed (tried again)
}

// Stage is the interest stage (see the package doc).
type Stage struct {
	o                   Options
	users, groups, node string // prefix/users/, prefix/groups/, prefix/nodes/

	mu       sync.Mutex
	clients  map[string]*client    // by client id: a session taken over keeps its interest
	follows  map[string]*client    // the program's inline subscriptions, by id
	watchers map[string]int        // user -> clients (and the leader) that need it shown
	leader   map[string]struct{}   // the members the group topics' leader needs
	fire     int                   // clients with an unrestricted wildcard
	fireIdle time.Time             // when fire fell to 0 (zero: in use, or never)
	gwatch   map[string]int        // group -> clients watching its topic
	gidle    map[string]time.Time  // groups nobody watches, since
	heard    map[string]struct{}   // users the store listens to (asked)
	pending  map[string]struct{}   // users to ask for (again: a user newly shown is loaded)
	idle     map[string]lingerMark // heard users nobody needs any more: their linger
	lq       []lingerer            // idle's lingers in the order they began, and stale ones (lingeredLocked)
	lqHead   int                   // lq's front: the entries before it are consumed
	lqSeq    uint64                // the last lingerer's seq
	all      bool                  // the store listens to every user
	wakeC    chan struct{}

	stop chan struct{}
	wg   sync.WaitGroup

	Stats Stats
}

// client is what a connection's subscriptions make the node need.
type client struct {
	cl      *mqtt.Client
	filters map[string]struct{}
	viewer  string // the connection's user, whose mates or self it may read
	service bool   // the connection is a service account's
	need    need   // what the filters make the node need, as counted
}

// need is what one client's filters need.
type need struct {
	users  map[string]struct{}
	fire   bool
	groups map[string]struct{}
}

// New returns the stage; Start starts its worker.
func New(o Options) *Stage {
	if o.Linger <= 0 {
		o.Linger = time.Minute
	}
	if o.MaxLingering <= 0 {
		o.MaxLingering = DefaultMaxLingering
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Stage{o: o, users: o.Prefix + "/users/", groups: o.Prefix + "/groups/", node: o.Prefix + "/nodes/",
		clients: make(map[string]*client), follows: make(map[string]*client), watchers: make(map[string]int),
		leader: make(map[string]struct{}), gwatch: make(map[string]int), gidle: make(map[string]time.Time),
		heard: make(map[string]struct{}), pending: make(map[string]struct{}), idle: make(map[string]lingerMark),
		wakeC: make(chan struct{}, 1), stop: make(chan struct{})}
}

// DefaultMaxLingering is Options.MaxLingering's default.
const DefaultMaxLingering = 100_000

// wake wakes the worker without waiting.
func (s *Stage) wake() {
	select {
	case s.wakeC <- struct{}{}:
	default:
	}
}

// Shows reports whether the node shows user (publishes and retains its
// presence): someone here watches it, or the node is a firehose. The pump
// asks it of every change.
func (s *Stage) Shows(user string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.showsLocked(user)
}

func (s *Stage) showsLocked(user string) bool {
	return s.watchers[user] > 0 || s.fire > 0 || !s.fireIdle.IsZero()
}

// HeardUsers returns the users the store listens to for this node (the
// firehose aside).
func (s *Stage) HeardUsers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.heard))
}

// Watching reports whether someone here watches user, and whether the
// node hears it.
func (s *Stage) Watching(user string) (watched, heard bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, heard = s.heard[user]
	return s.watchers[user] > 0, heard
}

// Firehose reports whether the node hears every user.
func (s *Stage) Firehose() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all
}

// Lead sets the users the group topics' leader needs shown (every member of
// every group), nil when this node does not lead.
func (s *Stage) Lead(members []string) {
	s.mu.Lock()
	next := make(map[string]struct{}, len(members))
	for _, u := range members {
		next[u] = struct{}{}
	}
	for u := range s.leader {
		if _, ok := next[u]; !ok {
			s.unwatchLocked(u)
		}
	}
	for u := range next {
		if _, ok := s.leader[u]; !ok {
			s.watchLocked(u)
		}
	}
	s.leader = next
	s.mu.Unlock()
	s.wake()
}

// watchLocked counts one more watcher of user; the first has the user
// loaded (and heard). mu is held.
func (s *Stage) watchLocked(user string) {
	s.watchers[user]++
	if s.watchers[user] == 1 {
		s.Stats.Watched.Add(1)
		s.needLocked(user, true)
	}
}

// unwatchLocked counts one watcher fewer.
func (s *Stage) unwatchLocked(user string) {
	if s.watchers[user] <= 0 {
		return
	}
	s.watchers[user]--
	if s.watchers[user] == 0 {
		delete(s.watchers, user)
		s.Stats.Watched.Add(-1)
		s.releaseLocked(user)
	}
}

// needLocked has user heard, and loaded when load (a user newly shown).
func (s *Stage) needLocked(user string, load bool) {
	if _, ok := s.idle[user]; ok {
		s.unlingerLocked(user)
		s.Stats.Lingering.Store(int64(len(s.idle)))
	}
	if _, ok := s.heard[user]; !ok || load {
		s.pending[user] = struct{}{}
	}
}

// releaseLocked starts the linger of a user nobody needs any more.
func (s *Stage) releaseLocked(user string) {
	if s.watchers[user] > 0 {
		return
	}
	delete(s.pending, user)
	if _, ok := s.heard[user]; ok {
		s.lingerLocked(user)
		s.Stats.Lingering.Store(int64(len(s.idle)))
	}
}

// lingerMark is one linger of a user: since when, and its number. A user who
// lingers again gets a new number, which tells the older entry of the
// queue (lq) stale.
type lingerMark struct {
	since time.Time
	seq   uint64
}

// lingerer is a linger in the queue, with its user.
type lingerer struct {
	user string
	lingerMark
}

// The lingering users are a map (idle, by user) and a queue (lq) of their
// lingers in the order they began, which is the order of their since:
// Options.Now does not run backwards (were it to, a linger behind a younger
// one would end late, never early). So a pass finds the lingers that
// ended and the longest lingering at the queue's front, at the cost of
// what it finds, however many linger: no scan or sort of them all under
// mu, which every SUBSCRIBE of the node takes. An entry is stale once its
// user is needed again, forgotten, or lingering again under a newer
// number: it is skipped, dropped at the front, and dropped from the whole
// queue when stale entries outnumber the current ones.

// lingerLocked starts user's linger at Options.Now. Under mu.
func (s *Stage) lingerLocked(user string) {
	s.lqSeq++
	l := lingerMark{since: s.o.Now(), seq: s.lqSeq}
	s.idle[user] = l
	s.lq = append(s.lq, lingerer{user, l})
	if len(s.lq)-s.lqHead > 2*len(s.idle)+64 {
		s.compactLocked()
	}
}

// unlingerLocked ends user's linger (its queue entry goes stale), and
// drops the queue when nobody lingers any more. Under mu.
func (s *Stage) unlingerLocked(user string) {
	delete(s.idle, user)
	if len(s.idle) == 0 {
		s.lq, s.lqHead = nil, 0
	}
}

// currentLocked reports whether l is its user's current linger. Under mu.
func (s *Stage) currentLocked(l lingerer) bool {
	c, ok := s.idle[l.user]
	return ok && c.seq == l.seq
}

// compactLocked keeps only the current lingers, in their order, in a new
// array when the old one is much larger than they need. Under mu.
func (s *Stage) compactLocked() {
	live := s.lq[:0]
	for _, l := range s.lq[s.lqHead:] {
		if s.currentLocked(l) {
			live = append(live, l)
		}
	}
	clear(s.lq[len(live):cap(s.lq)])
	if cap(live) > 4*len(live)+256 {
		live = slices.Clone(live)
	}
	s.lq, s.lqHead = live, 0
}

// lingeredLocked returns the users whose linger ended at now, and the
// longest lingering past Options.MaxLingering (whom forget counts as
// evicted), from the queue's front: the longest lingering first. Under mu.
func (s *Stage) lingeredLocked(now time.Time) []string {
	for s.lqHead < len(s.lq) && !s.currentLocked(s.lq[s.lqHead]) {
		s.lq[s.lqHead] = lingerer{}
		s.lqHead++
	}
	if s.lqHead == len(s.lq) {
		s.lq, s.lqHead = nil, 0 // nothing lingers: the array goes
		return nil
	}
	over := len(s.idle) - s.o.MaxLingering
	var out []string
	for _, l := range s.lq[s.lqHead:] {
		if !s.currentLocked(l) {
			continue
		}
		if now.Sub(l.since) < s.o.Linger && over <= 0 {
			break
		}
		out = append(out, l.user)
		over--
	}
	return out
}

// Start starts the worker, which asks the store for what the node needs
// and forgets what it needs no more, a linger after.
func (s *Stage) Start() {
	s.wg.Add(1)
	go s.work()
}

// Stop stops the worker and waits for it.
func (s *Stage) Stop() {
	close(s.stop)
	s.wg.Wait()
}

// work reconciles what the store listens to with what the node needs:
// when woken, a second after a failure, and every tenth of the linger (at
// most a second) for what lingered out.
func (s *Stage) work() {
	defer s.wg.Done()
	tick := time.NewTicker(min(s.o.Linger/10, time.Second))
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.wakeC:
		case <-tick.C:
		case <-retry.C:
		}
		if err := s.reconcile(); err != nil {
			s.Stats.Failures.Add(1)
			s.o.Log.Debug("interest: the store did not answer; trying again", "err", err)
			retry.Reset(time.Second)
		}
	}
}

// reconcile makes one pass: the firehose, the users to hear (and load),
// the users and groups lingered out.
func (s *Stage) reconcile() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.reconcileFirehose(ctx); err != nil {
		return err
	}
	now := s.o.Now()
	s.mu.Lock()
	listen := slices.Sorted(maps.Keys(s.pending))
	forget := s.lingeredLocked(now)
	var groups []string
	for g, since := range s.gidle {
		if now.Sub(since) >= s.o.Linger {
			groups = append(groups, g)
			delete(s.gidle, g)
		}
	}
	s.mu.Unlock()
	for _, g := range groups {
		if s.o.Groups != nil {
			s.o.Groups.Unwatch(g)
		}
	}
	if len(listen) > 0 {
		if err := s.o.Store.Listen(ctx, listen); err != nil {
			return err
		}
		s.Stats.Listens.Add(int64(len(listen)))
		s.mu.Lock()
		for _, u := range listen {
			delete(s.pending, u)
			s.heard[u] = struct{}{}
		}
		if len(s.pending) == 0 && len(listen) >= 1024 {
			// A map keeps the room of its largest size, and every pass
			// ranges over pending: after a burst (a node's first
			// subscribers), a new one.
			s.pending = make(map[string]struct{})
		}
		s.Stats.Heard.Store(int64(len(s.heard)))
		s.mu.Unlock()
	}
	return s.forget(ctx, forget)
}

// forget drops the users that lingered out, or that lingered past
// Options.MaxLingering (Stats.Evicted), unless one became needed again
// meanwhile.
func (s *Stage) forget(ctx context.Context, users []string) error {
	if len(users) == 0 {
		return nil
	}
	s.mu.Lock()
	var gone []string
	for _, u := range users {
		if _, idle := s.idle[u]; idle && s.watchers[u] == 0 {
			gone = append(gone, u)
		}
	}
	s.mu.Unlock()
	if len(gone) == 0 {
		return nil
	}
	if err := s.o.Store.Unlisten(ctx, gone); err != nil {
		return err
	}
	now := s.o.Now()
	s.mu.Lock()
	var dropped []string
	for _, u := range gone {
		l, idle := s.idle[u]
		if !idle || s.watchers[u] > 0 {
			s.pending[u] = struct{}{} // needed again while unlistening: listen again
			continue
		}
		if now.Sub(l.since) < s.o.Linger {
			s.Stats.Evicted.Add(1)
		}
		s.unlingerLocked(u)
		delete(s.heard, u)
		if !s.showsLocked(u) {
			dropped = append(dropped, u)
		}
	}
	s.Stats.Heard.Store(int64(len(s.heard)))
	s.Stats.Lingering.Store(int64(len(s.idle)))
	s.mu.Unlock()
	if len(dropped) > 0 && s.o.Forget != nil {
		s.o.Forget(dropped)
		s.Stats.Forgotten.Add(int64(len(dropped)))
	}
	return nil
}

// reconcileFirehose starts hearing every user when a client needs it, and
// stops a linger after the last one left, forgetting every user shown that
// nobody here watches.
func (s *Stage) reconcileFirehose(ctx context.Context) error {
	s.mu.Lock()
	start := s.fire > 0 && !s.all
	end := s.fire == 0 && s.all && !s.fireIdle.IsZero() && s.o.Now().Sub(s.fireIdle) >= s.o.Linger
	s.mu.Unlock()
	switch {
	case start:
		if err := s.o.Store.ListenAll(ctx); err != nil {
			return err
		}
		s.mu.Lock()
		s.all = true
		s.mu.Unlock()
		s.Stats.Firehose.Store(1)
		s.o.Log.Info("interest: an unrestricted subscriber here: this node hears every user (a firehose)")
	case end:
		if err := s.o.Store.UnlistenAll(ctx); err != nil {
			return err
		}
		var shown []string
		if s.o.Shown != nil {
			shown = s.o.Shown()
		}
		s.mu.Lock()
		s.all, s.fireIdle = false, time.Time{}
		var drop []string
		for _, u := range shown {
			if s.watchers[u] == 0 {
				drop = append(drop, u)
			}
		}
		s.mu.Unlock()
		s.Stats.Firehose.Store(0)
		if len(drop) > 0 && s.o.Forget != nil {
			s.o.Forget(drop)
			s.Stats.Forgotten.Add(int64(len(drop)))
		}
		s.o.Log.Info("interest: no unrestricted subscriber left: this node hears only its interest", "forgotten", len(drop))
	}
	return nil
}

// HoldFirehose has the node hear every user for a stage of its own (the
// lifecycle outputs, the webhooks), as an unrestricted subscriber would,
// until ReleaseFirehose; holds are counted.
func (s *Stage) HoldFirehose() {
	s.mu.Lock()
	s.fire++
	s.fireIdle = time.Time{}
	s.mu.Unlock()
	s.wake()
}

// ReleaseFirehose ends one HoldFirehose; the firehose stops a linger after
// nothing holds it.
func (s *Stage) ReleaseFirehose() {
	s.mu.Lock()
	if s.fire > 0 {
		s.fire--
		if s.fire == 0 {
			s.fireIdle = s.o.Now()
		}
	}
	s.mu.Unlock()
	s.wake()
}
