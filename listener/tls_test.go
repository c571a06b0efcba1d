package listener

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/packets"
	"go.uber.org/goleak"

	"github.com/presenced/presenced/internal/testkit"
)

// testCA is a certificate authority made for a test (ECDSA P-256).
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func newCA(t testing.TB, name string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue signs tmpl with ca and returns the certificate and a new key, as PEM.
func (ca *testCA) issue(t testing.TB, tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// serverPEM issues a server certificate for 127.0.0.1 (an IP SAN).
func (ca *testCA) serverPEM(t testing.TB, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.issue(t, &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "presenced test server"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// clientCert issues a client certificate with common name cn and DNS SANs.
func (ca *testCA) clientCert(t testing.TB, cn string, dns ...string) tls.Certificate {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, &x509.Certificate{
		SerialNumber: big.NewInt(100),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     dns,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return keyPair(t, certPEM, keyPEM)
}

func keyPair(t testing.TB, certPEM, keyPEM []byte) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serverTLS returns a server TLS configuration with a certificate of ca for
// 127.0.0.1.
func (ca *testCA) serverTLS(t testing.TB) *tls.Config {
	t.Helper()
	certPEM, keyPEM := ca.serverPEM(t, 2)
	return &tls.Config{Certificates: []tls.Certificate{keyPair(t, certPEM, keyPEM)}}
}

// clientTLS returns a client TLS configuration trusting ca, presenting
// certs.
func (ca *testCA) clientTLS(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: ca.pool(), Certificates: certs}
}

func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// serverSerial returns the serial number of the certificate the server
// presented to c.
func serverSerial(t testing.TB, c *client) int64 {
	t.Helper()
	var cs tls.ConnectionState
	switch tr := c.tr.(type) {
	case *tls.Conn:
		cs = tr.ConnectionState()
	case *testkit.WSConn:
		cs = tr.WS.UnderlyingConn().(*tls.Conn).ConnectionState()
	default:
		t.Fatalf("%T is not TLS", c.tr)
	}
	return cs.PeerCertificates[0].SerialNumber.Int64()
}

// recHook records, by client ID, what PeerCertificate returns in
// OnConnectAuthenticate and the error of OnDisconnect. It decides nothing:
// its OnConnectAuthenticate returns false, so that the next hook decides.
type recHook struct {
	mqtt.HookBase
	mu    sync.Mutex
	peers map[string]*x509.Certificate // nil: PeerCertificate returned false
	ends  map[string]error
}

func (h *recHook) ID() string { return "rec" }

func (h *recHook) Provides(b byte) bool {
	return b == mqtt.OnConnectAuthenticate || b == mqtt.OnDisconnect
}

func (h *recHook) OnConnectAuthenticate(cl *mqtt.Client, _ packets.Packet) bool {
	cert, ok := PeerCertificate(cl.Net.Conn)
	if ok != (cert != nil) {
		cert = &x509.Certificate{Subject: pkix.Name{CommonName: "PeerCertificate returned inconsistent results"}}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.peers[cl.ID] = cert
	return false
}

func (h *recHook) OnDisconnect(cl *mqtt.Client, err error, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ends[cl.ID] = err
}

// peer returns what PeerCertificate gave for client id, and whether the
// hook saw the client.
func (h *recHook) peer(id string) (*x509.Certificate, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.peers[id]
	return c, ok
}

func (h *recHook) end(id string) (error, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	err, ok := h.ends[id]
	return err, ok
}

// newRecServer returns a server whose hooks are a recHook and then
// AllowHook.
func newRecServer(t testing.TB) (*mqtt.Server, *recHook) {
	t.Helper()
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	h := &recHook{peers: map[string]*x509.Certificate{}, ends: map[string]error{}}
	if err := srv.AddHook(h, nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	return srv, h
}

// startTLSBroker starts a broker whose listener of kind serves TLS with a
// certificate of ca; its clients trust ca.
func startTLSBroker(t testing.TB, ca *testCA, kind string, cfg Config) *broker {
	t.Helper()
	cfg.TLS = ca.serverTLS(t)
	return startBrokerOn(t, newServer(t), kind, cfg, ca.clientTLS())
}

// MQTT 3.1.1 over TLS and over wss: connect, subscribe, receive publishes;
// mochi's connection has WritesNeverBlock and From finds the *Conn; on TCP
// it has ConnectionState; PeerCertificate is false without a client
// certificate; Close leaves nothing behind.
func TestTLSPubSub(t *testing.T) {
	ca := newCA(t, "test CA")
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			b := startTLSBroker(t, ca, kind, Config{})
			defer b.close(t)
			if p, want := b.l.Protocol(), map[string]string{"tcp": "tcp+tls", "ws": "wss"}[kind]; p != want {
				t.Errorf("Protocol() = %q, want %q", p, want)
			}
			c := b.dial(t, 0)
			c.connect("sub")
			c.subscribe(1, "a/b", 1)
			if err := b.srv.Publish("a/b", []byte("from the broker"), false, 1); err != nil {
				t.Fatal(err)
			}
			pk := c.expect(packets.Publish)
			if pk.TopicName != "a/b" || string(pk.Payload) != "from the broker" || pk.FixedHeader.Qos != 1 {
				t.Fatalf("got %s %q QoS %d", pk.TopicName, pk.Payload, pk.FixedHeader.Qos)
			}
			c.puback(pk.PacketID)
			c.publish("a/b", []byte("from the client"))
			if pk := c.expect(packets.Publish); string(pk.Payload) != "from the client" {
				t.Fatalf("got %q", pk.Payload)
			}

			cl, ok := b.srv.Clients.Get("sub")
			if !ok {
				t.Fatal("client sub not known to mochi")
			}
			if _, ok := From(cl.Net.Conn); !ok {
				t.Fatalf("From(%T) found no *Conn", cl.Net.Conn)
			}
			if nb, ok := cl.Net.Conn.(interface{ WritesNeverBlock() bool }); !ok || !nb.WritesNeverBlock() {
				t.Fatalf("%T does not say its writes never block", cl.Net.Conn)
			}
			if kind == "tcp" {
				cs, ok := cl.Net.Conn.(interface{ ConnectionState() tls.ConnectionState })
				if !ok || !cs.ConnectionState().HandshakeComplete {
					t.Fatalf("%T: no completed TLS handshake in sight", cl.Net.Conn)
				}
			}
			if cert, ok := PeerCertificate(cl.Net.Conn); ok || cert != nil {
				t.Fatalf("PeerCertificate without a client certificate: %v, %v", cert, ok)
			}
			if s := b.l.Stats(); s != (Stats{Open: 1}) {
				t.Fatalf("stats with one client: %+v", s)
			}

			b.close(t)
			if s := b.l.Stats(); s != (Stats{}) {
				t.Fatalf("stats after Close: %+v", s)
			}
			if err := closedByPeer(c.sock, waitTimeout); err != nil {
				t.Fatalf("client socket after Close: %v", err)
			}
		})
	}
}

// A browser client over wss://: gorilla/websocket's Dialer with the test CA
// and the subprotocol "mqtt" connects and gets its CONNACK, and HTTP/1.1 is
// negotiated although the browser offers h2 first and the server's
// configuration lists h2, directly or from GetConfigForClient.
func TestWSSBrowserClient(t *testing.T) {
	ca := newCA(t, "test CA")
	direct := ca.serverTLS(t)
	direct.NextProtos = []string{"h2", "http/1.1"}
	perClient := &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return direct, nil }}
	for name, cfg := range map[string]*tls.Config{"NextProtos": direct, "GetConfigForClient": perClient} {
		t.Run(name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			b := startBrokerOn(t, newServer(t), "ws", Config{TLS: cfg}, nil)
			defer b.close(t)
			browser := ca.clientTLS()
			browser.NextProtos = []string{"h2", "http/1.1"}
			c := dialWSWith(t, b.l.Address(), 0, browser)
			if p := c.tr.(*testkit.WSConn).WS.UnderlyingConn().(*tls.Conn).ConnectionState().NegotiatedProtocol; p != "http/1.1" {
				t.Fatalf("negotiated %q, want http/1.1", p)
			}
			c.connect("browser")
			c.subscribe(1, "presence/#", 0)
			if err := b.srv.Publish("presence/alice", []byte("online"), false, 0); err != nil {
				t.Fatal(err)
			}
			if pk := c.expect(packets.Publish); string(pk.Payload) != "online" {
				t.Fatalf("got %q", pk.Payload)
			}
			if direct.NextProtos[0] != "h2" {
				t.Fatal("the listener changed the caller's configuration")
			}
		})
	}
}

