// Package presenced adds presence to a mochi-mqtt v2 broker: who is online,
// on which devices, with which status, on which node, published as a
// retained message on presence/users/{user} and kept right across
// reconnects, takeovers, silent deaths and, with Redis, many nodes.
//
// A program that runs its own broker adds presence in a few lines:
//
//	srv := mqtt.New(&mqtt.Options{InlineClient: true})
//	_ = srv.AddHook(new(auth.Hook), &auth.Options{Ledger: ledger})
//	p, err := presenced.Attach(srv, presenced.Config{NodeID: "node-1"})
//	...
//	_ = p.Start(ctx)         // loads presence; before Serve
//	_ = srv.Serve()
//	...
//	_ = srv.Close()          // every connection ends as "shutdown"
//	_ = p.Stop(ctx)          // writes those ends, stops and waits
//
// The data flows one way, one package per stage:
//
//	mochi event ─> hooks.Presence ─> tracker ─> store ─> feed ─> publisher ─> retained presence/users/{user}
//	                                                                 ╰─> hooks.Delivery: in order, once, per subscriber
//
// hooks.Presence translates connection events and returns at once; the
// tracker turns each connection's wanted state into store writes
// (presence.Plan decides which); the store (memory or Redis) commits them
// atomically, epoch-checked, and reports every change on its feed; the
// pump, here, hands changes to the publisher and acts on the store's other
// reports (a reset, a node lost); the publisher retains each new version;
// hooks.Delivery makes each subscriber receive a user's versions in order
// (and, with WithACL, each once), and makes good what mochi dropped for a
// full queue. presence, the
// pure core, holds the types and every rule, and imports nothing of these.
//
// What presence needs from the server: Options.InlineClient (presence is
// published by the broker itself; Attach fails without it) and an
// authentication hook of the program's (mochi refuses every connection
// without one). Attach adds its hooks and sets no capability. When
// Capabilities.MaximumMessageExpiryInterval is above 0, mochi purges
// retained messages older than that; presence stores its own retained
// messages again every quarter of it, so they never expire while true.
//
// mochi grants an access that any hook allows, so presence can refuse a
// delivery only where it is the server's only OnACLCheck: WithACL makes it
// so, taking the program's access decision and adding presence's (then
// authenticate with hooks.Authenticator, which answers no OnACLCheck).
// Without it, presence still keeps its namespace read-only (in OnPublish,
// which every publish passes) and each subscriber's versions in order, but
// what is sent again for a subscriber that missed it reaches every
// subscriber of that user.
//
// mochi's own listeners write to a socket while holding the client's lock,
// which every QoS 1 publish to that client also takes, so one client that
// stops reading stalls every publisher to it: use package listener, whose
// writes never block.
package presenced

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/publisher"
	"github.com/presenced/presenced/roster"
	"github.com/presenced/presenced/store"
	"github.com/presenced/presenced/tracker"
)

// ErrNoInlineClient: the server was built without Options.InlineClient,
// which presence needs to publish.
var ErrNoInlineClient = errors.New("presenced: the mochi server needs Options.InlineClient")

// Config is the plugin's configuration: the node_id, identity, presence and
// redis sections of presenced.yaml (configs/presenced.yaml documents each
// key), the keep-alive given to clients that ask for none
// (mqtt.server_keepalive) and the limits of one connection. A zero value
// takes the default. With no Redis address presence is kept in memory, for
// one node.
type Config struct {
	NodeID          string
	ServerKeepAlive time.Duration
	Limits          Limits
	Identity        configs.IdentityConfig
	Presence        configs.PresenceConfig
	Redis           configs.RedisConfig
}

// Limits bound what one connection may do: the mqtt section's keys of the
// same names. The presence section holds the limits of a user
// (max_sessions_per_user, set_rate, set_burst).
type Limits struct {
	MaxKeepAlive             time.Duration // keep-alive ceiling, ServerKeepAlive included
	MaxConnectionsPerAddress int           // connections from one IP address
	// AddressLimitExempt are the addresses MaxConnectionsPerAddress does
	// not apply to (a proxy on this host); nil: loopback, empty: none.
	AddressLimitExempt []netip.Prefix
	MaxSubscriptions   int // topic filters per connection
	MaxTopicLength     int // bytes of a topic filter
	MaxTopicLevels     int // levels of a topic filter
}

