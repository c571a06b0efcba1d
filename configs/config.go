package configs

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/presenced/presenced/presence"
)

// Sentinel errors. Every error returned by this package wraps one of them, and
// its message names the offending key (YAML path, environment variable or
// flag).
var (
	// ErrUnknownKey: a YAML key, PRESENCED_* variable or flag that matches
	// no setting.
	ErrUnknownKey = errors.New("unknown key")
	// ErrInvalid: a value that cannot be decoded or fails validation.
	ErrInvalid = errors.New("invalid value")
	// ErrFile: the config file cannot be read.
	ErrFile = errors.New("cannot read config file")
)

// Duration is a time.Duration that decodes from strings like "60s", "2m" or
// "500ms" (time.ParseDuration syntax; a unit is required except for "0").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration does ("1m0s", "500ms").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText makes YAML, JSON and log output show "1m0s" rather than a
// number of nanoseconds.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses a time.ParseDuration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

func parseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		if isBareNumber(s) {
			return 0, fmt.Errorf("%q is not a duration: write it with a unit, such as %ss", s, s)
		}
		return 0, fmt.Errorf("want a duration with a unit such as 60s, 2m or 500ms (got %q)", s)
	}
	return Duration(v), nil
}

// isBareNumber reports whether s is a decimal number without a unit, such
// as 5, -1 or 1.5.
func isBareNumber(s string) bool {
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		s = s[1:]
	}
	digits := 0
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !strings.Contains(s[i+1:], "."):
		default:
			return false
		}
	}
	return digits > 0
}

// Config is the whole presenced configuration. A zero value in any field
// means "use the default" (see ApplyDefaults); the one exception is
// Presence.AuthoritativeDevices, where nil means the default and an empty
// non-nil slice means "none".
type Config struct {
	NodeID   string         `yaml:"node_id"` // default: os.Hostname(), "presenced" if that fails
	Log      LogConfig      `yaml:"log"`
	MQTT     MQTTConfig     `yaml:"mqtt"`
	Admin    AdminConfig    `yaml:"admin"`
	Identity IdentityConfig `yaml:"identity"`
	Presence PresenceConfig `yaml:"presence"`
	Redis    RedisConfig    `yaml:"redis"`
	Auth     AuthConfig     `yaml:"auth"`
	TLS      TLSConfig      `yaml:"tls"`
	Drain    DrainConfig    `yaml:"drain"`
	// Sparkplug makes the broker a Sparkplug B aware MQTT server (package
	// sparkplug; docs/sparkplug.md).
	Sparkplug SparkplugConfig `yaml:"sparkplug"`
	// Lifecycle is the lifecycle outputs (docs/events.md).
	Lifecycle LifecycleConfig `yaml:"lifecycle"`
	Webhooks  WebhooksConfig  `yaml:"webhooks"`
	Notify    NotifyConfig    `yaml:"notify"`
	// Canary measures the presence SLO with synthetic users (docs/slo.md).
	Canary CanaryConfig `yaml:"canary"`
}

// LogConfig configures the process logger.
type LogConfig struct {
	Level  string `yaml:"level"`  // debug|info|warn|error; default info
	Format string `yaml:"format"` // json|console; default json
	// Sessions logs one info line per session this node opens and per
	// session it ends (user, client id, device, node, epoch; the end's
	// reason and how long the session lasted). Default false.
	Sessions bool `yaml:"sessions"`
}

// MQTTConfig configures the embedded broker's listeners and per-connection
// resources.
type MQTTConfig struct {
	Addr             string   `yaml:"addr"`               // TCP listener; default ":1883"; "off" disables
	WSAddr           string   `yaml:"ws_addr"`            // WebSocket listener; default ":1882"; "off" disables
	ServerKeepAlive  Duration `yaml:"server_keepalive"`   // keep-alive given to clients that connect with 0; default 60s; 1s..65535s, whole seconds
	MaxWritesPending int      `yaml:"max_writes_pending"` // per-connection outbound queue (mochi MaximumClientWritesPending); default 256; 16..65535
	ReadBufferSize   int      `yaml:"read_buffer_size"`   // default 1024; 256..1048576
	WriteBufferSize  int      `yaml:"write_buffer_size"`  // default 1024; 256..1048576

	MaxPacketSize            int      `yaml:"max_packet_size"`             // bytes, refused before it is read; default 1 MiB; 1024..268435455
	MaxConnections           int      `yaml:"max_connections"`             // per node; default 50000
	MaxConnectionsPerAddress int      `yaml:"max_connections_per_address"` // per source IP; default 1000
	AddressLimitExempt       []string `yaml:"address_limit_exempt"`        // CIDRs max_connections_per_address does not apply to; default loopback; explicit empty: none
	MaxKeepAlive             Duration `yaml:"max_keepalive"`               // keep-alive ceiling, server_keepalive included; default 600s (or server_keepalive when above); whole seconds, 1s..65535s
	MaxSubscriptions         int      `yaml:"max_subscriptions"`           // topic filters per connection; default 100
	MaxTopicLength           int      `yaml:"max_topic_length"`            // bytes of a topic filter or PUBLISH topic name; default 256
	MaxTopicLevels           int      `yaml:"max_topic_levels"`            // levels of a topic filter; default 16
	MaxSessionExpiry         Duration `yaml:"max_session_expiry"`          // a persistent session (clean start off) is kept this long after its connection ends; default 2h; 1s..4294967295s, whole seconds
	RetainedExpiry           Duration `yaml:"retained_expiry"`             // retained messages outside the presence prefix expire after; default 24h; presence's never do
	WSAllowedOrigins         []string `yaml:"ws_allowed_origins"`          // Origin values a WebSocket upgrade may carry; default empty: any

	MaxTopicAliases      int      `yaml:"max_topic_aliases"`                // MQTT 5 topic aliases a client may set (Topic Alias Maximum in CONNACK); default 16; 1..65535
	MaxWillDelay         Duration `yaml:"max_will_delay"`                   // every MQTT 5 will delay is held to this; default 5m; 1s..24h, whole seconds
	MaxDelayedWills      int      `yaml:"max_delayed_wills"`                // delayed wills waiting on this node; one more is sent at once; default 10000; 1..10000000
	MaxPersistentPerUser int      `yaml:"max_persistent_sessions_per_user"` // persistent sessions (3.1.1 clean session off, MQTT 5 session expiry > 0) one user may hold on a node, connected or not; one more gets CONNACK 0x97 (3.1.1 0x03); default 32; 1..100000
	MaxInflightMessages  int      `yaml:"max_inflight_messages"`            // unacknowledged QoS 1/2 messages kept per session, online or not (mochi MaximumInflight); default 1000; 16..65535
	MaxInflightBytes     int      `yaml:"max_inflight_bytes"`               // their bytes (topic + payload): over it the connection ends and the message is dropped (one alone always passes); default 8 MiB; 1 KiB..1 GiB
	MaxInflightAge       Duration `yaml:"max_inflight_age"`                 // a connection whose oldest unacknowledged message is older is ended; default 5m; 1s..24h

	// Retained messages outside the presence prefix (topic + payload bytes):
	// one over a limit is refused (MQTT 5 QoS 1/2: PUBACK 0x97; else
	// delivered but not retained).
	MaxRetained             int `yaml:"max_retained"`                // in total; default 100000; 1..100000000
	MaxRetainedBytes        int `yaml:"max_retained_bytes"`          // in total; default 256 MiB; 1 KiB..1 TiB
	MaxRetainedPerUser      int `yaml:"max_retained_per_user"`       // left by one user; default 1000; 1..max_retained
	MaxRetainedBytesPerUser int `yaml:"max_retained_bytes_per_user"` // default 16 MiB; 1 KiB..max_retained_bytes
}

// AdminConfig configures the HTTP admin listener.
type AdminConfig struct {
	Addr      string `yaml:"addr"`       // default "127.0.0.1:8080"; "off" disables
	Token     Secret `yaml:"token"`      // bearer token for everything but /healthz and /readyz (PRESENCED_ADMIN_TOKEN)
	TokenFile string `yaml:"token_file"` // or a file holding it
	// AllowedHosts are the Host names the admin API answers besides
	// localhost and IP addresses ("*" any). Default empty: without a
	// token only those; with a token any (the check is off).
	AllowedHosts []string `yaml:"allowed_hosts"`
	// UnreadyAfter is how long Redis must have been unreachable before
	// GET /readyz answers 503 (the brokers keep serving meanwhile); an
	// explicit 0 answers 503 at once. Default 30s; at most 24h.
	UnreadyAfter *Duration `yaml:"unready_after"`
}

// IdentityConfig says how a connection maps to a user and a device.
type IdentityConfig struct {
	UserFrom  string `yaml:"user_from"` // username|client_id; default username
	Separator string `yaml:"separator"` // default "/"; with user_from client_id, "alice/phone" => user alice, device phone
	// FoldCase makes user names that differ only in case one user
	// (Unicode case folding: "Alice" is "alice"). Default false: names are
	// compared exactly. Risky: see docs/protocol.md (Identity).
	FoldCase bool `yaml:"fold_case"`
}