// The stall of TestStalledClientDoesNotBlockPublisher over TLS and wss: the
// TLS layer sits on the *Conn, so its writes do not block either, and the
// stalled client ends as a slow consumer, which mochi's hooks learn in
// OnDisconnect.
func TestTLSStalledClientDoesNotBlockPublisher(t *testing.T) {
	ca := newCA(t, "test CA")
	cases := []struct {
		name string
		cfg  Config
	}{
		{"over MaxBacklog", Config{MaxBacklog: 1 << 20}},
		{"no progress for WriteTimeout", Config{MaxBacklog: 64 << 20, WriteTimeout: time.Second}},
	}
	for _, kind := range kinds {
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				defer goleak.VerifyNone(t)
				srv, rec := newRecServer(t)
				cfg := tc.cfg
				cfg.TLS = ca.serverTLS(t)
				b := startBrokerOn(t, srv, kind, cfg, ca.clientTLS())
				defer b.close(t)
				stalledScenario(t, b, func(s Stats) bool { return s.SlowConsumers == 1 })
				testkit.Wait(t, waitTimeout, "OnDisconnect of the stalled client", func() error {
					_, ok := rec.end("stalled")
					return testkit.Why(ok, "not yet")
				})
				if err, _ := rec.end("stalled"); !errors.Is(err, ErrSlowConsumer) {
					t.Fatalf("OnDisconnect error %v, want ErrSlowConsumer", err)
				}
				testkit.Wait(t, waitTimeout, "no bytes left waiting", func() error {
					s := b.l.Stats()
					return testkit.Why(s == Stats{Open: 1, SlowConsumers: 1}, fmt.Sprintf("stats %+v", s))
				})
			})
		}
	}
}

