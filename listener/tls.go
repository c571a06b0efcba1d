package listener

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// tlsConn is what the listeners hand on when they serve TLS: to mochi for
// TCP (Client.Net.Conn), to net/http and then gorilla/websocket for wss.
// The *tls.Conn runs over the listener's *Conn, so its writes never wait
// either: it encrypts and hands the records to the *Conn.
//
// It embeds the *tls.Conn, so ConnectionState is reachable; it adds
// WritesNeverBlock, makes the handshake explicit so that a failed one is
// counted (Stats.TLSFailures), and closes without letting TLS's close_notify
// cut short the drain of the bytes waiting (see Close).
type tlsConn struct {
	*tls.Conn
	c     *Conn // the socket under the TLS layer
	state atomic.Uint32
}

// tlsConn state bits.
const (
	handshaken uint32 = 1 << iota // the handshake completed
	judged                        // a failed handshake was counted, or found not to count
)

func newTLSConn(c *Conn, cfg *tls.Config) *tlsConn {
	return &tlsConn{Conn: tls.Server(c, cfg), c: c}
}

// handshake runs the TLS handshake if it has not run, within the deadlines
// of the *Conn (the listener sets the CONNECT timeout before), and counts it
// in Stats.TLSFailures if it fails. Not counted: a client that closes
// before it sends anything (a TCP health check, say), and a connection that
// the listener closed meanwhile (on Close).
func (t *tlsConn) handshake() error {
	if t.state.Load()&handshaken != 0 {
		return nil
	}
	err := t.Conn.Handshake() // it keeps the error of a failed handshake and returns it again
	if err == nil {
		t.state.Or(handshaken)
		return nil
	}
	if t.state.Or(judged)&judged == 0 {
		st := t.c.state.Load()
		closedByUs := st&closed != 0 && st&(slow|timedOut) == 0
		if !closedByUs && !errors.Is(err, io.EOF) {
			t.c.t.tlsFailures.Add(1)
			var rh tls.RecordHeaderError
			if errors.As(err, &rh) && rh.Conn != nil { // the first bytes are no TLS record: plaintext
				t.c.t.plaintextOnTLS(t.c, rh.RecordHeader[0])
			} else {
				t.c.t.log.Debug("TLS handshake failed", "error", err, "remote", t.c.RemoteAddr().String())
			}
		}
	}
	return err
}

// plaintextEvery is how often a listener logs a client that spoke
// plaintext to it (at info: it is a client's mistake, often repeated at
// every reconnect); the others are counted, and the next line says how
// many were not logged.
const plaintextEvery = time.Minute

// plaintextOnTLS counts and logs a client whose first bytes on the TLS
// listener were not TLS; first is the first byte (0x10: an MQTT CONNECT).
func (t *tracker) plaintextOnTLS(c *Conn, first byte) {
	t.tlsPlaintext.Add(1)
	ok, suppressed := t.plaintextLog.Allow(time.Now(), plaintextEvery)
	if !ok {
		return
	}
	spoke := "plaintext (not TLS)"
	if first == 0x10 {
		spoke = "plain MQTT"
	}
	t.log.Info(fmt.Sprintf("a client spoke %s to the TLS listener %s; use mqtts:// (or wss://) or the plain port", spoke, c.LocalAddr()),
		"remote", c.RemoteAddr().String(), "suppressed_since_last", suppressed)
}

// Read reads decrypted bytes, running the handshake first if it has not
// run (net/http reads a wss connection without knowing it is TLS). After
// the connection was closed as a slow consumer it fails with
// ErrSlowConsumer, as the *Conn does.
func (t *tlsConn) Read(p []byte) (int, error) {
	if err := t.handshake(); err != nil {
		return 0, t.stateErr(err)
	}
	n, err := t.Conn.Read(p)
	if t.c.sniffing(sniffTLS) {
		t.c.sniffed(p[:n])
	}
	if err != nil {
		err = t.stateErr(err)
	}
	return n, err
}

