package configs

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// writeFile writes content to a fresh file and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mustContain fails unless err wraps sentinel and its message holds every part.
func mustContain(t *testing.T, err, sentinel error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one wrapping %v", sentinel)
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("error %q does not wrap %v", err, sentinel)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := Defaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("Defaults().Validate() = %v", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "presenced"
	}
	want := Config{
		NodeID: host,
		Log:    LogConfig{Level: "info", Format: "json"},
		MQTT: MQTTConfig{
			Addr: ":1883", WSAddr: ":1882",
			ServerKeepAlive:  Duration(60 * time.Second),
			MaxWritesPending: 256, ReadBufferSize: 1024, WriteBufferSize: 1024,
			MaxPacketSize: 1 << 20, MaxConnections: 50000, MaxConnectionsPerAddress: 1000,
			AddressLimitExempt: []string{"127.0.0.0/8", "::1/128"},
			MaxKeepAlive:       Duration(600 * time.Second), MaxSubscriptions: 100, MaxTopicLength: 256,
			MaxTopicLevels: 16, RetainedExpiry: Duration(24 * time.Hour), WSAllowedOrigins: []string{},
			MaxSessionExpiry: Duration(2 * time.Hour),
			MaxTopicAliases:  16, MaxWillDelay: Duration(5 * time.Minute), MaxDelayedWills: 10000, MaxPersistentPerUser: 32, MaxInflightMessages: 1000, MaxInflightBytes: 8 << 20,
			MaxInflightAge: Duration(5 * time.Minute), MaxRetained: 100000, MaxRetainedBytes: 256 << 20, MaxRetainedPerUser: 1000,
			MaxRetainedBytesPerUser: 16 << 20,
		},
		Admin:    AdminConfig{Addr: "127.0.0.1:8080", AllowedHosts: []string{}, UnreadyAfter: ptr(Duration(30 * time.Second))},
		Identity: IdentityConfig{UserFrom: "username", Separator: "/"},
		Presence: PresenceConfig{
			Mode:                 "on",
			TopicPrefix:          "presence",
			AuthoritativeDevices: []string{"desktop"},
			SessionTTL:           Duration(3 * time.Hour),
			RenewInterval:        Duration(time.Hour),
			ReapInterval:         Duration(time.Second),
			Visibility:           "open",
			GroupBatch:           Duration(250 * time.Millisecond),
			InterestLinger:       Duration(time.Minute),
			InterestMaxLingering: 100_000,
			Observers:            []string{},
			MaxSessionsPerUser:   16,
			SetRate:              5,
			SetBurst:             10,
			OfflineRetention:     Duration(720 * time.Hour),
			OfflineGrace:         ptr(Duration(5 * time.Second)),
			DisconnectDebounce:   ptr(Duration(time.Second)),
			WillDelayMax:         Duration(time.Minute),
			MinDwell:             ptr(Duration(time.Second)),
			Flap:                 FlapConfig{Window: Duration(2 * time.Minute), Ends: ptr(3), Grace: Duration(30 * time.Second)},
			PublishRate:          10_000,
			PublishBurst:         2_000,
			IdleAfterDevices:     DeviceDurations{},
			DormantDevices:       DeviceDurations{},
			TakeoverBattle: TakeoverBattleConfig{Takeovers: 5, Window: Duration(30 * time.Second),
				Backoff: Duration(5 * time.Second), MaxBackoff: Duration(2 * time.Minute)},
			ClockInterval:     ptr(Duration(5 * time.Second)),
			GroupResumeWindow: ptr(Duration(5 * time.Minute)), GroupResumeDeltas: 1200, GroupResumeBytes: 256 << 10,
		},
		Redis: RedisConfig{
			KeyPrefix: "presenced:", DialTimeout: Duration(2 * time.Second),
			ReadTimeout: Duration(time.Second), WriteTimeout: Duration(time.Second),
			PoolSize: 32, NodeTTL: Duration(10 * time.Second), SweepInterval: Duration(2 * time.Second),
			Retention: Duration(720 * time.Hour),
		},
		Auth: AuthConfig{JWT: JWTConfig{UserClaim: "sub", GroupsClaim: "groups", Leeway: Duration(30 * time.Second)}, ObserverMethods: []string{"password"},
			Passwords: PasswordsConfig{FailureBurst: 10, FailureInterval: Duration(6 * time.Second), Addresses: 65536, QueueWait: Duration(2 * time.Second), CacheSize: 65536}},
		Drain:     DrainConfig{Rate: 500, Timeout: Duration(20 * time.Second)},
		Sparkplug: SparkplugConfig{MaxEdgeNodes: 10000, ForgetAfter: Duration(time.Hour)},
		Lifecycle: LifecycleConfig{AWS: LifecycleOutput{Mode: "raw", Prefix: "$aws/events/presence"},
			EMQX: LifecycleOutput{Mode: "raw", Prefix: "$SYS/brokers"}, QueueDepth: 8192},
		Webhooks: WebhooksConfig{Replay: 10000},
		Notify:   NotifyConfig{MaxPendingPerUser: 16, MaxPending: 10000, MaxPayload: 4096, Queue: 4096},
		Canary: CanaryConfig{Users: 3, Interval: Duration(90 * time.Second), KeepAlive: Duration(5 * time.Second),
			Ends: []string{"clean", "rst", "silence", "drain"}, Window: Duration(time.Hour)},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Defaults() =\n%+v\nwant\n%+v", c, want)
	}

	// Each call gets its own slice.
	c.Presence.AuthoritativeDevices[0] = "changed"
	if got := Defaults().Presence.AuthoritativeDevices[0]; got != "desktop" {
		t.Errorf("Defaults shares its slice: got %q", got)
	}
}

func TestApplyDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    Config
		check func(c Config) bool
	}{
		{"set values are kept", Config{NodeID: "n1", MQTT: MQTTConfig{Addr: "off", MaxWritesPending: 128}},
			func(c Config) bool { return c.NodeID == "n1" && c.MQTT.Addr == "off" && c.MQTT.MaxWritesPending == 128 }},
		{"nil devices get the default", Config{},
			func(c Config) bool { return reflect.DeepEqual(c.Presence.AuthoritativeDevices, []string{"desktop"}) }},
		{"explicit empty devices stay empty", Config{Presence: PresenceConfig{AuthoritativeDevices: []string{}}},
			func(c Config) bool {
				return c.Presence.AuthoritativeDevices != nil && len(c.Presence.AuthoritativeDevices) == 0
			}},
		{"renew interval follows session ttl", Config{Presence: PresenceConfig{SessionTTL: Duration(30 * time.Second)}},
			func(c Config) bool { return c.Presence.RenewInterval == Duration(10*time.Second) }},
		{"set renew interval is kept", Config{Presence: PresenceConfig{RenewInterval: Duration(7 * time.Second)}},
			func(c Config) bool { return c.Presence.RenewInterval == Duration(7*time.Second) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := tt.in
			c.ApplyDefaults()
			if !tt.check(c) {
				t.Errorf("after ApplyDefaults: %+v", c)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	t.Parallel()
	sec := func(n float64) Duration { return Duration(n * float64(time.Second)) }
	tests := []struct {
		name   string
		mutate func(c *Config)
		key    string // the error must start with key + ": "
		detail string // and contain this
	}{
		{"empty node id", func(c *Config) { c.NodeID = "" }, "node_id", `got ""`},
		{"node id with slash", func(c *Config) { c.NodeID = "a/b" }, "node_id", "only letters"},
		{"node id with brace", func(c *Config) { c.NodeID = "{a}" }, "node_id", "only letters"},
		{"node id too long", func(c *Config) { c.NodeID = strings.Repeat("n", 254) }, "node_id", "1 to 253"},
		{"log level", func(c *Config) { c.Log.Level = "verbose" }, "log.level", `debug, info, warn, error (got "verbose")`},
		{"log level is case sensitive", func(c *Config) { c.Log.Level = "INFO" }, "log.level", `got "INFO"`},
		{"log format", func(c *Config) { c.Log.Format = "text" }, "log.format", `json, console (got "text")`},
		{"mqtt addr without port", func(c *Config) { c.MQTT.Addr = "1883" }, "mqtt.addr", `got "1883"`},
		{"mqtt addr named port", func(c *Config) { c.MQTT.Addr = ":mqtt" }, "mqtt.addr", `got ":mqtt"`},
		{"mqtt addr port too big", func(c *Config) { c.MQTT.Addr = ":65536" }, "mqtt.addr", `got ":65536"`},
		{"mqtt addr Off in capitals", func(c *Config) { c.MQTT.Addr = "OFF" }, "mqtt.addr", `or "off"`},
		{"ws addr", func(c *Config) { c.MQTT.WSAddr = "localhost" }, "mqtt.ws_addr", `got "localhost"`},
		{"ws addr same as tcp", func(c *Config) { c.MQTT.WSAddr = ":1883" }, "mqtt.ws_addr", "must differ from mqtt.addr"},
		{"admin addr", func(c *Config) { c.Admin.Addr = "127.0.0.1" }, "admin.addr", `got "127.0.0.1"`},
		{"admin addr same as ws", func(c *Config) { c.Admin.Addr = ":1882" }, "admin.addr", "must differ from mqtt.ws_addr"},
		{"admin beyond loopback without a token", func(c *Config) { c.Admin.Addr = "0.0.0.0:8080" }, "admin.addr", "set admin.token"},
		{"drain rate negative", func(c *Config) { c.Drain.Rate = -1 }, "drain.rate", "between 1 and 1000000 (got -1)"},
		{"drain rate too high", func(c *Config) { c.Drain.Rate = 1_000_001 }, "drain.rate", "got 1000001"},
		{"drain timeout too short", func(c *Config) { c.Drain.Timeout = sec(0.5) }, "drain.timeout", "between 1s and 3600s (got 500ms)"},
		{"drain timeout too long", func(c *Config) { c.Drain.Timeout = sec(3601) }, "drain.timeout", "between 1s and 3600s"},
		{"sparkplug edge nodes negative", func(c *Config) { c.Sparkplug.MaxEdgeNodes = -1 }, "sparkplug.max_edge_nodes", "between 1 and 10000000 (got -1)"},
		{"sparkplug forget after too short", func(c *Config) { c.Sparkplug.ForgetAfter = sec(30) }, "sparkplug.forget_after", "got 30s"},
		{"sparkplug forget after too long", func(c *Config) { c.Sparkplug.ForgetAfter = sec(721 * 3600) }, "sparkplug.forget_after", "between 1m and"},
		{"server reference with a newline", func(c *Config) { c.Drain.ServerReference = "a:1\nb:2" }, "drain.server_reference", "control characters"},
		{"server reference too long", func(c *Config) { c.Drain.ServerReference = strings.Repeat("a", 1025) }, "drain.server_reference", "at most 1024 bytes"},
		{"server reference not UTF-8", func(c *Config) { c.Drain.ServerReference = "\xff" }, "drain.server_reference", "UTF-8"},
		{"admin token twice", func(c *Config) { c.Admin.Token, c.Admin.TokenFile = "t", "/f" }, "admin.token", "not both"},
		{"max packet size", func(c *Config) { c.MQTT.MaxPacketSize = 100 }, "mqtt.max_packet_size", "got 100"},
		{"max keepalive not whole seconds", func(c *Config) { c.MQTT.MaxKeepAlive = sec(2.5) }, "mqtt.max_keepalive", "whole number"},
		{"ws origin empty", func(c *Config) { c.MQTT.WSAllowedOrigins = []string{""} }, "mqtt.ws_allowed_origins", "item 0"},
		{"visibility", func(c *Config) { c.Presence.Visibility = "friends" }, "presence.visibility", `got "friends"`},
		{"group batch", func(c *Config) { c.Presence.GroupBatch = Duration(time.Millisecond) }, "presence.group_batch", "got 1ms"},
		{"idle after below 1s", func(c *Config) { c.Presence.IdleAfter = sec(0.5) }, "presence.idle_after", "0 (off) or at least 1s (got 500ms)"},
		{"idle after negative", func(c *Config) { c.Presence.IdleAfter = sec(-1) }, "presence.idle_after", "got -1s"},
		{"clock interval below 1s", func(c *Config) { v := sec(0.5); c.Presence.ClockInterval = &v }, "presence.clock_interval", "between 1s and 3600s (got 500ms)"},
		{"clock interval above 1h", func(c *Config) { v := sec(3601); c.Presence.ClockInterval = &v }, "presence.clock_interval", "got 1h0m1s"},
		{"clock interval negative", func(c *Config) { v := sec(-1); c.Presence.ClockInterval = &v }, "presence.clock_interval", "got -1s"},
		{"idle after of a label below 1s", func(c *Config) { c.Presence.IdleAfterDevices = DeviceDurations{"desktop": sec(0.1)} }, "presence.idle_after_devices", "desktop must be 0 (never) or at least 1s (got 100ms)"},
		{"idle after of a label negative", func(c *Config) { c.Presence.IdleAfterDevices = DeviceDurations{"sensor": sec(-5)} }, "presence.idle_after_devices", "got -5s"},
		{"idle after of a bad label", func(c *Config) { c.Presence.IdleAfterDevices = DeviceDurations{"ph​one": sec(60)} }, "presence.idle_after_devices", "can never be a device label"},
		{"dormant period below 1s", func(c *Config) { c.Presence.DormantDevices = DeviceDurations{"sensor": sec(0.5)} }, "presence.dormant_devices", "sensor must be between 1s and 168h0m0s (got 500ms)"},
		{"dormant period above 7 days", func(c *Config) { c.Presence.DormantDevices = DeviceDurations{"sensor": sec(169 * 3600)} }, "presence.dormant_devices", "got 169h0m0s"},
		{"dormant bad label", func(c *Config) { c.Presence.DormantDevices = DeviceDurations{"ph\u200bone": sec(60)} }, "presence.dormant_devices", "can never be a device label"},
		{"dormant margin below 1s", func(c *Config) { c.Presence.DormantMargin = sec(0.5) }, "presence.dormant_margin", "got 500ms"},
		{"observer with a slash", func(c *Config) { c.Presence.Observers = []string{"a/b"} }, "presence.observers", "item 0"},
		{"observer in two scripts", func(c *Config) { c.Presence.Observers = []string{"ops", "\u0430lice"} }, "presence.observers", "item 1"},
		{"sessions per user", func(c *Config) { c.Presence.MaxSessionsPerUser = -1 }, "presence.max_sessions_per_user", "got -1"},
		{"one takeover is no battle", func(c *Config) { c.Presence.TakeoverBattle.Takeovers = 1 }, "presence.takeover_battle.takeovers", "got 1"},
		{"battle takeovers -2", func(c *Config) { c.Presence.TakeoverBattle.Takeovers = -2 }, "presence.takeover_battle.takeovers", "got -2"},
		{"battle window", func(c *Config) { c.Presence.TakeoverBattle.Window = sec(0.5) }, "presence.takeover_battle.window", "got 500ms"},
		{"battle backoff", func(c *Config) { c.Presence.TakeoverBattle.Backoff = sec(0.01) }, "presence.takeover_battle.backoff", "got 10ms"},
		{"battle max backoff below backoff", func(c *Config) { c.Presence.TakeoverBattle.MaxBackoff = sec(1) }, "presence.takeover_battle.max_backoff", "backoff (5s)"},
		{"battle max backoff", func(c *Config) { c.Presence.TakeoverBattle.MaxBackoff = sec(7200) }, "presence.takeover_battle.max_backoff", "got 2h"},
		{"cert user without a client CA", func(c *Config) { c.Auth.CertUserFrom = "cn" }, "auth.cert_user_from", "tls.client_ca_file"},
		{"cert user from", func(c *Config) { c.Auth.CertUserFrom = "email" }, "auth.cert_user_from", `got "email"`},
		{"tls cert without key", func(c *Config) { c.TLS.CertFile = "/c.pem" }, "tls.cert_file", "go together"},
		{"client CA without TLS", func(c *Config) { c.TLS.ClientCAFile = "/ca.pem" }, "tls.client_ca_file", "need TLS"},
		{"keepalive below 1s", func(c *Config) { c.MQTT.ServerKeepAlive = sec(0.5) }, "mqtt.server_keepalive", "must be between 1s and 65535s (got 500ms)"},
		{"keepalive negative", func(c *Config) { c.MQTT.ServerKeepAlive = sec(-1) }, "mqtt.server_keepalive", "got -1s"},
		{"keepalive above 65535s", func(c *Config) { c.MQTT.ServerKeepAlive = sec(65536) }, "mqtt.server_keepalive", "65535s"},
		{"keepalive not whole seconds", func(c *Config) { c.MQTT.ServerKeepAlive = sec(1.5) }, "mqtt.server_keepalive", "whole number of seconds (got 1.5s)"},
		{"max writes pending low", func(c *Config) { c.MQTT.MaxWritesPending = 15 }, "mqtt.max_writes_pending", "between 16 and 65535 (got 15)"},
		{"max writes pending high", func(c *Config) { c.MQTT.MaxWritesPending = 65536 }, "mqtt.max_writes_pending", "got 65536"},
		{"max writes pending negative", func(c *Config) { c.MQTT.MaxWritesPending = -1 }, "mqtt.max_writes_pending", "got -1"},
		{"read buffer low", func(c *Config) { c.MQTT.ReadBufferSize = 255 }, "mqtt.read_buffer_size", "between 256 and 1048576"},
		{"read buffer high", func(c *Config) { c.MQTT.ReadBufferSize = 1<<20 + 1 }, "mqtt.read_buffer_size", "got 1048577"},
		{"write buffer low", func(c *Config) { c.MQTT.WriteBufferSize = 1 }, "mqtt.write_buffer_size", "between 256 and 1048576"},
		{"write buffer high", func(c *Config) { c.MQTT.WriteBufferSize = 1 << 21 }, "mqtt.write_buffer_size", "got 2097152"},
		{"user from", func(c *Config) { c.Identity.UserFrom = "email" }, "identity.user_from", `username, client_id (got "email")`},
		{"separator too long", func(c *Config) { c.Identity.Separator = "123456789" }, "identity.separator", "8 bytes"},
		{"separator plus", func(c *Config) { c.Identity.Separator = "+" }, "identity.separator", "wildcards"},
		{"separator hash", func(c *Config) { c.Identity.Separator = "-#" }, "identity.separator", "wildcards"},
		{"separator bad utf8", func(c *Config) { c.Identity.Separator = "\xff" }, "identity.separator", "UTF-8"},
		{"topic prefix with plus", func(c *Config) { c.Presence.TopicPrefix = "a/+" }, "presence.topic_prefix", "wildcards"},
		{"topic prefix with hash", func(c *Config) { c.Presence.TopicPrefix = "#" }, "presence.topic_prefix", "wildcards"},
		{"topic prefix dollar", func(c *Config) { c.Presence.TopicPrefix = "$SYS/presence" }, "presence.topic_prefix", "start with $"},
		{"topic prefix empty level", func(c *Config) { c.Presence.TopicPrefix = "a//b" }, "presence.topic_prefix", "empty topic level"},
		{"topic prefix leading slash", func(c *Config) { c.Presence.TopicPrefix = "/a" }, "presence.topic_prefix", "empty topic level"},
		{"topic prefix trailing slash", func(c *Config) { c.Presence.TopicPrefix = "a/" }, "presence.topic_prefix", "end with /"},
		{"topic prefix NUL", func(c *Config) { c.Presence.TopicPrefix = "a\x00" }, "presence.topic_prefix", "NUL"},
		{"empty device", func(c *Config) { c.Presence.AuthoritativeDevices = []string{"desktop", ""} }, "presence.authoritative_devices", "item 1 must not be empty"},
		{"device with wildcard", func(c *Config) { c.Presence.AuthoritativeDevices = []string{"a+"} }, "presence.authoritative_devices", `got "a+"`},
		{"device with a leading space", func(c *Config) { c.Presence.AuthoritativeDevices = []string{" desk"} }, "presence.authoritative_devices", "can never be a device label"},
		{"session expiry not whole seconds", func(c *Config) { c.MQTT.MaxSessionExpiry = Duration(1500 * time.Millisecond) }, "mqtt.max_session_expiry", "whole seconds"},
		{"sentinel with cluster", func(c *Config) {
			c.Redis.Addrs, c.Redis.Cluster, c.Redis.SentinelMaster = []string{"a:1"}, true, "m"
		}, "redis.sentinel_master", "no redis.cluster"},
		{"exempt address not an address", func(c *Config) { c.MQTT.AddressLimitExempt = []string{"10.0.0.0/8", "proxy"} }, "mqtt.address_limit_exempt", "item 1"},
		{"repeated device", func(c *Config) { c.Presence.AuthoritativeDevices = []string{"a", "a"} }, "presence.authoritative_devices", `repeats "a"`},
		{"session ttl short", func(c *Config) { c.Presence.SessionTTL = sec(9); c.Presence.RenewInterval = sec(1) }, "presence.session_ttl", "at least 10s (got 9s)"},
		{"renew interval half the ttl", func(c *Config) { c.Presence.RenewInterval = c.Presence.SessionTTL / 2 }, "presence.renew_interval", "less than half of presence.session_ttl (3h0m0s)"},
		{"renew interval above ttl", func(c *Config) { c.Presence.RenewInterval = sec(4 * 3600) }, "presence.renew_interval", "got 4h0m0s"},
		{"renew interval zero", func(c *Config) { c.Presence.RenewInterval = 0 }, "presence.renew_interval", "more than 0"},
		{"renew interval negative", func(c *Config) { c.Presence.RenewInterval = sec(-1) }, "presence.renew_interval", "got -1s"},
		{"reap interval short", func(c *Config) { c.Presence.ReapInterval = Duration(99 * time.Millisecond) }, "presence.reap_interval", "between 100ms and 1m (got 99ms)"},
		{"reap interval long", func(c *Config) { c.Presence.ReapInterval = sec(61) }, "presence.reap_interval", "got 1m1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Defaults()
			tt.mutate(&c)
			err := c.Validate()
			mustContain(t, err, ErrInvalid, tt.detail)
			if err != nil && !strings.HasPrefix(err.Error(), tt.key+": ") {
				t.Errorf("error %q does not start with %q", err, tt.key+": ")
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("want exactly one problem, got:\n%v", err)
			}
		})
	}
}

func TestValidateErrorText(t *testing.T) {
	t.Parallel()
	c := Defaults()
	c.MQTT.ServerKeepAlive = Duration(500 * time.Millisecond)
	want := "mqtt.server_keepalive: must be between 1s and 65535s (got 500ms)"
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %q", err, want)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	c := Defaults()
	c.Log.Level = "loud"
	c.MQTT.MaxWritesPending = 1
	mustContain(t, c.Validate(), ErrInvalid, "log.level: ", "\nmqtt.max_writes_pending: ")

	// A zero Config (defaults not applied) is rejected, not a panic.
	mustContain(t, Config{}.Validate(), ErrInvalid, "node_id: ", "mqtt.addr: ", "mqtt.max_writes_pending: ")
}

func TestValidateAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(c *Config)
	}{
		{"listeners off", func(c *Config) { c.MQTT.Addr, c.MQTT.WSAddr, c.Admin.Addr = "off", "off", "off" }},
		{"port 0 everywhere", func(c *Config) { c.MQTT.Addr, c.MQTT.WSAddr, c.Admin.Addr = ":0", ":0", "127.0.0.1:0" }},
		{"ipv6 and host names", func(c *Config) { c.MQTT.Addr, c.MQTT.WSAddr = "[::1]:1883", "localhost:8083" }},
		{"extreme keepalives", func(c *Config) { c.MQTT.ServerKeepAlive = Duration(65535 * time.Second) }},
		{"smallest keepalive", func(c *Config) { c.MQTT.ServerKeepAlive = Duration(time.Second) }},
		{"limits low", func(c *Config) {
			c.MQTT.MaxWritesPending, c.MQTT.ReadBufferSize, c.MQTT.WriteBufferSize = 16, 256, 256
		}},
		{"limits high", func(c *Config) {
			c.MQTT.MaxWritesPending, c.MQTT.ReadBufferSize, c.MQTT.WriteBufferSize = 65535, 1<<20, 1<<20
		}},
		{"client id identity", func(c *Config) { c.Identity.UserFrom, c.Identity.Separator = "client_id", "::::::::" }},
		{"multibyte separator", func(c *Config) { c.Identity.Separator = "·" }},
		{"nested topic prefix", func(c *Config) { c.Presence.TopicPrefix = "acme/presence" }},
		{"no authoritative devices", func(c *Config) { c.Presence.AuthoritativeDevices = []string{} }},
		{"several devices", func(c *Config) { c.Presence.AuthoritativeDevices = []string{"desktop", "laptop"} }},
		{"shortest ttl", func(c *Config) {
			c.Presence.SessionTTL, c.Presence.RenewInterval = Duration(10*time.Second), Duration(4999*time.Millisecond)
		}},
		{"reap interval bounds", func(c *Config) { c.Presence.ReapInterval = Duration(100 * time.Millisecond) }},
		{"reap interval max", func(c *Config) { c.Presence.ReapInterval = Duration(time.Minute) }},
		{"node id with dots", func(c *Config) { c.NodeID = "node-1.eu_west:a" }},
		{"clock off", func(c *Config) { v := Duration(0); c.Presence.ClockInterval = &v }},
		{"clock bounds", func(c *Config) { v := Duration(time.Second); c.Presence.ClockInterval = &v }},
		{"clock max", func(c *Config) { v := Duration(time.Hour); c.Presence.ClockInterval = &v }},
		{"idle after 1s, labels on and off", func(c *Config) {
			c.Presence.IdleAfter, c.Presence.IdleAfterDevices = Duration(time.Second), DeviceDurations{"desktop": Duration(time.Hour), "sensor": 0}
		}},
		{"battle damping off, the rest ignored", func(c *Config) {
			c.Presence.TakeoverBattle = TakeoverBattleConfig{Takeovers: TakeoversOff, Window: -1}
		}},
		{"battle bounds", func(c *Config) {
			c.Presence.TakeoverBattle = TakeoverBattleConfig{Takeovers: 2, Window: Duration(time.Second),
				Backoff: Duration(100 * time.Millisecond), MaxBackoff: Duration(100 * time.Millisecond)}
		}},
		{"drain bounds low", func(c *Config) { c.Drain.Rate, c.Drain.Timeout = 1, Duration(time.Second) }},
		{"drain bounds high", func(c *Config) { c.Drain.Rate, c.Drain.Timeout = 1_000_000, Duration(time.Hour) }},
		{"several server references", func(c *Config) { c.Drain.ServerReference = "b.example.com:1883 c.example.com:1883" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Defaults()
			tt.mutate(&c)
			if err := c.Validate(); err != nil {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}

func TestDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"60s", 60 * time.Second, false},
		{"2m", 2 * time.Minute, false},
		{"500ms", 500 * time.Millisecond, false},
		{"1h30m", 90 * time.Minute, false},
		{"0", 0, false},
		{"-1s", -time.Second, false},
		{"60", 0, true},
		{"abc", 0, true},
		{"", 0, true},
		{"1 s", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			var d Duration
			err := d.UnmarshalText([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("UnmarshalText(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if d.D() != tt.want {
				t.Errorf("UnmarshalText(%q) = %v, want %v", tt.in, d.D(), tt.want)
			}
		})
	}

	d := Duration(90 * time.Second)
	if d.String() != "1m30s" {
		t.Errorf("String() = %q", d.String())
	}
	out, err := yaml.Marshal(struct{ D Duration }{d})
	if err != nil || strings.TrimSpace(string(out)) != "d: 1m30s" {
		t.Errorf("yaml.Marshal = %q, %v", out, err)
	}
}

// loadYAML loads content as the config file, with no environment or flags.
func loadYAML(t *testing.T, content string) (Config, string, error) {
	t.Helper()
	path := writeFile(t, "presenced.yaml", content)
	c, err := Load([]string{"--config", path}, nil, nil)
	return c, path, err
}

func TestLoadYAML(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, c Config)
	}{
		{"empty file", "", nil},
		{"comments only", "# nothing here\n", nil},
		{"empty document", "---\n", nil},
		{"null document", "~\n", nil},
		{"empty sections", "mqtt:\nlog:\n", nil},
		{"values", "node_id: n1\nlog:\n  level: debug\n  format: console\nmqtt:\n  addr: off\n  max_writes_pending: 128\n",
			func(t *testing.T, c Config) {
				if c.NodeID != "n1" || c.Log.Level != "debug" || c.Log.Format != "console" || c.MQTT.Addr != "off" || c.MQTT.MaxWritesPending != 128 {
					t.Errorf("got %+v", c)
				}
				if c.MQTT.WSAddr != ":1882" {
					t.Errorf("unset key lost its default: ws_addr = %q", c.MQTT.WSAddr)
				}
			}},
		{"durations", "mqtt:\n  server_keepalive: 2m\npresence:\n  session_ttl: 1h30m\n  reap_interval: 500ms\n",
			func(t *testing.T, c Config) {
				if c.MQTT.ServerKeepAlive.D() != 2*time.Minute || c.Presence.SessionTTL.D() != 90*time.Minute ||
					c.Presence.ReapInterval.D() != 500*time.Millisecond || c.Presence.RenewInterval.D() != 30*time.Minute {
					t.Errorf("got %+v", c.Presence)
				}
			}},
		{"zero means default", "mqtt:\n  server_keepalive: 0s\n  max_writes_pending: 0\n  addr: \"\"\n",
			func(t *testing.T, c Config) {
				if c.MQTT.ServerKeepAlive.D() != time.Minute || c.MQTT.MaxWritesPending != 256 || c.MQTT.Addr != ":1883" {
					t.Errorf("got %+v", c.MQTT)
				}
			}},
		{"devices absent", "presence:\n  reap_interval: 2s\n", devicesAre([]string{"desktop"})},
		{"devices null", "presence:\n  authoritative_devices:\n", devicesAre([]string{"desktop"})},
		{"devices explicit empty", "presence:\n  authoritative_devices: []\n", devicesAre([]string{})},
		{"devices listed", "presence:\n  authoritative_devices:\n    - phone\n    - tablet\n", devicesAre([]string{"phone", "tablet"})},
		{"idle after, per label", "presence:\n  idle_after: 15m\n  idle_after_devices: {desktop: 10m, sensor: 0, \"my phone\": 90s}\n",
			idleIs(15*time.Minute, DeviceDurations{"desktop": Duration(10 * time.Minute), "sensor": 0, "my phone": Duration(90 * time.Second)})},
		{"idle after, labels as a block", "presence:\n  idle_after_devices:\n    desktop: 1m\n",
			idleIs(0, DeviceDurations{"desktop": Duration(time.Minute)})},
		{"idle after, labels null", "presence:\n  idle_after_devices:\n", idleIs(0, DeviceDurations{})},
		{"observer sessions", "presence:\n  observers: [dashboard]\n  observer_sessions: true\n", func(t *testing.T, c Config) {
			if !c.Presence.ObserverSessions || len(c.Presence.Observers) != 1 {
				t.Errorf("presence.observer_sessions %v, observers %v", c.Presence.ObserverSessions, c.Presence.Observers)
			}
		}},
		{"anchors", "log:\n  level: &lvl warn\nidentity:\n  user_from: client_id\n  separator: &sep \":\"\n",
			func(t *testing.T, c Config) {
				if c.Log.Level != "warn" || c.Identity.Separator != ":" {
					t.Errorf("got %+v %+v", c.Log, c.Identity)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _, err := loadYAML(t, tt.yaml)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if tt.check == nil {
				want := Defaults()
				if !reflect.DeepEqual(c, want) {
					t.Errorf("got %+v, want the defaults %+v", c, want)
				}
				return
			}
			tt.check(t, c)
		})
	}
}

func idleIs(after time.Duration, devices DeviceDurations) func(*testing.T, Config) {
	return func(t *testing.T, c Config) {
		t.Helper()
		if c.Presence.IdleAfter.D() != after || !reflect.DeepEqual(c.Presence.IdleAfterDevices, devices) {
			t.Errorf("idle_after %s, idle_after_devices %#v; want %s, %#v", c.Presence.IdleAfter, c.Presence.IdleAfterDevices, after, devices)
		}
	}
}

func devicesAre(want []string) func(*testing.T, Config) {
	return func(t *testing.T, c Config) {
		t.Helper()
		got := c.Presence.AuthoritativeDevices
		if !reflect.DeepEqual(got, want) || (got == nil) != (want == nil) {
			t.Errorf("authoritative_devices = %#v, want %#v", got, want)
		}
	}
}

func TestLoadYAMLErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		yaml     string
		sentinel error
		parts    []string // the file's path is required too
	}{
		{"unknown nested key", "mqtt:\n  addr: \":1883\"\n  adr: \":1\"\n", ErrUnknownKey,
			[]string{`configs: unknown key "mqtt.adr" in `, " line 3", `did you mean "mqtt.addr"`}},
		{"unknown top-level key", "mqt:\n  addr: \":1\"\n", ErrUnknownKey, []string{`"mqt"`, "line 1", `did you mean "mqtt"`}},
		{"key in the wrong section", "presence:\n  addr: \":1\"\n", ErrUnknownKey, []string{`"presence.addr"`}},
		{"key case matters", "Log:\n  level: info\n", ErrUnknownKey, []string{`"Log"`}},
		{"every unknown key is reported", "foo: 1\nlog:\n  bar: 2\n", ErrUnknownKey, []string{`"foo"`, `"log.bar"`}},
		{"two documents", "log:\n  level: info\n---\nlog:\n  level: debug\n", ErrInvalid, []string{"second YAML document"}},
		{"root is a list", "- a\n- b\n", ErrInvalid, []string{"must be a mapping", "a list"}},
		{"root is a scalar", "hello\n", ErrInvalid, []string{"must be a mapping", `"hello"`}},
		{"section is a scalar", "mqtt: 5\n", ErrInvalid, []string{`"mqtt"`, "want a mapping"}},
		{"section is a list", "presence:\n  - a\n", ErrInvalid, []string{`"presence"`, "want a mapping"}},
		{"bad int", "mqtt:\n  max_writes_pending: lots\n", ErrInvalid, []string{`"mqtt.max_writes_pending"`, "line 2", "want an integer", `"lots"`}},
		{"bad bool", "presence:\n  observer_sessions: sometimes\n", ErrInvalid, []string{`"presence.observer_sessions"`, "line 2", `"sometimes"`}},
		{"float for int", "mqtt:\n  read_buffer_size: 1024.5\n", ErrInvalid, []string{`"mqtt.read_buffer_size"`, "want an integer"}},
		{"quoted int", "mqtt:\n  read_buffer_size: \"1024\"\n", ErrInvalid, []string{`"mqtt.read_buffer_size"`, `(got "1024")`}},
		{"int overflow", "mqtt:\n  max_writes_pending: 99999999999999999999999\n", ErrInvalid, []string{`"mqtt.max_writes_pending"`}},
		{"duration without unit", "mqtt:\n  server_keepalive: 60\n", ErrInvalid, []string{`"mqtt.server_keepalive"`, "with a unit", `"60"`}},
		{"bad duration", "presence:\n  session_ttl: soon\n", ErrInvalid, []string{`"presence.session_ttl"`, `"soon"`}},
		{"list for string", "log:\n  level: [debug]\n", ErrInvalid, []string{`"log.level"`, "want a string", "a list"}},
		{"scalar for list", "presence:\n  authoritative_devices: desktop\n", ErrInvalid, []string{`"presence.authoritative_devices"`, "want a list"}},
		{"nested list for list", "presence:\n  authoritative_devices: [[a]]\n", ErrInvalid, []string{`"presence.authoritative_devices"`}},
		{"duplicate key", "log:\n  level: info\n  level: debug\n", ErrInvalid, []string{`"log.level" appears twice`, "lines 2 and 3"}},
		{"idle labels as a list", "presence:\n  idle_after_devices: [desktop]\n", ErrInvalid, []string{`"presence.idle_after_devices"`, "want a mapping of device labels"}},
		{"idle label without a unit", "presence:\n  idle_after_devices: {desktop: 10}\n", ErrInvalid, []string{`"presence.idle_after_devices"`}},
		{"idle label twice", "presence:\n  idle_after_devices: {a: 1m, a: 2m}\n", ErrInvalid, []string{"presence.idle_after_devices"}},
		{"idle after below 1s", "presence:\n  idle_after: 10ms\n", ErrInvalid, []string{"presence.idle_after: must be 0 (off) or at least 1s (got 10ms)", "line 2"}},
		{"syntax error", "log:\n  level: info\n bad\n", ErrInvalid, []string{"cannot parse"}},
		{"tabs", "log:\n\tlevel: info\n", ErrInvalid, []string{"cannot parse"}},
		// The parser names the line where the mapping began; the error names
		// the line that broke it.
		{"indentation error on line 3", "log:\n  level: info\n format: json\nmqtt:\n  addr: \":1\"\n", ErrInvalid,
			[]string{"cannot parse ", " line 3: did not find expected key"}},
		{"list item on line 3", "log:\n  level: info\n  - format: json\n", ErrInvalid, []string{" line 3: did not find expected key"}},
		{"tab on line 3", "log:\n  level: info\n\tformat: json\n", ErrInvalid, []string{" line 3: found a tab character"}},
		{"deeper indentation on line 4", "presence:\n  session_ttl: 3h\n  min_dwell: 1s\n    offline_grace: 5s\n", ErrInvalid,
			[]string{" line 4: mapping values are not allowed in this context"}},
		{"unclosed list on line 4", "log:\n  level: info\npresence:\n  authoritative_devices: [desktop\nmqtt:\n  addr: \":1\"\n", ErrInvalid,
			[]string{" line 4: did not find expected ',' or ']'"}},
		{"unclosed quote on line 2", "log:\n  level: \"info\n  format: json\n", ErrInvalid, []string{" line 2: found unexpected end of stream"}},
		{"syntax error in a second document", "log:\n  level: info\n---\nlog:\n  level: info\n format: json\n", ErrInvalid,
			[]string{" line 6: did not find expected key"}},
		// Every duration: a bare number is refused, saying how to write it.
		{"bare number for a duration where 0 means off", "presence:\n  offline_grace: 5\n", ErrInvalid,
			[]string{`invalid value for "presence.offline_grace" in `, ` line 2: "5" is not a duration: write it with a unit, such as 5s`}},
		{"bare fraction for a duration", "presence:\n  min_dwell: 1.5\n", ErrInvalid,
			[]string{`"presence.min_dwell"`, `"1.5" is not a duration: write it with a unit, such as 1.5s`}},
		{"bare number for a duration", "drain:\n  timeout: 20\n", ErrInvalid,
			[]string{`"drain.timeout"`, `"20" is not a duration: write it with a unit, such as 20s`}},
		{"bare number for an idle label", "presence:\n  idle_after_devices: {desktop: 10m, sensor: 0, phone: 30}\n", ErrInvalid,
			[]string{`invalid value for "presence.idle_after_devices" in `, ` line 2: phone: "30" is not a duration: write it with a unit, such as 30s`}},
		{"validation names key and line", "mqtt:\n  max_writes_pending: 8\n", ErrInvalid,
			[]string{"mqtt.max_writes_pending: must be between 16 and 65535 (got 8) (set in ", " line 2)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, path, err := loadYAML(t, tt.yaml)
			mustContain(t, err, tt.sentinel, append(tt.parts, path)...)
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope.yaml")

	_, err := Load([]string{"--config", missing}, nil, nil)
	mustContain(t, err, ErrFile, "--config", missing)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %q does not wrap fs.ErrNotExist", err)
	}

	_, err = Load(nil, []string{"PRESENCED_CONFIG=" + missing}, nil)
	mustContain(t, err, ErrFile, "PRESENCED_CONFIG", missing)

	_, err = Load([]string{"-config", t.TempDir()}, nil, nil)
	mustContain(t, err, ErrFile, "--config")
}

func TestLoadEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		env   []string
		check func(t *testing.T, c Config)
	}{
		{"string", []string{"PRESENCED_MQTT_ADDR=:2000"}, func(t *testing.T, c Config) {
			if c.MQTT.Addr != ":2000" {
				t.Errorf("mqtt.addr = %q", c.MQTT.Addr)
			}
		}},
		{"top-level key", []string{"PRESENCED_NODE_ID=env-node"}, func(t *testing.T, c Config) {
			if c.NodeID != "env-node" {
				t.Errorf("node_id = %q", c.NodeID)
			}
		}},
		{"int and durations", []string{"PRESENCED_MQTT_MAX_WRITES_PENDING=2048", "PRESENCED_MQTT_SERVER_KEEPALIVE=30s", "PRESENCED_PRESENCE_SESSION_TTL=1m"},
			func(t *testing.T, c Config) {
				if c.MQTT.MaxWritesPending != 2048 || c.MQTT.ServerKeepAlive.D() != 30*time.Second ||
					c.Presence.SessionTTL.D() != time.Minute || c.Presence.RenewInterval.D() != 20*time.Second {
					t.Errorf("got %+v %+v", c.MQTT, c.Presence)
				}
			}},
		{"devices unset", nil, devicesAre([]string{"desktop"})},
		{"battle takeovers 0 is off", []string{"PRESENCED_PRESENCE_TAKEOVER_BATTLE_TAKEOVERS=0"}, battleTakeovers(TakeoversOff)},
		{"battle takeovers empty is the default", []string{"PRESENCED_PRESENCE_TAKEOVER_BATTLE_TAKEOVERS="}, battleTakeovers(5)},
		{"battle section", []string{"PRESENCED_PRESENCE_TAKEOVER_BATTLE_TAKEOVERS=3", "PRESENCED_PRESENCE_TAKEOVER_BATTLE_BACKOFF=3m"},
			func(t *testing.T, c Config) {
				if tb := c.Presence.TakeoverBattle; tb.Takeovers != 3 || tb.Backoff.D() != 3*time.Minute || tb.MaxBackoff.D() != 3*time.Minute {
					t.Errorf("takeover_battle = %+v, want 3 takeovers, back-off 3m and max_backoff raised to it", tb)
				}
			}},
		{"devices empty string", []string{"PRESENCED_PRESENCE_AUTHORITATIVE_DEVICES="}, devicesAre([]string{})},
		{"devices comma-separated", []string{"PRESENCED_PRESENCE_AUTHORITATIVE_DEVICES=desktop, laptop"}, devicesAre([]string{"desktop", "laptop"})},
		{"idle after per label", []string{"PRESENCED_PRESENCE_IDLE_AFTER=5m", "PRESENCED_PRESENCE_IDLE_AFTER_DEVICES=desktop=10m, sensor=0"},
			idleIs(5*time.Minute, DeviceDurations{"desktop": Duration(10 * time.Minute), "sensor": 0})},
		{"idle labels empty", []string{"PRESENCED_PRESENCE_IDLE_AFTER_DEVICES="}, idleIs(0, DeviceDurations{})},
		{"empty scalar is ignored", []string{"PRESENCED_MQTT_ADDR="}, func(t *testing.T, c Config) {
			if c.MQTT.Addr != ":1883" {
				t.Errorf("mqtt.addr = %q", c.MQTT.Addr)
			}
		}},
		{"later entry wins", []string{"PRESENCED_LOG_LEVEL=warn", "PRESENCED_LOG_LEVEL=error"}, func(t *testing.T, c Config) {
			if c.Log.Level != "error" {
				t.Errorf("log.level = %q", c.Log.Level)
			}
		}},
		{"other variables are ignored", []string{"HOME=/root", "presenced_mqtt_adr=x", "PRESENCEDX=1", "NOEQUALS"}, func(t *testing.T, c Config) {
			if !reflect.DeepEqual(c, Defaults()) {
				t.Errorf("got %+v", c)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Load(nil, tt.env, nil)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tt.check(t, c)
		})
	}
}

