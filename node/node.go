package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	mochiauth "github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	presenced "github.com/presenced/presenced"
	"github.com/presenced/presenced/admin"
	"github.com/presenced/presenced/auth"
	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/listener"
	"github.com/presenced/presenced/presence"
)

// Node is one running presenced: broker, presence and admin port.
type Node struct {
	cfg configs.Config
	log zerolog.Logger

	Server   *mqtt.Server
	Presence *presenced.Plugin // nil with presence.mode off

	// Auth is the authentication hook (nil without an auth method).
	Auth       *auth.Hook
	creds      *auth.Authenticator
	tls        *listener.TLSReloader // nil without TLS
	adminToken *admin.Token          // nil without admin.token

	tcp     *listener.TCP
	ws      *listener.WebSocket
	admin   *http.Server
	adminLn net.Listener
	wg      sync.WaitGroup

	stopOnce sync.Once

	// The drain (node_drain.go): halt ends one in progress (Stop cancels it);
	// drained is closed once it has stopped the node.
	halt       context.Context
	cancelHalt context.CancelFunc
	draining   atomic.Bool
	drainOnce  sync.Once
	drainMu    sync.Mutex     // guards drainWG.Add against Stop's Wait
	drainWG    sync.WaitGroup // a drain started by the admin API
	drained    chan struct{}
	drainErr   error
}

// New builds a node from a validated config. mochiLog receives mochi's own
// slog records (the caller routes them into the same zerolog logger); opts
// go to presence (tests set its clock).
func New(cfg configs.Config, log zerolog.Logger, mochiLog *slog.Logger, opts ...presenced.Option) (*Node, error) {
	n := &Node{cfg: cfg, log: log, drained: make(chan struct{})}
	n.halt, n.cancelHalt = context.WithCancel(context.Background())
	if err := n.secure(); err != nil {
		return nil, err
	}
	caps := mqtt.NewDefaultServerCapabilities()
	// mochi purges a retained message older than this (in seconds);
	// presence stores its own again every quarter of it, so that only
	// other retained messages expire. A v5 client's own message expiry
	// interval is honoured below it.
	caps.MaximumMessageExpiryInterval = int64(cfg.MQTT.RetainedExpiry.D() / time.Second)
	caps.MaximumClientWritesPending = int32(cfg.MQTT.MaxWritesPending)
	// mochi refuses a packet whose fixed header claims more than this
	// before it allocates or reads it.
	caps.MaximumPacketSize = uint32(cfg.MQTT.MaxPacketSize)
	caps.MaximumClients = int64(cfg.MQTT.MaxConnections)
	// mochi keeps a persistent session 136 years by default: any client
	// could leave state behind for good.
	caps.MaximumSessionExpiryInterval = uint32(cfg.MQTT.MaxSessionExpiry.D() / time.Second)
	n.Server = mqtt.New(&mqtt.Options{
		Capabilities:             caps,
		ClientNetReadBufferSize:  cfg.MQTT.ReadBufferSize,
		ClientNetWriteBufferSize: cfg.MQTT.WriteBufferSize,
		InlineClient:             true,
		Logger:                   mochiLog,
	})
	if cfg.Presence.Mode == "off" {
		// The benchmark baseline: the same broker without presence. mochi
		// refuses every connection without an authentication hook.
		if err := n.Server.AddHook(new(mochiauth.AllowHook), nil); err != nil {
			return nil, fmt.Errorf("add allow hook: %w", err)
		}
		return n, nil
	}
	// Authentication comes first: presence's hook, added after it, sees
	// the authenticated user as the connection's username. Presence is the
	// access authority (every topic allowed, presence's rules on top).
	service := func(*mqtt.Client) bool { return true } // no authentication: nobody is anybody in particular
	if n.creds != nil {
		n.Auth = auth.NewHook(auth.HookOptions{
			Server: n.Server, Credentials: n.creds, AllowAnonymous: cfg.Auth.AllowAnonymous,
			FromClientID: cfg.Identity.UserFrom == configs.UserFromClientID, Separator: cfg.Identity.Separator,
			Groups: func(user string, groups []string) {
				if n.Presence != nil { // set before the server serves
					n.Presence.ClaimGroups(user, groups)
				}
			},
			Log: log.With().Str("component", "auth").Logger(),
		})
		if err := n.Server.AddHook(n.Auth, nil); err != nil {
			return nil, fmt.Errorf("add authentication hook: %w", err)
		}
		service = n.Auth.Observer
	} else if err := n.Server.AddHook(new(hooks.Authenticator), nil); err != nil {
		return nil, fmt.Errorf("add authentication hook: %w", err)
	}
	opts = append([]presenced.Option{presenced.WithLogger(log), presenced.WithACL(nil), presenced.WithServiceAccounts(service)}, opts...)
	p, err := presenced.Attach(n.Server, presenced.ConfigFrom(cfg), opts...)
	if err != nil {
		return nil, err
	}
	n.Presence = p
	return n, nil
}

