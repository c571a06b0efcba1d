// Package node composes the presenced binary from its parts: a mochi
// server with presenced's listeners (TCP and WebSocket), the allow-all
// authentication hook, presence attached through the same API an embedding
// program uses (package presenced), and the admin HTTP port. It is wiring
// only; nothing imports it but cmd/presenced and the tests.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/rs/zerolog"

	presenced "github.com/presenced/presenced"
	"github.com/presenced/presenced/admin"
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

	tcp     *listener.TCP
	ws      *listener.WebSocket
	admin   *http.Server
	adminLn net.Listener
	wg      sync.WaitGroup

	stopOnce sync.Once
}

// New builds a node from a validated config. mochiLog receives mochi's own
// slog records (the caller routes them into the same zerolog logger); opts
// go to presence (tests set its clock).
func New(cfg configs.Config, log zerolog.Logger, mochiLog *slog.Logger, opts ...presenced.Option) (*Node, error) {
	n := &Node{cfg: cfg, log: log}
	caps := mqtt.NewDefaultServerCapabilities()
	// mochi purges every retained message 24 h after it was published unless
	// this is 0 (clearExpiredRetainedMessages). The binary keeps retained
	// messages for as long as they are true; a v5 client's own message
	// expiry interval is still honoured.
	caps.MaximumMessageExpiryInterval = 0
	caps.MaximumClientWritesPending = int32(cfg.MQTT.MaxWritesPending)
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
		if err := n.Server.AddHook(new(auth.AllowHook), nil); err != nil {
			return nil, fmt.Errorf("add allow hook: %w", err)
		}
		return n, nil
	}
	// Authentication proper comes in a later release: every connection is
	// allowed, under presence's identity rules, and presence is the access
	// authority (every topic allowed, presence's rules on top).
	if err := n.Server.AddHook(new(hooks.Authenticator), nil); err != nil {
		return nil, fmt.Errorf("add authentication hook: %w", err)
	}
	opts = append([]presenced.Option{presenced.WithLogger(log), presenced.WithACL(nil)}, opts...)
	p, err := presenced.Attach(n.Server, presenced.ConfigFrom(cfg), opts...)
	if err != nil {
		return nil, err
	}
	n.Presence = p
	return n, nil
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
		n.tcp = listener.NewTCP(listener.Config{ID: "tcp", Address: n.cfg.MQTT.Addr, Server: n.Server})
		if err := n.Server.AddListener(n.tcp); err != nil {
			return fmt.Errorf("mqtt.addr %s: %w", n.cfg.MQTT.Addr, err)
		}
	}
	if n.cfg.MQTT.WSAddr != configs.Off {
		n.ws = listener.NewWebSocket(listener.Config{ID: "ws", Address: n.cfg.MQTT.WSAddr, Server: n.Server})
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
		n.admin = &http.Server{Handler: admin.Handler(n.adminSource()), ReadHeaderTimeout: 10 * time.Second}
	}
	return nil
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
			Stats: func() any { return n.Stats() },
		}
	}
	p := n.Presence
	return admin.Source{Ready: p.Ready, Retained: p.Retained, User: p.User, Stats: func() any { return n.Stats() }}
}

// Stop shuts the node down: the admin port and the listeners close, every
// connection ends as shutdown, presence writes those ends to the store
// (waiting at most until ctx ends), then every goroutine is stopped and
// waited for.
func (n *Node) Stop(ctx context.Context) error {
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
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	var s Stats
	if n.Presence != nil {
		s.Stats = n.Presence.Stats()
	}
	s.Node = n.cfg.NodeID
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