// ConfigFrom takes the plugin's part of a whole presenced configuration.
func ConfigFrom(c configs.Config) Config {
	return Config{
		NodeID: c.NodeID, ServerKeepAlive: c.MQTT.ServerKeepAlive.D(),
		Limits: Limits{
			MaxKeepAlive:             c.MQTT.MaxKeepAlive.D(),
			MaxConnectionsPerAddress: c.MQTT.MaxConnectionsPerAddress,
			AddressLimitExempt:       prefixes(c.MQTT.AddressLimitExempt),
			MaxSubscriptions:         c.MQTT.MaxSubscriptions,
			MaxTopicLength:           c.MQTT.MaxTopicLength,
			MaxTopicLevels:           c.MQTT.MaxTopicLevels,
		},
		Identity: c.Identity, Presence: c.Presence, Redis: c.Redis,
	}
}

// prefixes parses validated prefixes.
func prefixes(list []string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		if p, err := configs.ParsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// complete applies the defaults and validates, with configs' rules.
func (c Config) complete() (Config, error) {
	full := configs.Config{NodeID: c.NodeID, Identity: c.Identity, Presence: c.Presence, Redis: c.Redis}
	full.MQTT.ServerKeepAlive = configs.Duration(c.ServerKeepAlive)
	full.MQTT.MaxKeepAlive = configs.Duration(c.Limits.MaxKeepAlive)
	full.MQTT.MaxConnectionsPerAddress = c.Limits.MaxConnectionsPerAddress
	if c.Limits.AddressLimitExempt != nil {
		full.MQTT.AddressLimitExempt = make([]string, len(c.Limits.AddressLimitExempt))
		for i, p := range c.Limits.AddressLimitExempt {
			full.MQTT.AddressLimitExempt[i] = p.String()
		}
	}
	full.MQTT.MaxSubscriptions = c.Limits.MaxSubscriptions
	full.MQTT.MaxTopicLength = c.Limits.MaxTopicLength
	full.MQTT.MaxTopicLevels = c.Limits.MaxTopicLevels
	full.ApplyDefaults()
	if err := full.Validate(); err != nil {
		return Config{}, err
	}
	return ConfigFrom(full), nil
}

// Option changes how the plugin is built.
type Option func(*Plugin)

// WithLogger sets the logger (default: the server's slog logger, through
// zerolog).
func WithLogger(l zerolog.Logger) Option { return func(p *Plugin) { p.log = l; p.logSet = true } }

// WithClock sets the clock of the in-memory store and of the sweep's grace
// (tests).
func WithClock(now func() time.Time) Option { return func(p *Plugin) { p.now = now } }

// WithACL makes presence the server's access authority: policy is the
// program's decision, and presence adds its own for presence topics on top
// (hooks.Guard). mochi grants what any hook allows, so the program must then
// add no other hook that answers OnACLCheck (mochi's auth.Hook and
// auth.AllowHook do: authenticate with hooks.Authenticator instead). A nil
// policy allows everything. Without WithACL, presence works beside the
// program's access hooks, except that a message sent again for a
// subscriber that missed it reaches every subscriber of that user, and a
// subscriber whose writer is stuck may receive its first version of a user
// twice (observers drop a version not above the last, see the README).
func WithACL(policy hooks.Policy) Option { return func(p *Plugin) { p.acl = &policy } }

// WithServiceAccounts says which connections are service accounts, which
// may read all presence, "#" and $SYS (with WithACL; the users listed in
// presence.observers are too). Without it and without presence.observers,
// every connection is one: presence does not know the program's accounts.
func WithServiceAccounts(service func(cl *mqtt.Client) bool) Option {
	return func(p *Plugin) { p.service = service }
}

// WithRedisClient uses c instead of a client built from the redis section;
// the plugin does not close it.
func WithRedisClient(c redis.UniversalClient) Option { return func(p *Plugin) { p.redisC = c } }

// Store is what the plugin needs of a presence store.
type Store interface {
	tracker.Store
	// Load reports every current aggregate as a change.
	Load(ctx context.Context) error
	// Reap ends the sessions whose store-side expiry has passed.
	Reap(ctx context.Context) (int, error)
	// User returns a user's whole record.
	User(ctx context.Context, user string) (presence.User, bool, error)
	// AnnounceNode reports a node's state to every node (NodeAnnounced).
	AnnounceNode(ctx context.Context, st presence.NodeStatus) error
}

var (
	_ Store = (*store.Memory)(nil)
	_ Store = (*store.Redis)(nil)
)

// Plugin is presence attached to one mochi server.
type Plugin struct {
	cfg    Config
	srv    *mqtt.Server
	log    zerolog.Logger
	logSet bool
	now    func() time.Time

	feed      *store.Feed
	store     Store
	redis     *store.Redis // nil with the in-memory store
	redisC    redis.UniversalClient
	ownClient bool
	acl       *hooks.Policy
	service   func(cl *mqtt.Client) bool
	broker    broker

	// The stages, for reading their counters (Stats has them all).
	Drainer   *hooks.Drain  // refuses CONNECTs and moves clients while the node drains (Drain)
	Limits    *hooks.Limits // the broker's limits on one connection
	Hook      *hooks.Presence
	Delivery  *hooks.Delivery
	Tracker   *tracker.Tracker
	Publisher *publisher.Publisher
	Pacer     *publisher.Pacer // between the feed and the publisher: holds blinks back, paces storms
	Roster    *roster.Index    // who belongs to which group
	Board     *roster.Board    // the leader's: every group, cut into batches
	Mirror    *roster.Mirror   // the group topics as published, for those watched here

	groupMu sync.Mutex           // a group's snapshot retained, then its delta published
	joins   chan []roster.Change // membership changes, for the pump
	groups  store.Groups         // where the groups are kept (the store)
	glog    store.GroupLog       // the group topics' batches, from the leader to every node
	resyncs map[string]struct{}  // watched groups to read again from the log (under groupsMu)

	groupsMu    sync.Mutex          // guards groupsDirty
	groupsDirty map[string]struct{} // groups to read again ("": all)
	groupsKick  chan struct{}
	fileMu      sync.Mutex          // guards fileGroups
	fileGroups  map[string]struct{} // the groups last written from the groups file
	claims      store.Claims        // the groups users' tokens claimed
	claimsMu    sync.Mutex          // guards claimsDirty
	claimsDirty map[string][]string // claims to write, per user
	claimsKick  chan struct{}

	nodes nodes // presence/nodes/{node} (nodes.go)

	meters *meters // what only the metrics count (metrics.go)

	auditing   atomic.Bool // an audit runs
	auditAgain atomic.Bool // a Recovered came during it

	stop      chan struct{}
	wg        sync.WaitGroup
	startOnce sync.Once
	stopOnce  sync.Once
	started   bool
}

// trackerShards is how many workers write to the store side by side.
const trackerShards = 4

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
	p := &Plugin{cfg: cfg, srv: srv, now: time.Now, feed: store.NewFeed(), stop: make(chan struct{}), nodes: newNodes(), meters: newMeters()}
	for _, o := range opts {
		o(p)
	}
	if !p.logSet {
		p.log = slogLogger(srv.Log)
	}
	logFor := func(c string) zerolog.Logger { return p.log.With().Str("component", c).Logger() }

	if len(cfg.Redis.Addrs) > 0 || p.redisC != nil {
		if p.redisC == nil {
			p.redisC, p.ownClient = newRedisClient(cfg.Redis), true
		}
		p.redis = store.NewRedis(store.RedisOptions{
			Client: p.redisC, Prefix: cfg.Redis.KeyPrefix, Node: cfg.NodeID,
			Authoritative: cfg.Presence.AuthoritativeDevices,
			NodeTTL:       cfg.Redis.NodeTTL.D(), Retention: cfg.Redis.Retention.D(),
			Log: logFor("redis"), Report: p.push, Now: p.now,
		})
		p.store = p.redis
	} else {
		p.store = store.NewMemory(presence.NewRules(cfg.Presence.AuthoritativeDevices), p.now, p.push)
	}

	p.Tracker = tracker.New(timed(p.store, p.meters), tracker.Options{
		Node: cfg.NodeID, TTL: cfg.Presence.SessionTTL.D(), Shards: trackerShards,
		Outage: func(err error) bool { return errors.Is(err, store.ErrUnavailable) },
		Log:    logFor("tracker"),
		Idle:   idleRules(cfg.Presence),
	})

	if cfg.Presence.Visibility != configs.VisibilityOpen && p.acl == nil {
		return nil, fmt.Errorf("presenced: presence.visibility %q needs WithACL: only the server's one OnACLCheck can refuse a delivery", cfg.Presence.Visibility)
	}
	service := p.service
	if service == nil && len(cfg.Presence.Observers) == 0 {
		service = func(*mqtt.Client) bool { return true }
	}
	p.Drainer = hooks.NewDrain(hooks.DrainOptions{Server: srv, Log: p.log})
	p.Limits = hooks.NewLimits(hooks.LimitsOptions{
		Server:           srv,
		Log:              logFor("hook"),
		ServerKeepAlive:  cfg.ServerKeepAlive,
		MaxKeepAlive:     cfg.Limits.MaxKeepAlive,
		MaxPerAddress:    cfg.Limits.MaxConnectionsPerAddress,
		Unlimited:        cfg.Limits.AddressLimitExempt,
		MaxSubscriptions: cfg.Limits.MaxSubscriptions,
		MaxTopicLength:   cfg.Limits.MaxTopicLength,
		MaxTopicLevels:   cfg.Limits.MaxTopicLevels,
	})
	p.Hook = hooks.New(hooks.Options{
		Prefix: cfg.Presence.TopicPrefix,
		Identity: hooks.IdentityRule{
			FromClientID: cfg.Identity.UserFrom == configs.UserFromClientID,
			Separator:    cfg.Identity.Separator,
		},
		Server:             srv,
		Tracker:            p.Tracker,
		Log:                logFor("hook"),
		MaxSessionsPerUser: cfg.Presence.MaxSessionsPerUser,
		SetRate:            cfg.Presence.SetRate,
		SetBurst:           cfg.Presence.SetBurst,
		Observers:          cfg.Presence.Observers,
		Service:            service,
		Battle:             battleOptions(cfg.Presence.TakeoverBattle),
		Moved:              p.Drainer.Moved,
		Now:                p.now,
		Activity:           idleRules(cfg.Presence).Enabled(),
	})
	p.Delivery = hooks.NewDelivery(hooks.DeliveryOptions{Prefix: cfg.Presence.TopicPrefix, Server: srv, Log: logFor("delivery")})
	p.broker = broker{srv: srv, d: p.Delivery}
	p.Publisher = publisher.New(cfg.Presence.TopicPrefix, p.broker, logFor("publisher"))
	p.Roster = roster.NewIndex()
	p.Board = roster.NewBoard(p.Roster, cfg.Presence.GroupBatch.D(), p.now, p.lookup)
	p.Pacer = publisher.NewPacer(cfg.Presence.Pacing(), cfg.Presence.PublishRate, cfg.Presence.PublishBurst, p.Publisher,
		func(a presence.Aggregate) {
			before := p.Publisher.Shown(a.User)
			p.Publisher.Publish(a)
			p.meters.published(a, before, p.Publisher.Shown(a.User), time.Now())
			p.Board.Note(a)
		})
	p.joins = make(chan []roster.Change, 16)
	p.groups = p.store.(store.Groups)
	p.glog = p.store.(store.GroupLog)
	p.Mirror = roster.NewMirror()
	p.resyncs = make(map[string]struct{})
	p.groupsDirty = make(map[string]struct{})
	p.groupsKick = make(chan struct{}, 1)
	p.claims = p.store.(store.Claims)
	p.claimsDirty = make(map[string][]string)
	p.claimsKick = make(chan struct{}, 1)
	if err := srv.AddHook(p.Drainer, nil); err != nil { // first of presence's: see package hooks
		return nil, fmt.Errorf("presenced: add drain hook: %w", err)
	}
	if err := srv.AddHook(p.Limits, nil); err != nil {
		return nil, fmt.Errorf("presenced: add limits hook: %w", err)
	}
	if err := srv.AddHook(p.Hook, nil); err != nil {
		return nil, fmt.Errorf("presenced: add hook: %w", err)
	}
	if err := srv.AddHook(&hooks.Groups{Watch: p.watch}, nil); err != nil { // before Delivery (see hooks.Groups)
		return nil, fmt.Errorf("presenced: add groups hook: %w", err)
	}
	if err := srv.AddHook(p.Delivery, nil); err != nil {
		return nil, fmt.Errorf("presenced: add delivery hook: %w", err)
	}
	if p.acl != nil {
		guard := hooks.NewGuard(hooks.GuardOptions{
			Delivery: p.Delivery, Presence: p.Hook, Policy: *p.acl,
			Sees: p.sees(), SeesGroup: p.seesGroup(),
			NodesPrivate: cfg.Presence.Visibility != configs.VisibilityOpen,
		})
		if err := srv.AddHook(guard, nil); err != nil {
			return nil, fmt.Errorf("presenced: add guard hook: %w", err)
		}
	}
	return p, nil
}

