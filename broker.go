package presenced

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	mochiauth "github.com/mochi-mqtt/server/v2/hooks/auth"

	"github.com/presenced/presenced/acl"
	"github.com/presenced/presenced/admin"
	"github.com/presenced/presenced/auth"
	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/listener"
	"github.com/presenced/presenced/stats"
)

// Broker is the presenced binary's broker, configured from presenced.yaml
// (package configs): a mochi server with presenced's listeners (TCP and
// WebSocket, with TLS when configured), authentication (package auth's
// Hook, or none on loopback), presence attached through the same API an
// embedding program uses (Attach) as the access authority, and the admin
// HTTP port behind its token. cmd/presenced is a short main over it.
type Broker struct {
	cfg configs.Config
	log *slog.Logger

	server   *mqtt.Server
	presence *Plugin // nil with presence.mode off

	auth       *auth.Hook            // nil without an authentication method
	creds      *auth.Authenticator   // its credentials
	authStop   chan struct{}         // ends the auth hook's Revoke loop (Start makes it)
	tls        *listener.TLSReloader // nil without TLS
	adminToken *admin.Token          // nil without admin.token
	adminSite  *admin.Site           // the admin port's cross-site and Host checks; nil without it
	acl        *acl.File             // auth.acl_file, nil without it
	// adminActions counts the operator's actions (presenced_admin_actions_total).
	adminActions admin.ActionCounts

	tcp     *listener.TCP
	ws      *listener.WebSocket
	admin   *http.Server
	adminLn net.Listener
	table   *stats.Table // the broker's own figures: listeners, authentication, admin port
	wg      sync.WaitGroup

	stopOnce sync.Once

	// The drain (broker_drain.go): halt ends one in progress (Stop cancels
	// it); drained is closed once it has stopped the broker.
	halt       context.Context
	cancelHalt context.CancelFunc
	draining   atomic.Bool
	drainOnce  sync.Once
	drainMu    sync.Mutex     // guards drainWG.Add against Stop's Wait
	drainWG    sync.WaitGroup // a drain started by the admin API
	drained    chan struct{}
	drainErr   error

	canary *canaryState // the canary (broker_canary.go); nil while canary.enabled is off
}

// NewBroker builds the broker of a validated configuration; opts go to
// presence (tests set its clock). log receives every line, mochi's too
// (with component mochi).
func NewBroker(cfg configs.Config, log *slog.Logger, opts ...Option) (*Broker, error) {
	b := &Broker{cfg: cfg, log: log, drained: make(chan struct{})}
	b.halt, b.cancelHalt = context.WithCancel(context.Background())
	if err := b.secure(); err != nil {
		return nil, err
	}
	if err := b.newCanaryState(); err != nil {
		return nil, err
	}
	b.server = mqtt.New(serverOptions(cfg.MQTT, mochiLog(log)))
	b.table = b.buildTable()
	if cfg.Presence.Mode == "off" {
		// The benchmark baseline: the same broker without presence. mochi
		// refuses every connection without an authentication hook.
		if err := b.server.AddHook(new(mochiauth.AllowHook), nil); err != nil {
			return nil, fmt.Errorf("add allow hook: %w", err)
		}
		return b, nil
	}
	// Authentication comes first: presence's hooks, added after it, see
	// the authenticated user as the connection's username. Presence is the
	// access authority (every topic allowed, presence's rules on top).
	// Without authentication nobody is anybody in particular: no
	// WithServiceAccounts and no presence.observers make every connection
	// a service account (the plugin's default), whose presence it keeps,
	// since nothing named it one.
	var service func(*mqtt.Client) bool
	if b.creds != nil {
		b.auth = auth.NewHook(auth.HookOptions{
			Server: b.server, Credentials: b.canaryCredentials(b.creds), AllowAnonymous: cfg.Auth.AllowAnonymous,
			FromClientID: cfg.Identity.UserFrom == configs.UserFromClientID, Separator: cfg.Identity.Separator,
			Groups: func(user string, groups []string) {
				if b.presence != nil { // set before the server serves
					b.presence.ClaimGroups(user, groups)
				}
			},
			Log: log.With("component", "auth"),
		})
		if err := b.server.AddHook(b.auth, nil); err != nil {
			return nil, fmt.Errorf("add authentication hook: %w", err)
		}
		service = b.auth.Observer
	} else if err := b.server.AddHook(new(hooks.Authenticator), nil); err != nil {
		return nil, fmt.Errorf("add authentication hook: %w", err)
	}
	base := []Option{WithLogger(log), WithACL(nil)}
	if service != nil {
		base = append(base, WithServiceAccounts(service))
	}
	opts = append(base, opts...)
	if b.acl != nil {
		opts = append([]Option{WithTopics(b.acl)}, opts...)
	}
	if cfg.Log.Sessions {
		opts = append(opts, WithSessionLog())
	}
	pc := ConfigFrom(cfg)
	// With authentication, it says who is a service account, by method
	// (auth.observer_methods): not a bare name under any method. Without,
	// every connection is one whatever presence.observers lists.
	pc.Presence.Observers = nil
	p, err := Attach(b.server, pc, opts...)
	if err != nil {
		return nil, err
	}
	b.presence = p
	return b, nil
}

