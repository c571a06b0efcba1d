package integration

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// tlsDial opens a TLS connection to addr and completes the handshake.
func tlsDial(t *testing.T, addr string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := tlsDialErr(addr, cfg)
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func tlsDialErr(addr string, cfg *tls.Config) (*tls.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: waitTimeout}, "tcp", addr, cfg)
}

// tlsRefused tries MQTT 3.1.1 over TLS with cfg and returns why no CONNACK
// came: the handshake failed, or (TLS 1.3, where the server judges the
// client's certificate after the client has finished) the server's alert
// or close arrived instead of the CONNACK. It fails the test if a CONNACK
// comes.
func tlsRefused(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	c, err := tlsDialErr(addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := c.Write(connect3Bytes(t, "x-tls", "", "")); err != nil {
		return err
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil {
		return err
	}
	t.Fatalf("a CONNACK (%x) over TLS with a certificate that should not pass", b)
	return nil
}

// waitPresence polls the admin API until user's retained presence
// satisfies cond.
func waitPresence(t *testing.T, adminAddr, user, what string, cond func(presence.Aggregate) bool) presence.Aggregate {
	t.Helper()
	var p presence.Aggregate
	testkit.Wait(t, waitTimeout, user+": "+what, func() error {
		var err error
		if p, err = mnPresenceOf(adminAddr, user); err != nil {
			return err
		}
		return testkit.Why(cond(p), fmt.Sprintf("presence %+v", p))
	})
	return p
}

// waitTLSFailures polls the admin API until the listeners' tls_failures
// are tcp and ws.
func waitTLSFailures(t *testing.T, adminAddr string, tcp, ws int64) {
	t.Helper()
	testkit.Wait(t, waitTimeout, fmt.Sprintf("tls_failures tcp %d ws %d", tcp, ws), func() error {
		s := getStats(t, adminAddr, "")
		gotTCP, gotWS := s.Listeners["tcp"].TLSFailures, s.Listeners["ws"].TLSFailures
		return testkit.Why(gotTCP == tcp && gotWS == ws, fmt.Sprintf("tcp %d, ws %d", gotTCP, gotWS))
	})
}

// The real binary with tls.cert_file and tls.key_file serves MQTT over TLS
// on its TCP port and wss on its WebSocket port; plaintext on either fails
// and is counted.
func TestTLSListeners(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "presenced test CA")
	certFile, keyFile := ca.server(t).write(t, dir, "server")
	pwfile := filepath.Join(dir, "passwd")
	writePasswordFile(t, pwfile, map[string]string{"alice": "alice-Secret-1"})
	_, mqttAddr, wsAddr, adminAddr := binAuth(t, fmt.Sprintf(
		"tls:\n  cert_file: %s\n  key_file: %s\nauth:\n  password_file: %s\n", certFile, keyFile, pwfile))
	trust := &tls.Config{RootCAs: ca.pool()}

	// MQTT 5 over TLS, and 3.1.1 over TLS.
	if _, code := try5(t, tlsDial(t, mqttAddr, trust), "alice-tls", withUser("alice"), withPassword("alice-Secret-1")); code != 0 {
		t.Fatalf("MQTT 5 over TLS: CONNACK %#x", code)
	}
	if code := try3(t, tlsDial(t, mqttAddr, trust), "alice-tls3", "alice", "alice-Secret-1"); code != rc3Accepted {
		t.Errorf("MQTT 3.1.1 over TLS: CONNACK %#x", code)
	}
	// wss, as a browser would: HTTP/1.1 upgrade over TLS.
	conn, resp, err := wsDial("wss://"+wsAddr+"/mqtt", trust, "")
	if err != nil {
		t.Fatalf("wss dial: %v (%s)", err, statusOfResp(resp))
	}
	if _, code := try5(t, conn, "alice-wss", withUser("alice"), withPassword("alice-Secret-1")); code != 0 {
		t.Fatalf("MQTT over wss: CONNACK %#x", code)
	}
	on := waitPresence(t, adminAddr, "alice", "three sessions", func(p presence.Aggregate) bool {
		return hasSession("alice-tls")(p) && hasSession("alice-tls3")(p) && hasSession("alice-wss")(p)
	})
	if len(on.Sessions) != 3 {
		t.Errorf("alice's sessions: %+v", on.Sessions)
	}
	// A wrong password over TLS is still refused.
	if _, code := try5(t, tlsDial(t, mqttAddr, trust), "x", withUser("alice"), withPassword("wrong")); code != rcBadUserNameOrPass {
		t.Errorf("wrong password over TLS: CONNACK %#x, want %#x", code, rcBadUserNameOrPass)
	}
	// Receive Maximum 0 (a protocol error) is seen through TLS and wss.
	refusedRM0(t, "tls", func() net.Conn { return tlsDial(t, mqttAddr, trust) }, "alice-rm0", "alice", "alice-Secret-1")
	refusedRM0(t, "wss", func() net.Conn {
		c, resp, err := wsDial("wss://"+wsAddr+"/mqtt", trust, "")
		if err != nil {
			t.Fatalf("wss dial: %v (%s)", err, statusOfResp(resp))
		}
		return c
	}, "alice-rm0ws", "alice", "alice-Secret-1")
	waitTLSFailures(t, adminAddr, 0, 0)

	// Plaintext MQTT on the TLS port: no CONNACK, the connection ends.
	plain := ctDialTCP(t, mqttAddr)
	defer plain.Close()
	_ = plain.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := plain.Write(connect3Bytes(t, "plain", "alice", "alice-Secret-1")); err != nil {
		t.Fatalf("write: %v", err)
	}
	b, err := io.ReadAll(plain)
	if len(b) > 0 && b[0] == 0x20 {
		t.Errorf("plaintext CONNECT on the TLS port got a CONNACK: %x", b)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("the TLS port kept a plaintext connection open for %v", waitTimeout)
	}
	// Plain ws:// on the wss port.
	if _, resp, err := wsDial("ws://"+wsAddr+"/mqtt", nil, ""); err == nil {
		t.Errorf("ws:// on the wss port upgraded (%s)", statusOfResp(resp))
	}
	waitTLSFailures(t, adminAddr, 1, 1)
}

// Mutual TLS with tls.client_ca_file, tls.require_client_cert and
// auth.cert_user_from cn: alice's certificate makes alice online; a
// certificate from another CA (even one naming alice) and no certificate
// fail the handshake and are counted. SIGHUP reloads the server
// certificate for new connections and keeps the open ones.
func TestTLSClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "presenced test CA")
	evil := newTestCA(t, "mallory's CA")
	certFile, keyFile := ca.server(t).write(t, dir, "server")
	caFile := filepath.Join(dir, "clients-ca.pem")
	writeAtomic(t, caFile, ca.pem)
	p, mqttAddr, wsAddr, adminAddr := binAuth(t, fmt.Sprintf(
		"tls:\n  cert_file: %s\n  key_file: %s\n  client_ca_file: %s\n  require_client_cert: true\nauth:\n  cert_user_from: cn\n",
		certFile, keyFile, caFile))

	alice := &tls.Config{RootCAs: ca.pool(), Certificates: []tls.Certificate{ca.client(t, "alice").tls}}
	// crypto/tls would not send a certificate that no CA of the server's
	// request issued: mallory's client presents it anyway.
	forged := evil.client(t, "alice").tls
	mallory := &tls.Config{RootCAs: ca.pool(), GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &forged, nil
	}}
	none := &tls.Config{RootCAs: ca.pool()}

	// alice's certificate: MQTT 5 and 3.1.1 without any username or
	// password, and wss.
	c5, code := try5(t, tlsDial(t, mqttAddr, alice), "alice-cert")
	if code != 0 {
		t.Fatalf("alice's certificate: CONNACK %#x", code)
	}
	if code := try3(t, tlsDial(t, mqttAddr, alice), "alice-cert3", "", ""); code != rc3Accepted {
		t.Errorf("alice's certificate, 3.1.1: CONNACK %#x", code)
	}
	conn, resp, err := wsDial("wss://"+wsAddr+"/mqtt", alice, "")
	if err != nil {
		t.Fatalf("wss with alice's certificate: %v (%s)", err, statusOfResp(resp))
	}
	if _, code := try5(t, conn, "alice-cert-wss"); code != 0 {
		t.Errorf("alice's certificate over wss: CONNACK %#x", code)
	}
	on := waitPresence(t, adminAddr, "alice", "online by certificate", func(p presence.Aggregate) bool {
		return hasSession("alice-cert")(p) && hasSession("alice-cert3")(p) && hasSession("alice-cert-wss")(p)
	})
	if len(on.Sessions) != 3 {
		t.Errorf("alice's sessions: %+v", on.Sessions)
	}
	// The certificate names the user: claiming another is refused.
	if _, code := try5(t, tlsDial(t, mqttAddr, alice), "x", withUser("bob")); code != rcBadUserNameOrPass {
		t.Errorf("alice's certificate with username bob: CONNACK %#x, want %#x", code, rcBadUserNameOrPass)
	}
	if s := getStats(t, adminAddr, ""); s.Auth == nil || s.Auth.Accepted != 3 || s.Auth.Refused != 1 {
		t.Errorf("auth counters %+v, want accepted 3, refused 1", s.Auth)
	}
	waitTLSFailures(t, adminAddr, 0, 0)

	// mallory's certificate (another CA, CN alice) and no certificate.
	for _, c := range []struct {
		what string
		cfg  *tls.Config
	}{{"a certificate from another CA", mallory}, {"no certificate", none}} {
		err := tlsRefused(t, mqttAddr, c.cfg)
		t.Logf("%s: refused: %v", c.what, err)
	}
	if _, resp, err := wsDial("wss://"+wsAddr+"/mqtt", mallory, ""); err == nil {
		t.Errorf("wss with mallory's certificate upgraded (%s)", statusOfResp(resp))
	}
	waitTLSFailures(t, adminAddr, 2, 1)
	if p, err := mnPresenceOf(adminAddr, "alice"); err != nil || len(p.Sessions) != 3 {
		t.Errorf("alice after the refusals: %+v (%v)", p, err)
	}

	// A new server certificate, reloaded on SIGHUP.
	old := tlsDial(t, mqttAddr, alice).ConnectionState().PeerCertificates[0].SerialNumber
	next := ca.server(t)
	next.write(t, dir, "server")
	p.hup(t)
	testkit.Wait(t, waitTimeout, "the new certificate served", func() error {
		c, err := tlsDialErr(mqttAddr, alice)
		if err != nil {
			return err
		}
		defer c.Close()
		got := c.ConnectionState().PeerCertificates[0].SerialNumber
		return testkit.Why(got.Cmp(next.leaf.SerialNumber) == 0, fmt.Sprintf("serial %v (old %v, new %v)", got, old, next.leaf.SerialNumber))
	})
	conn, resp, err = wsDial("wss://"+wsAddr+"/mqtt", alice, "")
	if err != nil {
		t.Fatalf("wss after the reload: %v (%s)", err, statusOfResp(resp))
	}
	tc, ok := conn.(*testkit.WSConn).WS.UnderlyingConn().(*tls.Conn)
	if !ok {
		t.Fatalf("wss connection under %T", conn.(*testkit.WSConn).WS.UnderlyingConn())
	}
	if got := tc.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(next.leaf.SerialNumber) != 0 {
		t.Errorf("wss serves serial %v after the reload, want %v", got, next.leaf.SerialNumber)
	}
	_ = conn.Close()
	// The connection opened before the reload still works.
	if rc := c5.publish(t, "presence/set", `{"status":"away","text":"after reload"}`, 1, false); rc != 0 {
		t.Errorf("alice-cert after the reload: PUBACK %#x", rc)
	}
	waitPresence(t, adminAddr, "alice", "alice-cert away after the reload", func(p presence.Aggregate) bool {
		s, ok := ctSessionOf(p, "alice-cert")
		return ok && s.Status == presence.Away
	})
}