// secure applies the security posture: with no authentication method and
// without auth.allow_anonymous, every MQTT listener is held to loopback
// (anyone reaching it could claim any user); it loads the credentials, the
// TLS files and the admin token.
func (n *Node) secure() error {
	cfg := &n.cfg
	if cfg.Presence.Visibility != configs.VisibilityOpen && !cfg.AuthEnabled() {
		return fmt.Errorf("presence.visibility %s needs an authentication method (auth.password_file, auth.jwt, auth.cert_user_from): without one any client can claim any user", cfg.Presence.Visibility)
	}
	if !cfg.AuthEnabled() && !cfg.Auth.AllowAnonymous {
		var held []string
		for _, addr := range []*string{&cfg.MQTT.Addr, &cfg.MQTT.WSAddr} {
			if *addr != configs.Off && !configs.LoopbackAddr(*addr) {
				held = append(held, *addr)
				*addr = onLoopback(*addr)
			}
		}
		if len(held) > 0 {
			n.log.Warn().Strs("configured", held).Str("mqtt", cfg.MQTT.Addr).Str("ws", cfg.MQTT.WSAddr).
				Msg("no authentication configured: MQTT listens on loopback only; configure auth (see the README's Security section) or set auth.allow_anonymous: true")
		}
	}
	if cfg.AuthEnabled() {
		a, err := auth.New(auth.Config{
			PasswordFile: cfg.Auth.PasswordFile,
			JWT: auth.JWTConfig{
				HS256SecretFile: cfg.Auth.JWT.HS256SecretFile, PublicKeysFile: cfg.Auth.JWT.PublicKeysFile,
				UserClaim: cfg.Auth.JWT.UserClaim, GroupsClaim: cfg.Auth.JWT.GroupsClaim, ObserverClaim: cfg.Auth.JWT.ObserverClaim,
				ClientIDClaim: cfg.Auth.JWT.ClientIDClaim, ClientIDPrefixClaim: cfg.Auth.JWT.ClientIDPrefixClaim,
				Audience: cfg.Auth.JWT.Audience, Issuer: cfg.Auth.JWT.Issuer, Leeway: leeway(cfg.Auth.JWT.Leeway.D()),
			},
			Observers:    cfg.Presence.Observers,
			CertUserFrom: cfg.Auth.CertUserFrom,
		})
		if err != nil {
			return err
		}
		n.creds = a
	}
	if cfg.TLS.CertFile != "" {
		r, err := listener.LoadTLS(listener.TLSFiles{
			CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile,
			ClientCAFile: cfg.TLS.ClientCAFile, RequireClientCert: cfg.TLS.RequireClientCert,
		})
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		n.tls = r
	}
	if cfg.Admin.Token != "" || cfg.Admin.TokenFile != "" {
		n.adminToken = new(admin.Token)
		if err := n.loadAdminToken(); err != nil {
			return err
		}
	}
	return nil
}