func battleTakeovers(n int) func(*testing.T, Config) {
	return func(t *testing.T, c Config) {
		if got := c.Presence.TakeoverBattle.Takeovers; got != n {
			t.Errorf("presence.takeover_battle.takeovers = %d, want %d", got, n)
		}
	}
}

// In the file, takeovers: 0 disables battle damping; a section left out or
// empty takes the defaults.
func TestLoadTakeoverBattle(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		yaml string
		want TakeoverBattleConfig
	}{
		{"presence:\n  takeover_battle:\n    takeovers: 0\n", TakeoverBattleConfig{Takeovers: TakeoversOff,
			Window: Duration(30 * time.Second), Backoff: Duration(5 * time.Second), MaxBackoff: Duration(2 * time.Minute)}},
		{"presence:\n  takeover_battle:\n", Defaults().Presence.TakeoverBattle},
		{"presence:\n  takeover_battle: {takeovers: 2, window: 5s, backoff: 1s, max_backoff: 8s}\n", TakeoverBattleConfig{Takeovers: 2,
			Window: Duration(5 * time.Second), Backoff: Duration(time.Second), MaxBackoff: Duration(8 * time.Second)}},
	} {
		c, err := Load([]string{"--config", writeFile(t, "presenced.yaml", tt.yaml)}, nil, nil)
		if err != nil {
			t.Fatalf("%q: %v", tt.yaml, err)
		}
		if c.Presence.TakeoverBattle != tt.want {
			t.Errorf("%q: takeover_battle = %+v, want %+v", tt.yaml, c.Presence.TakeoverBattle, tt.want)
		}
	}
	_, err := Load([]string{"--config", writeFile(t, "presenced.yaml", "presence:\n  takeover_battle: {takeovers: 1}\n")}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "presence.takeover_battle.takeovers: must be between 2 and 1000 (got 1) (set in") {
		t.Errorf("takeovers: 1: err = %v", err)
	}
}

func TestLoadEnvErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      []string
		sentinel error
		parts    []string
	}{
		{"unknown variable", []string{"PRESENCED_MQTT_ADR=:1"}, ErrUnknownKey,
			[]string{"PRESENCED_MQTT_ADR", `did you mean "PRESENCED_MQTT_ADDR"`}},
		{"unknown section", []string{"PRESENCED_REDIS=x"}, ErrUnknownKey, []string{"PRESENCED_REDIS"}},
		{"section name alone", []string{"PRESENCED_MQTT=x"}, ErrUnknownKey, []string{"PRESENCED_MQTT"}},
		{"every unknown variable", []string{"PRESENCED_A=1", "PRESENCED_B=2"}, ErrUnknownKey, []string{"PRESENCED_A ", "PRESENCED_B "}},
		{"unknown even when empty", []string{"PRESENCED_TYPO="}, ErrUnknownKey, []string{"PRESENCED_TYPO"}},
		{"bad int", []string{"PRESENCED_MQTT_MAX_WRITES_PENDING=many"}, ErrInvalid,
			[]string{"PRESENCED_MQTT_MAX_WRITES_PENDING", "mqtt.max_writes_pending", `want an integer (got "many")`}},
		{"bad duration", []string{"PRESENCED_PRESENCE_REAP_INTERVAL=5"}, ErrInvalid,
			[]string{"PRESENCED_PRESENCE_REAP_INTERVAL", "with a unit", `"5"`}},
		{"invalid value names the variable", []string{"PRESENCED_MQTT_MAX_WRITES_PENDING=5"}, ErrInvalid,
			[]string{"mqtt.max_writes_pending: must be between 16 and 65535 (got 5) (set by PRESENCED_MQTT_MAX_WRITES_PENDING)"}},
		{"idle label without a duration", []string{"PRESENCED_PRESENCE_IDLE_AFTER_DEVICES=desktop"}, ErrInvalid,
			[]string{"PRESENCED_PRESENCE_IDLE_AFTER_DEVICES", "label=duration"}},
		{"idle label twice", []string{"PRESENCED_PRESENCE_IDLE_AFTER_DEVICES=a=1m,a=2m"}, ErrInvalid, []string{`label "a" given twice`}},
		{"idle label bad duration", []string{"PRESENCED_PRESENCE_IDLE_AFTER_DEVICES=a=10"}, ErrInvalid, []string{`a: "10" is not a duration: write it with a unit, such as 10s`}},
		{"idle label not a duration", []string{"PRESENCED_PRESENCE_IDLE_AFTER_DEVICES=a=soon"}, ErrInvalid, []string{"a: want a duration"}},
		{"bare number for a duration where 0 means off", []string{"PRESENCED_PRESENCE_OFFLINE_GRACE=5"}, ErrInvalid,
			[]string{"PRESENCED_PRESENCE_OFFLINE_GRACE", `"5" is not a duration: write it with a unit, such as 5s`}},
		{"idle label below 1s", []string{"PRESENCED_PRESENCE_IDLE_AFTER_DEVICES=a=10ms"}, ErrInvalid,
			[]string{"presence.idle_after_devices: a must be 0 (never) or at least 1s (got 10ms) (set by PRESENCED_PRESENCE_IDLE_AFTER_DEVICES)"}},
		{"empty device", []string{"PRESENCED_PRESENCE_AUTHORITATIVE_DEVICES=desktop,"}, ErrInvalid,
			[]string{"presence.authoritative_devices", "PRESENCED_PRESENCE_AUTHORITATIVE_DEVICES"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(nil, tt.env, nil)
			mustContain(t, err, tt.sentinel, tt.parts...)
		})
	}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		file, env, flagV string // the value of log.level at each layer; "" = not given
		want             string
		source           string // where a validation error says the value came from
	}{
		{"defaults only", "", "", "", "info", ""},
		{"file over defaults", "file", "", "", "file", "p.yaml line 4)"},
		{"env over file", "file", "env", "", "env", "(set by PRESENCED_LOG_LEVEL)"},
		{"env over defaults", "", "env", "", "env", "(set by PRESENCED_LOG_LEVEL)"},
		{"flag over env", "file", "env", "flag", "flag", "(set by flag --log-level)"},
		{"flag over file", "file", "", "flag", "flag", "(set by flag --log-level)"},
		{"flag over defaults", "", "", "flag", "flag", "(set by flag --log-level)"},
	}
	// Each layer's value is a valid level, or that level suffixed "!"
	// (invalid) to see which layer the validation error blames.
	levels := map[string]string{"file": "warn", "env": "error", "flag": "debug"}
	for _, tt := range tests {
		for _, invalid := range []bool{false, true} {
			name := tt.name
			if invalid {
				name += "/invalid"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				value := func(layer string) string {
					if invalid {
						return levels[layer] + "!"
					}
					return levels[layer]
				}
				file := "mqtt:\n  addr: \":1001\"\n"
				if tt.file != "" {
					file += "log:\n  level: " + value("file") + "\n"
				}
				args := []string{"--config", writeFile(t, "p.yaml", file)}
				env := []string{"PRESENCED_MQTT_WS_ADDR=:1002"}
				if tt.env != "" {
					env = append(env, "PRESENCED_LOG_LEVEL="+value("env"))
				}
				if tt.flagV != "" {
					args = append(args, "--log-level", value("flag"))
				}
				c, err := Load(args, env, nil)

				if invalid && tt.source != "" {
					mustContain(t, err, ErrInvalid, `log.level: must be one of debug, info, warn, error (got "`+value(tt.want)+`") `, tt.source)
					return
				}
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				want := "info"
				if tt.want != "info" {
					want = levels[tt.want]
				}
				if c.Log.Level != want {
					t.Errorf("log.level = %q, want %q", c.Log.Level, want)
				}
				// Layers merge key by key.
				if c.MQTT.Addr != ":1001" || c.MQTT.WSAddr != ":1002" || c.Log.Format != "json" {
					t.Errorf("other keys: %+v %+v", c.MQTT, c.Log)
				}
			})
		}
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		check func(c Config) bool
	}{
		{"double dash with =", []string{"--node-id=f1", "--log-level=warn", "--log-format=console"},
			func(c Config) bool { return c.NodeID == "f1" && c.Log.Level == "warn" && c.Log.Format == "console" }},
		{"single dash with space", []string{"-mqtt-addr", ":0", "-ws-addr", "off", "-admin-addr", "off"},
			func(c Config) bool { return c.MQTT.Addr == ":0" && c.MQTT.WSAddr == "off" && c.Admin.Addr == "off" }},
		{"empty flag keeps the value", []string{"--mqtt-addr="},
			func(c Config) bool { return c.MQTT.Addr == ":1883" }},
		{"no args", nil, func(c Config) bool { return reflect.DeepEqual(c, Defaults()) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Load(tt.args, nil, nil)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !tt.check(c) {
				t.Errorf("got %+v", c)
			}
		})
	}
}

