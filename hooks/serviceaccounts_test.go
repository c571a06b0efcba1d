package hooks_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/crypto/bcrypt"

	"github.com/presenced/presenced/auth"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/presence"
)

// recorder is a Tracker that records which users opened a session.
type recorder struct {
	mu    sync.Mutex
	users []string
}

func (r *recorder) Connect(_ presence.ConnID, _, user, _ string, _ *presence.Activity, _ presence.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users = append(r.users, user)
}
func (*recorder) Established(presence.ConnID, string)                      {}
func (*recorder) Set(presence.ConnID, string, string, presence.SetRequest) {}
func (*recorder) Active(presence.ConnID, string)                           {}
func (*recorder) LastWords(presence.ConnID, string, string)                {}
func (*recorder) WillDelay(presence.ConnID, string, time.Duration)         {}
func (*recorder) LastSign(presence.ConnID, string, time.Time)              {}
func (*recorder) Disconnect(presence.ConnID, string, presence.EndReason)   {}
func (*recorder) Expect(presence.ConnID, string, time.Duration, time.Duration) {
}

func (r *recorder) opened(user string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.users, user)
}

// svcMaterial is what the real authenticator reads: a password file, an
// HS256 secret, and a CA with client certificates.
type svcMaterial struct {
	dir, passwords, secretFile string
	secret                     []byte
	ca                         *x509.Certificate
	caKey                      *ecdsa.PrivateKey
	server                     tls.Certificate
}

const svcPassword = "Secret-pw-1"

func newSvcMaterial(t *testing.T) *svcMaterial {
	t.Helper()
	m := &svcMaterial{dir: t.TempDir(), secret: []byte("an HS256 secret of well over thirty-two bytes, for the test only")}
	var pw bytes.Buffer
	for _, u := range []string{"alice", "dashboard"} {
		h, err := bcrypt.GenerateFromPassword([]byte(svcPassword), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&pw, "%s:%s\n", u, h)
	}
	m.passwords = filepath.Join(m.dir, "passwd")
	m.secretFile = filepath.Join(m.dir, "hs256.key")
	for f, b := range map[string][]byte{m.passwords: pw.Bytes(), m.secretFile: m.secret} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if m.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, m.caKey.Public(), m.caKey)
	if err != nil {
		t.Fatal(err)
	}
	if m.ca, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	m.server = m.issue(t, "server", x509.ExtKeyUsageServerAuth)
	return m
}