// On shutdown a TLS client whose socket buffer is full still gets all its
// bytes and the DISCONNECT: the close_notify of the TLS layer, which sets a
// write deadline of now, does not cut the drain short.
func TestTLSShutdownDisconnectReachesBusyClient(t *testing.T) {
	ca := newCA(t, "test CA")
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			b := startTLSBroker(t, ca, kind, Config{MaxBacklog: 64 << 20})
			defer b.close(t)
			c := b.dial(t, 4096)
			c.connect("busy")
			c.subscribe(1, "big", 0)
			payload := bytes.Repeat([]byte{'y'}, 8<<20)
			if err := b.srv.Publish("big", payload, false, 0); err != nil {
				t.Fatal(err)
			}
			testkit.Wait(t, waitTimeout, "bytes waiting for the client", func() error { return testkit.Why(b.l.Stats().Backlogged == 1, "not yet") })

			closed := make(chan struct{})
			b.closeOnce.Do(func() {})
			go func() { _ = b.srv.Close(); close(closed) }()
			pk := c.expect(packets.Publish)
			if !bytes.Equal(pk.Payload, payload) {
				t.Fatalf("payload of %d bytes, want %d", len(pk.Payload), len(payload))
			}
			if pk, err := c.next(waitTimeout); err != nil || pk.FixedHeader.Type != packets.Disconnect {
				t.Fatalf("want DISCONNECT after the backlog, got type %d: %v", pk.FixedHeader.Type, err)
			}
			<-closed
			if s := b.l.Stats(); s != (Stats{}) {
				t.Fatalf("stats: %+v", s)
			}
		})
	}
}

