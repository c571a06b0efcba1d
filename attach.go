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
	"github.com/presenced/presenced/delivery"
	"github.com/presenced/presenced/groups"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/nodes"
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
func WithACL(policy delivery.Policy) Option { return func(p *Plugin) { p.acl = &policy } }

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

// Plugin is presence attached to one mochi server.
type Plugin struct {
	cfg    Config
	srv    *mqtt.Server
	log    zerolog.Logger
	logSet bool
	now    func() time.Time

	feed    *store.Feed
	store   store.Store
	redisC  redis.UniversalClient // WithRedisClient's
	acl     *delivery.Policy
	service func(cl *mqtt.Client) bool
	outlet  *delivery.Outlet

	// The stages, for reading their counters (Stats has them all).
	Drainer   *hooks.Drain  // refuses CONNECTs and moves clients while the node drains (Drain)
	Limits    *hooks.Limits // the broker's limits on one connection
	Hook      *hooks.Presence
	Delivery  *delivery.Delivery
	Tracker   *tracker.Tracker
	Publisher *publisher.Publisher
	Pacer     *publisher.Pacer // between the feed and the publisher: holds blinks back, paces storms
	groups    *groups.Stage

	nodes *nodes.Nodes // presence/nodes/{node}

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
	p := &Plugin{cfg: cfg, srv: srv, now: time.Now, feed: store.NewFeed(), stop: make(chan struct{}), meters: newMeters()}
	for _, o := range opts {
		o(p)
	}
	if !p.logSet {
		p.log = slogLogger(srv.Log)
	}
	logFor := func(c string) zerolog.Logger { return p.log.With().Str("component", c).Logger() }

	p.store = store.Open(p.storeConfig(logFor("redis")))
	p.Tracker = tracker.New(p.store, tracker.Options{
		Node: cfg.NodeID, TTL: cfg.Presence.SessionTTL.D(), Shards: trackerShards,
		Outage:  func(err error) bool { return errors.Is(err, store.ErrUnavailable) },
		Log:     logFor("tracker"),
		Idle:    idleRules(cfg.Presence),
		Observe: p.meters.observe,
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
	p.Delivery = delivery.NewDelivery(delivery.DeliveryOptions{Prefix: cfg.Presence.TopicPrefix, Server: srv, Log: logFor("delivery")})
	p.outlet = delivery.NewOutlet(srv, p.Delivery)
	p.Publisher = publisher.New(publisher.Options{Prefix: cfg.Presence.TopicPrefix, Broker: p.outlet, Log: logFor("publisher"),
		Published: func(a presence.Aggregate, before presence.Shown) {
			p.meters.published(a, before, time.Now())
			p.groups.Note(a)
		}})
	p.Pacer = publisher.NewPacer(cfg.Presence.Pacing(), cfg.Presence.PublishRate, cfg.Presence.PublishBurst, p.Publisher)
	p.groups = groups.New(groups.Options{
		Prefix: cfg.Presence.TopicPrefix, Visibility: visibility(cfg.Presence.Visibility), Window: cfg.Presence.GroupBatch.D(),
		File: cfg.Presence.GroupsFile, Now: p.now, Log: logFor("groups"),
		Store: p.store, Presence: p.Publisher, Outlet: p.outlet, Viewer: p.Hook.Viewer, Introduce: p.introduce,
	})
	if err := srv.AddHook(p.Drainer, nil); err != nil { // first of presence's: see package hooks
		return nil, fmt.Errorf("presenced: add drain hook: %w", err)
	}
	if err := srv.AddHook(p.Limits, nil); err != nil {
		return nil, fmt.Errorf("presenced: add limits hook: %w", err)
	}
	p.nodes = nodes.New(nodes.Options{Node: cfg.NodeID, Prefix: cfg.Presence.TopicPrefix, Now: p.now, Log: logFor("nodes"),
		Store: p.store, Outlet: p.outlet, Sessions: p.Hook.Sessions})
	if err := srv.AddHook(p.Hook, nil); err != nil {
		return nil, fmt.Errorf("presenced: add hook: %w", err)
	}
	if err := srv.AddHook(&groups.Hook{Stage: p.groups}, nil); err != nil {
		return nil, fmt.Errorf("presenced: add groups hook: %w", err)
	}
	if err := srv.AddHook(p.Delivery, nil); err != nil {
		return nil, fmt.Errorf("presenced: add delivery hook: %w", err)
	}
	if p.acl != nil {
		guard := delivery.NewGuard(delivery.GuardOptions{
			Delivery: p.Delivery, Viewers: p.Hook, Policy: *p.acl,
			Sees: p.groups.SeesUser(), SeesGroup: p.groups.SeesGroup(),
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
	if err := p.store.Start(ctx); err != nil {
		return fmt.Errorf("redis.addrs %v: %w", p.cfg.Redis.Addrs, err)
	}
	if err := p.store.Load(ctx); err != nil {
		p.stopStore()
		return fmt.Errorf("initial load: %w", err)
	}
	p.handle(p.feed.Take())
	if err := p.groups.Load(ctx); err != nil {
		p.stopStore()
		return err
	}
	p.Tracker.Start()
	p.groups.Start()
	p.started = true
	p.wg.Add(1)
	go p.pump()
	p.nodes.Start(ctx)
	p.every("renew", p.cfg.Presence.RenewInterval.D(), p.Tracker.Renew)
	for _, task := range p.store.Tasks() {
		p.everyWithin(task.Name, task.Every, task.Budget, task.Run)
	}
	if rules := idleRules(p.cfg.Presence); rules.Enabled() {
		p.every("idle", idleCheckEvery(rules.Shortest()), func(context.Context) error {
			p.Tracker.CheckIdle(p.now())
			return nil
		})
	}
	storeName := "memory"
	if p.cfg.redisConfigured() || p.redisC != nil {
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

// stopStore undoes the store's start when the start fails.
func (p *Plugin) stopStore() { p.store.Stop() }

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
		if derr := p.Tracker.Flush(ctx); derr != nil {
			err = fmt.Errorf("presenced: drain presence writes: %w", derr)
		}
		if aerr := p.nodes.Announce(ctx, presence.NodeDown); aerr != nil {
			p.log.Warn().Err(aerr).Msg("node state down not announced; the other nodes sweep this one")
		}
		close(p.stop)
		p.wg.Wait()
		p.nodes.Stop()
		p.groups.Stop()
		p.Tracker.Stop()
		p.store.Stop()
		p.log.Info().Msg("presence stopped")
	})
	return err
}

// Ready reports whether the store answers (false: degraded, still serving).
func (p *Plugin) Ready() bool { return p.store.Ready() }

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

// redisConfigured reports whether presence is kept in Redis.
func (c Config) redisConfigured() bool { return len(c.Redis.Addrs) > 0 }

// storeConfig is the store's part of the configuration.
func (p *Plugin) storeConfig(log zerolog.Logger) store.Config {
	c, r := p.cfg, p.cfg.Redis
	sc := store.Config{
		Node: c.NodeID, Authoritative: c.Presence.AuthoritativeDevices,
		Retention: c.Presence.OfflineRetention.D(), ReapInterval: c.Presence.ReapInterval.D(),
		Now: p.now, Log: log, Report: p.push,
	}
	if !c.redisConfigured() && p.redisC == nil {
		return sc
	}
	sc.Retention, sc.ReapInterval = r.Retention.D(), c.Presence.RenewInterval.D()
	sc.Redis = &store.RedisConfig{
		Client: p.redisC, Addrs: r.Addrs, Cluster: r.Cluster,
		SentinelMaster: r.SentinelMaster, SentinelUsername: r.SentinelUsername, SentinelPassword: string(r.SentinelPassword),
		Username: r.Username, Password: string(r.Password), DB: r.DB,
		DialTimeout: r.DialTimeout.D(), ReadTimeout: r.ReadTimeout.D(), WriteTimeout: r.WriteTimeout.D(), PoolSize: r.PoolSize,
		KeyPrefix: r.KeyPrefix, NodeTTL: r.NodeTTL.D(), SweepInterval: r.SweepInterval.D(),
	}
	return sc
}

// visibility maps presence.visibility onto the groups stage's.
func visibility(v string) groups.Visibility {
	switch v {
	case configs.VisibilitySelf:
		return groups.Private
	case configs.VisibilityGroups:
		return groups.ByGroups
	}
	return groups.Open
}

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

// GroupSizes returns every group's name and size.
func (p *Plugin) GroupSizes() map[string]int { return p.groups.Sizes() }

// introduce sends user's current presence to the subscriptions to it of the
// viewers who now may read it (they could not before): the groups stage's
// Introduce, on the pump's goroutine.
func (p *Plugin) introduce(user string, may func(viewer string) bool) {
	to := p.outlet.Subscribers(p.Publisher.Topic(user), func(cl *mqtt.Client) bool {
		u, service := p.Hook.Viewer(cl)
		return !service && u != "" && may(u)
	})
	if len(to) > 0 {
		p.Publisher.Resend(user, p.outlet.SendTo(user, to))
	}
}

// NodeState returns this node's state: up, draining or down.
func (p *Plugin) NodeState() presence.NodeState { return p.nodes.State() }
