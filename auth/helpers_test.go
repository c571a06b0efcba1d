package auth_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"

	"github.com/presenced/presenced/auth"
)

// t0 is the tests' clock: every token's exp and nbf are set around it.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func clock() time.Time { return t0 }

// secret is the HS256 secret of the tests (at least 32 bytes).
var secret = []byte("an HS256 secret of presenced's tests, long enough")

// testKeys are the tests' key pairs, made once (RSA keys take a while).
type testKeys struct {
	rsa, rsa2     *rsa.PrivateKey
	ec, ec2       *ecdsa.PrivateKey
	ed, ed2       ed25519.PrivateKey
	rsaWeak       *rsa.PrivateKey // 1024 bits
	ecP384        *ecdsa.PrivateKey
	rsaPublicPEM  []byte // the PUBLIC KEY block of rsa
	rsaPublicDER  []byte
	allPublicPEM  []byte // rsa, ec and ed as PUBLIC KEY blocks
	publicJWKSDoc []byte // rsa (kid r1), ec (kid e1) and ed (kid d1)
}

var keys = sync.OnceValue(func() *testKeys {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	k := new(testKeys)
	var err error
	k.rsa, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.rsa2, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.rsaWeak, err = rsa.GenerateKey(rand.Reader, 1024)
	must(err)
	k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	k.ec2, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	k.ecP384, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	must(err)
	_, k.ed, err = ed25519.GenerateKey(rand.Reader)
	must(err)
	_, k.ed2, err = ed25519.GenerateKey(rand.Reader)
	must(err)
	k.rsaPublicDER, err = x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
	must(err)
	k.rsaPublicPEM = publicPEM(&k.rsa.PublicKey)
	k.allPublicPEM = append(append(publicPEM(&k.rsa.PublicKey), publicPEM(&k.ec.PublicKey)...), publicPEM(k.ed.Public())...)
	k.publicJWKSDoc = jwksDoc(
		testJWK{Key: &k.rsa.PublicKey, KeyID: "r1", Algorithm: "RS256", Use: "sig"},
		testJWK{Key: &k.ec.PublicKey, KeyID: "e1", Algorithm: "ES256", Use: "sig"},
		testJWK{Key: k.ed.Public(), KeyID: "d1", Algorithm: "EdDSA", Use: "sig"},
	)
	return k
})

// publicPEM is key as a PUBLIC KEY block.
func publicPEM(key any) []byte {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// testJWK is a key to write in a JWKS document, with its kid, alg and use
// when not empty.
type testJWK struct {
	Key                   any
	KeyID, Algorithm, Use string
}

// jwksDoc is a JWKS document of keys, written as RFC 7517 and 7518 say
// (the way go-jose, which wrote them before, writes them).
func jwksDoc(keys ...testJWK) []byte {
	b64 := base64.RawURLEncoding.EncodeToString
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	for _, k := range keys {
		m := make(map[string]string)
		switch key := k.Key.(type) {
		case *rsa.PublicKey:
			m["kty"], m["n"], m["e"] = "RSA", b64(key.N.Bytes()), b64(big.NewInt(int64(key.E)).Bytes())
		case *ecdsa.PublicKey:
			b, err := key.Bytes() // 0x04 || x || y, each coordinate full size
			if err != nil {
				panic(err)
			}
			size := (len(b) - 1) / 2
			m["kty"], m["crv"], m["x"], m["y"] = "EC", key.Curve.Params().Name, b64(b[1:1+size]), b64(b[1+size:])
		case ed25519.PublicKey:
			m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", b64(key)
		case ed25519.PrivateKey:
			m["kty"], m["crv"], m["x"], m["d"] = "OKP", "Ed25519", b64(key.Public().(ed25519.PublicKey)), b64(key.Seed())
		case []byte:
			m["kty"], m["k"] = "oct", b64(key)
		default:
			panic(fmt.Sprintf("jwksDoc: a %T", k.Key))
		}
		for name, v := range map[string]string{"kid": k.KeyID, "alg": k.Algorithm, "use": k.Use} {
			if v != "" {
				m[name] = v
			}
		}
		set.Keys = append(set.Keys, m)
	}
	doc, err := json.Marshal(set)
	if err != nil {
		panic(err)
	}
	return doc
}

// sign makes a token of claims signed by key with method, and kid in the
// header when not empty.
func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeFile writes data to name in dir and returns its path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// replaceFile replaces the file at path at once (write and rename), as a
// careful operator or AddPassword does, so that a concurrent Reload reads
// the old file or the new one.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Error(err)
	}
}

// hashLine is a password file line for user, hashed at the cheapest cost.
func hashLine(t *testing.T, user, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return user + ":" + string(h) + "\n"
}

func newAuth(t *testing.T, c auth.Config) *auth.Authenticator {
	t.Helper()
	if c.Now == nil {
		c.Now = clock
	}
	a, err := auth.New(c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// checkResult compares the outcome of Authenticate with the expectation:
// wantErr nil and the identity, or an error wrapping wantErr whose text
// holds reason.
func checkResult(t *testing.T, got auth.Identity, err error, want auth.Identity, wantErr error, reason string) {
	t.Helper()
	if wantErr == nil {
		if err != nil {
			t.Fatalf("error %v, want %+v", err, want)
		}
		if !equalIdentity(got, want) {
			t.Fatalf("identity %+v, want %+v", got, want)
		}
		return
	}
	if !errors.Is(err, wantErr) {
		t.Fatalf("error %v (identity %+v), want %v", err, got, wantErr)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Fatalf("error %q does not say %q", err, reason)
	}
	if !equalIdentity(got, auth.Identity{}) {
		t.Fatalf("identity %+v with an error", got)
	}
}

func equalIdentity(a, b auth.Identity) bool {
	return a.User == b.User && a.Method == b.Method && a.Observer == b.Observer &&
		a.ClientID == b.ClientID && a.ClientIDPrefix == b.ClientIDPrefix &&
		strings.Join(a.Groups, "\x00") == strings.Join(b.Groups, "\x00") && (a.Groups == nil) == (b.Groups == nil)
}