// refusedTLS reports whether a client with cfg is refused by b's TLS
// listener: its handshake fails, or (TLS 1.3, where the client finishes
// first) it gets no CONNACK.
func refusedTLS(t *testing.T, b *broker, cfg *tls.Config) error {
	t.Helper()
	var c *client
	var err error
	if b.kind == "tcp" {
		c, err = tryTLS(b.l.Address(), 0, cfg)
	} else {
		c, err = tryWS(b.l.Address(), 0, cfg)
	}
	if err != nil {
		return nil // refused in the handshake
	}
	defer c.tr.Close()
	c.t = t
	c.send(packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Connect},
		Connect:     packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 60, ClientIdentifier: "intruder"},
	})
	if pk, err := c.next(waitTimeout); err == nil {
		return fmt.Errorf("got packet type %d", pk.FixedHeader.Type)
	}
	return nil
}

// Mutual TLS from files: with RequireClientCert a client without a
// certificate, or with one of another CA, fails the handshake and is
// counted in TLSFailures; alice's certificate is accepted, and a hook sees
// it through PeerCertificate(cl.Net.Conn). Without RequireClientCert a
// client without a certificate connects, and PeerCertificate says so.
func TestMutualTLS(t *testing.T) {
	ca := newCA(t, "test CA")
	other := newCA(t, "other CA")
	dir := t.TempDir()
	certPEM, keyPEM := ca.serverPEM(t, 2)
	files := TLSFiles{
		CertFile:     writeFile(t, dir, "server.pem", certPEM),
		KeyFile:      writeFile(t, dir, "server.key", keyPEM),
		ClientCAFile: writeFile(t, dir, "clients.pem", ca.pem),
	}
	alice := ca.clientCert(t, "alice", "alice.devices.example")
	mallory := other.clientCert(t, "alice", "alice.devices.example")

	for _, kind := range kinds {
		for _, required := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/required=%v", kind, required), func(t *testing.T) {
				defer goleak.VerifyNone(t)
				f := files
				f.RequireClientCert = required
				r, err := LoadTLS(f)
				if err != nil {
					t.Fatal(err)
				}
				srv, rec := newRecServer(t)
				b := startBrokerOn(t, srv, kind, Config{TLS: r.Config()}, nil)
				defer b.close(t)

				failures := int64(0)
				if required {
					if err := refusedTLS(t, b, ca.clientTLS()); err != nil {
						t.Fatalf("client without a certificate: %v", err)
					}
					failures++
				} else {
					c := dialWith(t, b, ca.clientTLS())
					c.connect("anonymous")
					if cert, seen := rec.peer("anonymous"); !seen || cert != nil {
						t.Fatalf("PeerCertificate without a client certificate: %v (hook ran: %v)", cert, seen)
					}
				}
				// Go's client would not offer a certificate that the server's
				// CAs did not issue; this one insists.
				insisting := ca.clientTLS()
				insisting.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &mallory, nil }
				if err := refusedTLS(t, b, insisting); err != nil {
					t.Fatalf("client with a certificate of another CA: %v", err)
				}
				failures++
				testkit.Wait(t, waitTimeout, "failed handshakes counted", func() error {
					s := b.l.Stats()
					return testkit.Why(s.TLSFailures == failures, fmt.Sprintf("stats %+v", s))
				})

				c := dialWith(t, b, ca.clientTLS(alice))
				c.connect("alice-phone")
				cert, seen := rec.peer("alice-phone")
				if !seen || cert == nil {
					t.Fatalf("the hook got no certificate (hook ran: %v)", seen)
				}
				if cert.Subject.CommonName != "alice" || !slices.Equal(cert.DNSNames, []string{"alice.devices.example"}) {
					t.Fatalf("certificate of %q, SANs %v", cert.Subject.CommonName, cert.DNSNames)
				}
				cl, _ := b.srv.Clients.Get("alice-phone")
				if cert, ok := PeerCertificate(cl.Net.Conn); !ok || cert.Subject.CommonName != "alice" {
					t.Fatalf("PeerCertificate(%T) = %v, %v", cl.Net.Conn, cert, ok)
				}
				if s := b.l.Stats(); s.TLSFailures != failures {
					t.Fatalf("stats: %+v", s)
				}
			})
		}
	}
}