// PresenceConfig configures presence tracking.
type PresenceConfig struct {
	Mode                 string               `yaml:"mode"`                   // on|off; off runs the bare mochi broker (a benchmark baseline); default on
	TopicPrefix          string               `yaml:"topic_prefix"`           // default "presence"; a valid MQTT topic name
	AuthoritativeDevices []string             `yaml:"authoritative_devices"`  // default [desktop]; an explicit empty list means none
	SessionTTL           Duration             `yaml:"session_ttl"`            // store-side expiry backstop of a session; default 3h; >= 10s
	RenewInterval        Duration             `yaml:"renew_interval"`         // how often the node renews its sessions' expiry; default SessionTTL/3; 0 < x < SessionTTL/2
	ReapInterval         Duration             `yaml:"reap_interval"`          // how often the reaper looks for expired sessions; default 1s; 100ms..1m
	Visibility           string               `yaml:"visibility"`             // open|self|groups: who reads whose presence; default open
	GroupsFile           string               `yaml:"groups_file"`            // a YAML groups file (roster.File), read at start and on SIGHUP; empty: none
	GroupBatch           Duration             `yaml:"group_batch"`            // at most one presence/groups/{group} delta per this window; default 250ms; 10ms..10s
	InterestLinger       Duration             `yaml:"interest_linger"`        // a user (or group) nobody on this node needs any more is forgotten after this; default 60s; 1s..1h
	InterestMaxLingering int                  `yaml:"interest_max_lingering"` // users kept lingering at most; past it the longest lingering are forgotten early; default 100000; 100..10000000
	Observers            []string             `yaml:"observers"`              // service accounts: users who may read all presence (and # and $SYS/#)
	MaxSessionsPerUser   int                  `yaml:"max_sessions_per_user"`  // live sessions of one user on one node; the oldest is ended as kicked; default 16
	SetRate              int                  `yaml:"set_rate"`               // presence/set per second per session; default 5
	SetBurst             int                  `yaml:"set_burst"`              // presence/set burst per session; default 10
	OfflineRetention     Duration             `yaml:"offline_retention"`      // an offline user is forgotten after this (memory store; Redis uses redis.retention); default 720h
	TakeoverBattle       TakeoverBattleConfig `yaml:"takeover_battle"`

	// What observers are shown, and when (presence.Pacing). The keys where
	// 0 means off are pointers: unset takes the default.
	OfflineGrace       *Duration  `yaml:"offline_grace"`       // an unclean end (network, timeout, node_lost, drain) shows offline only after this; default 5s; 0 off; <= 5m
	DisconnectDebounce *Duration  `yaml:"disconnect_debounce"` // a clean DISCONNECT shows offline after this; default 1s; 0 at once; <= 10s
	WillDelayMax       Duration   `yaml:"will_delay_max"`      // an MQTT 5 will delay holds the end up to this; default 60s; 1s..1h
	MinDwell           *Duration  `yaml:"min_dwell"`           // least time between two shown status changes of a user; default 1s; 0 off; <= 1m
	Flap               FlapConfig `yaml:"flap"`
	PublishRate        int        `yaml:"publish_rate"`  // presence publishes per second per node, coalesced per user beyond it; default 10000; 10..1000000
	PublishBurst       int        `yaml:"publish_burst"` // default 2000; 1..1000000

	// IdleAfter shows a session idle after this long without activity (a
	// PUBLISH by the client, presence/set included; keep-alive is not), as
	// Slack's auto-away; its next activity brings its own status back. Only
	// an own status of online becomes idle. Default 0: off (IoT devices may
	// be silent by design). 0 or >= 1s.
	IdleAfter Duration `yaml:"idle_after"`
	// IdleAfterDevices overrides IdleAfter per device label, e.g.
	// {desktop: 10m, sensor: 0} (0: never for that label). Environment:
	// PRESENCED_PRESENCE_IDLE_AFTER_DEVICES=desktop=10m,sensor=0.
	IdleAfterDevices DeviceDurations `yaml:"idle_after_devices"`
	// ObserverSessions gives service accounts (the users of Observers who
	// authenticated by a method of auth.observer_methods, and tokens with
	// the observer claim) a presence session, as any user has: shown
	// online, counted. Default false: a service account is not a person,
	// and has none. Without authentication every connection reads as a
	// service account and nobody is named one: every connection has its
	// presence whatever this says.
	ObserverSessions bool `yaml:"observer_sessions"`
	// ClockInterval is the presence clock's period S: every S each node
	// publishes presence/clock (not retained, QoS 0) to its own
	// subscribers, so that an observer that hears none for 2 S shows its
	// view as stale. Default 5s; 0 off; 1s..1h.
	ClockInterval *Duration `yaml:"clock_interval"`
	// DormantDevices declares the check-in period of devices that sleep by
	// design, per device label, e.g. {sensor: 1h}: after a clean end such a
	// device is shown dormant, not offline, until its next check-in is
	// missed by more than DormantMargin (presence/dormant.go). A device's
	// own MQTT 5 CONNECT user property expect wins over its label's.
	// Periods 1s..168h. Environment:
	// PRESENCED_PRESENCE_DORMANT_DEVICES=sensor=1h,gateway=15m.
	DormantDevices DeviceDurations `yaml:"dormant_devices"`
	// DormantMargin is how late past its period a check-in may come before
	// the device is shown offline (reason missed). Default 0: a tenth of
	// the period, at least 5s; else 1s..24h.
	DormantMargin Duration `yaml:"dormant_margin"`

	// A subscriber of presence/groups/{group} coming back with the group
	// version it holds (the MQTT 5 user property "version" on SUBSCRIBE)
	// is sent what it missed from this node's log of the group's batches,
	// bounded per group by these three; otherwise the snapshot.
	GroupResumeWindow *Duration `yaml:"group_resume_window"` // how long a batch is kept; default 5m; 0 off (every resume gets the snapshot); <= 1h
	GroupResumeDeltas int       `yaml:"group_resume_deltas"` // at most this many batches per group; default 1200; 1..100000
	GroupResumeBytes  int       `yaml:"group_resume_bytes"`  // at most this many bytes of batches (JSON) per group; default 262144; 1024..67108864
}

// FlapConfig is flap control: a user whose ends would have shown them
// offline Ends times within Window flaps, and is shown offline only after
// Grace.
type FlapConfig struct {
	Window Duration `yaml:"window"` // default 2m; 1s..1h
	Ends   *int     `yaml:"ends"`   // default 3; 0 off; 2..1000
	Grace  Duration `yaml:"grace"`  // default 30s; offline_grace..1h
}

// Pacing is the rule of when observers are shown a change, from this
// section (defaults applied).
func (p PresenceConfig) Pacing() presence.Pacing {
	r := presence.Pacing{WillDelayMax: p.WillDelayMax.D(), FlapWindow: p.Flap.Window.D(), FlapGrace: p.Flap.Grace.D()}
	if p.OfflineGrace != nil {
		r.Grace = p.OfflineGrace.D()
	}
	if p.DisconnectDebounce != nil {
		r.Debounce = p.DisconnectDebounce.D()
	}
	if p.MinDwell != nil {
		r.Dwell = p.MinDwell.D()
	}
	if p.Flap.Ends != nil {
		r.FlapEnds = *p.Flap.Ends
	}
	return r
}

// DeviceDurations maps device labels to durations.
type DeviceDurations map[string]Duration

// TakeoverBattleConfig damps takeover battles: two devices sharing one
// client id that take the session from each other in a loop. Takeovers
// takeovers of one client id within Window on one node make a battle; a
// newcomer that would take the id over is then refused (MQTT 5 CONNACK 0x9F,
// 3.1.1 0x03) for Backoff, doubled on each further battle of the episode up
// to MaxBackoff. The episode ends after one Window with neither a takeover
// nor a refusal once the back-off ran out.
type TakeoverBattleConfig struct {
	// Takeovers is the count that makes a battle; default 5; 2..1000.
	// TakeoversOff (-1) disables damping; in the file or the environment,
	// an explicit 0 means the same.
	Takeovers  int      `yaml:"takeovers"`
	Window     Duration `yaml:"window"`      // default 30s; 1s..10m
	Backoff    Duration `yaml:"backoff"`     // the first refusal; default 5s; 100ms..10m
	MaxBackoff Duration `yaml:"max_backoff"` // default 2m; backoff..1h
}

// TakeoversOff as presence.takeover_battle.takeovers disables takeover
// battle damping (0 takes the default, as every zero does).
const TakeoversOff = -1

// RedisConfig configures the shared Redis store. No address means the
// in-memory store (a single node).
type RedisConfig struct {
	Addrs   []string `yaml:"addrs"`   // host:port of Redis (cluster: any seed nodes); empty: the in-memory store
	Cluster bool     `yaml:"cluster"` // Redis Cluster
	// SentinelMaster names the master that Redis Sentinel watches; with it,
	// addrs are the Sentinels' addresses, and the master they name is used
	// (and followed through a failover).
	SentinelMaster   string         `yaml:"sentinel_master"`
	SentinelUsername string         `yaml:"sentinel_username"` // ACL user of the Sentinels, if any
	SentinelPassword Secret         `yaml:"sentinel_password"` // never logged
	Username         string         `yaml:"username"`          // ACL user
	Password         Secret         `yaml:"password"`          // never logged
	DB               int            `yaml:"db"`                // database number (not with cluster)
	KeyPrefix        string         `yaml:"key_prefix"`        // default "presenced:"
	DialTimeout      Duration       `yaml:"dial_timeout"`      // default 2s
	ReadTimeout      Duration       `yaml:"read_timeout"`      // default 1s
	WriteTimeout     Duration       `yaml:"write_timeout"`     // default 1s
	PoolSize         int            `yaml:"pool_size"`         // connections per Redis node; default 32
	NodeTTL          Duration       `yaml:"node_ttl"`          // a node record lives this long unless refreshed; default 10s
	SweepInterval    Duration       `yaml:"sweep_interval"`    // how often nodes look for dead nodes' sessions; default 2s
	Retention        Duration       `yaml:"retention"`         // how long an offline user is kept; default 720h (30 days)
	TLS              RedisTLSConfig `yaml:"tls"`
}

// RedisTLSConfig is TLS to Redis (single server, every Cluster node, the
// Sentinels and their master). Off by default: Redis's own default.
type RedisTLSConfig struct {
	Enabled            bool   `yaml:"enabled"`              // dial Redis over TLS
	CAFile             string `yaml:"ca_file"`              // PEM roots Redis's certificate must chain to; empty: the system's
	CertFile           string `yaml:"cert_file"`            // client certificate (PEM), for tls-auth-clients; with key_file
	KeyFile            string `yaml:"key_file"`             // its key
	ServerName         string `yaml:"server_name"`          // the name Redis's certificate must hold; empty: each address's host
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"` // accept any certificate (tests only); default false
}

