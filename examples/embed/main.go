package main

import (
	"context"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	presenced "github.com/presenced/presenced"
	"github.com/presenced/presenced/admin"
	"github.com/presenced/presenced/hooks"
)

func main() {
	tcpAddr := flag.String("mqtt", ":1883", "MQTT over TCP")
	wsAddr := flag.String("ws", ":1882", "MQTT over WebSocket")
	adminAddr := flag.String("admin", "127.0.0.1:8081", "presence's admin API")
	redisAddr := flag.String("redis", "", "Redis address, to share presence between nodes (empty: in memory)")
	node := flag.String("node", "embed-1", "this node's id")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	// The program's own broker, with mochi's authentication ledger. Presence
	// needs the inline client to publish.
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: log})
	ledger := &auth.Ledger{
		Auth: auth.AuthRules{
			{Username: "alice", Password: "alice-secret", Allow: true},
			{Username: "bob", Password: "bob-secret", Allow: true},
		},
		ACL: auth.ACLRules{
			// alice and bob each own a topic tree; everyone reads the rest.
			{Username: "alice", Filters: auth.Filters{"alice/#": auth.ReadWrite, "bob/#": auth.Deny}},
			{Username: "bob", Filters: auth.Filters{"bob/#": auth.ReadWrite, "alice/#": auth.Deny}},
		},
	}
	// The ledger decides who connects (hooks.Authenticator), and what each
	// may read and write (presenced.WithACL): mochi grants what any hook
	// allows, so presence takes the ledger's access decision and adds its
	// own for presence topics, instead of mochi's auth.Hook answering for
	// both.
	if err := srv.AddHook(&hooks.Authenticator{Check: func(cl *mqtt.Client, pk packets.Packet) bool {
		_, ok := ledger.AuthOk(cl, pk)
		return ok
	}}, nil); err != nil {
		fatal(log, "authentication hook", err)
	}
	acl := func(cl *mqtt.Client, topic string, write bool) bool {
		_, ok := ledger.ACLOk(cl, topic, write)
		return ok
	}

	// Presence: the user is whoever the ledger let in.
	cfg := presenced.Config{NodeID: *node}
	if *redisAddr != "" {
		cfg.Redis.Addrs = []string{*redisAddr}
	}
	p, err := presenced.Attach(srv, cfg, presenced.WithACL(acl))
	if err != nil {
		fatal(log, "attach presence", err)
	}

	// The program's own listeners (mochi's). presenced's listener package
	// offers drop-in ones whose writes never block on a slow client.
	if err := srv.AddListener(listeners.NewTCP(listeners.Config{ID: "t1", Address: *tcpAddr})); err != nil {
		fatal(log, "tcp listener", err)
	}
	if err := srv.AddListener(listeners.NewWebsocket(listeners.Config{ID: "ws1", Address: *wsAddr})); err != nil {
		fatal(log, "websocket listener", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := p.Start(ctx); err != nil {
		fatal(log, "start presence", err)
	}
	if err := srv.Serve(); err != nil {
		fatal(log, "serve", err)
	}
	metrics, err := admin.Metrics(p.Collector()) // GET /metrics: presence's, Go's and the process's
	if err != nil {
		fatal(log, "metrics", err)
	}
	src := p.AdminSource(false) // no token in front of it: the API may not write groups
	src.Metrics = metrics
	api := &http.Server{Addr: *adminAddr, ReadHeaderTimeout: 10 * time.Second, Handler: admin.Handler(src)}
	api.RegisterOnShutdown(src.Events.Close) // the console's event streams end: Shutdown does not wait for them
	go func() {
		if err := api.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			log.Error("admin API stopped", "error", err)
		}
	}()
	log.Info("embed: serving", "mqtt", *tcpAddr, "ws", *wsAddr, "admin", *adminAddr)

	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = api.Shutdown(sctx)
	// mochi's Close can deadlock when a client leaves while it lists the
	// clients of a listener; end the connections first.
	disconnectAll(srv)
	_ = srv.Close()  // every connection has ended as "shutdown"
	_ = p.Stop(sctx) // presence writes those ends and stops
	log.Info("embed: stopped")
}

// disconnectAll ends every client connection and waits (a few seconds at
// most) until mochi has let go of them.
func disconnectAll(srv *mqtt.Server) {
	for _, cl := range srv.Clients.GetAll() {
		if !cl.Net.Inline && !cl.Closed() {
			_ = srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); atomic.LoadInt64(&srv.Info.ClientsConnected) > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

func fatal(log *slog.Logger, what string, err error) {
	log.Error(what, "error", err)
	os.Exit(1)
}
