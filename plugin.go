package presenced

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/admin"
	"github.com/presenced/presenced/clock"
	"github.com/presenced/presenced/delivery"
	"github.com/presenced/presenced/groups"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/interest"
	"github.com/presenced/presenced/lifecycle"
	"github.com/presenced/presenced/nodes"
	"github.com/presenced/presenced/notify"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/publisher"
	"github.com/presenced/presenced/roster"
	"github.com/presenced/presenced/sparkplug"
	"github.com/presenced/presenced/stats"
	"github.com/presenced/presenced/store"
	"github.com/presenced/presenced/tracker"
	"github.com/presenced/presenced/webhook"
)

// ErrNoInlineClient: the server was built without Options.InlineClient,
// which presence needs to publish.
var ErrNoInlineClient = errors.New("presenced: the mochi server needs Options.InlineClient")

// Option changes how the plugin is built.
type Option func(*Plugin)

// WithLogger sets the logger (default: the server's, mochi's
// Options.Logger).
func WithLogger(l *slog.Logger) Option { return func(p *Plugin) { p.log = l } }

// WithClock sets the clock of the in-memory store and of the sweep's grace
// (tests).
func WithClock(now func() time.Time) Option { return func(p *Plugin) { p.now = now } }

// WithACL makes presence the server's access authority: policy is the
// program's decision, and presence adds its own for presence topics on top
// (delivery.Guard). mochi grants what any hook allows, so the program must
// then add no other hook that answers OnACLCheck (mochi's auth.Hook and
// auth.AllowHook do: authenticate with hooks.Authenticator instead). A nil
// policy allows everything. Without WithACL, presence works beside the
// program's access hooks, except that a message sent again for a
// subscriber that missed it reaches every subscriber of that user, and a
// subscriber whose writer is stuck may receive its first version of a user
// twice (observers drop a version not above the last, see docs/protocol.md).
func WithACL(policy delivery.Policy) Option { return func(p *Plugin) { p.acl = &policy } }

// WithTopics decides the application topics (outside the presence prefix)
// of connections that are not service accounts, with WithACL: an
// acl.File, say. Without it, delivery.DefaultTopics.
func WithTopics(t delivery.Topics) Option { return func(p *Plugin) { p.topics = t } }

// WithServiceAccounts says which connections are service accounts, which
// may read all presence, "#" and $SYS (with WithACL; the users listed in
// presence.observers are too). A service account is not a person: it has
// no presence session, and is never shown online, unless
// Presence.ObserverSessions. Without it and without presence.observers,
// every connection is one, since presence does not know the program's
// accounts, and every connection with a user has its presence.
func WithServiceAccounts(service func(cl *mqtt.Client) bool) Option {
	return func(p *Plugin) { p.service = service }
}

// WithRedisClient uses c instead of a client built from the redis section;
// the plugin does not close it.
func WithRedisClient(c redis.UniversalClient) Option { return func(p *Plugin) { p.redisC = c } }