// AuthConfig configures who may connect. With no method configured
// (password_file, jwt keys, tls.cert_user_from) every client may connect
// with any username, and presenced listens on loopback only unless
// allow_anonymous is set.
type AuthConfig struct {
	AllowAnonymous bool            `yaml:"allow_anonymous"` // no method: listen beyond loopback anyway; with a method: clients without credentials connect as anonymous observers
	PasswordFile   string          `yaml:"password_file"`   // htpasswd -B file (presenced passwd FILE USER writes it); reloaded on SIGHUP
	JWT            JWTConfig       `yaml:"jwt"`
	CertUserFrom   string          `yaml:"cert_user_from"` // ""|cn|san: a verified client certificate names the user
	Passwords      PasswordsConfig `yaml:"passwords"`
	// ObserverMethods are the methods under which a user listed in
	// presence.observers is a service account: password, jwt,
	// certificate. Default (nil): [password]; an explicit empty list: none
	// (only a token's observer_claim makes one).
	ObserverMethods []string `yaml:"observer_methods"`
	// ACLFile is an access control file for application topics in
	// mosquitto's acl_file syntax (package acl); reloaded on SIGHUP.
	// Default empty: users publish and subscribe to any application topic
	// but filters with a wildcard first level, anonymous observers only
	// subscribe. Needs an authentication method.
	ACLFile string `yaml:"acl_file"`
}

// PasswordsConfig bounds the CPU that password checks (bcrypt, ~70 ms of a
// core each) cost: failures by address are throttled before hashing, the
// comparisons at once are bounded, and verified passwords are cached (as a
// keyed SHA-256 of user and password) until the password file is read
// again.
type PasswordsConfig struct {
	FailureBurst    int      `yaml:"failure_burst"`    // failed checks an address may make before it is refused (0x9F) without hashing; default 10; 1..10000
	FailureInterval Duration `yaml:"failure_interval"` // an address gets one failure back per interval; default 6s; 10ms..1h
	Addresses       int      `yaml:"addresses"`        // addresses with recent failures kept (IPv4, IPv6 /64); default 65536; 16..10000000
	Concurrency     int      `yaml:"concurrency"`      // bcrypt comparisons at once; default 0: the number of CPUs; 0..1024
	QueueWait       Duration `yaml:"queue_wait"`       // a check waits this long for its turn, then 0x89 server busy; default 2s; 1ms..1m
	CacheSize       int      `yaml:"cache_size"`       // users whose verified password is cached; default 65536; -1 turns the cache off; up to 10000000
}

// JWTConfig configures tokens carried in the CONNECT password.
type JWTConfig struct {
	HS256SecretFile     string   `yaml:"hs256_secret_file"`      // shared secret for HS256
	PublicKeysFile      string   `yaml:"public_keys_file"`       // PEM or JWKS: RS256, ES256, EdDSA
	UserClaim           string   `yaml:"user_claim"`             // default "sub"
	GroupsClaim         string   `yaml:"groups_claim"`           // default "groups"
	ObserverClaim       string   `yaml:"observer_claim"`         // a boolean claim that makes the user a service account
	ClientIDClaim       string   `yaml:"client_id_claim"`        // the client id must equal it
	ClientIDPrefixClaim string   `yaml:"client_id_prefix_claim"` // the client id must start with it
	Audience            string   `yaml:"audience"`
	Issuer              string   `yaml:"issuer"`
	Leeway              Duration `yaml:"leeway"`       // for exp and nbf; default 30s
	AllowNoExp          bool     `yaml:"allow_no_exp"` // accept tokens without exp (which never expire); default false: refused
	MaxLifetime         Duration `yaml:"max_lifetime"` // refuse tokens whose exp is further away than this; default 0: no maximum; 0 or 1m..8760h
}

// DrainConfig configures the drain of a node (SIGTERM, or POST
// /api/v1/drain): new connections are refused, the existing ones are asked
// to move at Rate per second, and the node stops when none is left or after
// Timeout.
type DrainConfig struct {
	Rate            int      `yaml:"rate"`             // connections asked to move per second; default 500; 1..1000000
	Timeout         Duration `yaml:"timeout"`          // the drain's bound, after which the rest end as shutdown; default 20s; 1s..1h
	ServerReference string   `yaml:"server_reference"` // MQTT 5 Server Reference sent with 0x9C (e.g. "mqtt.example.com:1883"); empty: 0x8B, no reference
}

// SparkplugConfig configures the Sparkplug B aware server (Sparkplug 3.0,
// chapter 10): births retained under $sparkplug/certificates/, and the
// stale NDEATH of an earlier connection (its bdSeq not the live NBIRTH's)
// flagged, or dropped.
type SparkplugConfig struct {
	Enabled         bool     `yaml:"enabled"`           // default false
	DropStaleDeaths bool     `yaml:"drop_stale_deaths"` // drop a stale NDEATH (a will included) instead of delivering it flagged; default false
	MaxEdgeNodes    int      `yaml:"max_edge_nodes"`    // edge nodes whose bdSeq a node tracks; default 10000; 1..10000000
	ForgetAfter     Duration `yaml:"forget_after"`      // an edge node dead this long is forgotten; default 1h; 1m..720h
}

// LifecycleConfig configures the lifecycle outputs: every session's open
// and end (and every CONNECT refused) in the dialects of AWS IoT Core and
// EMQX 5 (docs/events.md). Both are off by default.
type LifecycleConfig struct {
	AWS  LifecycleOutput `yaml:"aws"`  // $aws/events/presence/{connected,disconnected,connect_failed}/{clientId}
	EMQX LifecycleOutput `yaml:"emqx"` // $SYS/brokers/{node}/clients/{clientid}/{connected,disconnected}
	// QueueDepth bounds the events waiting to be published; past it they
	// are dropped and counted. Default 8192; 16..1048576.
	QueueDepth int `yaml:"queue_depth"`
}

// LifecycleOutput is one lifecycle output.
type LifecycleOutput struct {
	Enabled bool   `yaml:"enabled"` // default false
	Mode    string `yaml:"mode"`    // raw (every committed open and end) | shown (what observers were shown); default raw
	Prefix  string `yaml:"prefix"`  // topic prefix; default $aws/events/presence (aws), $SYS/brokers (emqx)
}

// The lifecycle modes.
const (
	LifecycleRaw   = "raw"
	LifecycleShown = "shown"
)

// NotifyConfig configures presence-gated notify (docs/notify.md): a
// message on presence/notify/{user} reaches the user's live sessions, on
// any node, or is pushed through the webhooks when the user is offline or
// still offline when presence.offline_grace ends.
type NotifyConfig struct {
	Enabled           bool `yaml:"enabled"`              // default false: presence/notify/... is read-only as the rest of the prefix
	MaxPendingPerUser int  `yaml:"max_pending_per_user"` // messages waiting for one user on a node (the oldest is dropped); default 16; 1..10000
	MaxPending        int  `yaml:"max_pending"`          // messages waiting on a node (a new one is dropped); default 10000; 1..10000000
	MaxPayload        int  `yaml:"max_payload"`          // bytes of a message (0x95 beyond); default 4096; 1..8192
	Queue             int  `yaml:"queue"`                // messages and events waiting for the notify stage's goroutine (0x97 beyond); default 4096; 16..1000000
}

// TLSConfig configures TLS on the MQTT listeners (TCP and WebSocket).
type TLSConfig struct {
	CertFile          string `yaml:"cert_file"`           // server certificate chain (PEM); with key_file enables TLS; reloaded on SIGHUP
	KeyFile           string `yaml:"key_file"`            // its key (PEM)
	ClientCAFile      string `yaml:"client_ca_file"`      // CAs of client certificates (mutual TLS)
	RequireClientCert bool   `yaml:"require_client_cert"` // refuse clients without a certificate
}

// AuthEnabled reports whether any authentication method is configured.
func (c Config) AuthEnabled() bool {
	a := c.Auth
	return a.PasswordFile != "" || a.JWT.HS256SecretFile != "" || a.JWT.PublicKeysFile != "" || a.CertUserFrom != ""
}

// Secret is a string that prints as "***" (in logs, errors and dumps).
type Secret string

// String implements fmt.Stringer.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "***"
}

// MarshalText keeps the secret out of JSON and YAML output.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Values with a meaning of their own.
const (
	// Off, as a listener address, disables that listener.
	Off = "off"
	// UserFromUsername and UserFromClientID are the values of identity.user_from.
	UserFromUsername = "username"
	UserFromClientID = "client_id"
	// VisibilityOpen and VisibilitySelf are the values of presence.visibility.
	VisibilityOpen   = "open"
	VisibilitySelf   = "self"
	VisibilityGroups = "groups"
)

