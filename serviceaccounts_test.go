package presenced

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/crypto/bcrypt"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/hooks"
)

// svcConnect sends an MQTT 5 CONNECT on conn and returns the CONNACK's
// reason code.
func svcConnect(t *testing.T, conn net.Conn, clientID, user, password string) byte {
	t.Helper()
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 5,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 60,
			ClientIdentifier: clientID, UsernameFlag: user != "", Username: []byte(user),
			PasswordFlag: password != "", Password: []byte(password)},
	}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = conn.SetDeadline(time.Time{}) }()
	if _, err := conn.Write(buf.Bytes()); err != nil {
		t.Fatalf("write CONNECT: %v", err)
	}
	head := make([]byte, 2)
	if _, err := io.ReadFull(conn, head); err != nil {
		t.Fatalf("read CONNACK: %v", err)
	}
	rest := make([]byte, head[1])
	if _, err := io.ReadFull(conn, rest); err != nil || head[0] != packets.Connack<<4 || len(rest) < 2 {
		t.Fatalf("CONNACK % x % x: %v", head, rest, err)
	}
	return rest[1]
}

// svcWant is what one connection should be: a service account or not, with
// a presence session or not.
type svcWant struct {
	user, password   string
	service, session bool
}

// svcCheck connects each of conns through dial and checks that the
// presence hook p holds what each wants.
func svcCheck(t *testing.T, p *Plugin, dial func() net.Conn, conns []svcWant) {
	t.Helper()
	sessions := 0
	for i, c := range conns {
		id := fmt.Sprintf("c%d", i)
		if code := svcConnect(t, dial(), id, c.user, c.password); code != 0 {
			t.Fatalf("%s: CONNACK %#x", c.user, code)
		}
		var cl *mqtt.Client
		for _, x := range p.srv.Clients.GetAll() {
			if hooks.ClientID(x) == id {
				cl = x
			}
		}
		if cl == nil {
			t.Fatalf("%s: no client %s", c.user, id)
		}
		if _, service := p.hook.Viewer(cl); service != c.service {
			t.Errorf("%s: service account %v, want %v", c.user, service, c.service)
		}
		if c.session {
			sessions++
		}
		if got := p.hook.Sessions(); got != sessions { // OnSessionEstablish ran before the CONNACK
			t.Errorf("after %s: %d sessions, want %d", c.user, got, sessions)
		}
	}
}

// The binary's wiring (NewBroker): without authentication every connection
// is a service account and has its presence, a name in presence.observers
// included; with a password file, presence.observers names service
// accounts, which have none unless presence.observer_sessions.
func TestBrokerServiceAccountSessions(t *testing.T) {
	pwfile := filepath.Join(t.TempDir(), "passwd")
	var lines bytes.Buffer
	for _, u := range []string{"alice", "dashboard"} {
		h, err := bcrypt.GenerateFromPassword([]byte(u+"-pw"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&lines, "%s:%s\n", u, h)
	}
	if err := os.WriteFile(pwfile, lines.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*configs.Config)
		conns []svcWant
	}{
		{"no authentication", func(c *configs.Config) { c.Presence.Observers = []string{"dashboard"} }, []svcWant{
			{user: "dashboard", service: true, session: true},
			{user: "alice", service: true, session: true},
		}},
		{"password file", func(c *configs.Config) {
			c.Auth.PasswordFile = pwfile
			c.Presence.Observers = []string{"dashboard"}
		}, []svcWant{
			{user: "dashboard", password: "dashboard-pw", service: true, session: false},
			{user: "alice", password: "alice-pw", service: false, session: true},
		}},
		{"password file, observer_sessions", func(c *configs.Config) {
			c.Auth.PasswordFile = pwfile
			c.Presence.Observers = []string{"dashboard"}
			c.Presence.ObserverSessions = true
		}, []svcWant{
			{user: "dashboard", password: "dashboard-pw", service: true, session: true},
			{user: "alice", password: "alice-pw", service: false, session: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := brokerConfig()
			tc.edit(&cfg)
			cfg.ApplyDefaults()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			n, err := NewBroker(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if err := n.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = n.Stop(ctx)
			})
			svcCheck(t, n.presence, func() net.Conn {
				c, err := net.Dial("tcp", n.MQTTAddr())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				return c
			}, tc.conns)
		})
	}
}

// The embedded form's wiring (Attach): presence.observers and
// WithServiceAccounts name service accounts, which have no presence unless
// Presence.ObserverSessions; with neither, every connection is one and has
// its presence.
func TestAttachServiceAccountSessions(t *testing.T) {
	svc := func(cl *mqtt.Client) bool { return string(cl.Properties.Username) == "svc" }
	for _, tc := range []struct {
		name  string
		cfg   func(*Config)
		opts  []Option
		conns []svcWant
	}{
		{"neither", nil, nil, []svcWant{
			{user: "dashboard", service: true, session: true},
			{user: "alice", service: true, session: true},
		}},
		{"presence.observers", func(c *Config) { c.Presence.Observers = []string{"dashboard"} }, nil, []svcWant{
			{user: "dashboard", service: true, session: false},
			{user: "alice", service: false, session: true},
		}},
		{"presence.observers, observer_sessions", func(c *Config) {
			c.Presence.Observers = []string{"dashboard"}
			c.Presence.ObserverSessions = true
		}, nil, []svcWant{
			{user: "dashboard", service: true, session: true},
			{user: "alice", service: false, session: true},
		}},
		{"WithServiceAccounts", nil, []Option{WithServiceAccounts(svc)}, []svcWant{
			{user: "svc", service: true, session: false},
			{user: "alice", service: false, session: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
			if err := srv.AddHook(new(hooks.Authenticator), nil); err != nil {
				t.Fatal(err)
			}
			cfg := Config{NodeID: "unit"}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			p, err := Attach(srv, cfg, append([]Option{WithACL(nil)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = srv.Close()
				_ = p.Stop(ctx)
			})
			svcCheck(t, p, func() net.Conn {
				client, server := net.Pipe()
				done := make(chan struct{})
				go func() { defer close(done); _ = srv.EstablishConnection("t", server) }()
				t.Cleanup(func() { _ = client.Close(); <-done })
				return client
			}, tc.conns)
		})
	}
}

// presence.observer_sessions crosses between the YAML layer and the
// embedded form's Config both ways.
func TestObserverSessionsConfig(t *testing.T) {
	y := configs.Defaults()
	y.Presence.ObserverSessions = true
	c := ConfigFrom(y)
	if !c.Presence.ObserverSessions {
		t.Fatal("ConfigFrom lost presence.observer_sessions")
	}
	if !c.yaml().Presence.ObserverSessions {
		t.Fatal("Config.yaml lost presence.observer_sessions")
	}
}
