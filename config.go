package presenced

import (
	"net/netip"
	"time"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

// Off, as a duration or a count of Config where the documentation says so,
// turns that feature off (the zero value takes the default).
const Off = -1

// Config is the plugin's configuration, in plain Go types. A zero value
// takes the default; Off turns off what can be. Each field is documented,
// with its default and bounds, under the key of the same name in
// configs/presenced.yaml (the YAML layer of the binary maps onto this with
// ConfigFrom); Validate's errors name those keys. With no Redis address
// presence is kept in memory, for one node.
type Config struct {
	NodeID string // node_id; default: the host name
	// ServerKeepAlive is given to clients that connect with keep-alive 0
	// (mqtt.server_keepalive; default 60 s).
	ServerKeepAlive time.Duration
	Limits          Limits
	Identity        Identity
	Presence        Presence
	Redis           Redis
	Sparkplug       Sparkplug // the sparkplug section (plugin_sparkplug.go)
	// Lifecycle is the lifecycle outputs (the lifecycle section).
	Lifecycle Lifecycle
	// Webhooks are the HTTP endpoints of the shown transitions (none: off;
	// docs/webhooks.md).
	Webhooks Webhooks
	Notify   Notify
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

	MaxWillDelay    time.Duration // every will's delay is held to this (mqtt.max_will_delay)
	MaxDelayedWills int           // delayed wills waiting on this node (mqtt.max_delayed_wills)
	// Persistent sessions one user may hold on a node
	// (mqtt.max_persistent_sessions_per_user).
	MaxPersistentPerUser int
	// The bounds of a session's unacknowledged QoS 1/2 messages beyond
	// mochi's count (mqtt.max_inflight_bytes, mqtt.max_inflight_age).
	MaxInflightBytes int64
	MaxInflightAge   time.Duration
	// Retained messages outside the presence prefix, in total and per user
	// (mqtt.max_retained, max_retained_bytes, max_retained_per_user,
	// max_retained_bytes_per_user).
	MaxRetained, MaxRetainedPerUser           int
	MaxRetainedBytes, MaxRetainedBytesPerUser int64
}

// Identity says where a connection's user comes from (the identity
// section).
type Identity struct {
	// FromClientID takes the user from the client id ("alice/phone" is
	// user alice, device phone) instead of the MQTT username.
	FromClientID bool
	Separator    string // default "/"
	// FoldCase makes user names that differ only in case one user
	// (identity.fold_case; off by default).
	FoldCase bool
}

// Visibility is who reads whose presence (presence.visibility).
type Visibility string

// The visibilities.
const (
	VisibilityOpen   Visibility = configs.VisibilityOpen   // everyone reads everyone's
	VisibilitySelf   Visibility = configs.VisibilitySelf   // a user reads their own; service accounts all
	VisibilityGroups Visibility = configs.VisibilityGroups // a user reads their group mates'
)

// Presence is the presence section.
type Presence struct {
	TopicPrefix string // default "presence"
	// AuthoritativeDevices' status decides the user's when one is live;
	// nil: [desktop]; empty: none.
	AuthoritativeDevices []string
	SessionTTL           time.Duration
	RenewInterval        time.Duration
	ReapInterval         time.Duration
	Visibility           Visibility
	GroupsFile           string
	GroupBatch           time.Duration
	InterestLinger       time.Duration // a user nobody here needs any more is forgotten after this
	InterestMaxLingering int           // users kept lingering at most (interest.Options.MaxLingering)
	Observers            []string      // service accounts: read all presence
	MaxSessionsPerUser   int
	SetRate              int
	SetBurst             int
	OfflineRetention     time.Duration
	TakeoverBattle       TakeoverBattle
	OfflineGrace         time.Duration // Off: none
	DisconnectDebounce   time.Duration // Off: none
	WillDelayMax         time.Duration
	MinDwell             time.Duration // Off: none
	Flap                 Flap
	PublishRate          int
	PublishBurst         int
	IdleAfter            time.Duration            // 0: off (the default)
	IdleAfterDevices     map[string]time.Duration // per device label; 0: never for it
	// ObserverSessions gives service accounts (Observers,
	// WithServiceAccounts) a presence session, as in 0.9.0; false
	// (the default): a service account is not a person, and has none.
	ObserverSessions bool
	// ClockInterval is the presence clock's period (presence.clock_interval):
	// presence/clock every this long; 0: the default (5 s); Off: none.
	ClockInterval time.Duration
	// DormantDevices declares the check-in period of devices that sleep
	// by design, per device label; DormantMargin how late a check-in may
	// come (0: a tenth of the period, at least 5 s). See
	// presence.dormant_devices.
	DormantDevices map[string]time.Duration
	DormantMargin  time.Duration
	// GroupResume bounds each node's log of a group topic's batches, from
	// which a subscriber coming back with the version it holds is sent
	// what it missed (presence.group_resume_*): Window (Off: no log, every
	// resume gets the snapshot), Deltas and Bytes per group; zero: the
	// default.
	GroupResume GroupResume
}

// GroupResume bounds the log of a group topic's batches, per group.
type GroupResume struct {
	Window time.Duration // Off: none
	Deltas int
	Bytes  int
}

// Flap is flap control (presence.flap).
type Flap struct {
	Window time.Duration
	Ends   int // Off: no flap control
	Grace  time.Duration
}

// TakeoverBattle damps takeover battles (presence.takeover_battle).
type TakeoverBattle struct {
	Takeovers  int // Off: no damping
	Window     time.Duration
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// Redis is the redis section.
type Redis struct {
	Addrs            []string // empty: the memory store
	Cluster          bool
	SentinelMaster   string
	SentinelUsername string
	SentinelPassword string
	Username         string
	Password         string
	DB               int
	KeyPrefix        string
	DialTimeout      time.Duration
	ReadTimeout      time.Duration
	WriteTimeout     time.Duration
	PoolSize         int
	NodeTTL          time.Duration
	SweepInterval    time.Duration
	Retention        time.Duration
	TLS              RedisTLS
}

// Lifecycle is the lifecycle section: the AWS IoT Core and EMQX 5
// lifecycle outputs (docs/events.md).
type Lifecycle struct {
	AWS, EMQX  LifecycleOutput
	QueueDepth int // events waiting to be published (default 8192)
}

// LifecycleOutput is one lifecycle output.
type LifecycleOutput struct {
	Enabled bool
	Mode    string // "raw" (default) or "shown"
	Prefix  string // default: the vendor's ($aws/events/presence, $SYS/brokers)
}

// RedisTLS is redis.tls: TLS to Redis (see configs.RedisTLSConfig).
type RedisTLS struct {
	Enabled                   bool
	CAFile, CertFile, KeyFile string
	ServerName                string
	InsecureSkipVerify        bool
}

// Webhooks is the webhooks section.
type Webhooks struct {
	Endpoints []WebhookEndpoint
	Replay    int // events a node that is not the sender keeps for a takeover; default 10,000
}

// WebhookEndpoint is one endpoint of webhooks.endpoints (a zero value takes
// the default named there).
type WebhookEndpoint struct {
	Name             string
	URL              string
	Secret           string // or SecretFile, read at Attach
	SecretFile       string
	Events           []string
	MaxBatch         int
	MaxWait          time.Duration
	Timeout          time.Duration
	Queue            int
	RetryBackoff     time.Duration
	RetryMaxBackoff  time.Duration
	BreakerThreshold int
	BreakerCooldown  time.Duration
}

// Notify is the notify section (presence-gated notify, docs/notify.md).
type Notify struct {
	Enabled           bool
	MaxPendingPerUser int // messages waiting for one user on a node
	MaxPending        int // messages waiting on a node
	MaxPayload        int // bytes of a message
	Queue             int // messages and events waiting for the stage
}

// Validate reports the first problems with c, each naming its key in
// presenced.yaml (errors wrap configs.ErrInvalid). Attach validates its
// Config itself; a program may call Validate earlier.
func (c Config) Validate() error {
	_, err := c.complete()
	return err
}

// complete applies the defaults and validates, by the rules of the YAML
// layer: one set of rules, whichever way a Config is written.
func (c Config) complete() (Config, error) {
	full := c.yaml()
	full.ApplyDefaults()
	if err := full.Validate(); err != nil {
		return Config{}, err
	}
	return ConfigFrom(full), nil
}

// offDuration maps a duration where 0 means off in YAML: Off (or below) is
// an explicit 0, zero is unset.
func offDuration(d time.Duration) *configs.Duration {
	switch {
	case d < 0:
		zero := configs.Duration(0)
		return &zero
	case d == 0:
		return nil
	}
	v := configs.Duration(d)
	return &v
}

// offCount is offDuration for a count.
func offCount(n int) *int {
	switch {
	case n < 0:
		zero := 0
		return &zero
	case n == 0:
		return nil
	}
	return &n
}

// yaml is c as the YAML layer writes it.
func (c Config) yaml() configs.Config {
	d := func(v time.Duration) configs.Duration { return configs.Duration(v) }
	var y configs.Config
	y.NodeID = c.NodeID
	y.MQTT.ServerKeepAlive = d(c.ServerKeepAlive)
	y.MQTT.MaxKeepAlive = d(c.Limits.MaxKeepAlive)
	y.MQTT.MaxConnectionsPerAddress = c.Limits.MaxConnectionsPerAddress
	if c.Limits.AddressLimitExempt != nil {
		y.MQTT.AddressLimitExempt = make([]string, len(c.Limits.AddressLimitExempt))
		for i, p := range c.Limits.AddressLimitExempt {
			y.MQTT.AddressLimitExempt[i] = p.String()
		}
	}
	y.MQTT.MaxSubscriptions, y.MQTT.MaxTopicLength, y.MQTT.MaxTopicLevels = c.Limits.MaxSubscriptions, c.Limits.MaxTopicLength, c.Limits.MaxTopicLevels
	y.MQTT.MaxWillDelay, y.MQTT.MaxInflightBytes, y.MQTT.MaxInflightAge = d(c.Limits.MaxWillDelay), int(c.Limits.MaxInflightBytes), d(c.Limits.MaxInflightAge)
	y.MQTT.MaxRetained, y.MQTT.MaxRetainedPerUser = c.Limits.MaxRetained, c.Limits.MaxRetainedPerUser
	y.MQTT.MaxDelayedWills, y.MQTT.MaxPersistentPerUser = c.Limits.MaxDelayedWills, c.Limits.MaxPersistentPerUser
	y.MQTT.MaxRetainedBytes, y.MQTT.MaxRetainedBytesPerUser = int(c.Limits.MaxRetainedBytes), int(c.Limits.MaxRetainedBytesPerUser)
	if c.Identity.FromClientID {
		y.Identity.UserFrom = configs.UserFromClientID
	}
	y.Identity.Separator = c.Identity.Separator
	y.Identity.FoldCase = c.Identity.FoldCase
	p, yp := c.Presence, &y.Presence
	yp.TopicPrefix, yp.AuthoritativeDevices = p.TopicPrefix, p.AuthoritativeDevices
	yp.SessionTTL, yp.RenewInterval, yp.ReapInterval = d(p.SessionTTL), d(p.RenewInterval), d(p.ReapInterval)
	yp.Visibility, yp.GroupsFile, yp.GroupBatch, yp.Observers = string(p.Visibility), p.GroupsFile, d(p.GroupBatch), p.Observers
	yp.InterestLinger, yp.InterestMaxLingering = d(p.InterestLinger), p.InterestMaxLingering
	yp.MaxSessionsPerUser, yp.SetRate, yp.SetBurst = p.MaxSessionsPerUser, p.SetRate, p.SetBurst
	yp.OfflineRetention = d(p.OfflineRetention)
	tb := p.TakeoverBattle
	yp.TakeoverBattle = configs.TakeoverBattleConfig{Takeovers: tb.Takeovers, Window: d(tb.Window), Backoff: d(tb.Backoff), MaxBackoff: d(tb.MaxBackoff)}
	if tb.Takeovers < 0 {
		yp.TakeoverBattle.Takeovers = configs.TakeoversOff
	}
	yp.OfflineGrace, yp.DisconnectDebounce, yp.MinDwell = offDuration(p.OfflineGrace), offDuration(p.DisconnectDebounce), offDuration(p.MinDwell)
	yp.WillDelayMax = d(p.WillDelayMax)
	yp.Flap = configs.FlapConfig{Window: d(p.Flap.Window), Ends: offCount(p.Flap.Ends), Grace: d(p.Flap.Grace)}
	yp.PublishRate, yp.PublishBurst = p.PublishRate, p.PublishBurst
	yp.IdleAfter = d(p.IdleAfter)
	yp.ObserverSessions = p.ObserverSessions
	yp.ClockInterval = offDuration(p.ClockInterval)
	yp.DormantMargin = d(p.DormantMargin)
	if p.DormantDevices != nil {
		yp.DormantDevices = make(configs.DeviceDurations, len(p.DormantDevices))
		for k, v := range p.DormantDevices {
			yp.DormantDevices[k] = d(v)
		}
	}
	yp.GroupResumeWindow, yp.GroupResumeDeltas, yp.GroupResumeBytes = offDuration(p.GroupResume.Window), p.GroupResume.Deltas, p.GroupResume.Bytes
	if p.IdleAfterDevices != nil {
		yp.IdleAfterDevices = make(configs.DeviceDurations, len(p.IdleAfterDevices))
		for k, v := range p.IdleAfterDevices {
			yp.IdleAfterDevices[k] = d(v)
		}
	}
	r := c.Redis
	y.Redis = configs.RedisConfig{Addrs: r.Addrs, Cluster: r.Cluster, SentinelMaster: r.SentinelMaster,
		SentinelUsername: r.SentinelUsername, SentinelPassword: configs.Secret(r.SentinelPassword),
		Username: r.Username, Password: configs.Secret(r.Password), DB: r.DB, KeyPrefix: r.KeyPrefix,
		DialTimeout: d(r.DialTimeout), ReadTimeout: d(r.ReadTimeout), WriteTimeout: d(r.WriteTimeout), PoolSize: r.PoolSize,
		NodeTTL: d(r.NodeTTL), SweepInterval: d(r.SweepInterval), Retention: d(r.Retention),
		TLS: configs.RedisTLSConfig(r.TLS)}
	y.Sparkplug = c.Sparkplug.yaml()
	lo := func(o LifecycleOutput) configs.LifecycleOutput {
		return configs.LifecycleOutput{Enabled: o.Enabled, Mode: o.Mode, Prefix: o.Prefix}
	}
	y.Lifecycle = configs.LifecycleConfig{AWS: lo(c.Lifecycle.AWS), EMQX: lo(c.Lifecycle.EMQX), QueueDepth: c.Lifecycle.QueueDepth}
	y.Webhooks.Replay = c.Webhooks.Replay
	for _, e := range c.Webhooks.Endpoints {
		y.Webhooks.Endpoints = append(y.Webhooks.Endpoints, configs.WebhookEndpoint{
			Name: e.Name, URL: e.URL, Secret: configs.Secret(e.Secret), SecretFile: e.SecretFile, Events: e.Events,
			MaxBatch: e.MaxBatch, MaxWait: d(e.MaxWait), Timeout: d(e.Timeout), Queue: e.Queue,
			RetryBackoff: d(e.RetryBackoff), RetryMaxBackoff: d(e.RetryMaxBackoff),
			BreakerThreshold: e.BreakerThreshold, BreakerCooldown: d(e.BreakerCooldown),
		})
	}
	y.Notify = configs.NotifyConfig(c.Notify)
	return y
}

// onDuration maps back a YAML duration where 0 means off.
func onDuration(p *configs.Duration) time.Duration {
	switch {
	case p == nil:
		return 0
	case *p == 0:
		return Off
	}
	return p.D()
}

// ConfigFrom is the plugin's part of a whole presenced configuration (the
// YAML layer's): it maps the node_id, mqtt limits, identity, presence,
// redis and webhooks sections onto Config.
func ConfigFrom(y configs.Config) Config {
	c := Config{NodeID: y.NodeID, ServerKeepAlive: y.MQTT.ServerKeepAlive.D()}
	c.Limits = Limits{
		MaxKeepAlive: y.MQTT.MaxKeepAlive.D(), MaxConnectionsPerAddress: y.MQTT.MaxConnectionsPerAddress,
		MaxSubscriptions: y.MQTT.MaxSubscriptions, MaxTopicLength: y.MQTT.MaxTopicLength, MaxTopicLevels: y.MQTT.MaxTopicLevels,
		MaxWillDelay: y.MQTT.MaxWillDelay.D(), MaxInflightBytes: int64(y.MQTT.MaxInflightBytes), MaxInflightAge: y.MQTT.MaxInflightAge.D(),
		MaxRetained: y.MQTT.MaxRetained, MaxRetainedPerUser: y.MQTT.MaxRetainedPerUser, MaxDelayedWills: y.MQTT.MaxDelayedWills,
		MaxPersistentPerUser: y.MQTT.MaxPersistentPerUser,
		MaxRetainedBytes:     int64(y.MQTT.MaxRetainedBytes), MaxRetainedBytesPerUser: int64(y.MQTT.MaxRetainedBytesPerUser),
	}
	if y.MQTT.AddressLimitExempt != nil {
		c.Limits.AddressLimitExempt = make([]netip.Prefix, 0, len(y.MQTT.AddressLimitExempt))
		for _, s := range y.MQTT.AddressLimitExempt {
			if p, err := configs.ParsePrefix(s); err == nil {
				c.Limits.AddressLimitExempt = append(c.Limits.AddressLimitExempt, p)
			}
		}
	}
	c.Identity = Identity{FromClientID: y.Identity.UserFrom == configs.UserFromClientID, Separator: y.Identity.Separator, FoldCase: y.Identity.FoldCase}
	yp := y.Presence
	c.Presence = Presence{
		TopicPrefix: yp.TopicPrefix, AuthoritativeDevices: yp.AuthoritativeDevices,
		SessionTTL: yp.SessionTTL.D(), RenewInterval: yp.RenewInterval.D(), ReapInterval: yp.ReapInterval.D(),
		Visibility: Visibility(yp.Visibility), GroupsFile: yp.GroupsFile, GroupBatch: yp.GroupBatch.D(), Observers: yp.Observers,
		InterestLinger: yp.InterestLinger.D(), InterestMaxLingering: yp.InterestMaxLingering,
		MaxSessionsPerUser: yp.MaxSessionsPerUser, SetRate: yp.SetRate, SetBurst: yp.SetBurst, OfflineRetention: yp.OfflineRetention.D(),
		TakeoverBattle: TakeoverBattle{Takeovers: yp.TakeoverBattle.Takeovers, Window: yp.TakeoverBattle.Window.D(),
			Backoff: yp.TakeoverBattle.Backoff.D(), MaxBackoff: yp.TakeoverBattle.MaxBackoff.D()},
		OfflineGrace: onDuration(yp.OfflineGrace), DisconnectDebounce: onDuration(yp.DisconnectDebounce), MinDwell: onDuration(yp.MinDwell),
		WillDelayMax: yp.WillDelayMax.D(), Flap: Flap{Window: yp.Flap.Window.D(), Grace: yp.Flap.Grace.D()},
		PublishRate: yp.PublishRate, PublishBurst: yp.PublishBurst, IdleAfter: yp.IdleAfter.D(),
	}
	c.Presence.ObserverSessions = yp.ObserverSessions
	c.Presence.ClockInterval = onDuration(yp.ClockInterval)
	c.Presence.DormantMargin = yp.DormantMargin.D()
	if len(yp.DormantDevices) > 0 {
		c.Presence.DormantDevices = make(map[string]time.Duration, len(yp.DormantDevices))
		for k, v := range yp.DormantDevices {
			c.Presence.DormantDevices[k] = v.D()
		}
	}
	c.Presence.GroupResume = GroupResume{Window: onDuration(yp.GroupResumeWindow), Deltas: yp.GroupResumeDeltas, Bytes: yp.GroupResumeBytes}
	if yp.TakeoverBattle.Takeovers == configs.TakeoversOff {
		c.Presence.TakeoverBattle.Takeovers = Off
	}
	if yp.Flap.Ends != nil {
		c.Presence.Flap.Ends = *yp.Flap.Ends
		if *yp.Flap.Ends == 0 {
			c.Presence.Flap.Ends = Off
		}
	}
	if yp.IdleAfterDevices != nil {
		c.Presence.IdleAfterDevices = make(map[string]time.Duration, len(yp.IdleAfterDevices))
		for k, v := range yp.IdleAfterDevices {
			c.Presence.IdleAfterDevices[k] = v.D()
		}
	}
	r := y.Redis
	c.Redis = Redis{Addrs: r.Addrs, Cluster: r.Cluster, SentinelMaster: r.SentinelMaster, SentinelUsername: r.SentinelUsername,
		SentinelPassword: string(r.SentinelPassword), Username: r.Username, Password: string(r.Password), DB: r.DB, KeyPrefix: r.KeyPrefix,
		DialTimeout: r.DialTimeout.D(), ReadTimeout: r.ReadTimeout.D(), WriteTimeout: r.WriteTimeout.D(), PoolSize: r.PoolSize,
		NodeTTL: r.NodeTTL.D(), SweepInterval: r.SweepInterval.D(), Retention: r.Retention.D(),
		TLS: RedisTLS(r.TLS)}
	c.Sparkplug = sparkplugFrom(y.Sparkplug)
	lo := func(o configs.LifecycleOutput) LifecycleOutput {
		return LifecycleOutput{Enabled: o.Enabled, Mode: o.Mode, Prefix: o.Prefix}
	}
	c.Lifecycle = Lifecycle{AWS: lo(y.Lifecycle.AWS), EMQX: lo(y.Lifecycle.EMQX), QueueDepth: y.Lifecycle.QueueDepth}
	c.Webhooks.Replay = y.Webhooks.Replay
	for _, e := range y.Webhooks.Endpoints {
		c.Webhooks.Endpoints = append(c.Webhooks.Endpoints, WebhookEndpoint{
			Name: e.Name, URL: e.URL, Secret: string(e.Secret), SecretFile: e.SecretFile, Events: e.Events,
			MaxBatch: e.MaxBatch, MaxWait: e.MaxWait.D(), Timeout: e.Timeout.D(), Queue: e.Queue,
			RetryBackoff: e.RetryBackoff.D(), RetryMaxBackoff: e.RetryMaxBackoff.D(),
			BreakerThreshold: e.BreakerThreshold, BreakerCooldown: e.BreakerCooldown.D(),
		})
	}
	c.Notify = Notify(y.Notify)
	return c
}

// off is a duration that may be Off, as the pure rules take it (0: off).
func off(d time.Duration) time.Duration { return max(d, 0) }

// pacing is the rule of when observers are shown a change.
func (p Presence) pacing() presence.Pacing {
	return presence.Pacing{
		Grace: off(p.OfflineGrace), Debounce: off(p.DisconnectDebounce), Dwell: off(p.MinDwell), WillDelayMax: p.WillDelayMax,
		FlapWindow: p.Flap.Window, FlapGrace: p.Flap.Grace, FlapEnds: max(p.Flap.Ends, 0),
	}
}

// idleRules are presence.idle_after and its per-label overrides.
func (p Presence) idleRules() presence.IdleRules {
	r := presence.IdleRules{Default: p.IdleAfter, Devices: make(map[string]time.Duration, len(p.IdleAfterDevices))}
	for label, d := range p.IdleAfterDevices {
		r.Devices[label] = d
	}
	return r
}

// groupResume is the groups stage's log bounds (presence.group_resume_*).
func (p Presence) groupResume() roster.LogLimits {
	r := p.GroupResume
	if r.Window < 0 {
		return roster.LogLimits{}
	}
	return roster.LogLimits{MaxAge: r.Window, MaxDeltas: r.Deltas, MaxBytes: r.Bytes}
}