// Default values. NodeID defaults to the host name and RenewInterval to
// SessionTTL/3, so they have no constant here.
const (
	defaultLogLevel            = "info"
	defaultLogFormat           = "json"
	defaultMQTTAddr            = ":1883"
	defaultMQTTWSAddr          = ":1882"
	defaultServerKeepAlive     = Duration(60 * time.Second)
	defaultMaxWritesPending    = 256
	defaultReadBufferSize      = 1024
	defaultWriteBufferSize     = 1024
	defaultAdminAddr           = "127.0.0.1:8080"
	defaultUnreadyAfter        = Duration(30 * time.Second)
	defaultUserFrom            = UserFromUsername
	defaultSeparator           = "/"
	defaultTopicPrefix         = "presence"
	defaultAuthoritativeDevice = "desktop"
	defaultSessionTTL          = Duration(3 * time.Hour)
	defaultRenewDivisor        = 3
	defaultReapInterval        = Duration(time.Second)
	fallbackNodeID             = "presenced"
	defaultKeyPrefix           = "presenced:"
	defaultDialTimeout         = Duration(2 * time.Second)
	defaultRedisIOTimeout      = Duration(time.Second)
	defaultPoolSize            = 32
	defaultFailureBurst        = 10
	defaultFailureInterval     = Duration(6 * time.Second)
	defaultPasswordAddresses   = 65536
	defaultPasswordQueueWait   = Duration(2 * time.Second)
	defaultPasswordCache       = 65536
	defaultNodeTTL             = Duration(10 * time.Second)
	defaultSweepInterval       = Duration(2 * time.Second)
	defaultRetention           = Duration(30 * 24 * time.Hour)
	defaultMaxPacketSize       = 1 << 20
	defaultMaxConnections      = 50000
	defaultMaxPerAddress       = 1000
	defaultMaxKeepAlive        = Duration(600 * time.Second)
	defaultMaxSubscriptions    = 100
	defaultMaxTopicLength      = 256
	defaultMaxTopicLevels      = 16
	defaultRetainedExpiry      = Duration(24 * time.Hour)
	defaultMaxSessionExpiry    = Duration(2 * time.Hour)
	defaultMaxTopicAliases     = 16
	defaultMaxWillDelay        = Duration(5 * time.Minute)
	defaultMaxDelayedWills     = 10000
	defaultMaxPersistentUser   = 32
	defaultMaxInflightMessages = 1000
	defaultMaxInflightBytes    = 8 << 20
	defaultMaxInflightAge      = Duration(5 * time.Minute)
	defaultMaxRetained         = 100000
	defaultMaxRetainedBytes    = 256 << 20
	defaultMaxRetainedPerUser  = 1000
	defaultMaxRetainedUserB    = 16 << 20
	defaultVisibility          = VisibilityOpen
	defaultGroupBatch          = Duration(250 * time.Millisecond)
	defaultInterestLinger      = Duration(time.Minute)
	defaultInterestMaxLinger   = 100_000
	defaultMaxSessionsPerUser  = 16
	defaultSetRate             = 5
	defaultSetBurst            = 10
	defaultOfflineGrace        = Duration(5 * time.Second)
	defaultGroupResumeWindow   = Duration(5 * time.Minute)
	defaultGroupResumeDeltas   = 1200
	defaultGroupResumeBytes    = 256 << 10
	defaultDisconnectDebounce  = Duration(time.Second)
	defaultWillDelayMax        = Duration(time.Minute)
	defaultMinDwell            = Duration(time.Second)
	defaultClockInterval       = Duration(5 * time.Second)
	defaultFlapWindow          = Duration(2 * time.Minute)
	defaultFlapEnds            = 3
	defaultFlapGrace           = Duration(30 * time.Second)
	defaultPublishRate         = 10_000
	defaultPublishBurst        = 2_000
	// A phone changing network takes its session over once; five takeovers
	// in 30s is one every 6s, which only a loop produces.
	defaultBattleTakeovers = 5
	defaultBattleWindow    = Duration(30 * time.Second)
	// Clients reconnect about once a second: 5s cuts a loop fivefold at
	// once, and costs a misjudged device no more than that.
	defaultBattleBackoff    = Duration(5 * time.Second)
	defaultBattleMaxBackoff = Duration(2 * time.Minute)
	defaultUserClaim        = "sub"
	defaultGroupsClaim      = "groups"
	defaultJWTLeeway        = Duration(30 * time.Second)
	// A drain asks 500 connections a second to move: 10,000 in 20 s, a
	// rate the other nodes take without a reconnect storm.
	defaultDrainRate = 500

	defaultLifecycleDepth = 8192
	// DefaultAWSPrefix and DefaultEMQXPrefix are where AWS IoT Core and
	// EMQX publish their lifecycle events.
	DefaultAWSPrefix  = "$aws/events/presence"
	DefaultEMQXPrefix = "$SYS/brokers"
	// notify (NotifyConfig)
	defaultNotifyMaxPendingPerUser = 16
	defaultNotifyMaxPending        = 10000
	defaultNotifyMaxPayload        = 4096
	defaultNotifyQueue             = 4096
	maxNotifyPayload               = 8192 // store.MaxNotifyPayload: a notify command carries the message to another node
	// 20 s of drain, plus at most 10 s to stop, fit in Kubernetes' default
	// terminationGracePeriodSeconds (30 s) before its SIGKILL.
	defaultDrainTimeout = Duration(20 * time.Second)
	// maxServerReference bounds drain.server_reference.
	maxServerReference = 1024
	// Ten thousand edge nodes per node: a few hundred bytes each.
	defaultSparkplugMaxEdgeNodes = 10000
	// An edge node dead for an hour is forgotten: a will later than that
	// is delivered as it is.
	defaultSparkplugForgetAfter = Duration(time.Hour)
)

// Defaults returns the config with every default applied.
func Defaults() Config {
	var c Config
	c.ApplyDefaults()
	return c
}

// ApplyDefaults fills every zero-valued field with its default. It is the
// only place defaults live (nats-server setBaselineOptions style).
func (c *Config) ApplyDefaults() {
	if c.NodeID == "" {
		c.NodeID = hostnameOr(fallbackNodeID)
	}

	setString(&c.Log.Level, defaultLogLevel)
	setString(&c.Log.Format, defaultLogFormat)

	setString(&c.MQTT.Addr, defaultMQTTAddr)
	setString(&c.MQTT.WSAddr, defaultMQTTWSAddr)
	setDuration(&c.MQTT.ServerKeepAlive, defaultServerKeepAlive)
	setInt(&c.MQTT.MaxWritesPending, defaultMaxWritesPending)
	setInt(&c.MQTT.ReadBufferSize, defaultReadBufferSize)
	setInt(&c.MQTT.WriteBufferSize, defaultWriteBufferSize)
	setInt(&c.MQTT.MaxPacketSize, defaultMaxPacketSize)
	setInt(&c.MQTT.MaxConnections, defaultMaxConnections)
	setInt(&c.MQTT.MaxConnectionsPerAddress, defaultMaxPerAddress)
	// The ceiling is at least the keep-alive given to clients that ask for
	// none (a server keep-alive above it would be capped at once).
	setDuration(&c.MQTT.MaxKeepAlive, max(defaultMaxKeepAlive, min(c.MQTT.ServerKeepAlive, maxServerKeepAlive)))
	setInt(&c.MQTT.MaxSubscriptions, defaultMaxSubscriptions)
	setInt(&c.MQTT.MaxTopicLength, defaultMaxTopicLength)
	setInt(&c.MQTT.MaxTopicLevels, defaultMaxTopicLevels)
	setDuration(&c.MQTT.MaxSessionExpiry, defaultMaxSessionExpiry)
	setDuration(&c.MQTT.RetainedExpiry, defaultRetainedExpiry)
	setInt(&c.MQTT.MaxTopicAliases, defaultMaxTopicAliases)
	setDuration(&c.MQTT.MaxWillDelay, defaultMaxWillDelay)
	setInt(&c.MQTT.MaxDelayedWills, defaultMaxDelayedWills)
	setInt(&c.MQTT.MaxPersistentPerUser, defaultMaxPersistentUser)
	setInt(&c.MQTT.MaxInflightMessages, defaultMaxInflightMessages)
	setInt(&c.MQTT.MaxInflightBytes, max(defaultMaxInflightBytes, c.MQTT.MaxPacketSize))
	setDuration(&c.MQTT.MaxInflightAge, defaultMaxInflightAge)
	setInt(&c.MQTT.MaxRetained, defaultMaxRetained)
	setInt(&c.MQTT.MaxRetainedBytes, max(defaultMaxRetainedBytes, c.MQTT.MaxPacketSize))
	setInt(&c.MQTT.MaxRetainedPerUser, min(defaultMaxRetainedPerUser, c.MQTT.MaxRetained))
	setInt(&c.MQTT.MaxRetainedBytesPerUser, min(max(defaultMaxRetainedUserB, c.MQTT.MaxPacketSize), c.MQTT.MaxRetainedBytes))
	if c.MQTT.AddressLimitExempt == nil { // an explicit empty list stays empty
		c.MQTT.AddressLimitExempt = []string{"127.0.0.0/8", "::1/128"}
	}
	if c.MQTT.WSAllowedOrigins == nil { // empty and unset mean the same: any origin
		c.MQTT.WSAllowedOrigins = []string{}
	}

	setString(&c.Admin.Addr, defaultAdminAddr)
	setDurationPtr(&c.Admin.UnreadyAfter, defaultUnreadyAfter)
	if c.Admin.AllowedHosts == nil { // empty and unset mean the same
		c.Admin.AllowedHosts = []string{}
	}
	for i, h := range c.Admin.AllowedHosts {
		c.Admin.AllowedHosts[i] = strings.ToLower(h)
	}

	setString(&c.Identity.UserFrom, defaultUserFrom)
	setString(&c.Identity.Separator, defaultSeparator)

	setString(&c.Presence.Mode, "on")
	setString(&c.Presence.TopicPrefix, defaultTopicPrefix)
	if c.Presence.AuthoritativeDevices == nil { // an explicit empty list stays empty
		c.Presence.AuthoritativeDevices = []string{defaultAuthoritativeDevice}
	}
	setDuration(&c.Presence.SessionTTL, defaultSessionTTL)
	setDuration(&c.Presence.RenewInterval, c.Presence.SessionTTL/defaultRenewDivisor) // after SessionTTL
	setDuration(&c.Presence.ReapInterval, defaultReapInterval)
	setString(&c.Presence.Visibility, defaultVisibility)
	setDuration(&c.Presence.GroupBatch, defaultGroupBatch)
	setDuration(&c.Presence.InterestLinger, defaultInterestLinger)
	setInt(&c.Presence.InterestMaxLingering, defaultInterestMaxLinger)
	setDurationPtr(&c.Presence.GroupResumeWindow, defaultGroupResumeWindow)
	setInt(&c.Presence.GroupResumeDeltas, defaultGroupResumeDeltas)
	setInt(&c.Presence.GroupResumeBytes, defaultGroupResumeBytes)
	if c.Auth.ObserverMethods == nil { // an explicit empty list stays empty
		c.Auth.ObserverMethods = []string{"password"}
	}
	if c.Presence.Observers == nil {
		c.Presence.Observers = []string{}
	}
	setInt(&c.Presence.MaxSessionsPerUser, defaultMaxSessionsPerUser)
	setInt(&c.Presence.SetRate, defaultSetRate)
	setInt(&c.Presence.SetBurst, defaultSetBurst)
	setDuration(&c.Presence.OfflineRetention, defaultRetention)
	setDurationPtr(&c.Presence.OfflineGrace, defaultOfflineGrace)
	setDurationPtr(&c.Presence.DisconnectDebounce, defaultDisconnectDebounce)
	setDuration(&c.Presence.WillDelayMax, defaultWillDelayMax)
	setDurationPtr(&c.Presence.MinDwell, defaultMinDwell)
	setDuration(&c.Presence.Flap.Window, defaultFlapWindow)
	if c.Presence.Flap.Ends == nil {
		n := defaultFlapEnds
		c.Presence.Flap.Ends = &n
	}
	setDuration(&c.Presence.Flap.Grace, max(defaultFlapGrace, *c.Presence.OfflineGrace))
	setInt(&c.Presence.PublishRate, defaultPublishRate)
	setInt(&c.Presence.PublishBurst, defaultPublishBurst)
	// presence.idle_after: 0 (off) is the default; nothing to set.
	if c.Presence.IdleAfterDevices == nil {
		c.Presence.IdleAfterDevices = DeviceDurations{}
	}
	setDurationPtr(&c.Presence.ClockInterval, defaultClockInterval)
	if c.Presence.DormantDevices == nil {
		c.Presence.DormantDevices = DeviceDurations{}
	}
	setInt(&c.Presence.TakeoverBattle.Takeovers, defaultBattleTakeovers)
	setDuration(&c.Presence.TakeoverBattle.Window, defaultBattleWindow)
	setDuration(&c.Presence.TakeoverBattle.Backoff, defaultBattleBackoff)
	setDuration(&c.Presence.TakeoverBattle.MaxBackoff, max(defaultBattleMaxBackoff, c.Presence.TakeoverBattle.Backoff))

	setString(&c.Auth.JWT.UserClaim, defaultUserClaim)
	setString(&c.Auth.JWT.GroupsClaim, defaultGroupsClaim)
	setDuration(&c.Auth.JWT.Leeway, defaultJWTLeeway)
	setInt(&c.Auth.Passwords.FailureBurst, defaultFailureBurst)
	setDuration(&c.Auth.Passwords.FailureInterval, defaultFailureInterval)
	setInt(&c.Auth.Passwords.Addresses, defaultPasswordAddresses)
	setDuration(&c.Auth.Passwords.QueueWait, defaultPasswordQueueWait)
	setInt(&c.Auth.Passwords.CacheSize, defaultPasswordCache)

	setString(&c.Redis.KeyPrefix, defaultKeyPrefix)
	setDuration(&c.Redis.DialTimeout, defaultDialTimeout)
	setDuration(&c.Redis.ReadTimeout, defaultRedisIOTimeout)
	setDuration(&c.Redis.WriteTimeout, defaultRedisIOTimeout)
	setInt(&c.Redis.PoolSize, defaultPoolSize)
	setDuration(&c.Redis.NodeTTL, defaultNodeTTL)
	setDuration(&c.Redis.SweepInterval, defaultSweepInterval)
	setDuration(&c.Redis.Retention, defaultRetention)

	setInt(&c.Drain.Rate, defaultDrainRate)
	setDuration(&c.Drain.Timeout, defaultDrainTimeout)

	setInt(&c.Sparkplug.MaxEdgeNodes, defaultSparkplugMaxEdgeNodes)
	setDuration(&c.Sparkplug.ForgetAfter, defaultSparkplugForgetAfter)
	setInt(&c.Lifecycle.QueueDepth, defaultLifecycleDepth)
	setString(&c.Lifecycle.AWS.Mode, LifecycleRaw)
	setString(&c.Lifecycle.AWS.Prefix, DefaultAWSPrefix)
	setString(&c.Lifecycle.EMQX.Mode, LifecycleRaw)
	setString(&c.Lifecycle.EMQX.Prefix, DefaultEMQXPrefix)
	c.applyWebhookDefaults()
	setInt(&c.Notify.MaxPendingPerUser, defaultNotifyMaxPendingPerUser)
	setInt(&c.Notify.MaxPending, defaultNotifyMaxPending)
	setInt(&c.Notify.MaxPayload, defaultNotifyMaxPayload)
	setInt(&c.Notify.Queue, defaultNotifyQueue)
	setInt(&c.Canary.Users, 3)
	setDuration(&c.Canary.Interval, Duration(90*time.Second))
	setDuration(&c.Canary.KeepAlive, Duration(5*time.Second))
	setDuration(&c.Canary.Window, Duration(time.Hour))
	if c.Canary.Ends == nil {
		c.Canary.Ends = []string{"clean", "rst", "silence", "drain"}
	}
}