func TestFlagConfigOverridesEnvConfig(t *testing.T) {
	t.Parallel()
	fromFlag := writeFile(t, "a.yaml", "node_id: from-flag\n")
	fromEnv := writeFile(t, "b.yaml", "node_id: from-env\n")
	env := []string{"PRESENCED_CONFIG=" + fromEnv}

	c, err := Load(nil, env, nil)
	if err != nil || c.NodeID != "from-env" {
		t.Errorf("PRESENCED_CONFIG: node_id %q, err %v", c.NodeID, err)
	}
	c, err = Load([]string{"--config=" + fromFlag}, env, nil)
	if err != nil || c.NodeID != "from-flag" {
		t.Errorf("--config: node_id %q, err %v", c.NodeID, err)
	}
}

func TestFlagErrors(t *testing.T) {
	t.Parallel()
	for _, help := range []string{"-h", "--help", "-help"} {
		var usage bytes.Buffer
		_, err := Load([]string{help}, nil, &usage)
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s: err = %v, want flag.ErrHelp", help, err)
		}
		for _, want := range []string{"Usage: presenced", "-mqtt-addr", "-config", "PRESENCED_PRESENCE_AUTHORITATIVE_DEVICES", "presence.authoritative_devices",
			"presenced passwd FILE USER", "presenced token [-ttl 1h] [-groups g1,g2] [-observer] SECRET_FILE USER",
			"presenced health [-addr ADDR]", "exits 0 when the admin port answers ready", "presenced --version",
			"presenced who [--status S]", "presenced user NAME", "presenced kick USER[/CLIENT_ID]", "presenced account USER STATUS [TEXT] | USER --clear",
			"presenced forget USER", "PRESENCED_ADMIN_URL"} {
			if !strings.Contains(usage.String(), want) {
				t.Errorf("%s: usage does not mention %q:\n%s", help, want, usage.String())
			}
		}
	}

	var usage bytes.Buffer
	_, err := Load([]string{"--mqtt-adr", ":1"}, nil, &usage)
	mustContain(t, err, ErrUnknownKey, "mqtt-adr")
	if !strings.Contains(usage.String(), "Usage: presenced") {
		t.Errorf("no usage after a bad flag: %q", usage.String())
	}

	_, err = Load([]string{"--mqtt-addr"}, nil, nil)
	mustContain(t, err, ErrInvalid, "mqtt-addr")

	_, err = Load([]string{"--log-level", "debug", "extra"}, nil, nil)
	mustContain(t, err, ErrInvalid, `"extra"`)

	_, err = Load([]string{"--log-level", "loud"}, nil, nil)
	mustContain(t, err, ErrInvalid, `log.level: must be one of debug, info, warn, error (got "loud") (set by flag --log-level)`)
}