// dialWith dials b's listener with a client TLS configuration of its own.
func dialWith(t testing.TB, b *broker, cfg *tls.Config) *client {
	t.Helper()
	if b.kind == "tcp" {
		return dialTLS(t, b.l.Address(), 0, cfg)
	}
	return dialWSWith(t, b.l.Address(), 0, cfg)
}

// Reload: new connections get the new certificate, the open ones stay; a
// broken file makes Reload fail, naming the file, and the certificate
// served stays.
func TestTLSReload(t *testing.T) {
	defer goleak.VerifyNone(t)
	ca := newCA(t, "test CA")
	dir := t.TempDir()
	certPEM, keyPEM := ca.serverPEM(t, 1)
	files := TLSFiles{
		CertFile: writeFile(t, dir, "server.pem", certPEM),
		KeyFile:  writeFile(t, dir, "server.key", keyPEM),
	}
	r, err := LoadTLS(files)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Certificate().SerialNumber.Int64(); n != 1 {
		t.Fatalf("serving serial %d", n)
	}
	b := startBrokerOn(t, newServer(t), "tcp", Config{TLS: r.Config()}, ca.clientTLS())
	defer b.close(t)

	old := b.dial(t, 0)
	if n := serverSerial(t, old); n != 1 {
		t.Fatalf("first client got serial %d, want 1", n)
	}
	old.connect("old")
	old.subscribe(1, "r", 0)

	certPEM, keyPEM = ca.serverPEM(t, 2)
	writeFile(t, dir, "server.pem", certPEM)
	writeFile(t, dir, "server.key", keyPEM)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := r.Certificate().SerialNumber.Int64(); n != 2 {
		t.Fatalf("serving serial %d after Reload", n)
	}
	fresh := b.dial(t, 0)
	if n := serverSerial(t, fresh); n != 2 {
		t.Fatalf("client after Reload got serial %d, want 2", n)
	}
	fresh.connect("fresh")

	// The connection made before the Reload is still there.
	if err := b.srv.Publish("r", []byte("still here"), false, 0); err != nil {
		t.Fatal(err)
	}
	if pk := old.expect(packets.Publish); string(pk.Payload) != "still here" {
		t.Fatalf("got %q", pk.Payload)
	}

	// Broken files: Reload fails naming the file; serial 2 stays.
	_, otherKey := ca.serverPEM(t, 3)
	for _, bad := range []struct {
		file, cert, key string
	}{
		{files.CertFile, "not a certificate", string(keyPEM)},
		{files.KeyFile, string(certPEM), "not a key"},
		{files.KeyFile, string(certPEM), string(otherKey)}, // the key of another certificate
	} {
		writeFile(t, dir, "server.pem", []byte(bad.cert))
		writeFile(t, dir, "server.key", []byte(bad.key))
		err := r.Reload()
		if err == nil || !strings.Contains(err.Error(), bad.file) {
			t.Fatalf("Reload with a broken %s: %v", filepath.Base(bad.file), err)
		}
		t.Logf("Reload: %v", err)
		c := b.dial(t, 0)
		if n := serverSerial(t, c); n != 2 {
			t.Fatalf("client after a failed Reload got serial %d, want 2", n)
		}
		_ = c.tr.Close()
	}
	if err := os.Remove(files.CertFile); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), files.CertFile) {
		t.Fatalf("Reload with a missing certificate: %v", err)
	}
	if n := r.Certificate().SerialNumber.Int64(); n != 2 {
		t.Fatalf("serving serial %d after failed Reloads", n)
	}
}