func hostnameOr(fallback string) string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return fallback
	}
	return h
}

func setString(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func setInt(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}

func setDuration(p *Duration, v Duration) {
	if *p == 0 {
		*p = v
	}
}

// setDurationPtr sets an unset key where an explicit 0 means off.
func setDurationPtr(p **Duration, v Duration) {
	if *p == nil {
		*p = &v
	}
}

// Validation limits.
const (
	minServerKeepAlive  = Duration(time.Second)
	maxServerKeepAlive  = Duration(65535 * time.Second) // MQTT keep-alive is a 16-bit count of seconds
	minMaxWritesPending = 16
	maxMaxWritesPending = 65535
	minBufferSize       = 256
	maxBufferSize       = 1 << 20
	maxSeparatorBytes   = 8
	minSessionTTL       = Duration(10 * time.Second)
	minReapInterval     = Duration(100 * time.Millisecond)
	minIdleAfter        = Duration(time.Second) // presence.idle_after and its per-label overrides, when set
	maxReapInterval     = Duration(time.Minute)
	maxNodeIDBytes      = 253 // a DNS name
	maxTopicBytes       = 65535
)

// keyError is one problem with one key. Its message starts with the key's
// YAML path; Load appends where the value came from.
type keyError struct {
	key    string // YAML path, e.g. "mqtt.server_keepalive"
	msg    string // e.g. "must be between 1s and 65535s (got 500ms)"
	source string // e.g. "set by PRESENCED_MQTT_SERVER_KEEPALIVE"; empty when unknown
}

func (e *keyError) Error() string {
	if e.source == "" {
		return e.key + ": " + e.msg
	}
	return e.key + ": " + e.msg + " (" + e.source + ")"
}

func (e *keyError) Unwrap() error { return ErrInvalid }

// Validate checks every value and reports every problem found, each naming
// its key by YAML path, e.g.
// `mqtt.server_keepalive: must be between 1s and 65535s (got 500ms)`.
// The error wraps ErrInvalid. Validate does not apply defaults: call
// ApplyDefaults first (Load does).
func (c Config) Validate() error {
	return joinKeyErrors(c.validate())
}

func joinKeyErrors(errs []*keyError) error {
	if len(errs) == 0 {
		return nil
	}
	list := make([]error, len(errs))
	for i, e := range errs {
		list[i] = e
	}
	return errors.Join(list...)
}

// validate lists every problem with c, one section at a time; Validate and
// Load report them in this order.
func (c Config) validate() []*keyError {
	var v validator
	c.validateNodeID(&v)
	c.validateLog(&v)
	c.validateMQTT(&v)
	c.validateAdmin(&v)
	c.validateIdentity(&v)
	c.validatePresence(&v)
	c.validateAuth(&v)
	c.validateTLS(&v)
	c.validateRedis(&v)
	c.validateDrain(&v)
	c.validateSparkplug(&v)
	c.validateLifecycle(&v)
	c.validateWebhooks(&v)
	c.validateNotify(&v)
	c.validateCanary(&v)
	return v.errs
}

// validateNodeID checks node_id.
func (c Config) validateNodeID(v *validator) {
	v.check("node_id", validNodeID(c.NodeID))
}

// validateLog checks the log section.
func (c Config) validateLog(v *validator) {
	v.check("log.level", oneOf(c.Log.Level, "debug", "info", "warn", "error"))
	v.check("log.format", oneOf(c.Log.Format, "json", "console"))
}

// validateMQTT checks the mqtt section: the listeners, the keep-alives, the
// per-connection buffers, the broker's limits and the WebSocket origins.
func (c Config) validateMQTT(v *validator) {
	v.check("mqtt.addr", validAddr(c.MQTT.Addr))
	v.check("mqtt.ws_addr", validAddr(c.MQTT.WSAddr))
	v.check("mqtt.ws_addr", distinctAddr(c.MQTT.WSAddr, "mqtt.addr", c.MQTT.Addr))
	if p := durationBetween(c.MQTT.ServerKeepAlive, minServerKeepAlive, maxServerKeepAlive); p != "" {
		v.check("mqtt.server_keepalive", p)
	} else if c.MQTT.ServerKeepAlive%Duration(time.Second) != 0 {
		v.add("mqtt.server_keepalive", "must be a whole number of seconds (got %s)", c.MQTT.ServerKeepAlive)
	}
	v.check("mqtt.max_writes_pending", intBetween(c.MQTT.MaxWritesPending, minMaxWritesPending, maxMaxWritesPending))
	v.check("mqtt.read_buffer_size", intBetween(c.MQTT.ReadBufferSize, minBufferSize, maxBufferSize))
	v.check("mqtt.write_buffer_size", intBetween(c.MQTT.WriteBufferSize, minBufferSize, maxBufferSize))

	v.check("mqtt.max_packet_size", intBetween(c.MQTT.MaxPacketSize, 1024, 268435455))
	v.check("mqtt.max_connections", intBetween(c.MQTT.MaxConnections, 1, 10_000_000))
	v.check("mqtt.max_connections_per_address", intBetween(c.MQTT.MaxConnectionsPerAddress, 1, 10_000_000))
	for i, a := range c.MQTT.AddressLimitExempt {
		if _, err := ParsePrefix(a); err != nil {
			v.add("mqtt.address_limit_exempt", "item %d must be an IP address or CIDR prefix (got %q)", i, a)
		}
	}
	if p := durationBetween(c.MQTT.MaxKeepAlive, minServerKeepAlive, maxServerKeepAlive); p != "" {
		v.check("mqtt.max_keepalive", p)
	} else if c.MQTT.MaxKeepAlive%Duration(time.Second) != 0 {
		v.add("mqtt.max_keepalive", "must be a whole number of seconds (got %s)", c.MQTT.MaxKeepAlive)
	}
	v.check("mqtt.max_subscriptions", intBetween(c.MQTT.MaxSubscriptions, 1, 100_000))
	v.check("mqtt.max_topic_length", intBetween(c.MQTT.MaxTopicLength, 16, maxTopicBytes))
	v.check("mqtt.max_topic_levels", intBetween(c.MQTT.MaxTopicLevels, 4, 1000))
	if c.MQTT.MaxSessionExpiry < Duration(time.Second) || c.MQTT.MaxSessionExpiry > Duration(math.MaxUint32*time.Second) || c.MQTT.MaxSessionExpiry%Duration(time.Second) != 0 {
		v.add("mqtt.max_session_expiry", "must be whole seconds from 1s to 4294967295s (got %s)", c.MQTT.MaxSessionExpiry)
	}
	if c.MQTT.RetainedExpiry < Duration(time.Second) {
		v.add("mqtt.retained_expiry", "must be at least 1s (got %s)", c.MQTT.RetainedExpiry)
	}
	v.check("mqtt.max_topic_aliases", intBetween(c.MQTT.MaxTopicAliases, 1, 65535))
	if p := durationBetween(c.MQTT.MaxWillDelay, Duration(time.Second), Duration(24*time.Hour)); p != "" {
		v.check("mqtt.max_will_delay", p)
	} else if c.MQTT.MaxWillDelay%Duration(time.Second) != 0 {
		v.add("mqtt.max_will_delay", "must be a whole number of seconds (got %s)", c.MQTT.MaxWillDelay)
	}
	v.check("mqtt.max_delayed_wills", intBetween(c.MQTT.MaxDelayedWills, 1, 10_000_000))
	v.check("mqtt.max_persistent_sessions_per_user", intBetween(c.MQTT.MaxPersistentPerUser, 1, 100_000))
	v.check("mqtt.max_inflight_messages", intBetween(c.MQTT.MaxInflightMessages, 16, 65535))
	v.check("mqtt.max_inflight_bytes", intBetween(c.MQTT.MaxInflightBytes, 1024, 1<<30))
	v.check("mqtt.max_inflight_age", durationBetween(c.MQTT.MaxInflightAge, Duration(time.Second), Duration(24*time.Hour)))
	v.check("mqtt.max_retained", intBetween(c.MQTT.MaxRetained, 1, 100_000_000))
	v.check("mqtt.max_retained_bytes", intBetween(c.MQTT.MaxRetainedBytes, 1024, 1<<40))
	v.check("mqtt.max_retained_per_user", intBetween(c.MQTT.MaxRetainedPerUser, 1, max(c.MQTT.MaxRetained, 1)))
	v.check("mqtt.max_retained_bytes_per_user", intBetween(c.MQTT.MaxRetainedBytesPerUser, 1024, max(c.MQTT.MaxRetainedBytes, 1024)))
	for i, o := range c.MQTT.WSAllowedOrigins {
		if o == "" || strings.ContainsAny(o, " \t\n") {
			v.add("mqtt.ws_allowed_origins", "item %d must be an origin such as https://app.example.com (got %q)", i, o)
		}
	}
}

// validateAdmin checks the admin section: its listener must differ from the
// MQTT ones and, reachable beyond this machine, needs a token.
func (c Config) validateAdmin(v *validator) {
	v.check("admin.addr", validAddr(c.Admin.Addr))
	if c.Admin.UnreadyAfter != nil {
		v.check("admin.unready_after", durationBetween(*c.Admin.UnreadyAfter, 0, Duration(24*time.Hour)))
	}
	if c.Admin.Token != "" && c.Admin.TokenFile != "" {
		v.add("admin.token", "set admin.token or admin.token_file, not both")
	}
	adminOK := validAddr(c.Admin.Addr) == "" && distinctAddr(c.Admin.Addr, "mqtt.addr", c.MQTT.Addr) == "" &&
		distinctAddr(c.Admin.Addr, "mqtt.ws_addr", c.MQTT.WSAddr) == ""
	if adminOK && c.Admin.Addr != Off && !LoopbackAddr(c.Admin.Addr) && c.Admin.Token == "" && c.Admin.TokenFile == "" {
		v.add("admin.addr", "%q is reachable beyond this machine: set admin.token or admin.token_file, or listen on 127.0.0.1", c.Admin.Addr)
	}
	v.check("admin.addr", distinctAddr(c.Admin.Addr, "mqtt.addr", c.MQTT.Addr))
	v.check("admin.addr", distinctAddr(c.Admin.Addr, "mqtt.ws_addr", c.MQTT.WSAddr))
	for i, h := range c.Admin.AllowedHosts {
		if h == "" || strings.ContainsAny(h, " \t\n:/[]") {
			v.add("admin.allowed_hosts", "item %d must be a host name without a port, such as presenced.example.com, or * (got %q)", i, h)
		}
	}
}

// validateIdentity checks the identity section.
func (c Config) validateIdentity(v *validator) {
	v.check("identity.user_from", oneOf(c.Identity.UserFrom, UserFromUsername, UserFromClientID))
	v.check("identity.separator", validSeparator(c.Identity.Separator))
}

// validatePresence checks the presence section, with its takeover_battle and
// flap subsections and the per-device idle_after_devices.
func (c Config) validatePresence(v *validator) {
	v.check("presence.mode", oneOf(c.Presence.Mode, "on", "off"))
	v.check("presence.topic_prefix", validTopicName(c.Presence.TopicPrefix))
	v.check("presence.authoritative_devices", validDevices(c.Presence.AuthoritativeDevices))
	if c.Presence.SessionTTL < minSessionTTL {
		v.add("presence.session_ttl", "must be at least %s (got %s)", minSessionTTL, c.Presence.SessionTTL)
	}
	if c.Presence.RenewInterval <= 0 || c.Presence.RenewInterval >= c.Presence.SessionTTL/2 {
		v.add("presence.renew_interval", "must be more than 0 and less than half of presence.session_ttl (%s), so a session is renewed at least twice before it expires (got %s)",
			c.Presence.SessionTTL, c.Presence.RenewInterval)
	}
	v.check("presence.reap_interval", durationBetween(c.Presence.ReapInterval, minReapInterval, maxReapInterval))
	v.check("presence.visibility", oneOf(c.Presence.Visibility, VisibilityOpen, VisibilitySelf, VisibilityGroups))
	v.check("presence.group_batch", durationBetween(c.Presence.GroupBatch, Duration(10*time.Millisecond), Duration(10*time.Second)))
	v.check("presence.interest_linger", durationBetween(c.Presence.InterestLinger, Duration(time.Second), Duration(time.Hour)))
	v.check("presence.interest_max_lingering", intBetween(c.Presence.InterestMaxLingering, 100, 10_000_000))
	for i, u := range c.Presence.Observers {
		if err := presence.ValidUser(u); err != nil {
			v.add("presence.observers", "item %d must be a user name: %v", i, err)
		}
	}
	v.check("presence.max_sessions_per_user", intBetween(c.Presence.MaxSessionsPerUser, 1, 10_000))
	v.check("presence.set_rate", intBetween(c.Presence.SetRate, 1, 10_000))
	v.check("presence.set_burst", intBetween(c.Presence.SetBurst, 1, 100_000))
	if tb := c.Presence.TakeoverBattle; tb.Takeovers != TakeoversOff {
		v.check("presence.takeover_battle.takeovers", intBetween(tb.Takeovers, 2, 1000))
		v.check("presence.takeover_battle.window", durationBetween(tb.Window, Duration(time.Second), Duration(10*time.Minute)))
		v.check("presence.takeover_battle.backoff", durationBetween(tb.Backoff, Duration(100*time.Millisecond), Duration(10*time.Minute)))
		if tb.MaxBackoff < tb.Backoff || tb.MaxBackoff > Duration(time.Hour) {
			v.add("presence.takeover_battle.max_backoff", "must be between backoff (%s) and 1h (got %s)", tb.Backoff, tb.MaxBackoff)
		}
	}
	if c.Presence.OfflineRetention < Duration(time.Minute) {
		v.add("presence.offline_retention", "must be at least 1m (got %s)", c.Presence.OfflineRetention)
	}
	pace := c.Presence.Pacing()
	if w := c.Presence.GroupResumeWindow; w != nil {
		v.check("presence.group_resume_window", durationBetween(*w, 0, Duration(time.Hour)))
	}
	v.check("presence.group_resume_deltas", intBetween(c.Presence.GroupResumeDeltas, 1, 100000))
	v.check("presence.group_resume_bytes", intBetween(c.Presence.GroupResumeBytes, 1024, 64<<20))
	v.check("presence.offline_grace", durationBetween(Duration(pace.Grace), 0, Duration(5*time.Minute)))
	v.check("presence.disconnect_debounce", durationBetween(Duration(pace.Debounce), 0, Duration(10*time.Second)))
	v.check("presence.will_delay_max", durationBetween(c.Presence.WillDelayMax, Duration(time.Second), Duration(time.Hour)))
	v.check("presence.min_dwell", durationBetween(Duration(pace.Dwell), 0, Duration(time.Minute)))
	v.check("presence.flap.window", durationBetween(c.Presence.Flap.Window, Duration(time.Second), Duration(time.Hour)))
	if pace.FlapEnds != 0 {
		v.check("presence.flap.ends", intBetween(pace.FlapEnds, 2, 1000))
	}
	v.check("presence.flap.grace", durationBetween(c.Presence.Flap.Grace, Duration(pace.Grace), Duration(time.Hour)))
	v.check("presence.publish_rate", intBetween(c.Presence.PublishRate, 10, 1_000_000))
	v.check("presence.publish_burst", intBetween(c.Presence.PublishBurst, 1, 1_000_000))
	if d := c.Presence.IdleAfter; d != 0 && d < minIdleAfter {
		v.add("presence.idle_after", "must be 0 (off) or at least %s (got %s)", minIdleAfter, d)
	}
	for _, label := range slices.Sorted(maps.Keys(c.Presence.IdleAfterDevices)) {
		d := c.Presence.IdleAfterDevices[label]
		switch {
		case presence.ValidDevice(label) != nil:
			v.add("presence.idle_after_devices", "%q can never be a device label: %v", label, presence.ValidDevice(label))
		case d != 0 && d < minIdleAfter:
			v.add("presence.idle_after_devices", "%s must be 0 (never) or at least %s (got %s)", label, minIdleAfter, d)
		}
	}
	if d := c.Presence.ClockInterval; d != nil && *d != 0 {
		v.check("presence.clock_interval", durationBetween(*d, Duration(time.Second), Duration(time.Hour)))
	}
	c.validateDormant(v)
}

// validateDormant checks presence.dormant_devices and dormant_margin.
func (c Config) validateDormant(v *validator) {
	for _, label := range slices.Sorted(maps.Keys(c.Presence.DormantDevices)) {
		d := c.Presence.DormantDevices[label]
		switch {
		case presence.ValidDevice(label) != nil:
			v.add("presence.dormant_devices", "%q can never be a device label: %v", label, presence.ValidDevice(label))
		case d.D() < presence.MinExpect || d.D() > presence.MaxExpect:
			v.add("presence.dormant_devices", "%s must be between %s and %s (got %s)", label, Duration(presence.MinExpect), Duration(presence.MaxExpect), d)
		}
	}
	if m := c.Presence.DormantMargin; m != 0 {
		v.check("presence.dormant_margin", durationBetween(m, Duration(time.Second), Duration(24*time.Hour)))
	}
}

// validateAuth checks the auth section; auth.cert_user_from needs
// tls.client_ca_file.
func (c Config) validateAuth(v *validator) {
	if p := oneOf(c.Auth.CertUserFrom, "", "cn", "san"); p != "" {
		v.add("auth.cert_user_from", "must be empty, cn or san (got %q)", c.Auth.CertUserFrom)
	} else if c.Auth.CertUserFrom != "" && c.TLS.ClientCAFile == "" {
		v.add("auth.cert_user_from", "needs tls.client_ca_file: only a verified client certificate can name a user")
	}
	pw := c.Auth.Passwords
	v.check("auth.passwords.failure_burst", intBetween(pw.FailureBurst, 1, 10000))
	v.check("auth.passwords.failure_interval", durationBetween(pw.FailureInterval, Duration(10*time.Millisecond), Duration(time.Hour)))
	v.check("auth.passwords.addresses", intBetween(pw.Addresses, 16, 10000000))
	v.check("auth.passwords.concurrency", intBetween(pw.Concurrency, 0, 1024))
	v.check("auth.passwords.queue_wait", durationBetween(pw.QueueWait, Duration(time.Millisecond), Duration(time.Minute)))
	if pw.CacheSize != -1 {
		v.check("auth.passwords.cache_size", intBetween(pw.CacheSize, 1, 10000000))
	}
	if c.Auth.JWT.Leeway < 0 || c.Auth.JWT.Leeway > Duration(10*time.Minute) {
		v.add("auth.jwt.leeway", "must be between 0s and 10m (got %s)", c.Auth.JWT.Leeway)
	}
	if c.Auth.ACLFile != "" && !c.AuthEnabled() {
		v.add("auth.acl_file", "needs an authentication method (auth.password_file, auth.jwt, auth.cert_user_from): without one every client is a service account")
	}
	if m := c.Auth.JWT.MaxLifetime; m != 0 && (m < Duration(time.Minute) || m > Duration(8760*time.Hour)) {
		v.add("auth.jwt.max_lifetime", "must be 0 (no maximum) or between 1m and 8760h (got %s)", m)
	}
	for i, m := range c.Auth.ObserverMethods {
		if oneOf(m, "password", "jwt", "certificate") != "" {
			v.add("auth.observer_methods", "item %d must be password, jwt or certificate (got %q)", i, m)
		}
	}
}

// validateTLS checks the tls section: the certificate and key go together,
// client certificates need them, and requiring one needs a client CA.
func (c Config) validateTLS(v *validator) {
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		v.add("tls.cert_file", "tls.cert_file and tls.key_file go together")
	}
	if (c.TLS.ClientCAFile != "" || c.TLS.RequireClientCert) && c.TLS.CertFile == "" {
		v.add("tls.client_ca_file", "client certificates need TLS: set tls.cert_file and tls.key_file")
	}
	if c.TLS.RequireClientCert && c.TLS.ClientCAFile == "" {
		v.add("tls.require_client_cert", "needs tls.client_ca_file")
	}
}

