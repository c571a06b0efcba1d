package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/url"
	"testing"
	"time"

	"github.com/presenced/presenced/auth"
)

// selfSigned makes a self-signed client certificate.
func selfSigned(t *testing.T, cn string, dns, emails []string, uris []*url.URL) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:   big.NewInt(1),
		Subject:        pkix.Name{CommonName: cn, Organization: []string{"presenced tests"}},
		NotBefore:      t0.Add(-time.Hour),
		NotAfter:       t0.Add(time.Hour),
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:       dns,
		EmailAddresses: emails,
		URIs:           uris,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestCertificateUser(t *testing.T) {
	t.Parallel()
	spiffe, _ := url.Parse("spiffe://example.org/alice")
	full := selfSigned(t, "alice", []string{"alice.devices.example", "second.example"}, []string{"alice@example.org"}, []*url.URL{spiffe})
	emailOnly := selfSigned(t, "alice", nil, []string{"alice@example.org"}, []*url.URL{spiffe})
	uriOnly := selfSigned(t, "alice", nil, nil, []*url.URL{spiffe})
	cnOnly := selfSigned(t, "alice", nil, nil, nil)
	tests := []struct {
		name    string
		from    string
		cert    *x509.Certificate
		user    string // the MQTT username
		want    string // "" for denied
		observe bool
		reason  string
	}{
		{"cn", auth.CertUserCN, full, "", "alice", false, ""},
		{"cn and the same username", auth.CertUserCN, full, "alice", "alice", false, ""},
		{"cn and another username", auth.CertUserCN, full, "bob", "", false, "username does not match the certificate"},
		{"san: first dns name", auth.CertUserSAN, full, "", "alice.devices.example", false, ""},
		{"san: second dns name is not the user", auth.CertUserSAN, full, "second.example", "", false, "username does not match the certificate"},
		{"san: email without dns", auth.CertUserSAN, emailOnly, "", "alice@example.org", false, ""},
		{"san: uri without dns or email", auth.CertUserSAN, uriOnly, "", "spiffe://example.org/alice", false, ""},
		{"san: none, cn not taken", auth.CertUserSAN, cnOnly, "alice", "", false, "the certificate names no user"},
		{"observer by certificate", auth.CertUserCN, selfSigned(t, "monitor", nil, nil, nil), "", "monitor", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := newAuth(t, auth.Config{CertUserFrom: tt.from, Observers: []string{"monitor"}})
			got, err := a.Authenticate(tt.user, []byte("ignored"), "client-1", tt.cert)
			if tt.want == "" {
				checkResult(t, got, err, auth.Identity{}, auth.ErrDenied, tt.reason)
				return
			}
			checkResult(t, got, err, auth.Identity{User: tt.want, Method: auth.MethodCertificate, Observer: tt.observe}, nil, "")
		})
	}
}