// battleOptions turns presence.takeover_battle into the hook's options.
func battleOptions(c configs.TakeoverBattleConfig) hooks.BattleOptions {
	if c.Takeovers == configs.TakeoversOff {
		return hooks.BattleOptions{}
	}
	return hooks.BattleOptions{Takeovers: c.Takeovers, Window: c.Window.D(), Backoff: c.Backoff.D(), MaxBackoff: c.MaxBackoff.D()}
}

// Battles returns the takeover battles going on on this node.
func (p *Plugin) Battles() []hooks.Battle { return p.Hook.Battles() }

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
	var file map[string][]string
	if f := p.cfg.Presence.GroupsFile; f != "" {
		var err error
		if file, err = roster.LoadFile(f); err != nil {
			return fmt.Errorf("presence.groups_file: %w", err)
		}
	}
	if p.redis != nil {
		if err := p.redis.Start(ctx); err != nil {
			return fmt.Errorf("redis.addrs %v: %w", p.cfg.Redis.Addrs, err)
		}
	}
	if err := p.store.Load(ctx); err != nil {
		p.stopStore()
		return fmt.Errorf("initial load: %w", err)
	}
	p.handle(p.feed.Take())
	if file != nil {
		if err := p.SetGroups(ctx, file); err != nil {
			p.stopStore()
			return err
		}
	}
	groups, err := p.groups.AllGroups(ctx)
	if err != nil {
		p.stopStore()
		return fmt.Errorf("initial load of the groups: %w", err)
	}
	p.Roster.Replace(groups)
	p.Tracker.Start()
	p.started = true
	p.wg.Add(4)
	go p.pump()
	go p.worker(p.groupsKick, p.readChanged)
	go p.worker(p.claimsKick, p.writeDirtyClaims)
	go p.leadLoop()
	if err := p.announce(ctx, presence.NodeUp); err != nil {
		p.log.Warn().Err(err).Msg("node state up not announced; announced again in a few seconds")
	}
	p.announceLoop()
	p.every("renew", p.cfg.Presence.RenewInterval.D(), p.renew)
	if p.redis != nil {
		// A dead node's sessions are ended a pipelined chunk at a time,
		// resumably; tens of thousands take longer than one interval.
		sweep := p.cfg.Redis.SweepInterval.D()
		p.everyWithin("sweep", sweep, max(sweep, p.cfg.Redis.NodeTTL.D()), func(ctx context.Context) error {
			_, err := p.redis.Sweep(ctx)
			return err
		})
	} else {
		p.every("reap", p.cfg.Presence.ReapInterval.D(), func(ctx context.Context) error {
			n, err := p.store.Reap(ctx)
			p.meters.ended(presence.EndTimeout, int64(n))
			return err
		})
	}
	if rules := idleRules(p.cfg.Presence); rules.Enabled() {
		p.every("idle", idleCheckEvery(rules.Shortest()), func(context.Context) error {
			p.Tracker.CheckIdle(p.now())
			return nil
		})
	}
	storeName := "memory"
	if p.redis != nil {
		storeName = "redis"
	}
	p.log.Info().Str("node", p.cfg.NodeID).Str("store", storeName).Msg("presence started")
	return nil
}