// TestEveryKeyIsReachable checks the reflection-derived key tree: every leaf
// has a unique environment variable that sets it, and every flag names a key.
func TestEveryKeyIsReachable(t *testing.T) {
	t.Parallel()
	seen := map[string]string{envConfigFile: "--config"}
	for _, lf := range leaves() {
		if other, dup := seen[lf.env]; dup {
			t.Errorf("%s and %s share the variable %s", lf.path, other, lf.env)
		}
		seen[lf.env] = lf.path

		typ := lf.typ
		if typ.Kind() == reflect.Pointer { // a key where 0 means off
			typ = typ.Elem()
		}
		sample := map[reflect.Kind]string{reflect.String: "x", reflect.Int: "7", reflect.Bool: "true", reflect.Slice: "a,b", reflect.Int64: "7s", reflect.Map: "a=7s"}[typ.Kind()]
		if typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Struct { // a list of sections: YAML
			sample = "[{url: http://x}]"
		}
		if sample == "" {
			t.Errorf("%s: no sample for type %s; teach setFromString and this test about it", lf.path, lf.typ)
			continue
		}
		l := loader{sources: map[string]string{}}
		if err := l.applyEnv(map[string]string{lf.env: sample}); err != nil {
			t.Errorf("%s=%s: %v", lf.env, sample, err)
			continue
		}
		if reflect.ValueOf(l.cfg).FieldByIndex(lf.index).IsZero() {
			t.Errorf("%s=%s did not set %s", lf.env, sample, lf.path)
		}
		if l.sources[lf.path] != "set by "+lf.env {
			t.Errorf("%s: source %q", lf.path, l.sources[lf.path])
		}
	}
	for _, f := range flagKeys {
		if _, ok := leafByPath(f.key); !ok {
			t.Errorf("flag --%s names the unknown key %q", f.flag, f.key)
		}
	}
}

