package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	presenced "github.com/presenced/presenced"
	"github.com/presenced/presenced/admin"
	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/stats"
)

// waitTimeout bounds every poll in these tests.
const waitTimeout = 10 * time.Second

// lateMargin is how late, end to end, a timed change (a grace, a debounce, a
// will delay, a flap grace) may be shown after its time and still pass: the
// end is read, held, released by a timer and delivered by goroutines that a
// loaded CI machine can stall for over a second (TestGraceThenOffline's clean
// end was shown 1.06 s late on 2026-12-03). The exact times are the pure
// rule's, tested with an injected clock (presence/pace_test.go,
// publisher/schedule_test.go). End to end, the lower bounds stay exact (a
// change is never shown before its time), and where a wrong rule would show
// a change later than the right one, the tests tell them apart by order or
// by the store's own times, not by this margin.
const lateMargin = 3 * time.Second

// testNode is a real broker on random loopback ports, in this process: the
// binary's composition (presenced.Broker, presenced's listeners), or with
// INTEGRATION_FORM=embedded a mochi server built the way an embedding program
// builds it, with mochi's own listeners and allow-all authentication hook,
// and presence attached (presenced.Attach).
type testNode struct {
	Server   *mqtt.Server
	Presence *presenced.Plugin
	cfg      configs.Config
	form     string // "binary" or "embedded"

	mqttAddr, wsAddr, adminAddr string
}

func (n *testNode) MQTTAddr() string  { return n.mqttAddr }
func (n *testNode) WSAddr() string    { return n.wsAddr }
func (n *testNode) AdminAddr() string { return n.adminAddr }

// Stats returns presence's figures.
func (n *testNode) Stats() stats.Snapshot { return n.Presence.Stats() }

// embedded reports whether the suite runs against the embedded form.
func embedded() bool { return os.Getenv("INTEGRATION_FORM") == "embedded" }