// idleRules are presence.idle_after and its per-label overrides.
func idleRules(c configs.PresenceConfig) presence.IdleRules {
	r := presence.IdleRules{Default: c.IdleAfter.D(), Devices: make(map[string]time.Duration, len(c.IdleAfterDevices))}
	for label, d := range c.IdleAfterDevices {
		r.Devices[label] = d.D()
	}
	return r
}

// idleCheckEvery is how often the idle checker runs: a quarter of the
// shortest idle time, at most a second, so a session shows idle at most
// that late.
func idleCheckEvery(shortest time.Duration) time.Duration {
	return min(max(shortest/4, 10*time.Millisecond), time.Second)
}

// renew renews every session's store-side expiry; with Redis it then reaps
// the sessions of this node that nothing renews any more (the backstop).
func (p *Plugin) renew(ctx context.Context) error {
	if err := p.Tracker.Renew(ctx); err != nil {
		return err
	}
	if p.redis != nil {
		n, err := p.redis.Reap(ctx)
		p.meters.ended(presence.EndTimeout, int64(n))
		return err
	}
	return nil
}

// stopStore undoes the store's start when the start fails.
func (p *Plugin) stopStore() {
	if p.redis != nil {
		p.redis.Stop()
	}
}

// Stop writes the ends of the sessions that ended (close the server first,
// so that every connection has ended as "shutdown"), waiting at most until
// ctx ends, publishes what is pending, then stops every goroutine and waits
// for them.
func (p *Plugin) Stop(ctx context.Context) error {
	var err error
	p.stopOnce.Do(func() {
		if !p.started {
			return
		}
		if derr := p.Tracker.Drain(ctx); derr != nil {
			err = fmt.Errorf("presenced: drain presence writes: %w", derr)
		}
		if aerr := p.announce(ctx, presence.NodeDown); aerr != nil {
			p.log.Warn().Err(aerr).Msg("node state down not announced; the other nodes sweep this one")
		}
		close(p.stop)
		p.wg.Wait()
		p.Tracker.Stop()
		if p.redis != nil {
			p.redis.Stop()
			if p.ownClient {
				_ = p.redisC.Close()
			}
		}
		p.log.Info().Msg("presence stopped")
	})
	return err
}