// LoadTLS names the file at fault.
func TestLoadTLSErrors(t *testing.T) {
	ca := newCA(t, "test CA")
	dir := t.TempDir()
	certPEM, keyPEM := ca.serverPEM(t, 1)
	cert := writeFile(t, dir, "server.pem", certPEM)
	key := writeFile(t, dir, "server.key", keyPEM)
	junk := writeFile(t, dir, "junk.pem", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		f    TLSFiles
		want string
	}{
		{TLSFiles{CertFile: missing, KeyFile: key}, missing},
		{TLSFiles{CertFile: cert, KeyFile: missing}, missing},
		{TLSFiles{CertFile: junk, KeyFile: key}, junk},
		{TLSFiles{CertFile: cert, KeyFile: cert}, cert},
		{TLSFiles{CertFile: cert, KeyFile: key, ClientCAFile: missing}, missing},
		{TLSFiles{CertFile: cert, KeyFile: key, ClientCAFile: key}, key}, // no certificate in it
		{TLSFiles{CertFile: cert, KeyFile: key, ClientCAFile: junk}, junk},
		{TLSFiles{CertFile: cert, KeyFile: key, RequireClientCert: true}, "ClientCAFile"},
		{TLSFiles{CertFile: cert}, "key file"},
	} {
		_, err := LoadTLS(tc.f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadTLS(%+v): %v, want an error naming %s", tc.f, err, tc.want)
		}
	}
	r, err := LoadTLS(TLSFiles{CertFile: cert, KeyFile: key, ClientCAFile: writeFile(t, dir, "ca.pem", ca.pem)})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := r.Config().GetConfigForClient(nil)
	if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.VerifyClientCertIfGiven {
		t.Fatalf("MinVersion %#x, ClientAuth %v", cfg.MinVersion, cfg.ClientAuth)
	}
}

// The CONNECT timeout covers the TLS handshake: a socket that never sends a
// ClientHello, or sends part of one, is closed after ConnectTimeout and
// counted as a failed handshake.
func TestTLSHandshakeTimeout(t *testing.T) {
	ca := newCA(t, "test CA")
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			const timeout = 300 * time.Millisecond
			b := startTLSBroker(t, ca, kind, Config{ConnectTimeout: timeout})
			defer b.close(t)
			silent := dialTCP(t, b.l.Address(), 0).sock
			partial := dialTCP(t, b.l.Address(), 0).sock
			if _, err := partial.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00}); err != nil { // a record header, no record
				t.Fatal(err)
			}
			start := time.Now()
			for i, s := range []net.Conn{silent, partial} {
				if err := closedByPeer(s, waitTimeout); err != nil {
					t.Fatalf("socket %d: %v", i, err)
				}
			}
			if d := time.Since(start); d < timeout/2 {
				t.Fatalf("closed after %v, before the timeout of %v", d, timeout)
			}
			testkit.Wait(t, waitTimeout, "sockets released and counted", func() error {
				s := b.l.Stats()
				return testkit.Why(s == Stats{TLSFailures: 2}, fmt.Sprintf("stats %+v", s))
			})
		})
	}
}

// Server.Close returns promptly while sockets are in the middle of their
// TLS handshake, closes them, and does not count them as failed handshakes.
func TestTLSCloseDuringHandshake(t *testing.T) {
	ca := newCA(t, "test CA")
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			b := startTLSBroker(t, ca, kind, Config{ConnectTimeout: time.Hour})
			defer b.close(t)
			silent := dialTCP(t, b.l.Address(), 0).sock
			partial := dialTCP(t, b.l.Address(), 0).sock
			if _, err := partial.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00}); err != nil {
				t.Fatal(err)
			}
			connected := b.dial(t, 0)
			connected.connect("connected")
			testkit.Wait(t, waitTimeout, "every socket accepted", func() error { return testkit.Why(b.l.Stats().Open == 3, "not yet") })

			took := b.close(t)
			if took > 5*time.Second {
				t.Fatalf("Server.Close took %v", took)
			}
			t.Logf("Server.Close took %v with 2 sockets in their handshake and a client", took)
			for i, s := range []net.Conn{silent, partial, connected.sock} {
				if err := closedByPeer(s, waitTimeout); err != nil {
					t.Fatalf("socket %d after Close: %v", i, err)
				}
			}
			if s := b.l.Stats(); s != (Stats{}) {
				t.Fatalf("stats: %+v", s)
			}
		})
	}
}

