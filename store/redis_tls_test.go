package store

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// testPKI writes a CA, a server certificate for 127.0.0.1 and "redis.test",
// and a client certificate, each signed by the CA, as PEM files in dir.
type testPKI struct{ ca, serverCert, serverKey, clientCert, clientKey, otherCA string }

func newTestPKI(t *testing.T, dir string) testPKI {
	t.Helper()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	serial := int64(1)
	sign := func(tmpl *x509.Certificate, pub any, parent *x509.Certificate, priv *ecdsa.PrivateKey) ([]byte, *x509.Certificate) {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, priv)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return der, c
	}
	caKey := key()
	caDER, ca := sign(&x509.Certificate{Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, &caKey.PublicKey, nil, caKey)
	otherKey := key()
	otherDER, _ := sign(&x509.Certificate{Subject: pkix.Name{CommonName: "other CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, &otherKey.PublicKey, nil, otherKey)
	srvKey := key()
	srvDER, _ := sign(&x509.Certificate{Subject: pkix.Name{CommonName: "redis"}, DNSNames: []string{"redis.test"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}, &srvKey.PublicKey, ca, caKey)
	cliKey := key()
	cliDER, _ := sign(&x509.Certificate{Subject: pkix.Name{CommonName: "presenced"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}, &cliKey.PublicKey, ca, caKey)
	return testPKI{
		ca: write("ca.pem", "CERTIFICATE", caDER), otherCA: write("other.pem", "CERTIFICATE", otherDER),
		serverCert: write("server.pem", "CERTIFICATE", srvDER), serverKey: write("server.key", "PRIVATE KEY", keyDER(srvKey)),
		clientCert: write("client.pem", "CERTIFICATE", cliDER), clientKey: write("client.key", "PRIVATE KEY", keyDER(cliKey)),
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The store reaches a real redis-server over TLS only (mutual TLS, an ACL
// user with a password): it opens a session and reads it back. The wrong
// CA, no client certificate, the wrong server name or the wrong password
// fail Start.
func TestRedisTLS(t *testing.T) {
	pki := newTestPKI(t, t.TempDir())
	tlsPort := freeTCPPort(t)
	srv := redistest.Start(t, "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", pki.serverCert, "--tls-key-file", pki.serverKey, "--tls-ca-cert-file", pki.ca,
		"--tls-auth-clients", "yes", "--user", "presenced", "on", ">s3cret-pw", "~*", "&*", "+@all")
	_ = srv
	addr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	nodes := 0
	open := func(tc RedisTLS, user, password string) (Store, error) {
		t.Helper()
		cfg, err := tc.Config()
		if err != nil {
			t.Fatalf("TLS config: %v", err)
		}
		nodes++
		s := Open(Config{Node: "tls-node-" + strconv.Itoa(nodes), Authoritative: []string{"desktop"}, Retention: time.Hour, ReapInterval: time.Second,
			Redis: &RedisConfig{Addrs: []string{addr}, Username: user, Password: password, TLS: cfg,
				DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, PoolSize: 4,
				KeyPrefix: "tls:", NodeTTL: 3 * time.Second, SweepInterval: time.Second}})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Start(ctx); err != nil {
			s.Stop()
			return nil, err
		}
		t.Cleanup(s.Stop)
		return s, nil
	}
	good := RedisTLS{Enabled: true, CAFile: pki.ca, CertFile: pki.clientCert, KeyFile: pki.clientKey}
	s, err := open(good, "presenced", "s3cret-pw")
	if err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	ctx := context.Background()
	if _, err := s.Open(ctx, presence.OpenArgs{User: "alice", ID: "a", Node: "tls-node-1", TTL: time.Hour}); err != nil {
		t.Fatalf("open over TLS: %v", err)
	}
	if p, ok, err := s.(*Redis).Get(ctx, "alice"); err != nil || !ok || p.Status != presence.Online {
		t.Fatalf("alice over TLS: %+v %v %v", p, ok, err)
	}
	named := good
	named.ServerName = "redis.test"
	if _, err := open(named, "presenced", "s3cret-pw"); err != nil {
		t.Errorf("with the server name in the certificate: %v", err)
	}
	for _, c := range []struct {
		name     string
		tls      RedisTLS
		password string
		want     string
	}{
		{"another CA", RedisTLS{Enabled: true, CAFile: pki.otherCA, CertFile: pki.clientCert, KeyFile: pki.clientKey}, "s3cret-pw", "certificate"},
		{"no client certificate", RedisTLS{Enabled: true, CAFile: pki.ca}, "s3cret-pw", ""},
		{"another server name", RedisTLS{Enabled: true, CAFile: pki.ca, CertFile: pki.clientCert, KeyFile: pki.clientKey, ServerName: "evil.test"}, "s3cret-pw", "certificate"},
		{"wrong password", good, "wrong", ""},
		{"no TLS", RedisTLS{}, "s3cret-pw", ""},
	} {
		if _, err := open(c.tls, "presenced", c.password); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Start error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

// Files without enabled, or a certificate without its key, are refused.
func TestRedisTLSConfig(t *testing.T) {
	for _, c := range []RedisTLS{{CAFile: "x"}, {InsecureSkipVerify: true}, {Enabled: true, CertFile: "c"}, {Enabled: true, CAFile: "/nonexistent"}} {
		if _, err := c.Config(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if c, err := (RedisTLS{}).Config(); c != nil || err != nil {
		t.Errorf("off: %v %v", c, err)
	}
}

// The TLS configuration reaches each kind of client: single, Cluster and
// Sentinel (whose options the master connections use too).
func TestRedisTLSEveryTopology(t *testing.T) {
	tc := &tls.Config{ServerName: "redis.test", MinVersion: tls.VersionTLS12}
	base := RedisConfig{Addrs: []string{"127.0.0.1:1"}, TLS: tc, PoolSize: 1}
	single := newClient(base).(*redis.Client)
	defer single.Close()
	if single.Options().TLSConfig != tc {
		t.Error("single server: no TLS")
	}
	cc := base
	cc.Cluster = true
	cluster := newClient(cc).(*redis.ClusterClient)
	defer cluster.Close()
	if cluster.Options().TLSConfig != tc {
		t.Error("cluster: no TLS")
	}
	sc := base
	sc.SentinelMaster = "m"
	failover := newClient(sc).(*redis.Client)
	defer failover.Close()
	if failover.Options().TLSConfig != tc {
		t.Error("sentinel: no TLS")
	}
}

// A Redis Cluster (one master, TLS for clients and the bus) reached over
// TLS only: the store opens a session and reads it back.
func TestRedisTLSCluster(t *testing.T) {
	pki := newTestPKI(t, t.TempDir())
	tlsPort := freeTCPPort(t)
	srv := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", pki.serverCert, "--tls-key-file", pki.serverKey, "--tls-ca-cert-file", pki.ca,
		"--tls-auth-clients", "yes", "--tls-cluster", "yes", "--cluster-announce-ip", "127.0.0.1")
	ctx := context.Background()
	plain := srv.Client(t)
	if err := plain.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, 10*time.Second, "the cluster is ok", func() error {
		info, err := plain.ClusterInfo(ctx).Result()
		return testkit.Why(err == nil && strings.Contains(info, "cluster_state:ok"), info)
	})
	tc, err := RedisTLS{Enabled: true, CAFile: pki.ca, CertFile: pki.clientCert, KeyFile: pki.clientKey}.Config()
	if err != nil {
		t.Fatal(err)
	}
	s := Open(Config{Node: "tls-cluster-node", Authoritative: []string{"desktop"}, Retention: time.Hour, ReapInterval: time.Second,
		Redis: &RedisConfig{Addrs: []string{"127.0.0.1:" + strconv.Itoa(tlsPort)}, Cluster: true, TLS: tc,
			DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, PoolSize: 4,
			KeyPrefix: "tls:", NodeTTL: 3 * time.Second, SweepInterval: time.Second}})
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Start(sctx); err != nil {
		t.Fatalf("start over TLS: %v", err)
	}
	defer s.Stop()
	if _, err := s.Open(ctx, presence.OpenArgs{User: "alice", ID: "a", Node: "tls-cluster-node", TTL: time.Hour}); err != nil {
		t.Fatalf("open over TLS: %v", err)
	}
	if p, ok, err := s.(*Redis).Get(ctx, "alice"); err != nil || !ok || p.Status != presence.Online {
		t.Fatalf("alice over TLS: %+v %v %v", p, ok, err)
	}
	// The store's connections are all on the TLS port; the plain port
	// serves only the test's own client.
	list, err := plain.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	onTLS, onPlain := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		switch {
		case strings.Contains(line, "laddr=127.0.0.1:"+strconv.Itoa(tlsPort)+" "):
			onTLS++
		case !strings.Contains(line, "cmd=client|list"):
			onPlain++
			t.Errorf("a connection on the plain port: %s", line)
		}
	}
	if onTLS == 0 {
		t.Errorf("no connection on the TLS port:\n%s", list)
	}
}