// validateRedis checks the redis section: the addresses and topology, the
// key prefix, the timeouts, the pool and the node and retention durations.
func (c Config) validateRedis(v *validator) {
	for _, a := range c.Redis.Addrs {
		if p := validAddr(a); p != "" || a == Off {
			v.add("redis.addrs", "must be host:port addresses (got %q)", a)
		}
	}
	if c.Redis.Cluster && len(c.Redis.Addrs) == 0 {
		v.add("redis.cluster", "needs redis.addrs")
	}
	if !c.Redis.Cluster && c.Redis.SentinelMaster == "" && len(c.Redis.Addrs) > 1 {
		v.add("redis.addrs", "more than one address needs redis.cluster: true or redis.sentinel_master (got %d)", len(c.Redis.Addrs))
	}
	if c.Redis.SentinelMaster != "" && (c.Redis.Cluster || len(c.Redis.Addrs) == 0) {
		v.add("redis.sentinel_master", "needs redis.addrs (the Sentinels) and no redis.cluster")
	}
	if c.Redis.DB < 0 || c.Redis.DB > 15 || (c.Redis.Cluster && c.Redis.DB != 0) {
		v.add("redis.db", "must be 0 to 15, and 0 with a cluster (got %d)", c.Redis.DB)
	}
	if strings.ContainsAny(c.Redis.KeyPrefix, "{}") || len(c.Redis.KeyPrefix) > 64 {
		v.add("redis.key_prefix", "must be at most 64 bytes without { or } (got %q)", c.Redis.KeyPrefix)
	}
	v.check("redis.dial_timeout", durationBetween(c.Redis.DialTimeout, Duration(10*time.Millisecond), Duration(time.Minute)))
	v.check("redis.read_timeout", durationBetween(c.Redis.ReadTimeout, Duration(10*time.Millisecond), Duration(time.Minute)))
	v.check("redis.write_timeout", durationBetween(c.Redis.WriteTimeout, Duration(10*time.Millisecond), Duration(time.Minute)))
	v.check("redis.pool_size", intBetween(c.Redis.PoolSize, 1, 10000))
	v.check("redis.node_ttl", durationBetween(c.Redis.NodeTTL, Duration(time.Second), Duration(time.Hour)))
	if c.Redis.SweepInterval <= 0 || c.Redis.SweepInterval > c.Redis.NodeTTL {
		v.add("redis.sweep_interval", "must be more than 0 and at most redis.node_ttl (%s) (got %s)", c.Redis.NodeTTL, c.Redis.SweepInterval)
	}
	if t := c.Redis.TLS; !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify) {
		v.add("redis.tls.enabled", "must be true when another redis.tls key is set")
	} else if (t.CertFile == "") != (t.KeyFile == "") {
		v.add("redis.tls.cert_file", "and redis.tls.key_file go together")
	}
	if c.Redis.Retention < Duration(time.Minute) {
		v.add("redis.retention", "must be at least 1m (got %s)", c.Redis.Retention)
	}
}