// Plugin is presence attached to one mochi server: the stages, composed
// (see the package doc), and nothing else.
type Plugin struct {
	cfg    Config
	srv    *mqtt.Server
	log    *slog.Logger
	now    func() time.Time
	redisC redis.UniversalClient // WithRedisClient's
	// redisTLS is redis.tls, its files read (nil: no TLS).
	redisTLS *tls.Config
	acl      *delivery.Policy
	topics   delivery.Topics // WithTopics
	service  func(cl *mqtt.Client) bool
	// sessionLog logs every session opened and ended (WithSessionLog).
	sessionLog bool

	// The stages, in the order the data flows.
	drain     *hooks.Drain  // refuses CONNECTs and moves clients while the node drains
	limits    *hooks.Limits // the broker's limits on one connection
	hook      *hooks.Presence
	tracker   *tracker.Tracker
	store     store.Store
	feed      *store.Feed
	pacer     *publisher.Pacer // between the feed and the publisher: holds blinks back, paces storms
	publisher *publisher.Publisher
	groups    *groups.Stage
	interest  *interest.Stage // which users this node needs: hears, shows, forgets
	nodes     *nodes.Nodes
	delivery  *delivery.Delivery
	outlet    *delivery.Outlet

	meters *meters      // what only the figures count (metrics.go)
	table  *stats.Table // every figure (stats.go)

	auditing   atomic.Bool // an audit runs
	auditAgain atomic.Bool // a Recovered came during it

	drops chan []string // users nobody here shows any more, for the pump to forget

	events *admin.Events // the admin API's events stream (plugin_console.go)

	sparkplug *sparkplug.Hook // the Sparkplug aware server (plugin_sparkplug.go); added only when enabled
	webhooks  *webhook.Hub    // the webhooks (plugin_webhook.go); nil: none configured
	// webhookSeq tells the shown opens and ends of sessions, for the
	// endpoints that ask for session events; nil: none does. The pump's.
	webhookSeq *presence.Sequencer
	notify     *notify.Stage // presence-gated notify; nil while notify.enabled is off (plugin_notify.go)
	pusher     notify.Pusher // WithPusher's

	stop      chan struct{}
	wg        sync.WaitGroup
	startOnce sync.Once
	stopOnce  sync.Once
	started   bool

	lifecycle *lifecycle.Stage // the lifecycle outputs (nil: none enabled)

	clock *clock.Stage // the presence clock (plugin_clock.go); nil: presence.clock_interval off

	privacy *delivery.Privacy // the truth of users with a privacy setting, per delivery (plugin_privacy.go)
}