// A socket that connects and closes without a byte (a TCP health check) is
// not a failed handshake; a plain MQTT client on the TLS port is.
func TestTLSFailuresCounted(t *testing.T) {
	defer goleak.VerifyNone(t)
	ca := newCA(t, "test CA")
	b := startTLSBroker(t, ca, "tcp", Config{})
	defer b.close(t)
	probe := dialTCP(t, b.l.Address(), 0)
	_ = probe.sock.Close()
	plain := dialTCP(t, b.l.Address(), 0)
	plain.send(packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Connect},
		Connect:     packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 60, ClientIdentifier: "plain"},
	})
	if err := closedByPeer(plain.sock, waitTimeout); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, waitTimeout, "both released", func() error {
		s := b.l.Stats()
		return testkit.Why(s == Stats{TLSFailures: 1, TLSPlaintext: 1}, fmt.Sprintf("stats %+v", s))
	})
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A client that speaks plain MQTT (or other plaintext) to the TLS port is
// counted in TLSPlaintext and logged at info, naming the listener's
// address, at most one line a minute (the next one says how many were not
// logged); a TLS handshake that fails otherwise stays at debug.
func TestPlaintextOnTLSLogged(t *testing.T) {
	defer goleak.VerifyNone(t)
	ca := newCA(t, "test CA")
	var logged lockedBuffer
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	b := startBrokerOn(t, srv, "tcp", Config{TLS: ca.serverTLS(t)}, ca.clientTLS())
	defer b.close(t)
	for i, first := range [][]byte{
		nil, // a CONNECT, as a plain MQTT client sends it
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		nil,
	} {
		plain := dialTCP(t, b.l.Address(), 0)
		if first == nil {
			plain.send(packets.Packet{
				FixedHeader: packets.FixedHeader{Type: packets.Connect},
				Connect:     packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 60, ClientIdentifier: "plain"},
			})
		} else if _, err := plain.sock.Write(first); err != nil {
			t.Fatal(err)
		}
		if err := closedByPeer(plain.sock, waitTimeout); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		testkit.Wait(t, waitTimeout, "counted", func() error {
			s := b.l.Stats()
			return testkit.Why(s.TLSPlaintext == int64(i+1) && s.TLSFailures == int64(i+1), fmt.Sprintf("stats %+v", s))
		})
	}
	// A client with a certificate the server does not trust: a failed
	// handshake, but TLS: not plaintext, and not logged at info.
	if _, err := tryTLS(b.l.Address(), 0, newCA(t, "another CA").clientTLS()); err == nil {
		t.Fatal("a TLS client of another CA connected")
	}
	testkit.Wait(t, waitTimeout, "the TLS failure counted", func() error {
		s := b.l.Stats()
		return testkit.Why(s.TLSFailures == 4 && s.TLSPlaintext == 3, fmt.Sprintf("stats %+v", s))
	})
	out := logged.String()
	want := "a client spoke plain MQTT to the TLS listener " + b.l.Address() + "; use mqtts:// (or wss://) or the plain port"
	if got := strings.Count(out, "to the TLS listener"); got != 1 || !strings.Contains(out, want) || !strings.Contains(out, "level=INFO") {
		t.Fatalf("%d lines about the TLS listener, want one at info saying %q:\n%s", got, want, out)
	}
	if !strings.Contains(out, "suppressed_since_last=0") || !strings.Contains(out, "listener=tcp") {
		t.Fatalf("the line does not count what was not logged or name the listener:\n%s", out)
	}
}