// The documented file must be loadable and spell out every default.
func TestPresencedYAMLIsTheDefaults(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("presenced.yaml")
	if err != nil {
		t.Fatal(err)
	}

	// Decoded without applying defaults, the file alone must give the
	// defaults, so every value in it is written out and right.
	l := loader{sources: map[string]string{}}
	if err := l.decodeYAML(data, "presenced.yaml"); err != nil {
		t.Fatalf("decode presenced.yaml: %v", err)
	}
	want := Defaults()
	got := l.cfg
	if got.NodeID != "" {
		t.Errorf("presenced.yaml sets node_id %q; leave it to the host name", got.NodeID)
	}
	got.NodeID = want.NodeID
	if !reflect.DeepEqual(got, want) {
		t.Errorf("presenced.yaml =\n%+v\nDefaults() =\n%+v", got, want)
	}

	// And through Load, as a user would.
	c, err := Load([]string{"--config", "presenced.yaml"}, nil, nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Load(presenced.yaml) =\n%+v\nwant\n%+v", c, want)
	}
}

// Every key must appear in presenced.yaml with a comment above it.
func TestPresencedYAMLDocumentsEveryKey(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("presenced.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, lf := range leaves() {
		if lf.path == "node_id" { // host-dependent: documented commented out
			if !strings.Contains(string(data), "\n# node_id:") {
				t.Errorf("presenced.yaml does not document node_id as a comment")
			}
			continue
		}
		key := findKey(doc.Content[0], strings.Split(lf.path, "."))
		if key == nil {
			t.Errorf("presenced.yaml does not set %s", lf.path)
			continue
		}
		if strings.TrimSpace(key.HeadComment) == "" {
			t.Errorf("presenced.yaml: %s (line %d) has no comment above it", lf.path, key.Line)
		}
	}
}