// Ready reports whether the store answers (false: degraded, still serving).
func (p *Plugin) Ready() bool { return p.redis == nil || p.redis.Ready() }

// Held returns the change held back from observers of user (the offline
// grace, the disconnect debounce, the dwell), if any.
func (p *Plugin) Held(user string) (any, bool) { return p.Pacer.Hold(user, p.now()) }

// Holds lists every change held back from observers, the users who flap,
// and how many wait for the publish rate.
func (p *Plugin) Holds() any {
	held, flapping := p.Pacer.Holds(p.now())
	if held == nil {
		held = []publisher.Hold{}
	}
	if flapping == nil {
		flapping = []string{}
	}
	return struct {
		Held     []publisher.Hold `json:"held"`
		Flapping []string         `json:"flapping"`
		Queued   int64            `json:"publish_queue_depth"`
	}{held, flapping, p.Pacer.Stats.Queued.Load()}
}

// Retained returns the retained payload of user, as observers receive it.
func (p *Plugin) Retained(user string) ([]byte, bool) { return p.Publisher.Get(user) }

// User returns a user's whole record from the store: account, live and
// recently ended sessions with their end reasons.
func (p *Plugin) User(ctx context.Context, user string) (presence.User, bool, error) {
	return p.store.User(ctx, user)
}