// Attach builds presence for srv and adds its hooks, in the order package
// hooks gives. Call it before srv.Serve, then Start.
func Attach(srv *mqtt.Server, cfg Config, opts ...Option) (*Plugin, error) {
	if !srv.Options.InlineClient {
		return nil, ErrNoInlineClient
	}
	cfg, err := cfg.complete()
	if err != nil {
		return nil, fmt.Errorf("presenced: %w", err)
	}
	p := &Plugin{cfg: cfg, srv: srv, log: srv.Log, now: time.Now, feed: store.NewFeed(), stop: make(chan struct{}), meters: newMeters(),
		drops: make(chan []string, 16), events: admin.NewEvents()}
	for _, o := range opts {
		o(p)
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Notify.Enabled && p.acl == nil {
		return nil, fmt.Errorf("presenced: notify.enabled needs WithACL: only the server's one OnACLCheck keeps presence/notify/{user} to its user")
	}
	if cfg.Presence.Visibility != VisibilityOpen && p.acl == nil {
		return nil, fmt.Errorf("presenced: presence.visibility %q needs WithACL: only the server's one OnACLCheck can refuse a delivery", cfg.Presence.Visibility)
	}
	if p.redisTLS, err = store.RedisTLS(cfg.Redis.TLS).Config(); err != nil {
		return nil, fmt.Errorf("presenced: %w", err)
	}
	p.build()
	if err := p.buildWebhooks(); err != nil {
		return nil, err
	}
	p.buildNotify() // pushes through the webhooks
	return p, p.addHooks()
}

// logFor is the logger of one component.
func (p *Plugin) logFor(component string) *slog.Logger { return p.log.With("component", component) }

// build makes the stages and wires them, each to the small interfaces of
// the next.
func (p *Plugin) build() {
	cfg, srv := p.cfg, p.srv
	p.store = store.Open(p.storeConfig())
	p.tracker = tracker.New(p.store, tracker.Options{
		Node: cfg.NodeID, TTL: cfg.Presence.SessionTTL, // the workers: tracker.Options.Shards's default
		Outage: func(err error) bool { return errors.Is(err, store.ErrUnavailable) },
		Log:    p.logFor("tracker"), Idle: cfg.Presence.idleRules(), Observe: p.meters.observe,
		Sessions: p.sessionLogger(),
	})
	service := p.service
	// Nothing names a service account: every connection is one, and keeps
	// its presence (a service account named has none by default).
	everyone := service == nil && len(cfg.Presence.Observers) == 0
	if everyone {
		service = func(*mqtt.Client) bool { return true }
	}
	p.drain = hooks.NewDrain(hooks.DrainOptions{Server: srv, Log: p.logFor("drain")})
	l := cfg.Limits
	p.limits = hooks.NewLimits(hooks.LimitsOptions{
		Server: srv, Log: p.logFor("limits"), ServerKeepAlive: cfg.ServerKeepAlive, MaxKeepAlive: l.MaxKeepAlive,
		MaxPerAddress: l.MaxConnectionsPerAddress, Unlimited: l.AddressLimitExempt,
		MaxSubscriptions: l.MaxSubscriptions, MaxTopicLength: l.MaxTopicLength, MaxTopicLevels: l.MaxTopicLevels,
		MaxWillDelay: l.MaxWillDelay, MaxDelayedWills: l.MaxDelayedWills, MaxInflightBytes: l.MaxInflightBytes, MaxInflightAge: l.MaxInflightAge,
		Retained: hooks.RetainedLimits{Prefix: cfg.Presence.TopicPrefix, Max: l.MaxRetained, MaxBytes: l.MaxRetainedBytes,
			MaxPerUser: l.MaxRetainedPerUser, BytesPerUser: l.MaxRetainedBytesPerUser},
		MaxPersistentPerUser: l.MaxPersistentPerUser,
	})
	p.hook = hooks.New(hooks.Options{
		Prefix:   cfg.Presence.TopicPrefix,
		Identity: hooks.IdentityRule{FromClientID: cfg.Identity.FromClientID, Separator: cfg.Identity.Separator, FoldCase: cfg.Identity.FoldCase},
		Server:   srv, Tracker: p.tracker, Log: p.logFor("hook"),
		MaxSessionsPerUser: cfg.Presence.MaxSessionsPerUser, SetRate: cfg.Presence.SetRate, SetBurst: cfg.Presence.SetBurst,
		Observers: cfg.Presence.Observers, Service: service, Battle: battleOptions(cfg.Presence.TakeoverBattle),
		Moved: p.drain.Moved, Now: p.now, Activity: cfg.Presence.idleRules().Enabled(),
		ServiceSessions: cfg.Presence.ObserverSessions || everyone,
		Dormant:         hooks.DormantOptions{Devices: cfg.Presence.DormantDevices, Margin: cfg.Presence.DormantMargin},
	})
	p.delivery = delivery.NewDelivery(delivery.DeliveryOptions{Prefix: cfg.Presence.TopicPrefix, Server: srv, Log: p.logFor("delivery")})
	p.outlet = delivery.NewOutlet(srv, p.delivery)
	p.privacy = p.buildPrivacy()
	p.publisher = publisher.New(publisher.Options{Prefix: cfg.Presence.TopicPrefix, Broker: p.outlet, Log: p.logFor("publisher"),
		Published: func(a presence.Aggregate, before presence.Shown) { // the truth: operators' and services' views
			p.meters.published(a, before, time.Now())
			p.publishedEvent(a.User)
			p.lifecycleShown(a)
			p.webhookShown(a, before)
		},
		// What everyone is shown (plugin_privacy.go): the groups and the
		// clock's highest version hear only that, so that a change only
		// the user and service accounts may see moves neither.
		Public: func(a presence.Aggregate) {
			p.groups.Note(a)
			p.clockPublished(a.Version)
		},
		Privy: p.privacy,
	})
	p.delivery.Serve(p.publisher) // the retained store of presence/users/{user}
	p.pacer = publisher.NewPacer(cfg.Presence.pacing(), cfg.Presence.PublishRate, cfg.Presence.PublishBurst, p.publisher)
	p.groups = groups.New(groups.Options{
		Prefix: cfg.Presence.TopicPrefix, Visibility: visibility(cfg.Presence.Visibility), Window: cfg.Presence.GroupBatch,
		File: cfg.Presence.GroupsFile, Now: p.now, Log: p.logFor("groups"),
		Store: p.store, Presence: p.publisher, Outlet: groupTopics{p.outlet}, Viewer: p.hook.Viewer, Introduce: p.introduce,
		Lead:      func(members []string) { p.interest.Lead(members) },
		Resume:    cfg.Presence.groupResume(),
		Addressed: p.acl != nil,
	})
	p.interest = interest.New(interest.Options{
		Prefix: cfg.Presence.TopicPrefix, Visibility: interest.Visibility(visibility(cfg.Presence.Visibility)),
		Linger: cfg.Presence.InterestLinger, MaxLingering: cfg.Presence.InterestMaxLingering, Now: p.now, Log: p.logFor("interest"),
		Store: p.store, Viewer: p.hook.Viewer, Mates: p.groups.Mates, Groups: p.groups,
		Shown: p.publisher.List, Forget: p.forgetShown, Nodes: func(filter string) { p.nodes.Watch(filter) },
	})
	p.nodes = nodes.New(nodes.Options{Node: cfg.NodeID, Prefix: cfg.Presence.TopicPrefix, Now: p.now, Log: p.logFor("nodes"),
		Store: p.store, Outlet: nodeOutlet{p.outlet, p.events}, Sessions: p.hook.Sessions})
	p.sparkplug = p.buildSparkplug()
	p.buildLifecycle()
	p.table = p.buildTable()
	p.buildClock()
}

// addHooks adds the hooks to the server, in the order package hooks gives.
func (p *Plugin) addHooks() error {
	// The groups' hook before the delivery's: see groups.Hook.
	list := []mqtt.Hook{p.drain, p.limits, p.hook, &interest.Hook{Stage: p.interest}, &groups.Hook{Stage: p.groups}, p.delivery, p.privacy}
	if p.notify != nil {
		list = append(list, &notify.Hook{Stage: p.notify, Viewer: p.hook.Viewer})
	}
	if p.acl != nil {
		list = append(list, delivery.NewGuard(delivery.GuardOptions{
			Delivery: p.delivery, Viewers: p.hook, Policy: *p.acl,
			Sees: p.groups.SeesUser(), SeesGroup: p.groups.SeesGroup(),
			NodesPrivate: p.cfg.Presence.Visibility != VisibilityOpen,
			Topics:       p.topics,
			Private:      p.lifecyclePrivate(),
			Notify:       p.notify != nil,
		}))
	}
	if p.cfg.Sparkplug.Enabled {
		list = append(list, p.sparkplug) // after presence's: a will it sent nowhere is none of its concern
	}
	list = append(list, p.lifecycleHooks()...)
	for _, h := range list {
		if err := p.srv.AddHook(h, nil); err != nil {
			return fmt.Errorf("presenced: add hook %s: %w", h.ID(), err)
		}
	}
	return nil
}

// battleOptions turns presence.takeover_battle into the hook's options.
func battleOptions(c TakeoverBattle) hooks.BattleOptions {
	if c.Takeovers < 0 {
		return hooks.BattleOptions{}
	}
	return hooks.BattleOptions{Takeovers: c.Takeovers, Window: c.Window, Backoff: c.Backoff, MaxBackoff: c.MaxBackoff}
}

// visibility maps presence.visibility onto the groups stage's.
func visibility(v Visibility) groups.Visibility {
	switch v {
	case VisibilitySelf:
		return groups.Private
	case VisibilityGroups:
		return groups.ByGroups
	}
	return groups.Open
}

// storeConfig is the store's part of the configuration.
func (p *Plugin) storeConfig() store.Config {
	c, r := p.cfg, p.cfg.Redis
	sc := store.Config{
		Node: c.NodeID, Authoritative: c.Presence.AuthoritativeDevices,
		Retention: c.Presence.OfflineRetention, ReapInterval: c.Presence.ReapInterval,
		Now: p.now, Log: p.logFor("redis"), Report: p.push,
	}
	if len(r.Addrs) == 0 && p.redisC == nil {
		return sc
	}
	sc.Retention, sc.ReapInterval = r.Retention, c.Presence.RenewInterval
	sc.DormantInterval = c.Presence.ReapInterval // the Redis reaper's own pace is the renewal's; missed check-ins keep reap_interval's
	sc.Redis = &store.RedisConfig{
		Client: p.redisC, Addrs: r.Addrs, Cluster: r.Cluster,
		SentinelMaster: r.SentinelMaster, SentinelUsername: r.SentinelUsername, SentinelPassword: r.SentinelPassword,
		Username: r.Username, Password: r.Password, DB: r.DB,
		DialTimeout: r.DialTimeout, ReadTimeout: r.ReadTimeout, WriteTimeout: r.WriteTimeout, PoolSize: r.PoolSize,
		KeyPrefix: r.KeyPrefix, NodeTTL: r.NodeTTL, SweepInterval: r.SweepInterval, TLS: p.redisTLS,
	}
	return sc
}

// Start connects the store (with Redis: claims the node id, which fails
// with store.ErrNodeIDInUse while another live node holds it), publishes
// every presence it holds, and starts the workers. When it returns, every
// known user's presence is retained.
func (p *Plugin) Start(ctx context.Context) error {
	err := errors.New("presenced: already started")
	p.startOnce.Do(func() { err = p.start(ctx) })
	return err
}

func (p *Plugin) start(ctx context.Context) error {
	if err := p.store.Start(ctx); err != nil {
		if errors.Is(err, store.ErrUnavailable) {
			return err // it names the addresses and says Redis is needed at start
		}
		return fmt.Errorf("redis.addrs %v: %w", p.cfg.Redis.Addrs, err)
	}
	// No user is loaded at start: the node loads the users it needs as
	// they are needed (the interest stage).
	if err := p.groups.Load(ctx); err != nil {
		p.store.Stop()
		return err
	}
	p.tracker.Start()
	p.groups.Start()
	p.interest.Start()
	p.startLifecycle()
	p.startWebhooks()
	if p.notify != nil {
		p.notify.Start()
	}
	p.started = true
	p.wg.Add(1)
	go p.pump()
	p.nodes.Start(ctx)
	p.startClock()
	p.every("renew", p.cfg.Presence.RenewInterval, p.cfg.Presence.RenewInterval, p.tracker.Renew)
	for _, task := range p.store.Tasks() {
		p.every(task.Name, task.Every, task.Budget, task.Run)
	}
	if rules := p.cfg.Presence.idleRules(); rules.Enabled() {
		every := idleCheckEvery(rules.Shortest())
		p.every("idle", every, every, func(context.Context) error {
			p.tracker.CheckIdle(p.now())
			return nil
		})
	}
	storeName := "memory"
	if len(p.cfg.Redis.Addrs) > 0 || p.redisC != nil {
		storeName = "redis"
	}
	p.log.Info("presence started", "node", p.cfg.NodeID, "store", storeName)
	return nil
}

// idleCheckEvery is how often the idle checker runs: a quarter of the
// shortest idle time, at most a second, so a session shows idle at most
// that late.
func idleCheckEvery(shortest time.Duration) time.Duration {
	return min(max(shortest/4, 10*time.Millisecond), time.Second)
}

// Stop writes the ends of the sessions that ended (close the server first,
// so that every connection has ended as "shutdown"), waiting at most until
// ctx ends, announces the node down, publishes what is pending, then stops
// every goroutine and waits for them.
func (p *Plugin) Stop(ctx context.Context) error {
	var err error
	p.stopOnce.Do(func() {
		if !p.started {
			return
		}
		if ferr := p.tracker.Flush(ctx); ferr != nil {
			err = fmt.Errorf("presenced: write the sessions' ends: %w", ferr)
		}
		if aerr := p.nodes.Announce(ctx, presence.NodeDown); aerr != nil {
			p.log.Warn("node state down not announced; the other nodes sweep this one", "err", aerr)
		}
		close(p.stop)
		p.wg.Wait()
		p.stopLifecycle()
		if p.notify != nil {
			p.notify.Stop() // before the webhooks, through which it pushes
		}
		p.stopWebhooks(ctx)
		p.events.Close()
		p.stopClock()
		p.nodes.Stop()
		p.interest.Stop()
		p.groups.Stop()
		p.tracker.Stop()
		p.store.Stop()
		p.log.Info("presence stopped")
	})
	return err
}

// Ready reports whether the store answers (false: degraded, still serving).
func (p *Plugin) Ready() bool { return p.store.Ready() }

// Config returns the configuration in use, defaults applied.
func (p *Plugin) Config() Config { return p.cfg }

// NodeState returns this node's state: up, draining or down.
func (p *Plugin) NodeState() presence.NodeState { return p.nodes.State() }

// Snapshot returns what this node delivers a new subscriber of
// presence/users/{user} as its retained message (the public view: the
// entitled get the truth at delivery, delivery.Privacy), when it shows the
// user. mochi's retained store holds nothing of presence/users/...: the
// publisher's views are its retained store (delivery.Snapshots).
func (p *Plugin) Snapshot(user string) ([]byte, bool) {
	var b []byte
	p.publisher.Snapshots(user, false, func(_ string, _ uint64, payload []byte) { b = payload })
	return b, b != nil
}

// Retained returns the presence payload of user, as observers receive
// it: the retained one when this node shows the user, else read from the
// store (the admin API's: not on the packet path).
func (p *Plugin) Retained(user string) ([]byte, bool) {
	if b, ok := p.publisher.Get(user); ok {
		return b, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u, ok, err := p.store.User(ctx, user)
	if err != nil || !ok || u.Current.Version == 0 {
		return nil, false
	}
	return u.Current.AppendJSON(nil), true
}

// User returns a user's whole record from the store: account, live and
// recently ended sessions with their end reasons.
func (p *Plugin) User(ctx context.Context, user string) (presence.User, bool, error) {
	return p.store.User(ctx, user)
}

// Held returns the change held back from observers of user (the offline
// grace, the disconnect debounce, the dwell), if any.
func (p *Plugin) Held(user string) (publisher.Hold, bool) { return p.pacer.Hold(user, p.now()) }

// Holds is what Plugin.Holds returns.
type Holds struct {
	Held     []publisher.Hold `json:"held"`                // every change held back from observers
	Flapping []string         `json:"flapping"`            // the users who flap
	Queued   int64            `json:"publish_queue_depth"` // users waiting for the publish rate
}

// Holds lists every change held back from observers, the users who flap,
// and how many wait for the publish rate.
func (p *Plugin) Holds() Holds {
	held, flapping := p.pacer.Holds(p.now())
	if held == nil {
		held = []publisher.Hold{}
	}
	if flapping == nil {
		flapping = []string{}
	}
	return Holds{Held: held, Flapping: flapping, Queued: p.pacer.Stats.Queued.Load()}
}

// Battles returns the takeover battles going on on this node.
func (p *Plugin) Battles() []hooks.Battle { return p.hook.Battles() }

// Renew renews every session's store-side expiry now (it runs every
// presence.renew_interval), opening again any the store lost.
func (p *Plugin) Renew(ctx context.Context) error { return p.tracker.Renew(ctx) }

// Groups returns the groups stage: who belongs to which group, the group
// topics kept here, and the store the admin API writes groups through.
func (p *Plugin) Groups() *groups.Stage { return p.groups }

// ReloadGroups reads presence.groups_file again and writes it to the store
// (see groups.Stage.ReloadFile).
func (p *Plugin) ReloadGroups() error { return p.groups.ReloadFile() }

// SetGroups writes groups (name -> members) to the store as ReloadGroups
// does with the file's.
func (p *Plugin) SetGroups(ctx context.Context, g map[string][]string) error {
	return p.groups.SetGroups(ctx, g)
}

// ClaimGroups records the groups a user's token claims (see
// groups.Stage.Claim); it never waits for the store.
func (p *Plugin) ClaimGroups(user string, g []string) { p.groups.Claim(user, g) }

// GroupSnapshot returns a group's snapshot (the admin API's).
func (p *Plugin) GroupSnapshot(group string) (roster.Snapshot, bool) { return p.groups.Snapshot(group) }

// AdminSource is what the admin API (package admin) reads of presence: its
// data, for admin.Handler. writes says whether the API may write groups
// and act on users (Actions: only behind a token). The program adds what
// is its own: Drain and Draining, Metrics, Pprof, Log and Counts (the
// actions' log and counts), and Stats if it has more figures than presence.
func (p *Plugin) AdminSource(writes bool) admin.Source {
	src := admin.Source{
		Ready: p.Ready, Retained: p.Retained, User: p.User, Stats: func() any { return p.Stats() },
		Held:  func(user string) (any, bool) { return p.Held(user) },
		Holds: func() any { return p.Holds() }, Battles: p.Battles,
		Group: p.groups.Snapshot, Groups: p.groups.Sizes,
		Draining: func() bool { return p.NodeState() != presence.NodeUp },
		List:     p.store.List,
		Nodes:    p.NodeStates, Events: p.events, Follow: p.Follow,
	}
	if writes {
		g := p.groups.Store()
		src.SetGroup, src.AddMembers, src.RemoveMembers, src.DeleteGroup = g.SetGroup, g.AddMembers, g.RemoveMembers, g.DeleteGroup
		src.Actions = p // the operator's actions (plugin_actions.go): only behind a token too
	}
	return src
}

// introduce sends user's current presence to the subscriptions to it of the
// viewers who now may read it (they could not before): the groups stage's
// Introduce, on the pump's goroutine.
func (p *Plugin) introduce(user string, may func(viewer string) bool) {
	to := p.outlet.Subscribers(p.publisher.Topic(user), func(cl *mqtt.Client) bool {
		u, service := p.hook.Viewer(cl)
		return !service && u != "" && may(u)
	})
	if len(to) > 0 {
		p.publisher.Resend(user, p.outlet.SendTo(user, to))
	}
}

// forgetShown has the pump forget what the node shows of users nobody here
// needs any more (the interest stage's Forget): on the pump's goroutine, in
// order with the changes it publishes.
func (p *Plugin) forgetShown(users []string) {
	select {
	case p.drops <- users:
	case <-p.stop:
	}
}

// Subscribe subscribes handler to filter as an inline subscription of the
// program's own (mochi's Server.Subscribe), and counts it as interest, as
// a client's subscription is: mochi tells no hook of an inline
// subscription, so one made with Server.Subscribe directly makes this node
// load and show nobody. The program is a service account: a wildcard over
// the users makes this node a firehose.
func (p *Plugin) Subscribe(filter string, id int, handler mqtt.InlineSubFn) error {
	p.interest.Follow(strconv.Itoa(id), filter)
	if err := p.srv.Subscribe(filter, id, p.privacy.Inline(handler)); err != nil {
		p.interest.Unfollow(strconv.Itoa(id), filter)
		return err
	}
	// mochi handed it the retained messages it holds; presence/users/...
	// is presence's own (delivery.Snapshots).
	p.delivery.InlineRetained(filter, id, p.privacy.Inline(handler))
	return nil
}

// Unsubscribe removes an inline subscription made with Subscribe.
func (p *Plugin) Unsubscribe(filter string, id int) error {
	err := p.srv.Unsubscribe(filter, id)
	p.interest.Unfollow(strconv.Itoa(id), filter)
	return err
}

// groupTopics is the delivery's Outlet as the groups stage's: one step of
// the fence at a time.
type groupTopics struct{ *delivery.Outlet }

func (o groupTopics) Step(fn func(t groups.Topics)) {
	o.Outlet.Step(func(f delivery.Fenced) { fn(f) })
}