// issue makes a certificate for cn signed by the CA.
func (m *svcMaterial) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial.Add(serial, big.NewInt(2)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: []string{cn}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, m.ca, key.Public(), m.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// token signs an HS256 token for sub, with the observer claim when given.
func (m *svcMaterial) token(t *testing.T, sub string, observer *bool) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}
	if observer != nil {
		claims["presence_observer"] = *observer
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(m.secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// svcServer is a mochi server with the binary's authentication hook (or,
// without credentials, hooks.Authenticator) and the presence hook.
type svcServer struct {
	srv  *mqtt.Server
	hook *hooks.Presence
	rec  *recorder
	m    *svcMaterial
}

func newSvcServer(t *testing.T, m *svcMaterial, creds *auth.Authenticator, o hooks.Options) *svcServer {
	t.Helper()
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	var authHook mqtt.Hook = new(hooks.Authenticator)
	if creds != nil {
		a := auth.NewHook(auth.HookOptions{Server: srv, Credentials: creds, AllowAnonymous: true})
		authHook = a
		if o.Service == nil {
			o.Service = a.Observer
		}
	}
	if err := srv.AddHook(authHook, nil); err != nil {
		t.Fatal(err)
	}
	s := &svcServer{srv: srv, rec: &recorder{}, m: m}
	o.Prefix, o.Server, o.Tracker = "presence", srv, s.rec
	s.hook = hooks.New(o)
	if err := srv.AddHook(s.hook, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// connect sends an MQTT 5 CONNECT over a pipe (over TLS with cert) and
// returns the CONNACK's reason code and the broker's client.
func (s *svcServer) connect(t *testing.T, clientID, user, password string, cert *tls.Certificate) (byte, *mqtt.Client) {
	t.Helper()
	var client, server net.Conn = net.Pipe()
	if cert != nil {
		pool := x509.NewCertPool()
		pool.AddCert(s.m.ca)
		server = tls.Server(server, &tls.Config{Certificates: []tls.Certificate{s.m.server},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS13})
		client = tls.Client(client, &tls.Config{Certificates: []tls.Certificate{*cert}, RootCAs: pool,
			ServerName: "server", MinVersion: tls.VersionTLS13})
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.srv.EstablishConnection("t", server) }()
	t.Cleanup(func() {
		_ = client.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("the connection did not end")
		}
	})
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
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := client.Write(buf.Bytes()); err != nil {
		t.Fatalf("write CONNECT: %v", err)
	}
	head := make([]byte, 2) // a CONNACK's remaining length fits one byte
	if _, err := io.ReadFull(client, head); err != nil {
		t.Fatalf("read CONNACK: %v", err)
	}
	rest := make([]byte, head[1])
	if _, err := io.ReadFull(client, rest); err != nil || head[0] != packets.Connack<<4 || len(rest) < 2 {
		t.Fatalf("CONNACK % x % x: %v", head, rest, err)
	}
	_ = client.SetDeadline(time.Time{})
	for _, cl := range s.srv.Clients.GetAll() {
		if hooks.ClientID(cl) == clientID && !cl.Closed() {
			return rest[1], cl
		}
	}
	return rest[1], nil
}

// The decision table of a connection's session: who is a service account
// comes from the real authenticator (password file, HS256 tokens with an
// observer claim, client certificates over TLS), and a service account opens
// no session unless ServiceSessions; without authentication every
// connection is one, and the program (presenced.Attach, the binary) sets
// ServiceSessions: everyone keeps a session. Each service account still
// reads as one (Viewer), with or without a session.
func TestServiceAccountSessions(t *testing.T) {
	m := newSvcMaterial(t)
	yes, no := true, false
	type conn struct {
		what, user, password string
		cert                 string // a client certificate with this CN, over TLS
		service, session     bool
	}
	authn := func(methods []string) *auth.Config {
		return &auth.Config{PasswordFile: m.passwords, Observers: []string{"dashboard"}, ObserverMethods: methods,
			JWT: auth.JWTConfig{HS256SecretFile: m.secretFile, ObserverClaim: "presence_observer"}, CertUserFrom: auth.CertUserCN}
	}
	everyone := func(*mqtt.Client) bool { return true }
	for _, tc := range []struct {
		name  string
		auth  *auth.Config // nil: no authentication (hooks.Authenticator)
		opts  hooks.Options
		conns []conn
	}{
		{"named by password", authn([]string{auth.MethodPassword}), hooks.Options{}, []conn{
			{what: "listed, by password", user: "dashboard", password: svcPassword, service: true, session: false},
			{what: "a person", user: "alice", password: svcPassword, service: false, session: true},
			{what: "anonymous", service: false, session: false},
		}},
		{"named by password, observer_sessions", authn([]string{auth.MethodPassword}), hooks.Options{ServiceSessions: true}, []conn{
			{what: "listed, by password", user: "dashboard", password: svcPassword, service: true, session: true},
			{what: "a person", user: "alice", password: svcPassword, service: false, session: true},
			{what: "anonymous", service: false, session: false},
		}},
		{"the token's observer claim", authn([]string{auth.MethodPassword}), hooks.Options{}, []conn{
			{what: "claim true", password: m.token(t, "svc", &yes), service: true, session: false},
			{what: "claim false", password: m.token(t, "bob", &no), service: false, session: true},
			{what: "no claim", password: m.token(t, "carol", nil), service: false, session: true},
		}},
		{"the token's observer claim, observer_sessions", authn([]string{auth.MethodPassword}), hooks.Options{ServiceSessions: true}, []conn{
			{what: "claim true", password: m.token(t, "svc", &yes), service: true, session: true},
		}},
		{"listed, by a method not in observer_methods", authn([]string{auth.MethodPassword}), hooks.Options{}, []conn{
			{what: "a token naming dashboard", password: m.token(t, "dashboard", nil), service: false, session: true},
			{what: "a certificate naming dashboard", cert: "dashboard", service: false, session: true},
		}},
		{"named by certificate", authn([]string{auth.MethodPassword, auth.MethodCertificate}), hooks.Options{}, []conn{
			{what: "a certificate naming dashboard", cert: "dashboard", service: true, session: false},
			{what: "a certificate naming alice", cert: "alice", service: false, session: true},
		}},
		{"observer_methods empty", authn([]string{}), hooks.Options{}, []conn{
			{what: "listed, by password", user: "dashboard", password: svcPassword, service: false, session: true},
		}},
		{"named by presence.observers (embedded)", nil, hooks.Options{Observers: []string{"dashboard"}}, []conn{
			{what: "listed", user: "dashboard", service: true, session: false},
			{what: "not listed", user: "alice", service: false, session: true},
		}},
		{"named by presence.observers (embedded), observer_sessions", nil, hooks.Options{Observers: []string{"dashboard"}, ServiceSessions: true}, []conn{
			{what: "listed", user: "dashboard", service: true, session: true},
		}},
		{"no authentication: every connection a service account", nil, hooks.Options{Service: everyone, ServiceSessions: true}, []conn{
			{what: "a name listed elsewhere", user: "dashboard", service: true, session: true},
			{what: "anyone", user: "alice", service: true, session: true},
			{what: "no username", service: true, session: false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var creds *auth.Authenticator
			if tc.auth != nil {
				var err error
				if creds, err = auth.New(*tc.auth); err != nil {
					t.Fatal(err)
				}
			}
			s := newSvcServer(t, m, creds, tc.opts)
			sessions := 0
			for i, c := range tc.conns {
				var cert *tls.Certificate
				if c.cert != "" {
					cc := m.issue(t, c.cert, x509.ExtKeyUsageClientAuth)
					cert = &cc
				}
				id := fmt.Sprintf("c%d", i)
				code, cl := s.connect(t, id, c.user, c.password, cert)
				if code != 0 || cl == nil {
					t.Fatalf("%s: CONNACK %#x", c.what, code)
				}
				user, service := s.hook.Viewer(cl)
				if service != c.service {
					t.Errorf("%s: service account %v, want %v", c.what, service, c.service)
				}
				name := c.user
				if name == "" {
					name = string(cl.Properties.Username) // the token's or the certificate's user
				}
				if user != name {
					t.Errorf("%s: Viewer's user %q, want %q", c.what, user, name)
				}
				if c.session {
					sessions++
				}
				// OnSessionEstablish ran before the CONNACK.
				if got := name != "" && s.rec.opened(name); got != c.session {
					t.Errorf("%s (%s): session opened %v, want %v", c.what, name, got, c.session)
				}
				if got := s.hook.Sessions(); got != sessions {
					t.Errorf("after %s: %d sessions, want %d", c.what, got, sessions)
				}
			}
		})
	}
}