// Write encrypts p and hands the records to the *Conn, which never waits
// for the client.
func (t *tlsConn) Write(p []byte) (int, error) {
	if err := t.handshake(); err != nil {
		return 0, t.stateErr(err)
	}
	n, err := t.Conn.Write(p)
	if err != nil {
		err = t.stateErr(err)
	}
	return n, err
}

// stateErr replaces err with ErrSlowConsumer, or the write deadline's
// error, when that is why the *Conn was closed.
func (t *tlsConn) stateErr(err error) error {
	if st := t.c.state.Load(); st&(slow|timedOut) != 0 {
		return stateErr(st)
	}
	return err
}

// Close sends TLS's close_notify alert, if the handshake completed, and
// closes the *Conn, which lets the bytes waiting drain (see Conn.Close).
// crypto/tls sets a write deadline of now after the alert; on a *Conn that
// would drop the bytes still waiting (the DISCONNECT mochi has just written,
// and the alert), so the *Conn ignores write deadlines from here on.
func (t *tlsConn) Close() error {
	t.c.ignoreWriteDeadlines()
	return t.Conn.Close()
}

// CloseWrite sends TLS's close_notify alert (net/http does before closing a
// connection it answered with an error), as Close does.
func (t *tlsConn) CloseWrite() error {
	t.c.ignoreWriteDeadlines()
	return t.Conn.CloseWrite()
}

// WritesNeverBlock reports true, as Conn.WritesNeverBlock.
func (t *tlsConn) WritesNeverBlock() bool { return true }

// PeerCertificate returns the client certificate of a connection that one of
// this package's listeners accepted over TLS (TCP with Config.TLS, or wss),
// given the net.Conn mochi holds (Client.Net.Conn), if the handshake
// verified it against the client CAs of the TLS configuration
// (tls.Config.ClientCAs with ClientAuth VerifyClientCertIfGiven or
// RequireAndVerifyClientCert; LoadTLS's ClientCAFile). It returns false
// for a connection without TLS, without a client certificate, or with one
// that was not verified (ClientAuth RequestClientCert or
// RequireAnyClientCert). It also accepts a plain *tls.Conn.
func PeerCertificate(nc net.Conn) (*x509.Certificate, bool) {
	if ws, ok := nc.(*wsConn); ok {
		nc = ws.ws.UnderlyingConn()
	}
	tc, ok := nc.(interface{ ConnectionState() tls.ConnectionState })
	if !ok {
		return nil, false
	}
	cs := tc.ConnectionState()
	if !cs.HandshakeComplete || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return nil, false
	}
	return cs.PeerCertificates[0], true
}

// withoutH2 returns the TLS configuration of the WebSocket listener: cfg
// without "h2" in its ALPN protocols, also in the configurations its
// GetConfigForClient returns. A WebSocket upgrade needs HTTP/1.1, and
// browsers offer h2 first; without h2 on the server they fall back to
// HTTP/1.1. Configurations made for HTTPS servers (autocert, certmagic)
// list h2.
func withoutH2(cfg *tls.Config) *tls.Config {
	if cfg == nil {
		return nil
	}
	cfg = cfg.Clone()
	cfg.NextProtos = dropH2(cfg.NextProtos)
	if get := cfg.GetConfigForClient; get != nil {
		cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(hello)
			if err != nil || c == nil || !slices.Contains(c.NextProtos, "h2") {
				return c, err
			}
			c = c.Clone()
			c.NextProtos = dropH2(c.NextProtos)
			return c, nil
		}
	}
	return cfg
}

func dropH2(protos []string) []string {
	if !slices.Contains(protos, "h2") {
		return protos
	}
	return slices.DeleteFunc(slices.Clone(protos), func(p string) bool { return p == "h2" })
}