// A CONNECT claiming a remaining length of 256 MiB, with mochi's
// MaximumPacketSize at 1 MiB, is refused before anything is allocated for
// it: the connection is closed and Stats.TooLarge counts it. Over TCP, TLS,
// WebSocket and wss.
func TestTooLargeConnect(t *testing.T) {
	ca := newCA(t, "test CA")
	for _, kind := range kinds {
		for _, withTLS := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tls=%v", kind, withTLS), func(t *testing.T) {
				defer goleak.VerifyNone(t)
				srv := newServer(t)
				srv.Options.Capabilities.MaximumPacketSize = 1 << 20
				var cfg Config
				var clientTLS *tls.Config
				if withTLS {
					cfg.TLS, clientTLS = ca.serverTLS(t), ca.clientTLS()
				}
				b := startBrokerOn(t, srv, kind, cfg, clientTLS)
				defer b.close(t)
				c := b.dial(t, 0)

				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				// CONNECT, remaining length 268435455 (the most MQTT can say).
				if _, err := c.tr.Write([]byte{packets.Connect << 4, 0xFF, 0xFF, 0xFF, 0x7F}); err != nil {
					t.Fatal(err)
				}
				if err := closedByPeer(c.sock, waitTimeout); err != nil {
					t.Fatalf("the connection was not closed: %v", err)
				}
				testkit.Wait(t, waitTimeout, "refusal counted", func() error {
					s := b.l.Stats()
					return testkit.Why(s == Stats{TooLarge: 1}, fmt.Sprintf("stats %+v", s))
				})
				runtime.ReadMemStats(&after)
				if d := after.TotalAlloc - before.TotalAlloc; d > 32<<20 {
					t.Fatalf("%d bytes allocated meanwhile", d)
				}
			})
		}
	}
}

// The new counters are snake_case in JSON, as the others.
func TestStatsJSON(t *testing.T) {
	out, err := json.Marshal(Stats{TooLarge: 1, TLSFailures: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"too_large":1`, `"tls_failures":2`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s lacks %s", out, want)
		}
	}
}

// From sees through a plain *tls.Conn over a *Conn.
func TestFromTLSConn(t *testing.T) {
	defer goleak.VerifyNone(t)
	server, _ := tcpPair(t, 0)
	c, tr := wrap(t, server, Config{})
	if got, ok := From(tls.Server(c, &tls.Config{})); !ok || got != c {
		t.Fatalf("From(*tls.Conn) = %v, %v", got, ok)
	}
	if _, ok := From(server); ok {
		t.Fatal("From found a *Conn in a bare socket")
	}
	closeTracker(t, tr)
}

// PeerCertificate returns only a certificate that the handshake verified:
// with ClientAuth RequireAnyClientCert the client presents one, and the
// handshake takes it without verifying it.
func TestPeerCertificateUnverified(t *testing.T) {
	defer goleak.VerifyNone(t)
	ca := newCA(t, "test CA")
	srv, rec := newRecServer(t)
	cfg := ca.serverTLS(t)
	cfg.ClientAuth = tls.RequireAnyClientCert
	b := startBrokerOn(t, srv, "tcp", Config{TLS: cfg}, nil)
	defer b.close(t)
	alice := ca.clientCert(t, "alice")
	c := dialWith(t, b, ca.clientTLS(alice))
	c.connect("unverified")
	if cert, seen := rec.peer("unverified"); !seen || cert != nil {
		t.Fatalf("PeerCertificate of an unverified certificate: %v (hook ran: %v)", cert, seen)
	}
	cl, _ := b.srv.Clients.Get("unverified")
	if n := len(cl.Net.Conn.(interface{ ConnectionState() tls.ConnectionState }).ConnectionState().PeerCertificates); n != 1 {
		t.Fatalf("the client presented %d certificates", n)
	}
}

// A packet over MaximumPacketSize after CONNECT counts too.
func TestTooLargeAfterConnect(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := newServer(t)
	srv.Options.Capabilities.MaximumPacketSize = 1 << 20
	b := startBrokerOn(t, srv, "tcp", Config{}, nil)
	defer b.close(t)
	c := b.dial(t, 0)
	c.connect("big")
	// PUBLISH, remaining length 2 MiB; the rest need not follow.
	if _, err := c.tr.Write([]byte{packets.Publish << 4, 0x80, 0x80, 0x80, 0x01}); err != nil {
		t.Fatal(err)
	}
	if err := closedByPeer(c.sock, waitTimeout); err != nil {
		t.Fatalf("the connection was not closed: %v", err)
	}
	testkit.Wait(t, waitTimeout, "refusal counted", func() error {
		s := b.l.Stats()
		return testkit.Why(s == Stats{TooLarge: 1}, fmt.Sprintf("stats %+v", s))
	})
}