// Config returns the configuration in use, defaults applied.
func (p *Plugin) Config() Config { return p.cfg }

// clusterReload is how old a Redis Cluster's slot map may get before the
// client reads it again (go-redis's default is a minute): after a master
// dies, only a new map leads to the replica that took its place. The store
// also has it read again on every failed call.
const clusterReload = time.Second

// clusterDialRetries is how many dials a cluster client makes per attempt
// (go-redis's default is 5, 100 ms apart): with 5, a call to a dead master
// takes about 3.4 s to fail (4 attempts of 2 tries of 5 dials), holding a
// tracker worker, and with it the writes of users on live masters, that
// long. A failed write is retried by the tracker anyway.
const clusterDialRetries = 1

// newRedisClient builds the go-redis client from the config: a cluster
// client with redis.cluster, a Sentinel failover client with
// redis.sentinel_master, else a single-server client.
func newRedisClient(c configs.RedisConfig) redis.UniversalClient {
	switch {
	case c.Cluster:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                      c.Addrs,
			Username:                   c.Username,
			Password:                   string(c.Password),
			DialTimeout:                c.DialTimeout.D(),
			ReadTimeout:                c.ReadTimeout.D(),
			WriteTimeout:               c.WriteTimeout.D(),
			PoolSize:                   c.PoolSize,
			MaxRetries:                 1,
			DialerRetries:              clusterDialRetries,
			ClusterStateReloadInterval: clusterReload,
		})
	case c.SentinelMaster != "":
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:       c.SentinelMaster,
			SentinelAddrs:    c.Addrs,
			SentinelUsername: c.SentinelUsername,
			SentinelPassword: string(c.SentinelPassword),
			Username:         c.Username,
			Password:         string(c.Password),
			DB:               c.DB,
			DialTimeout:      c.DialTimeout.D(),
			ReadTimeout:      c.ReadTimeout.D(),
			WriteTimeout:     c.WriteTimeout.D(),
			PoolSize:         c.PoolSize,
			MaxRetries:       1,
		})
	}
	return redis.NewClient(&redis.Options{
		Addr:         c.Addrs[0],
		Username:     c.Username,
		Password:     string(c.Password),
		DB:           c.DB,
		DialTimeout:  c.DialTimeout.D(),
		ReadTimeout:  c.ReadTimeout.D(),
		WriteTimeout: c.WriteTimeout.D(),
		PoolSize:     c.PoolSize,
		MaxRetries:   1,
	})
}