// validateDrain checks the drain section.
func (c Config) validateDrain(v *validator) {
	v.check("drain.rate", intBetween(c.Drain.Rate, 1, 1_000_000))
	v.check("drain.timeout", durationBetween(c.Drain.Timeout, Duration(time.Second), Duration(time.Hour)))
	v.check("drain.server_reference", validServerReference(c.Drain.ServerReference))
}

// validateSparkplug checks the sparkplug section.
func (c Config) validateSparkplug(v *validator) {
	v.check("sparkplug.max_edge_nodes", intBetween(c.Sparkplug.MaxEdgeNodes, 1, 10_000_000))
	v.check("sparkplug.forget_after", durationBetween(c.Sparkplug.ForgetAfter, Duration(time.Minute), Duration(720*time.Hour)))
}

// validateLifecycle checks the lifecycle section.
func (c Config) validateLifecycle(v *validator) {
	l := c.Lifecycle
	v.check("lifecycle.queue_depth", intBetween(l.QueueDepth, 16, 1<<20))
	outs := []struct {
		key string
		o   LifecycleOutput
	}{{"lifecycle.aws", l.AWS}, {"lifecycle.emqx", l.EMQX}}
	for _, o := range outs {
		if o.o.Mode != LifecycleRaw && o.o.Mode != LifecycleShown {
			v.add(o.key+".mode", "%q: raw or shown", o.o.Mode)
		}
		p := o.o.Prefix
		switch {
		case p == "" || strings.ContainsAny(p, "+#") || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//"):
			v.add(o.key+".prefix", "%q: a topic name without wildcards, and without an empty level", p)
		case o.o.Enabled && (p == c.Presence.TopicPrefix || strings.HasPrefix(p, c.Presence.TopicPrefix+"/") || strings.HasPrefix(c.Presence.TopicPrefix, p+"/")):
			v.add(o.key+".prefix", "%q overlaps presence.topic_prefix %q", p, c.Presence.TopicPrefix)
		}
	}
	if l.AWS.Enabled && l.EMQX.Enabled {
		a, e := l.AWS.Prefix, l.EMQX.Prefix
		if a == e || strings.HasPrefix(a, e+"/") || strings.HasPrefix(e, a+"/") {
			v.add("lifecycle.emqx.prefix", "%q overlaps lifecycle.aws.prefix %q", e, a)
		}
	}
}