// findKey returns the key node at path in a mapping, or nil.
func findKey(m *yaml.Node, path []string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != path[0] {
			continue
		}
		if len(path) == 1 {
			return m.Content[i]
		}
		return findKey(m.Content[i+1], path[1:])
	}
	return nil
}

func TestRedisConfig(t *testing.T) {
	t.Parallel()
	cfg, err := Load([]string{"--redis-addr", "127.0.0.1:6379"}, []string{"PRESENCED_REDIS_PASSWORD=hunter2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Redis.Addrs) != 1 || cfg.Redis.Addrs[0] != "127.0.0.1:6379" || cfg.Redis.Password != "hunter2" {
		t.Fatalf("redis config: %+v", cfg.Redis)
	}
	if s := fmt.Sprintf("%v %+v %s", cfg, cfg.Redis, cfg.Redis.Password); strings.Contains(s, "hunter2") {
		t.Fatalf("password printed: %s", s)
	}
	for _, tc := range []struct {
		edit func(*Config)
		key  string
	}{
		{func(c *Config) { c.Redis.Addrs = []string{"a:1", "b:2"} }, "redis.addrs"},
		{func(c *Config) { c.Redis.Addrs = []string{"nohost"} }, "redis.addrs"},
		{func(c *Config) { c.Redis.Cluster = true }, "redis.cluster"},
		{func(c *Config) { c.Redis.KeyPrefix = "a{b}" }, "redis.key_prefix"},
		{func(c *Config) { c.Redis.SweepInterval = Duration(time.Minute) }, "redis.sweep_interval"},
		{func(c *Config) { c.Redis.Addrs, c.Redis.Cluster, c.Redis.DB = []string{"a:1"}, true, 3 }, "redis.db"},
	} {
		c := Defaults()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.key+": ") {
			t.Errorf("%s: %v", tc.key, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// The keys where 0 means off keep an explicit 0, and the pacing rule
// follows the section.
func TestPacingKeys(t *testing.T) {
	t.Parallel()
	c, err := Load(nil, []string{"PRESENCED_PRESENCE_OFFLINE_GRACE=0s", "PRESENCED_PRESENCE_FLAP_ENDS=0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Presence.Pacing()
	if p.Grace != 0 || p.FlapEnds != 0 || p.Debounce != time.Second || p.Dwell != time.Second || p.FlapGrace != 30*time.Second {
		t.Fatalf("pacing %+v", p)
	}
	bad := Defaults()
	bad.Presence.OfflineGrace = ptr(Duration(time.Minute))
	bad.Presence.Flap.Grace = Duration(10 * time.Second)
	mustContain(t, bad.Validate(), ErrInvalid, "presence.flap.grace")
	bad = Defaults()
	bad.Presence.DisconnectDebounce = ptr(Duration(time.Minute))
	mustContain(t, bad.Validate(), ErrInvalid, "presence.disconnect_debounce")
}

// PRESENCED_ADMIN_URL is the operator's commands' (presenced who, kick
// ...): the broker's configuration ignores it, so that one environment may
// serve both; a misspelling of it is still an error.
func TestAdminURLIgnored(t *testing.T) {
	t.Parallel()
	if _, err := Load(nil, []string{"PRESENCED_ADMIN_URL=http://127.0.0.1:8080"}, nil); err != nil {
		t.Errorf("PRESENCED_ADMIN_URL: %v", err)
	}
	_, err := Load(nil, []string{"PRESENCED_ADMIN_URI=http://127.0.0.1:8080"}, nil)
	mustContain(t, err, ErrUnknownKey, "PRESENCED_ADMIN_URI")
}
