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
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/store"
)

// Node is one running presenced: broker, presence and admin port.
type Node struct {
	cfg   configs.Config
	log   zerolog.Logger
	now   func() time.Time
	store Store

	Server    *mqtt.Server
	Hook      *hooks.Presence
	Tracker   *Tracker
	Publisher *Publisher

	retained sync.RWMutex // see hooks.Options.Retained
	redis    *store.Redis // nil with the in-memory store
	redisC   redis.UniversalClient

	tcp     *tcpListener
	ws      *wsListener
	admin   *http.Server
	adminLn net.Listener

	stop     chan struct{}
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// Option changes how a node is built (tests inject a clock or a store).
type Option func(*Node)

// WithClock sets the clock used by the store.
func WithClock(now func() time.Time) Option { return func(n *Node) { n.now = now } }

// WithStore replaces the store (the default is the in-memory store).
func WithStore(s Store) Option { return func(n *Node) { n.store = s } }

// trackerShards is how many workers write to the store side by side.
const trackerShards = 4

// New builds a node from a validated config. mochiLog receives mochi's own
// slog records (the caller routes them into the same zerolog logger).
func New(cfg configs.Config, log zerolog.Logger, mochiLog *slog.Logger, opts ...Option) (*Node, error) {
	n := &Node{cfg: cfg, log: log, now: time.Now, stop: make(chan struct{})}
	for _, o := range opts {
		o(n)
	}
	if n.store == nil && len(cfg.Redis.Addrs) > 0 && cfg.Presence.Mode != "off" {
		n.redisC = newRedisClient(cfg.Redis)
		n.redis = store.NewRedis(store.RedisOptions{
			Client:        n.redisC,
			Prefix:        cfg.Redis.KeyPrefix,
			Node:          cfg.NodeID,
			Authoritative: cfg.Presence.AuthoritativeDevices,
			NodeTTL:       cfg.Redis.NodeTTL.D(),
			Retention:     cfg.Redis.Retention.D(),
			Log:           log.With().Str("component", "redis").Logger(),
			OnReset:       func() { n.Tracker.Reassert() },
			Known:         func() map[string]uint64 { return n.Publisher.Versions() },
		})
		n.store = n.redis
	}
	if n.store == nil {
		n.store = store.NewMemory(presence.NewRules(cfg.Presence.AuthoritativeDevices), n.now)
	}

	caps := mqtt.NewDefaultServerCapabilities()
	// mochi purges every retained message 24 h after it was published unless
	// this is 0 (clearExpiredRetainedMessages). Presence must stay retained
	// for as long as it is true, so the forced purge is off; a v5 client's own
	// message expiry interval is still honoured.
	caps.MaximumMessageExpiryInterval = 0
	caps.MaximumClientWritesPending = int32(cfg.MQTT.MaxWritesPending)
	n.Server = mqtt.New(&mqtt.Options{
		Capabilities:             caps,
		ClientNetReadBufferSize:  cfg.MQTT.ReadBufferSize,
		ClientNetWriteBufferSize: cfg.MQTT.WriteBufferSize,
		InlineClient:             true,
		Logger:                   mochiLog,
	})

	n.Tracker = NewTracker(n.store, cfg.NodeID, cfg.Presence.SessionTTL.D(), trackerShards, log.With().Str("component", "tracker").Logger())
	n.Publisher = NewPublisher(cfg.Presence.TopicPrefix, n.retain, log.With().Str("component", "publisher").Logger())
	n.Hook = hooks.New(hooks.Options{
		Prefix: cfg.Presence.TopicPrefix,
		Identity: hooks.IdentityRule{
			FromClientID: cfg.Identity.UserFrom == configs.UserFromClientID,
			Separator:    cfg.Identity.Separator,
		},
		ServerKeepAlive: cfg.MQTT.ServerKeepAlive.D(),
		Clients:         n.Server.Clients,
		Tracker:         n.Tracker,
		Retained:        &n.retained,
		Dropped:         n.Publisher.Resend,
		Log:             log.With().Str("component", "hook").Logger(),
	})
	if cfg.Presence.Mode == "off" {
		// The benchmark baseline: the same broker, listeners and limits,
		// without presence. mochi refuses every connection without an
		// authentication hook, so it gets the allow-all one.
		if err := n.Server.AddHook(new(auth.AllowHook), nil); err != nil {
			return nil, fmt.Errorf("add allow hook: %w", err)
		}
		return n, nil
	}
	if err := n.Server.AddHook(n.Hook, nil); err != nil {
		return nil, fmt.Errorf("add presence hook: %w", err)
	}
	return n, nil
}

// retain publishes a retained QoS 1 message from the broker itself.
func (n *Node) retain(topic string, payload []byte) error {
	n.retained.Lock()
	defer n.retained.Unlock()
	return n.Server.Publish(topic, payload, true, 1)
}

// Start binds every port, loads the current presence and starts serving.
// When it returns without error the node accepts connections.
func (n *Node) Start(ctx context.Context) error {
	n.store.Watch(n.Publisher.Offer)
	if n.redis != nil {
		if err := n.redis.Start(ctx); err != nil {
			return fmt.Errorf("redis.addrs %v: %w", n.cfg.Redis.Addrs, err)
		}
	}
	if err := n.store.Load(ctx, n.Publisher.Offer); err != nil {
		return fmt.Errorf("initial load: %w", err)
	}
	if n.cfg.MQTT.Addr != configs.Off {
		n.tcp = newTCPListener("tcp", n.cfg.MQTT.Addr, n.closeListenerClients)
		if err := n.Server.AddListener(n.tcp); err != nil {
			return fmt.Errorf("mqtt.addr %s: %w", n.cfg.MQTT.Addr, err)
		}
	}
	if n.cfg.MQTT.WSAddr != configs.Off {
		n.ws = newWSListener("ws", n.cfg.MQTT.WSAddr, n.closeListenerClients)
		if err := n.Server.AddListener(n.ws); err != nil {
			n.Server.Listeners.CloseAll(func(string) {})
			return fmt.Errorf("mqtt.ws_addr %s: %w", n.cfg.MQTT.WSAddr, err)
		}
	}
	if n.cfg.Admin.Addr != configs.Off {
		ln, err := net.Listen("tcp", n.cfg.Admin.Addr)
		if err != nil {
			n.Server.Listeners.CloseAll(func(string) {})
			return fmt.Errorf("admin.addr %s: %w", n.cfg.Admin.Addr, err)
		}
		n.adminLn = ln
		n.admin = &http.Server{Handler: n.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	}

	n.Tracker.Start()
	n.Publisher.Start()
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
	n.loop("renew", n.cfg.Presence.RenewInterval.D(), n.Tracker.Renew)
	reapEvery := n.cfg.Presence.ReapInterval.D()
	if n.redis != nil {
		reapEvery = n.cfg.Redis.SweepInterval.D()
	}
	n.loop("reap", reapEvery, func(ctx context.Context) error {
		_, err := n.store.Reap(ctx)
		return err
	})
	n.log.Info().Str("node", n.cfg.NodeID).Str("mqtt", n.MQTTAddr()).Str("ws", n.WSAddr()).
		Str("admin", n.AdminAddr()).Msg("presenced started")
	return nil
}

// closeListenerClients disconnects every client of a listener as the server
// shuts down (mochi's own version can deadlock; see tcpListener.Close).
func (n *Node) closeListenerClients(id string) {
	for _, cl := range n.Server.Clients.GetAll() {
		if cl.Net.Listener == id && !cl.Closed() {
			_ = n.Server.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
}

// loop runs fn every interval until Stop.
func (n *Node) loop(name string, every time.Duration, fn func(context.Context) error) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-n.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), every)
				if err := fn(ctx); err != nil {
					ev := n.log.Warn()
					if errors.Is(err, store.ErrUnavailable) {
						ev = n.log.Debug() // the store logs an outage once
					}
					ev.Err(err).Str("loop", name).Msg("periodic task failed")
				}
				cancel()
			}
		}
	}()
}

// Stop shuts the node down: the listeners close and every connection ends as
// shutdown, the tracker writes those ends to the store (waiting at most until
// ctx ends), then every goroutine is stopped and waited for.
func (n *Node) Stop(ctx context.Context) error {
	var err error
	n.stopOnce.Do(func() {
		if n.admin != nil {
			_ = n.admin.Shutdown(ctx)
		}
		_ = n.Server.Close()
		if derr := n.Tracker.Drain(ctx); derr != nil {
			err = fmt.Errorf("drain presence writes: %w", derr)
		}
		close(n.stop)
		n.wg.Wait()
		n.Tracker.Stop()
		n.Publisher.Stop()
		if n.redis != nil {
			n.redis.Stop()
			_ = n.redisC.Close()
		}
		n.log.Info().Msg("presenced stopped")
	})
	return err
}

// Ready reports whether the store answers (false: degraded, still serving).
func (n *Node) Ready() bool { return n.redis == nil || n.redis.Ready() }

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