// TLSFiles names the PEM files of a TLS configuration for LoadTLS.
type TLSFiles struct {
	// CertFile holds the server's certificate, followed by the
	// intermediate certificates up to (not including) the root; KeyFile
	// its private key.
	CertFile, KeyFile string

	// ClientCAFile, if set, holds the CA certificates that client
	// certificates are verified against; clients are then asked for a
	// certificate. Without it, clients are not asked for one.
	ClientCAFile string

	// RequireClientCert, with ClientCAFile, refuses a client that presents
	// no certificate. Without it a client may present none, but one it
	// presents must verify. (A certificate that does not verify always
	// fails the handshake.)
	RequireClientCert bool

	// MinVersion is the lowest TLS version accepted. Default
	// tls.VersionTLS12.
	MinVersion uint16
}

// TLSReloader serves the certificates of a TLSFiles, and reads them again on
// Reload (on SIGHUP, for example), without a restart.
type TLSReloader struct {
	files TLSFiles
	mu    sync.Mutex                 // serialises Reload
	cur   atomic.Pointer[tls.Config] // the configuration of new handshakes
}

// LoadTLS reads the files of f and returns a TLSReloader serving them. Its
// errors name the file at fault.
func LoadTLS(f TLSFiles) (*TLSReloader, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("listener: TLS needs a certificate file and a key file")
	}
	if f.RequireClientCert && f.ClientCAFile == "" {
		return nil, errors.New("listener: RequireClientCert needs a ClientCAFile to verify the client certificates against")
	}
	if f.MinVersion == 0 {
		f.MinVersion = tls.VersionTLS12
	}
	r := &TLSReloader{files: f}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Config returns a TLS configuration for Config.TLS. It takes the
// certificates and client CAs of every handshake from the reloader
// (GetConfigForClient, and GetCertificate), so Reload applies to the
// connections that begin after it. The handshake uses the configuration
// GetConfigForClient returns: changing the other fields of the returned
// Config has no effect. Each call returns a new Config.
func (r *TLSReloader) Config() *tls.Config {
	return &tls.Config{
		MinVersion: r.files.MinVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.cur.Load(), nil
		},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return &r.cur.Load().Certificates[0], nil
		},
	}
}

// Certificate returns the server certificate served now (its serial number
// and expiry are worth logging after a Reload).
func (r *TLSReloader) Certificate() *x509.Certificate {
	return r.cur.Load().Certificates[0].Leaf
}

// Reload reads the files again. If they are all valid, the handshakes that
// begin from now on use them; if one is not, it returns an error naming it
// and the certificates served so far stay. The connections already open
// are untouched either way. It is safe to call at any time, from any
// goroutine.
func (r *TLSReloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg, err := r.files.load()
	if err != nil {
		return err
	}
	r.cur.Store(cfg)
	return nil
}

// load reads f's files into the configuration of a handshake.
func (f TLSFiles) load() (*tls.Config, error) {
	certPEM, err := os.ReadFile(f.CertFile)
	if err != nil {
		return nil, fmt.Errorf("listener: TLS certificate: %w", err)
	}
	if _, err := parseCerts(certPEM); err != nil {
		return nil, fmt.Errorf("listener: TLS certificate %s: %w", f.CertFile, err)
	}
	keyPEM, err := os.ReadFile(f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("listener: TLS key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("listener: TLS key %s (for certificate %s): %w", f.KeyFile, f.CertFile, err)
	}
	if cert.Leaf == nil { // with GODEBUG x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("listener: TLS certificate %s: %w", f.CertFile, err)
		}
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   f.MinVersion,
	}
	if f.ClientCAFile != "" {
		caPEM, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("listener: TLS client CAs: %w", err)
		}
		cas, err := parseCerts(caPEM)
		if err != nil {
			return nil, fmt.Errorf("listener: TLS client CAs %s: %w", f.ClientCAFile, err)
		}
		cfg.ClientCAs = x509.NewCertPool()
		for _, ca := range cas {
			cfg.ClientCAs.AddCert(ca)
		}
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if f.RequireClientCert {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return cfg, nil
}

// parseCerts parses the CERTIFICATE blocks of a PEM file; it fails if there
// is none or one does not parse.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return certs, nil
}