// leeway maps the config's leeway (0 is none) to auth's (0 is the default,
// negative none).
func leeway(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// loadAdminToken sets the admin token from admin.token or admin.token_file.
func (n *Node) loadAdminToken() error {
	token := string(n.cfg.Admin.Token)
	if n.cfg.Admin.TokenFile != "" {
		b, err := os.ReadFile(n.cfg.Admin.TokenFile)
		if err != nil {
			return fmt.Errorf("admin.token_file: %w", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return fmt.Errorf("admin.token_file %s: empty", n.cfg.Admin.TokenFile)
		}
	}
	n.adminToken.Set(token)
	return nil
}

// Reload reads the password file, token keys, TLS files and admin token
// file again (on SIGHUP). What fails to load keeps its old value; the
// errors are joined.
func (n *Node) Reload() error {
	var errs []error
	if n.creds != nil {
		if err := n.creds.Reload(); err != nil {
			errs = append(errs, fmt.Errorf("auth: %w", err))
		}
	}
	if n.tls != nil {
		if err := n.tls.Reload(); err != nil {
			errs = append(errs, fmt.Errorf("tls: %w", err))
		}
	}
	if n.adminToken != nil && n.cfg.Admin.TokenFile != "" {
		if err := n.loadAdminToken(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.Presence != nil {
		if err := n.Presence.ReloadGroups(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// onLoopback returns addr's port on 127.0.0.1.
func onLoopback(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		port = "0"
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// checkOrigin accepts a WebSocket upgrade whose Origin is one of allowed
// ("*" allows any), or that carries none (not a browser). Empty allowed:
// nil, every origin.
func checkOrigin(allowed []string) func(r *http.Request) bool {
	if len(allowed) == 0 {
		return nil
	}
	return func(r *http.Request) bool {
		origin := r.Header.Get("Origin")
		if origin == "" {
			return true
		}
		for _, a := range allowed {
			if a == "*" || strings.EqualFold(a, origin) {
				return true
			}
		}
		return false
	}
}

// Start loads presence, binds every port and starts serving. When it
// returns without error the node accepts connections.
func (n *Node) Start(ctx context.Context) error {
	if n.Presence != nil {
		if err := n.Presence.Start(ctx); err != nil {
			return err
		}
	}
	if err := n.listen(); err != nil {
		n.Server.Listeners.CloseAll(func(string) {})
		if n.Presence != nil {
			_ = n.Presence.Stop(ctx)
		}
		return err
	}
	if err := n.Server.Serve(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if n.admin != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := n.admin.Serve(n.adminLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Error().Err(err).Msg("admin server stopped")
			}
		}()
	}
	store := "none (presence off)"
	if n.Presence != nil {
		store = "memory"
		if len(n.cfg.Redis.Addrs) > 0 {
			store = "redis"
		}
	}
	n.log.Info().Str("node", n.cfg.NodeID).Str("store", store).Str("mqtt", n.MQTTAddr()).Str("ws", n.WSAddr()).
		Str("admin", n.AdminAddr()).Msg("presenced started")
	return nil
}

// listen binds the MQTT listeners and the admin port.
func (n *Node) listen() error {
	if n.cfg.MQTT.Addr != configs.Off {
		n.tcp = listener.NewTCP(listener.Config{ID: "tcp", Address: n.cfg.MQTT.Addr, Server: n.Server, TLS: n.tlsConfig()})
		if err := n.Server.AddListener(n.tcp); err != nil {
			return fmt.Errorf("mqtt.addr %s: %w", n.cfg.MQTT.Addr, err)
		}
	}
	if n.cfg.MQTT.WSAddr != configs.Off {
		n.ws = listener.NewWebSocket(listener.Config{
			ID: "ws", Address: n.cfg.MQTT.WSAddr, Server: n.Server, TLS: n.tlsConfig(),
			CheckOrigin: checkOrigin(n.cfg.MQTT.WSAllowedOrigins),
		})
		if err := n.Server.AddListener(n.ws); err != nil {
			return fmt.Errorf("mqtt.ws_addr %s: %w", n.cfg.MQTT.WSAddr, err)
		}
	}
	if n.cfg.Admin.Addr != configs.Off {
		ln, err := net.Listen("tcp", n.cfg.Admin.Addr)
		if err != nil {
			return fmt.Errorf("admin.addr %s: %w", n.cfg.Admin.Addr, err)
		}
		n.adminLn = ln
		src := n.adminSource()
		cs := []prometheus.Collector{collector{n}}
		if n.Presence != nil {
			cs = append(cs, n.Presence.Collector())
		}
		if src.Metrics, err = admin.Metrics(cs...); err != nil {
			_ = ln.Close()
			return err
		}
		src.Pprof = true // behind the token, or on loopback (configs refuses a wider address without one)
		h := admin.Handler(src)
		if n.adminToken != nil {
			h = n.adminToken.Wrap(h)
		}
		n.admin = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	}
	return nil
}

// tlsConfig returns the listeners' TLS configuration, nil without TLS.
func (n *Node) tlsConfig() *tls.Config {
	if n.tls == nil {
		return nil
	}
	return n.tls.Config()
}

// adminSource is what the admin port reads.
func (n *Node) adminSource() admin.Source {
	if n.Presence == nil {
		return admin.Source{
			Ready:    func() bool { return true },
			Retained: func(string) ([]byte, bool) { return nil, false },
			User: func(context.Context, string) (presence.User, bool, error) {
				return presence.User{}, false, nil
			},
			Stats:    func() any { return n.Stats() },
			Draining: n.Draining,
			Drain:    n.StartDrain,
		}
	}
	p := n.Presence
	src := admin.Source{Ready: p.Ready, Retained: p.Retained, User: p.User, Stats: func() any { return n.Stats() },
		Held: p.Held, Holds: p.Holds, Battles: p.Battles, Group: p.GroupSnapshot, Groups: p.GroupSizes,
		Draining: n.Draining, Drain: n.StartDrain}
	if n.adminToken != nil { // writes only behind a token
		g := p.Groups().Store()
		src.SetGroup, src.AddMembers, src.RemoveMembers, src.DeleteGroup = g.SetGroup, g.AddMembers, g.RemoveMembers, g.DeleteGroup
	}
	return src
}

// Stop shuts the node down: the admin port and the listeners close, every
// connection ends as shutdown, presence writes those ends to the store
// (waiting at most until ctx ends), then every goroutine is stopped and
// waited for.
func (n *Node) Stop(ctx context.Context) error {
	n.drainMu.Lock()
	n.cancelHalt() // a drain in progress ends now
	n.drainMu.Unlock()
	n.drainWG.Wait() // and one the admin API started has stopped
	return n.stop(ctx)
}

// stop is Stop without waiting for a drain (the drain's own end calls it).
func (n *Node) stop(ctx context.Context) error {
	var err error
	n.stopOnce.Do(func() {
		if n.admin != nil {
			_ = n.admin.Shutdown(ctx)
		}
		_ = n.Server.Close()
		n.wg.Wait()
		if n.Presence != nil {
			err = n.Presence.Stop(ctx)
		}
		n.log.Info().Msg("presenced stopped")
	})
	return err
}

// Ready reports whether the store answers (false: degraded, still serving).
func (n *Node) Ready() bool { return n.Presence == nil || n.Presence.Ready() }

// Stats is the node's counters: presence's and its listeners'.
type Stats struct {
	presenced.Stats
	Listeners map[string]listener.Stats `json:"listeners"`
	Auth      *AuthStats                `json:"auth,omitempty"` // with an authentication method
	// AdminRefused counts admin requests without the right token.
	AdminRefused int64 `json:"admin_refused"`
}

// AuthStats are the authentication hook's counters.
type AuthStats struct {
	Accepted       int64 `json:"accepted"`
	Anonymous      int64 `json:"anonymous"`
	Refused        int64 `json:"refused"`
	ClientIDDenied int64 `json:"client_id_denied"`
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	var s Stats
	if n.Presence != nil {
		s.Stats = n.Presence.Stats()
	} else {
		s.Runtime = presenced.ReadRuntimeStats()
	}
	s.Node = n.cfg.NodeID
	if n.Auth != nil {
		c := &n.Auth.Stats
		s.Auth = &AuthStats{Accepted: c.Accepted.Load(), Anonymous: c.Anonymous.Load(), Refused: c.Refused.Load(), ClientIDDenied: c.ClientIDDenied.Load()}
	}
	if n.adminToken != nil {
		s.AdminRefused = n.adminToken.Refused.Load()
	}
	s.Listeners = map[string]listener.Stats{}
	if n.tcp != nil {
		s.Listeners["tcp"] = n.tcp.Stats()
	}
	if n.ws != nil {
		s.Listeners["ws"] = n.ws.Stats()
	}
	return s
}

// MQTTAddr returns the bound MQTT TCP address ("" when off).
func (n *Node) MQTTAddr() string {
	if n.tcp == nil {
		return ""
	}
	return n.tcp.Address()
}

// WSAddr returns the bound WebSocket address ("" when off).
func (n *Node) WSAddr() string {
	if n.ws == nil {
		return ""
	}
	return n.ws.Address()
}

// AdminAddr returns the bound admin address ("" when off).
func (n *Node) AdminAddr() string {
	if n.adminLn == nil {
		return ""
	}
	return n.adminLn.Addr().String()
}