// serverOptions are mochi's options from the mqtt section.
func serverOptions(c configs.MQTTConfig, log *slog.Logger) *mqtt.Options {
	caps := mqtt.NewDefaultServerCapabilities()
	// mochi purges a retained message older than this (in seconds);
	// presence stores its own again every quarter of it, so that only
	// other retained messages expire. A v5 client's own message expiry
	// interval is honoured below it.
	caps.MaximumMessageExpiryInterval = int64(c.RetainedExpiry.D() / time.Second)
	caps.MaximumClientWritesPending = int32(c.MaxWritesPending)
	// mochi refuses a packet whose fixed header claims more than this
	// before it allocates or reads it.
	caps.MaximumPacketSize = uint32(c.MaxPacketSize)
	caps.MaximumClients = int64(c.MaxConnections)
	// mochi keeps a persistent session 136 years by default: any client
	// could leave state behind for good.
	caps.MaximumSessionExpiryInterval = uint32(c.MaxSessionExpiry.D() / time.Second)
	// mochi accepts 65,535 topic aliases by default, each a topic name of
	// up to a packet's size, and never tells the client its maximum (the
	// Limits hook puts it in CONNACK).
	caps.TopicAliasMaximum = uint16(c.MaxTopicAliases)
	// Unacknowledged QoS 1/2 messages a session holds, online or not; the
	// Limits hook bounds their bytes and age.
	caps.MaximumInflight = uint16(c.MaxInflightMessages)
	return &mqtt.Options{
		Capabilities:             caps,
		ClientNetReadBufferSize:  c.ReadBufferSize,
		ClientNetWriteBufferSize: c.WriteBufferSize,
		InlineClient:             true,
		Logger:                   log,
	}
}

// Server returns the mochi server.
func (b *Broker) Server() *mqtt.Server { return b.server }

// Presence returns presence (nil with presence.mode off).
func (b *Broker) Presence() *Plugin { return b.presence }

// Start loads presence, binds every port and starts serving. When it
// returns without error the broker accepts connections.
func (b *Broker) Start(ctx context.Context) error {
	if b.presence != nil {
		if err := b.presence.Start(ctx); err != nil {
			return err
		}
	}
	if err := b.listen(); err != nil {
		b.server.Listeners.CloseAll(func(string) {})
		if b.presence != nil {
			_ = b.presence.Stop(ctx)
		}
		return err
	}
	if err := b.server.Serve(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if b.auth != nil {
		b.authStop = make(chan struct{})
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.auth.RunRevoke(b.authStop, time.Second) // expired tokens end within a second
		}()
	}
	b.startCanary()
	if b.admin != nil {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			if err := b.admin.Serve(b.adminLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				b.log.Error("admin server stopped", "err", err)
			}
		}()
	}
	store := "none (presence off)"
	if b.presence != nil {
		store = "memory"
		if len(b.cfg.Redis.Addrs) > 0 {
			store = "redis"
		}
	}
	b.log.Info("presenced started", "node", b.cfg.NodeID, "store", store, "mqtt", b.MQTTAddr(), "ws", b.WSAddr(), "admin", b.AdminAddr())
	return nil
}