// validateNotify checks the notify section.
func (c Config) validateNotify(v *validator) {
	v.check("notify.max_pending_per_user", intBetween(c.Notify.MaxPendingPerUser, 1, 10_000))
	v.check("notify.max_pending", intBetween(c.Notify.MaxPending, 1, 10_000_000))
	v.check("notify.max_payload", intBetween(c.Notify.MaxPayload, 1, maxNotifyPayload))
	v.check("notify.queue", intBetween(c.Notify.Queue, 16, 1_000_000))
}

type validator struct{ errs []*keyError }

func (v *validator) add(key, format string, args ...any) {
	v.errs = append(v.errs, &keyError{key: key, msg: fmt.Sprintf(format, args...)})
}

// check records problem under key unless it is empty.
func (v *validator) check(key, problem string) {
	if problem != "" {
		v.errs = append(v.errs, &keyError{key: key, msg: problem})
	}
}

// The helpers below return "" for a good value, or what is wrong with it.

func oneOf(s string, allowed ...string) string {
	for _, a := range allowed {
		if s == a {
			return ""
		}
	}
	return fmt.Sprintf("must be one of %s (got %q)", strings.Join(allowed, ", "), s)
}

func intBetween(n, lo, hi int) string {
	if n < lo || n > hi {
		return fmt.Sprintf("must be between %d and %d (got %d)", lo, hi, n)
	}
	return ""
}

func durationBetween(d, lo, hi Duration) string {
	if d < lo || d > hi {
		return fmt.Sprintf("must be between %s and %s (got %s)", shortDuration(lo), shortDuration(hi), d)
	}
	return ""
}

// shortDuration writes limits the way people type them: "1m", "65535s",
// "100ms" (time.Duration would say "1m0s" and "18h12m15s").
func shortDuration(d Duration) string {
	switch {
	case d > 0 && d < Duration(time.Hour) && d%Duration(time.Minute) == 0:
		return strconv.FormatInt(int64(d/Duration(time.Minute)), 10) + "m"
	case d > 0 && d%Duration(time.Second) == 0:
		return strconv.FormatInt(int64(d/Duration(time.Second)), 10) + "s"
	}
	return d.String()
}

// ParsePrefix reads a CIDR prefix, or one IP address as the prefix of
// just that address.
func ParsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// LoopbackAddr reports whether a host:port address is on loopback only.
func LoopbackAddr(s string) bool {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validAddr accepts "off" or host:port with a numeric port (0 picks a free
// port, which tests use).
func validAddr(s string) string {
	if s == Off {
		return ""
	}
	bad := fmt.Sprintf("must be host:port, :port or %q (got %q)", Off, s)
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return bad
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return bad
	}
	return ""
}

// distinctAddr reports two enabled listeners configured on the same address.
// Port 0 is exempt: each listener gets its own free port.
func distinctAddr(s, otherKey, other string) string {
	if s == Off || s != other {
		return ""
	}
	if _, port, err := net.SplitHostPort(s); err != nil || port == "0" {
		return ""
	}
	return fmt.Sprintf("must differ from %s (both are %q)", otherKey, s)
}

func validNodeID(s string) string {
	if s == "" || len(s) > maxNodeIDBytes {
		return fmt.Sprintf("must be 1 to %d characters (got %q)", maxNodeIDBytes, s)
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' || r == ':'
		if !ok {
			return fmt.Sprintf("may hold only letters, digits, '.', '-', '_' and ':' (got %q)", s)
		}
	}
	return ""
}

func validSeparator(s string) string {
	switch {
	case s == "" || len(s) > maxSeparatorBytes || !utf8.ValidString(s):
		return fmt.Sprintf("must be 1 character to %d bytes of UTF-8 (got %q)", maxSeparatorBytes, s)
	case strings.ContainsAny(s, "+#"):
		return fmt.Sprintf("must not contain the MQTT wildcards + or # (got %q)", s)
	case strings.ContainsRune(s, 0):
		return fmt.Sprintf("must not contain NUL (got %q)", s)
	}
	return ""
}

// validTopicName checks an MQTT topic name that presenced publishes under:
// non-empty, no wildcards, not a $-topic, no empty level, no trailing /.
func validTopicName(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > maxTopicBytes || !utf8.ValidString(s):
		return fmt.Sprintf("must be at most %d bytes of UTF-8", maxTopicBytes)
	case strings.ContainsAny(s, "+#"):
		return fmt.Sprintf("must not contain the MQTT wildcards + or # (got %q)", s)
	case strings.ContainsRune(s, 0):
		return fmt.Sprintf("must not contain NUL (got %q)", s)
	case strings.HasPrefix(s, "$"):
		return fmt.Sprintf("must not start with $, which marks broker topics (got %q)", s)
	case strings.HasSuffix(s, "/"):
		return fmt.Sprintf("must not end with / (got %q)", s)
	case strings.HasPrefix(s, "/") || strings.Contains(s, "//"):
		return fmt.Sprintf("must not have an empty topic level (got %q)", s)
	}
	return ""
}

// validServerReference accepts an MQTT 5 Server Reference: empty, or up to
// maxServerReference bytes of UTF-8 without control characters (the
// specification allows several references separated by spaces).
func validServerReference(s string) string {
	if len(s) > maxServerReference || !utf8.ValidString(s) {
		return fmt.Sprintf("must be at most %d bytes of UTF-8 (got %d bytes)", maxServerReference, len(s))
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Sprintf("must not contain control characters (got %q)", s)
		}
	}
	return ""
}

func validDevices(devices []string) string {
	seen := make(map[string]bool, len(devices))
	for i, d := range devices {
		switch {
		case d == "":
			return fmt.Sprintf("item %d must not be empty", i)
		case strings.ContainsAny(d, "+#") || strings.ContainsRune(d, 0) || !utf8.ValidString(d):
			return fmt.Sprintf("item %d must be UTF-8 without +, # or NUL (got %q)", i, d)
		case presence.ValidDevice(d) != nil:
			return fmt.Sprintf("item %d can never be a device label: %v", i, presence.ValidDevice(d))
		case seen[d]:
			return fmt.Sprintf("item %d repeats %q", i, d)
		}
		seen[d] = true
	}
	return ""
}

// CanaryConfig configures the canary (package canary, docs/slo.md): a few
// synthetic users that each node connects to its own listener and ends
// every way, and an observer that measures what the other nodes showed.
type CanaryConfig struct {
	Enabled   bool     `yaml:"enabled"`   // default false
	Users     int      `yaml:"users"`     // synthetic users per node (connections: users + 1); default 3; 1..8
	Interval  Duration `yaml:"interval"`  // each user's cycle: connect, end a third in, connect again; default 90s; at least 3 × the bound, at most 1h; fewer than presence.flap.ends ends per presence.flap.window
	KeepAlive Duration `yaml:"keepalive"` // the synthetic users' keep-alive; default 5s; whole seconds, 1s..mqtt.max_keepalive
	Ends      []string `yaml:"ends"`      // the end kinds, rotated; default [clean, rst, silence, drain]
	Window    Duration `yaml:"window"`    // the window of GET /api/v1/slo; default 1h; 1m..24h
}

// CanaryBound is the detection bound the canary holds an end to: 1.5 ×
// canary.keepalive + presence.offline_grace + 1 s (slo.Bound).
func (c Config) CanaryBound() time.Duration {
	var grace time.Duration
	if c.Presence.OfflineGrace != nil {
		grace = c.Presence.OfflineGrace.D()
	}
	return c.Canary.KeepAlive.D()*3/2 + grace + time.Second
}

// validateCanary checks the canary section.
func (c Config) validateCanary(v *validator) {
	k := c.Canary
	v.check("canary.users", intBetween(k.Users, 1, 8))
	v.check("canary.keepalive", durationBetween(k.KeepAlive, Duration(time.Second), maxServerKeepAlive))
	if k.KeepAlive%Duration(time.Second) != 0 {
		v.add("canary.keepalive", "must be a whole number of seconds (got %s)", k.KeepAlive)
	}
	v.check("canary.interval", durationBetween(k.Interval, Duration(time.Second), Duration(time.Hour)))
	v.check("canary.window", durationBetween(k.Window, Duration(time.Minute), Duration(24*time.Hour)))
	if len(k.Ends) == 0 {
		v.add("canary.ends", "must name at least one end kind")
	}
	for _, e := range k.Ends {
		if p := oneOf(e, "clean", "rst", "silence", "drain"); p != "" {
			v.add("canary.ends", "%s", p)
		}
	}
	if !k.Enabled {
		return
	}
	// What depends on other sections is checked only when the canary runs.
	if k.KeepAlive > c.MQTT.MaxKeepAlive {
		v.add("canary.keepalive", "must be at most mqtt.max_keepalive (%s; got %s)", c.MQTT.MaxKeepAlive, k.KeepAlive)
	}
	if bound := Duration(c.CanaryBound()); k.Interval < 3*bound {
		v.add("canary.interval", "must be at least 3 × the bound, 1.5 × canary.keepalive + presence.offline_grace + 1s = %s (got %s)",
			shortDuration(bound), k.Interval)
	}
	// A synthetic user that flaps is held for presence.flap.grace: its
	// ends would be late by design.
	if n := c.Presence.Flap.Ends; n != nil && *n >= 2 && k.Interval*Duration(*n-1) <= c.Presence.Flap.Window {
		v.add("canary.interval", "must be more than presence.flap.window / (presence.flap.ends - 1) = %s, or the synthetic users flap (got %s)",
			shortDuration(c.Presence.Flap.Window/Duration(*n-1)), k.Interval)
	}
	if c.MQTT.Addr == Off {
		v.add("canary.enabled", "needs the TCP listener (mqtt.addr is off): the canary connects to it over loopback")
	}
	if c.TLS.RequireClientCert {
		v.add("canary.enabled", "cannot connect with tls.require_client_cert: the canary has no client certificate")
	}
}