// nodeConfig is the config of a test node: random loopback ports, Redis
// (a server of the test's own) with INTEGRATION_STORE=redis, the defaults
// changed by each of edits in turn, applied and validated.
func nodeConfig(t *testing.T, edits ...func(*configs.Config)) configs.Config {
	t.Helper()
	cfg := configs.Defaults()
	cfg.NodeID = "node-a"
	cfg.MQTT.Addr = "127.0.0.1:0"
	cfg.MQTT.WSAddr = "127.0.0.1:0"
	cfg.Admin.Addr = "127.0.0.1:0"
	if os.Getenv("INTEGRATION_STORE") == "redis" {
		srv := redistest.Start(t)
		cfg.Redis.Addrs = []string{srv.Addr()}
		cfg.Redis.NodeTTL = configs.Duration(3 * time.Second)
		cfg.Redis.SweepInterval = configs.Duration(500 * time.Millisecond)
	}
	for _, edit := range edits {
		if edit != nil {
			edit(&cfg)
		}
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// startNode starts a node with defaults changed by edit (the pacing off:
// pacingOff), stopped at cleanup.
func startNode(t *testing.T, edit func(*configs.Config), opts ...presenced.Option) *testNode {
	t.Helper()
	return startConfigured(t, nodeConfig(t, pacingOff, edit), opts...)
}

// startConfigured starts a node of a config made and validated by the
// caller (in the suite's form), stopped at cleanup.
func startConfigured(t *testing.T, cfg configs.Config, opts ...presenced.Option) *testNode {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if embedded() {
		return startEmbedded(t, cfg, log, opts...)
	}
	n, err := presenced.NewBroker(cfg, log, opts...)
	if err != nil {
		t.Fatalf("presenced.NewBroker: %v", err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return &testNode{Server: n.Server(), Presence: n.Presence(), cfg: cfg, form: "binary",
		mqttAddr: n.MQTTAddr(), wsAddr: n.WSAddr(), adminAddr: n.AdminAddr()}
}

// startEmbedded builds presence into a mochi server of the test's own, as
// an embedding program does (see examples/embed): mochi's TCP and WebSocket
// listeners, an authentication hook that lets everyone in, presence as the
// access authority (presenced.WithACL), and the admin API on a listener of
// its own.
func startEmbedded(t *testing.T, cfg configs.Config, log *slog.Logger, opts ...presenced.Option) *testNode {
	t.Helper()
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumClientWritesPending = int32(cfg.MQTT.MaxWritesPending)
	srv := mqtt.New(&mqtt.Options{
		Capabilities: caps, // mochi's default retained expiry: presence refreshes its own
		InlineClient: true,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := srv.AddHook(new(hooks.Authenticator), nil); err != nil {
		t.Fatal(err)
	}
	opts = append([]presenced.Option{presenced.WithLogger(log), presenced.WithACL(nil)}, opts...)
	p, err := presenced.Attach(srv, presenced.ConfigFrom(cfg), opts...)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	n := &testNode{Server: srv, Presence: p, cfg: cfg, form: "embedded", mqttAddr: freeAddr(t), wsAddr: freeAddr(t)}
	if err := srv.AddListener(listeners.NewTCP(listeners.Config{ID: "t1", Address: n.mqttAddr})); err != nil {
		t.Fatalf("tcp listener: %v", err)
	}
	if err := srv.AddListener(listeners.NewWebsocket(listeners.Config{ID: "ws1", Address: n.wsAddr})); err != nil {
		t.Fatalf("websocket listener: %v", err)
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.adminAddr = ln.Addr().String()
	metrics, err := admin.Metrics(p.Collector())
	if err != nil {
		t.Fatal(err)
	}
	src := p.AdminSource(false)
	src.Metrics = metrics
	hs := &http.Server{Handler: admin.Handler(src), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(ln) }()
	// mochi's WebSocket listener binds in Serve: wait until it answers.
	testkit.Wait(t, waitTimeout, "mochi's listeners up", func() error {
		for _, a := range []string{n.mqttAddr, n.wsAddr} {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err != nil {
				return err
			}
			_ = c.Close()
		}
		return nil
	})
	t.Cleanup(func() {
		_ = hs.Close()
		<-served
		// mochi's Server.Close closes each listener's clients through
		// Clients.GetByListener, which takes the clients' read lock twice
		// and can deadlock with a client leaving at that moment (presenced's
		// listeners avoid it). End the connections first, as
		// examples/embed does, so nothing leaves during Close.
		closeClients(t, srv)
		_ = srv.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return n
}

// closeClients disconnects every client and waits until mochi has let go of
// them.
func closeClients(t *testing.T, srv *mqtt.Server) {
	for _, cl := range srv.Clients.GetAll() {
		if !cl.Net.Inline && !cl.Closed() {
			_ = srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
	testkit.Wait(t, waitTimeout, "every client gone", func() error {
		n := atomic.LoadInt64(&srv.Info.ClientsConnected)
		return testkit.Why(n == 0, fmt.Sprintf("%d connected", n))
	})
}

// freeAddr returns a loopback address with a port free at the moment.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // a log line after the test ended
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// client5 is a paho MQTT 5 client over TCP.
type client5 struct {
	*paho.Client
	conn net.Conn
	msgs chan *paho.Publish
	// gone receives the server's DISCONNECT, if it sends one, and when.
	gone chan serverDisconnect
}

// serverDisconnect is a DISCONNECT from the server and when it came.
type serverDisconnect struct {
	*paho.Disconnect
	at time.Time
}

type connectOpt func(*paho.Connect)

func withKeepAlive(s uint16) connectOpt { return func(c *paho.Connect) { c.KeepAlive = s } }
func withDevice(d string) connectOpt {
	return func(c *paho.Connect) {
		if c.Properties == nil {
			c.Properties = &paho.ConnectProperties{}
		}
		c.Properties.User = append(c.Properties.User, paho.UserProperty{Key: "device", Value: d})
	}
}
func withUser(u string) connectOpt {
	return func(c *paho.Connect) { c.Username, c.UsernameFlag = u, true }
}
func withClientID(id string) connectOpt { return func(c *paho.Connect) { c.ClientID = id } }
func withPassword(pw string) connectOpt {
	return func(c *paho.Connect) { c.Password, c.PasswordFlag = []byte(pw), true }
}
func withWill(topic, payload string, retain bool) connectOpt {
	return func(c *paho.Connect) {
		c.WillMessage = &paho.WillMessage{Topic: topic, Payload: []byte(payload), Retain: retain, QoS: 1}
	}
}

// dial5 connects an MQTT 5 client; user "" connects without a username.
func dial5(t *testing.T, addr, clientID, user string, opts ...connectOpt) *client5 {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, waitTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	c, ack, err := connect5(t, conn, clientID, user, opts...)
	if err != nil {
		t.Fatalf("connect %s: %v", clientID, err)
	}
	if ack.ReasonCode != 0 {
		t.Fatalf("connect %s: reason %#x", clientID, ack.ReasonCode)
	}
	return c
}

// connect5 sends CONNECT over conn and returns the CONNACK and the error
// instead of failing the test, so that a refused CONNECT can be checked.
func connect5(t *testing.T, conn net.Conn, clientID, user string, opts ...connectOpt) (*client5, *paho.Connack, error) {
	t.Helper()
	if _, socket := conn.(*net.TCPConn); !socket {
		// paho writes a packet in several Writes, from several goroutines
		// (testkit.Streamed): over a socket of its own they stay whole.
		// Over a WebSocket and over TLS they did not: a PINGREQ landed in
		// a SUBSCRIBE, and the broker dropped the client (no SUBACK).
		inner := conn
		s, err := testkit.Streamed(inner)
		if err != nil {
			t.Fatalf("stream over %T: %v", inner, err)
		}
		t.Cleanup(func() { _ = inner.Close() })
		conn = s
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &client5{conn: conn, msgs: make(chan *paho.Publish, 1024), gone: make(chan serverDisconnect, 1)}
	c.Client = paho.NewClient(paho.ClientConfig{
		ClientID: clientID,
		Conn:     conn,
		OnServerDisconnect: func(d *paho.Disconnect) {
			select {
			case c.gone <- serverDisconnect{d, time.Now()}:
			default:
			}
		},
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			select {
			case c.msgs <- pr.Packet:
			default:
				t.Errorf("client %s: message buffer full", clientID)
			}
			return true, nil
		}},
	})
	cp := &paho.Connect{ClientID: clientID, KeepAlive: 30, CleanStart: true}
	if user != "" {
		cp.Username, cp.UsernameFlag = user, true
	}
	for _, o := range opts {
		o(cp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ack, err := c.Connect(ctx, cp)
	return c, ack, err
}

// set publishes a presence/set payload with QoS 1 and returns the PUBACK reason code.
func (c *client5) publish(t *testing.T, topic, payload string, qos byte, retain bool) byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	resp, err := c.Publish(ctx, &paho.Publish{Topic: topic, Payload: []byte(payload), QoS: qos, Retain: retain})
	if resp == nil {
		if qos == 0 && err == nil {
			return 0
		}
		t.Fatalf("publish %s: %v", topic, err)
	}
	return resp.ReasonCode
}

// disconnect sends a clean DISCONNECT.
func (c *client5) disconnect() { _ = c.Disconnect(&paho.Disconnect{ReasonCode: 0}) }

// drop closes the socket without DISCONNECT.
func (c *client5) drop() { _ = c.conn.Close() }

// observer is an MQTT 5 client that subscribes to presence and checks every
// message it receives: its aggregates go to a testkit.Changes (versions must
// strictly increase per user), and every payload is kept per topic.
type observer struct {
	t       *testing.T
	c       *client5
	changes testkit.Changes
	mu      sync.Mutex
	raw     map[string][]string // every payload per topic
	errors  []string            // payloads that are not a user's presence
}

func newObserver(t *testing.T, addr, filter string, opts ...connectOpt) *observer {
	t.Helper()
	o := &observer{t: t, raw: map[string][]string{}}
	o.c = dial5(t, addr, fmt.Sprintf("observer-%d", time.Now().UnixNano()), "", opts...)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go o.collect(done)
	o.subscribe(filter)
	return o
}

// subscribe subscribes the observer to filter at QoS 1. mochi refuses a
// SUBSCRIBE whose packet identifier is that of one of its own QoS 1
// deliveries to the client still in flight (0x91, packet identifier in
// use: server.go processSubscribe looks in the same inflight map), and
// paho reuses the lowest free identifier: a SUBSCRIBE right after another
// that brought retained messages can meet it. Once paho has acknowledged
// them the identifier is free: it is tried again until then.
func (o *observer) subscribe(filter string) {
	_, err := testkit.Poll(waitTimeout, testkit.Tick, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		sa, err := o.c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}})
		if err != nil && (sa == nil || len(sa.Reasons) != 1 || sa.Reasons[0] != byte(packets.ErrPacketIdentifierInUse.Code)) {
			o.t.Fatalf("subscribe %s: %v", filter, err)
		}
		if err != nil {
			o.t.Logf("subscribe %s: %v; again", filter, err)
		}
		return err
	})
	if err != nil {
		o.t.Fatalf("subscribe %s: %v", filter, err)
	}
}

func (o *observer) collect(done <-chan struct{}) {
	for {
		var m *paho.Publish
		select {
		case <-done:
			return
		case m = <-o.c.msgs:
		}
		o.mu.Lock()
		o.raw[m.Topic] = append(o.raw[m.Topic], string(m.Payload))
		if user, ok := strings.CutPrefix(m.Topic, "presence/users/"); ok {
			p, err := presence.ParseAggregate(m.Payload)
			switch {
			case err != nil:
				o.errors = append(o.errors, fmt.Sprintf("%s: bad payload %q: %v", m.Topic, m.Payload, err))
			case p.User != user:
				o.errors = append(o.errors, fmt.Sprintf("%s: payload names user %q", m.Topic, p.User))
			default:
				o.changes.Add(p)
			}
		}
		o.mu.Unlock()
	}
}

// last returns the newest presence of user.
func (o *observer) last(user string) (presence.Aggregate, bool) { return o.changes.Last(user) }

// history returns every presence of user received so far.
func (o *observer) history(user string) []presence.Aggregate { return o.changes.History(user) }

// waitFor waits until the newest presence of user satisfies cond.
func (o *observer) waitFor(user, what string, cond func(presence.Aggregate) bool) presence.Aggregate {
	o.t.Helper()
	return o.changes.WaitFor(o.t, waitTimeout, user, what, cond)
}

func (o *observer) waitStatus(user string, s presence.Status) presence.Aggregate {
	o.t.Helper()
	return o.waitFor(user, "status "+string(s), func(p presence.Aggregate) bool { return p.Status == s })
}

// check fails the test on any version that did not increase, and on any
// payload that is not a user's presence.
func (o *observer) check() {
	o.t.Helper()
	o.changes.Check(o.t)
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.errors {
		o.t.Error(e)
	}
}

// adminGet fetches a path from the admin port.
func adminGet(t *testing.T, n *testNode, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get("http://" + n.AdminAddr() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, b
}

func statusOf(ss ...presence.Status) func(presence.Aggregate) bool {
	return func(p presence.Aggregate) bool {
		for _, s := range ss {
			if p.Status == s {
				return true
			}
		}
		return false
	}
}

var _ = json.Marshal

// pacingOff turns off what holds changes back from observers (the offline
// grace, the disconnect debounce, the dwell, flap control): most tests assert
// the moment the store learns of a change, and the pacing tests
// (pacing_test.go) turn it on with pacingOn.
func pacingOff(c *configs.Config) {
	zero := configs.Duration(0)
	none := 0
	c.Presence.OfflineGrace = &zero
	c.Presence.DisconnectDebounce = &zero
	c.Presence.MinDwell = &zero
	c.Presence.Flap.Ends = &none
}

// pacingOffEnv is pacingOff for the binary, as environment variables.
var pacingOffEnv = []string{
	"PRESENCED_PRESENCE_OFFLINE_GRACE=0s", "PRESENCED_PRESENCE_DISCONNECT_DEBOUNCE=0s",
	"PRESENCED_PRESENCE_MIN_DWELL=0s", "PRESENCED_PRESENCE_FLAP_ENDS=0",
}

// clientByID finds mochi's client of a client id as the client sent it:
// mochi's own key is scoped by the user (presence.ClientKey).
func clientByID(srv *mqtt.Server, id string) (*mqtt.Client, bool) {
	for _, cl := range srv.Clients.GetAll() {
		if hooks.ClientID(cl) == id {
			return cl, true
		}
	}
	return nil, false
}