// listen binds the MQTT listeners and the admin port.
func (b *Broker) listen() error {
	if b.cfg.MQTT.Addr != configs.Off {
		b.tcp = listener.NewTCP(listener.Config{ID: "tcp", Address: b.cfg.MQTT.Addr, Server: b.server, TLS: b.tlsConfig()})
		if err := b.server.AddListener(b.tcp); err != nil {
			return fmt.Errorf("mqtt.addr %s: %w", b.cfg.MQTT.Addr, err)
		}
	}
	if b.cfg.MQTT.WSAddr != configs.Off {
		b.ws = listener.NewWebSocket(listener.Config{
			ID: "ws", Address: b.cfg.MQTT.WSAddr, Server: b.server, TLS: b.tlsConfig(),
			CheckOrigin: checkOrigin(b.cfg.MQTT.WSAllowedOrigins),
		})
		if err := b.server.AddListener(b.ws); err != nil {
			return fmt.Errorf("mqtt.ws_addr %s: %w", b.cfg.MQTT.WSAddr, err)
		}
	}
	if b.cfg.Admin.Addr == configs.Off {
		return nil
	}
	ln, err := net.Listen("tcp", b.cfg.Admin.Addr)
	if err != nil {
		return fmt.Errorf("admin.addr %s: %w", b.cfg.Admin.Addr, err)
	}
	b.adminLn = ln
	src := b.adminSource()
	if src.Metrics, err = admin.Metrics(b.Collector()); err != nil {
		_ = ln.Close()
		return err
	}
	// Go's profiles tell much about the process (its command line among
	// them): only behind the token.
	src.Pprof = b.adminToken != nil
	h := admin.Handler(src)
	if b.adminToken != nil {
		h = b.adminToken.Wrap(h)
	}
	// A web page must not drive the API (cross-site writes), nor read it
	// through a name of its own resolved to loopback (DNS rebinding): the
	// Host check is on without a token, or with admin.allowed_hosts.
	b.adminSite = &admin.Site{Hosts: b.cfg.Admin.AllowedHosts, CheckHost: b.adminToken == nil || len(b.cfg.Admin.AllowedHosts) > 0}
	h = b.adminSite.Wrap(h)
	// The HTTP server's own complaints (a malformed request, a TLS handshake
	// that failed) go to the log like every line, at debug level.
	b.admin = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(b.log.With("component", "admin").Handler(), slog.LevelDebug)}
	if src.Events != nil {
		b.admin.RegisterOnShutdown(src.Events.Close) // the events streams end: Shutdown waits for no stream
	}
	return nil
}

// tlsConfig returns the listeners' TLS configuration, nil without TLS.
func (b *Broker) tlsConfig() *tls.Config {
	if b.tls == nil {
		return nil
	}
	return b.tls.Config()
}

// adminSource is what the admin port reads: presence's, with the
// broker's figures and drain.
func (b *Broker) adminSource() admin.Source {
	var src admin.Source
	if b.presence != nil {
		src = b.presence.AdminSource(b.adminToken != nil) // writes only behind a token
		src.Ready = readiness(b.presence.DownSince, b.unreadyAfter(), time.Now)
	} else {
		src = admin.Source{Ready: func() bool { return true }, Retained: func(string) ([]byte, bool) { return nil, false }}
	}
	src.Stats = func() any { return b.Stats() }
	src.Draining, src.Drain = b.Draining, b.StartDrain
	src.Log, src.Counts = b.log.With("component", "admin"), &b.adminActions
	if b.canary != nil {
		src.SLO = func() any { return b.SLO() }
	}
	return src
}

// Stop shuts the broker down: the admin port and the listeners close,
// every connection ends as shutdown, presence writes those ends to the
// store (waiting at most until ctx ends), then every goroutine is stopped
// and waited for.
func (b *Broker) Stop(ctx context.Context) error {
	b.drainMu.Lock()
	b.cancelHalt() // a drain in progress ends now
	b.drainMu.Unlock()
	b.drainWG.Wait() // and one the admin API started has stopped
	return b.stop(ctx)
}

// stop is Stop without waiting for a drain (the drain's own end calls it).
func (b *Broker) stop(ctx context.Context) error {
	var err error
	b.stopOnce.Do(func() {
		b.stopCanary() // its connections end before the listeners close
		if b.admin != nil {
			_ = b.admin.Shutdown(ctx)
		}
		_ = b.server.Close()
		if b.authStop != nil {
			close(b.authStop)
		}
		b.wg.Wait()
		if b.presence != nil {
			err = b.presence.Stop(ctx)
		}
		b.log.Info("presenced stopped")
	})
	return err
}

// Ready reports whether the store answers (false: degraded, still serving).
func (b *Broker) Ready() bool { return b.presence == nil || b.presence.Ready() }

// MQTTAddr returns the bound MQTT TCP address ("" when off).
func (b *Broker) MQTTAddr() string {
	if b.tcp == nil {
		return ""
	}
	return b.tcp.Address()
}

// WSAddr returns the bound WebSocket address ("" when off).
func (b *Broker) WSAddr() string {
	if b.ws == nil {
		return ""
	}
	return b.ws.Address()
}

// AdminAddr returns the bound admin address ("" when off).
func (b *Broker) AdminAddr() string {
	if b.adminLn == nil {
		return ""
	}
	return b.adminLn.Addr().String()
}
