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
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/rs/zerolog"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/node"
	"github.com/presenced/presenced/presence"
)

// waitTimeout bounds every poll in these tests.
const waitTimeout = 10 * time.Second

// testNode is a real broker on random loopback ports, in this process.
type testNode struct {
	*node.Node
	cfg configs.Config
}

// startNode starts a node with defaults changed by edit, stopped at cleanup.
func startNode(t *testing.T, edit func(*configs.Config), opts ...node.Option) *testNode {
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
	if edit != nil {
		edit(&cfg)
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	log := zerolog.Nop()
	if testing.Verbose() {
		log = zerolog.New(zerolog.ConsoleWriter{Out: testLogWriter{t}}).Level(zerolog.DebugLevel)
	}
	n, err := node.New(cfg, log, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	if err != nil {
		t.Fatalf("node.New: %v", err)
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
	return &testNode{Node: n, cfg: cfg}
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // a log line after the test ended
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// client5 is a paho MQTT 5 client over TCP.
type client5 struct {
	*paho.Client
	conn net.Conn
	msgs chan *paho.Publish
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
	t.Cleanup(func() { _ = conn.Close() })
	c := &client5{conn: conn, msgs: make(chan *paho.Publish, 1024)}
	c.Client = paho.NewClient(paho.ClientConfig{
		ClientID: clientID,
		Conn:     conn,
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

// observer subscribes to presence and checks every message it receives:
// versions must strictly increase per user.
type observer struct {
	t      *testing.T
	c      *client5
	mu     sync.Mutex
	seen   map[string][]presence.Presence
	raw    map[string][]string // every payload per topic, for topics outside presence/users
	errors []string
}

func newObserver(t *testing.T, addr, filter string) *observer {
	t.Helper()
	o := &observer{t: t, seen: map[string][]presence.Presence{}, raw: map[string][]string{}}
	o.c = dial5(t, addr, fmt.Sprintf("observer-%d", time.Now().UnixNano()), "")
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go o.collect(done)
	o.subscribe(filter)
	return o
}

func (o *observer) subscribe(filter string) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := o.c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}}); err != nil {
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
			p, err := presence.ParsePresence(m.Payload)
			switch {
			case err != nil:
				o.errors = append(o.errors, fmt.Sprintf("%s: bad payload %q: %v", m.Topic, m.Payload, err))
			case p.User != user:
				o.errors = append(o.errors, fmt.Sprintf("%s: payload names user %q", m.Topic, p.User))
			default:
				if prev := o.seen[user]; len(prev) > 0 && p.Version <= prev[len(prev)-1].Version {
					o.errors = append(o.errors, fmt.Sprintf("%s: version %d after %d", m.Topic, p.Version, prev[len(prev)-1].Version))
				}
				o.seen[user] = append(o.seen[user], p)
			}
		}
		o.mu.Unlock()
	}
}

// last returns the newest presence of user.
func (o *observer) last(user string) (presence.Presence, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.seen[user]
	if len(s) == 0 {
		return presence.Presence{}, false
	}
	return s[len(s)-1], true
}

// history returns every presence of user received so far.
func (o *observer) history(user string) []presence.Presence {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]presence.Presence(nil), o.seen[user]...)
}

// waitFor polls until the newest presence of user satisfies cond.
func (o *observer) waitFor(user, what string, cond func(presence.Presence) bool) presence.Presence {
	o.t.Helper()
	var p presence.Presence
	eventually(o.t, waitTimeout, user+": "+what, func() bool {
		var ok bool
		p, ok = o.last(user)
		return ok && cond(p)
	})
	return p
}

func (o *observer) waitStatus(user string, s presence.Status) presence.Presence {
	o.t.Helper()
	return o.waitFor(user, "status "+string(s), func(p presence.Presence) bool { return p.Status == s })
}

// check fails the test on any version that went backwards or bad payload.
func (o *observer) check() {
	o.t.Helper()
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

func statusOf(ss ...presence.Status) func(presence.Presence) bool {
	return func(p presence.Presence) bool {
		for _, s := range ss {
			if p.Status == s {
				return true
			}
		}
		return false
	}
}

var _ = json.Marshal
