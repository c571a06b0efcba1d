package auth_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/presenced/presenced/auth"
)

// at is a NumericDate claim value d from the tests' clock.
func at(d time.Duration) int64 { return t0.Add(d).Unix() }

func TestHS256(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := newAuth(t, auth.Config{
		// The file ends in a newline, which is not part of the secret.
		JWT: auth.JWTConfig{
			HS256SecretFile:     writeFile(t, dir, "secret", append(secret, '\n')),
			ObserverClaim:       "svc",
			ClientIDClaim:       "cid",
			ClientIDPrefixClaim: "cid_prefix",
		},
		Observers: []string{"reader"},
	})
	hs := func(claims jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, secret, claims, "") }
	good := hs(jwt.MapClaims{"sub": "alice", "exp": at(time.Hour)})
	segs := strings.Split(good, ".")
	tampered := segs[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"mallory"}`)) + "." + segs[2]
	unsigned := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "alice"}, "")
	otherSecret := sign(t, jwt.SigningMethodHS256, []byte("not the secret, but just as long as it"), jwt.MapClaims{"sub": "alice"}, "")
	withNewline := sign(t, jwt.SigningMethodHS256, append(secret, '\n'), jwt.MapClaims{"sub": "alice"}, "")
	alice := auth.Identity{User: "alice", Method: auth.MethodJWT}

	tests := []struct {
		name     string
		token    string
		user     string
		clientID string
		want     auth.Identity
		reason   string // "" when it must pass
	}{
		{"good", good, "", "c", alice, ""},
		{"good, the same username", good, "alice", "c", alice, ""},
		{"username of another", good, "bob", "c", auth.Identity{}, "username does not match the token"},
		{"no exp never expires", hs(jwt.MapClaims{"sub": "alice"}), "", "c", alice, ""},
		{"expired", hs(jwt.MapClaims{"sub": "alice", "exp": at(-time.Hour)}), "", "c", auth.Identity{}, "token expired"},
		{"expired within the leeway", hs(jwt.MapClaims{"sub": "alice", "exp": at(-29 * time.Second)}), "", "c", alice, ""},
		{"expired beyond the leeway", hs(jwt.MapClaims{"sub": "alice", "exp": at(-31 * time.Second)}), "", "c", auth.Identity{}, "token expired"},
		{"not yet valid", hs(jwt.MapClaims{"sub": "alice", "nbf": at(time.Hour)}), "", "c", auth.Identity{}, "token not valid yet"},
		{"not yet valid within the leeway", hs(jwt.MapClaims{"sub": "alice", "nbf": at(29 * time.Second)}), "", "c", alice, ""},
		{"not yet valid beyond the leeway", hs(jwt.MapClaims{"sub": "alice", "nbf": at(31 * time.Second)}), "", "c", auth.Identity{}, "token not valid yet"},
		{"exp not a number", hs(jwt.MapClaims{"sub": "alice", "exp": "tomorrow"}), "", "c", auth.Identity{}, "invalid claims"},
		{"another secret", otherSecret, "", "c", auth.Identity{}, "bad signature"},
		{"the secret with its newline", withNewline, "", "c", auth.Identity{}, "bad signature"},
		{"payload changed", tampered, "", "c", auth.Identity{}, "bad signature"},
		{"signature cut", segs[0] + "." + segs[1] + ".", "", "c", auth.Identity{}, "bad signature"},
		{"alg none", unsigned, "", "c", auth.Identity{}, "algorithm not allowed"},
		{"alg none, signature kept", strings.Join(strings.Split(unsigned, ".")[:2], ".") + "." + segs[2], "", "c", auth.Identity{}, "algorithm not allowed"},
		{"RS256 without public keys", sign(t, jwt.SigningMethodRS256, keys().rsa, jwt.MapClaims{"sub": "alice"}, ""), "", "c", auth.Identity{}, "algorithm not allowed"},
		{"HS512 with the secret", sign(t, jwt.SigningMethodHS512, secret, jwt.MapClaims{"sub": "alice"}, ""), "", "c", auth.Identity{}, "algorithm not allowed"},
		{"critical header extension", func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice"})
			tok.Header["crit"] = []string{"b64"}
			tok.Header["b64"] = false
			s, err := tok.SignedString(secret)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}(), "", "c", auth.Identity{}, "critical header extensions"},
		{"no user claim", hs(jwt.MapClaims{"name": "alice"}), "alice", "c", auth.Identity{}, `no string claim "sub"`},
		{"user claim not a string", hs(jwt.MapClaims{"sub": 42}), "", "c", auth.Identity{}, `no string claim "sub"`},
		{"empty user claim", hs(jwt.MapClaims{"sub": ""}), "", "c", auth.Identity{}, `no string claim "sub"`},
		{"groups", hs(jwt.MapClaims{"sub": "alice", "groups": []string{"staff", "ops"}}), "", "c",
			auth.Identity{User: "alice", Method: auth.MethodJWT, Groups: []string{"staff", "ops"}}, ""},
		{"one group as a string", hs(jwt.MapClaims{"sub": "alice", "groups": "staff"}), "", "c",
			auth.Identity{User: "alice", Method: auth.MethodJWT, Groups: []string{"staff"}}, ""},
		{"groups not strings", hs(jwt.MapClaims{"sub": "alice", "groups": []any{"staff", 7}}), "", "c", auth.Identity{}, `claim "groups" is not a list of strings`},
		{"observer claim", hs(jwt.MapClaims{"sub": "svc-monitor", "svc": true}), "", "c",
			auth.Identity{User: "svc-monitor", Method: auth.MethodJWT, Observer: true}, ""},
		{"observer claim false", hs(jwt.MapClaims{"sub": "alice", "svc": false}), "", "c", alice, ""},
		{"observer claim false, listed observer", hs(jwt.MapClaims{"sub": "reader", "svc": false}), "", "c",
			auth.Identity{User: "reader", Method: auth.MethodJWT, Observer: true}, ""},
		{"observer claim not a boolean", hs(jwt.MapClaims{"sub": "alice", "svc": "true"}), "", "c", auth.Identity{}, `claim "svc" is not a boolean`},
		{"client id bound", hs(jwt.MapClaims{"sub": "alice", "cid": "alice-phone"}), "", "alice-phone",
			auth.Identity{User: "alice", Method: auth.MethodJWT, ClientID: "alice-phone"}, ""},
		{"client id bound, another used", hs(jwt.MapClaims{"sub": "alice", "cid": "alice-phone"}), "", "alice-laptop", auth.Identity{}, "the token does not allow this client id"},
		{"client id claim not a string", hs(jwt.MapClaims{"sub": "alice", "cid": 1}), "", "1", auth.Identity{}, `claim "cid" is not a string`},
		{"client id prefix", hs(jwt.MapClaims{"sub": "alice", "cid_prefix": "alice-"}), "", "alice-phone",
			auth.Identity{User: "alice", Method: auth.MethodJWT, ClientIDPrefix: "alice-"}, ""},
		{"client id prefix, another used", hs(jwt.MapClaims{"sub": "alice", "cid_prefix": "alice-"}), "", "bob-phone", auth.Identity{}, "the token does not allow this client id"},
		{"client id prefix, empty id", hs(jwt.MapClaims{"sub": "alice", "cid_prefix": "alice-"}), "", "", auth.Identity{}, "the token does not allow this client id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := a.Authenticate(tt.user, []byte(tt.token), tt.clientID, nil)
			if tt.reason == "" {
				checkResult(t, got, err, tt.want, nil, "")
				return
			}
			checkResult(t, got, err, auth.Identity{}, auth.ErrDenied, tt.reason)
			if bound := strings.Contains(tt.reason, "client id"); errors.Is(err, auth.ErrClientIDDenied) != bound {
				t.Errorf("error %v: ErrClientIDDenied is %v, want %v", err, !bound, bound)
			}
			if strings.Contains(err.Error(), tt.token) || strings.Contains(err.Error(), strings.Split(tt.token, ".")[1]) {
				t.Errorf("error %q holds the token", err)
			}
		})
	}
}

func TestLeeway(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secretFile := writeFile(t, dir, "secret", secret)
	expired := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": at(-90 * time.Second)}, "")
	early := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "nbf": at(time.Second)}, "")
	tests := []struct {
		leeway          time.Duration
		expiredOK, nbOK bool
	}{
		{0, false, true}, // 0 means the default 30s
		{2 * time.Minute, true, true},
		{-1, false, false}, // negative: none
	}
	for _, tt := range tests {
		a := newAuth(t, auth.Config{JWT: auth.JWTConfig{HS256SecretFile: secretFile, Leeway: tt.leeway}})
		if _, err := a.Authenticate("", []byte(expired), "c", nil); (err == nil) != tt.expiredOK {
			t.Errorf("leeway %v, expired 90s ago: %v", tt.leeway, err)
		}
		if _, err := a.Authenticate("", []byte(early), "c", nil); (err == nil) != tt.nbOK {
			t.Errorf("leeway %v, valid in 1s: %v", tt.leeway, err)
		}
	}
}

func TestAudienceAndIssuer(t *testing.T) {
	t.Parallel()
	a := newAuth(t, auth.Config{JWT: auth.JWTConfig{
		HS256SecretFile: writeFile(t, t.TempDir(), "secret", secret),
		Audience:        "presenced",
		Issuer:          "https://id.example.org",
		UserClaim:       "preferred_username",
	}})
	claims := func(aud any, iss any) jwt.MapClaims {
		c := jwt.MapClaims{"preferred_username": "alice", "sub": "f81d4fae"}
		if aud != nil {
			c["aud"] = aud
		}
		if iss != nil {
			c["iss"] = iss
		}
		return c
	}
	tests := []struct {
		name     string
		aud, iss any
		reason   string
	}{
		{"aud string", "presenced", "https://id.example.org", ""},
		{"aud list", []string{"account", "presenced"}, "https://id.example.org", ""},
		{"aud of another service", "account", "https://id.example.org", "wrong audience"},
		{"aud missing", nil, "https://id.example.org", "wrong audience"},
		{"aud not a string", 5, "https://id.example.org", "wrong audience"},
		{"iss of another", "presenced", "https://evil.example.org", "wrong issuer"},
		{"iss missing", "presenced", nil, "wrong issuer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tok := sign(t, jwt.SigningMethodHS256, secret, claims(tt.aud, tt.iss), "")
			got, err := a.Authenticate("", []byte(tok), "c", nil)
			if tt.reason == "" {
				checkResult(t, got, err, auth.Identity{User: "alice", Method: auth.MethodJWT}, nil, "")
			} else {
				checkResult(t, got, err, auth.Identity{}, auth.ErrDenied, tt.reason)
			}
		})
	}
}

// The classic key confusion: a token signed with HS256 using the RSA public
// key (which is public) as the HMAC secret must never pass.
func TestKeyConfusion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k := keys()
	pemFile := writeFile(t, dir, "keys.pem", k.rsaPublicPEM)
	jwksFile := writeFile(t, dir, "keys.json", k.publicJWKSDoc)
	secretFile := writeFile(t, dir, "secret", secret)
	claims := jwt.MapClaims{"sub": "mallory"}
	forged := map[string]string{
		"PEM bytes":            sign(t, jwt.SigningMethodHS256, k.rsaPublicPEM, claims, ""),
		"PEM bytes, trimmed":   sign(t, jwt.SigningMethodHS256, []byte(strings.TrimSpace(string(k.rsaPublicPEM))), claims, ""),
		"DER bytes":            sign(t, jwt.SigningMethodHS256, k.rsaPublicDER, claims, ""),
		"JWKS document":        sign(t, jwt.SigningMethodHS256, k.publicJWKSDoc, claims, "r1"),
		"PEM bytes, RSA's kid": sign(t, jwt.SigningMethodHS256, k.rsaPublicPEM, claims, "r1"),
	}
	configs := []struct {
		name   string
		jwt    auth.JWTConfig
		reason string
	}{
		{"PEM keys only", auth.JWTConfig{PublicKeysFile: pemFile}, "algorithm not allowed"},
		{"JWKS only", auth.JWTConfig{PublicKeysFile: jwksFile}, "algorithm not allowed"},
		{"PEM keys and a secret", auth.JWTConfig{PublicKeysFile: pemFile, HS256SecretFile: secretFile}, "bad signature"},
		{"JWKS and a secret", auth.JWTConfig{PublicKeysFile: jwksFile, HS256SecretFile: secretFile}, "bad signature"},
	}
	for _, c := range configs {
		a := newAuth(t, auth.Config{JWT: c.jwt})
		for name, tok := range forged {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				got, err := a.Authenticate("", []byte(tok), "c", nil)
				checkResult(t, got, err, auth.Identity{}, auth.ErrDenied, c.reason)
			})
		}
	}
}

// RS256, ES256 and EdDSA verify with keys from PEM and from a JWKS.
func TestPublicKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k := keys()
	sources := map[string]string{
		"PEM":              writeFile(t, dir, "keys.pem", k.allPublicPEM),
		"JWKS":             writeFile(t, dir, "keys.json", k.publicJWKSDoc),
		"JWKS, other name": writeFile(t, dir, "jwks", append([]byte("\n  "), k.publicJWKSDoc...)),
	}
	claims := jwt.MapClaims{"sub": "alice", "exp": at(time.Minute)}
	tests := []struct {
		name   string
		method jwt.SigningMethod
		key    any
		kid    string
		reason string
	}{
		{"RS256", jwt.SigningMethodRS256, k.rsa, "", ""},
		{"RS256 with kid", jwt.SigningMethodRS256, k.rsa, "r1", ""},
		{"ES256", jwt.SigningMethodES256, k.ec, "", ""},
		{"ES256 with kid", jwt.SigningMethodES256, k.ec, "e1", ""},
		{"EdDSA", jwt.SigningMethodEdDSA, k.ed, "", ""},
		{"EdDSA with kid", jwt.SigningMethodEdDSA, k.ed, "d1", ""},
		{"RS256, unknown key", jwt.SigningMethodRS256, k.rsa2, "", "bad signature"},
		{"ES256, unknown key", jwt.SigningMethodES256, k.ec2, "", "bad signature"},
		{"EdDSA, unknown key", jwt.SigningMethodEdDSA, k.ed2, "", "bad signature"},
		{"RS512", jwt.SigningMethodRS512, k.rsa, "", "algorithm not allowed"},
		{"PS256", jwt.SigningMethodPS256, k.rsa, "", "algorithm not allowed"},
		{"HS256 without a secret", jwt.SigningMethodHS256, secret, "", "algorithm not allowed"},
	}
	for source, file := range sources {
		a := newAuth(t, auth.Config{JWT: auth.JWTConfig{PublicKeysFile: file}})
		for _, tt := range tests {
			t.Run(source+"/"+tt.name, func(t *testing.T) {
				got, err := a.Authenticate("alice", []byte(sign(t, tt.method, tt.key, claims, tt.kid)), "c", nil)
				if tt.reason == "" {
					checkResult(t, got, err, auth.Identity{User: "alice", Method: auth.MethodJWT}, nil, "")
				} else {
					checkResult(t, got, err, auth.Identity{}, auth.ErrDenied, tt.reason)
				}
			})
		}
	}
	// A file with keys of one type allows only that type's algorithm.
	ecOnly := newAuth(t, auth.Config{JWT: auth.JWTConfig{PublicKeysFile: writeFile(t, dir, "ec.pem", publicPEM(&k.ec.PublicKey))}})
	for _, tok := range []string{
		sign(t, jwt.SigningMethodRS256, k.rsa, claims, ""),
		sign(t, jwt.SigningMethodEdDSA, k.ed, claims, ""),
	} {
		_, err := ecOnly.Authenticate("", []byte(tok), "c", nil)
		checkResult(t, auth.Identity{}, err, auth.Identity{}, auth.ErrDenied, "algorithm not allowed")
	}
}

// A token's kid picks the JWKS key with that id; a kid no key has falls
// back to the keys without one.
func TestKeyID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k := keys()
	rotated := writeFile(t, dir, "rotated.json", jwksDoc(
		testJWK{Key: &k.rsa.PublicKey, KeyID: "2025", Use: "sig"},
		testJWK{Key: &k.rsa2.PublicKey, KeyID: "2026", Use: "sig"},
	))
	mixed := writeFile(t, dir, "mixed.json", jwksDoc(
		testJWK{Key: &k.rsa.PublicKey, KeyID: "2025"},
		testJWK{Key: &k.rsa2.PublicKey},
	))
	pemFile := writeFile(t, dir, "keys.pem", k.allPublicPEM)
	claims := jwt.MapClaims{"sub": "alice"}
	tests := []struct {
		name, file string
		key        any
		kid        string
		reason     string
	}{
		{"kid picks the old key", rotated, k.rsa, "2025", ""},
		{"kid picks the new key", rotated, k.rsa2, "2026", ""},
		{"kid of the other key", rotated, k.rsa2, "2025", "bad signature"},
		{"unknown kid", rotated, k.rsa, "2024", "unknown key id"},
		{"no kid tries every key", rotated, k.rsa2, "", ""},
		{"unknown kid falls back to keys without one", mixed, k.rsa2, "2024", ""},
		{"unknown kid, key that has an id", mixed, k.rsa, "2024", "bad signature"},
		{"PEM keys have no kid", pemFile, k.rsa, "anything", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := newAuth(t, auth.Config{JWT: auth.JWTConfig{PublicKeysFile: tt.file}})
			got, err := a.Authenticate("", []byte(sign(t, jwt.SigningMethodRS256, tt.key, claims, tt.kid)), "c", nil)
			if tt.reason == "" {
				checkResult(t, got, err, auth.Identity{User: "alice", Method: auth.MethodJWT}, nil, "")
			} else {
				checkResult(t, got, err, auth.Identity{}, auth.ErrDenied, tt.reason)
			}
		})
	}
}

func TestPublicKeysFile(t *testing.T) {
	t.Parallel()
	k := keys()
	p521, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	privDER := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("not even a key")})
	tests := []struct {
		name string
		file string
		data []byte
		want string // in the error; "" when the file loads
	}{
		{"certificate", "cert.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: selfSigned(t, "issuer", nil, nil, nil).Raw}), ""},
		{"PEM with comments between blocks", "keys.pem", append([]byte("# our issuer's keys\n"), k.allPublicPEM...), ""},
		{"JWKS, skipping what cannot be used", "keys.json", jwksDoc(
			testJWK{Key: &k.rsa2.PublicKey, KeyID: "enc", Use: "enc"},
			testJWK{Key: &k.ecP384.PublicKey, KeyID: "p384"},
			testJWK{Key: &k.rsa2.PublicKey, KeyID: "rs512", Algorithm: "RS512"},
			testJWK{Key: &k.rsa.PublicKey, KeyID: "r1"},
		), ""},
		{"JWKS, unknown key type skipped", "keys.json", []byte(`{"keys":[{"kty":"XYZ","kid":"x"},` + string(k.publicJWKSDoc[len(`{"keys":[`):])), ""},
		{"empty", "keys.pem", nil, "no PEM block"},
		{"not PEM", "keys.pem", []byte("hello"), "no PEM block"},
		{"private key PEM", "keys.pem", append(k.rsaPublicPEM, privDER...), `PEM block 2 is "PRIVATE KEY"`},
		{"broken PEM key", "keys.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}}), "PEM block 1 (PUBLIC KEY)"},
		{"weak RSA PEM", "keys.pem", publicPEM(&k.rsaWeak.PublicKey), "at least 2048 bits"},
		{"P-384 PEM", "keys.pem", publicPEM(&k.ecP384.PublicKey), "P-384: only P-256"},
		{"P-521 PEM", "keys.pem", publicPEM(&p521.PublicKey), "P-521"},
		{"broken JSON", "keys.json", []byte(`{"keys": [`), "not a JWKS document"},
		{"JWKS without usable keys", "keys.json", jwksDoc(testJWK{Key: &k.rsa.PublicKey, Use: "enc"}), "no key for RS256, ES256 or EdDSA"},
		{"JWKS with a private key", "keys.json", jwksDoc(testJWK{Key: edPriv, KeyID: "oops"}), `key 0 (kid "oops") is a private or symmetric key`},
		{"JWKS with a symmetric key", "keys.json", jwksDoc(testJWK{Key: secret, KeyID: "hmac"}), `(kid "hmac") is a private or symmetric key`},
		{"JWKS with a weak RSA key", "keys.json", jwksDoc(testJWK{Key: &k.rsaWeak.PublicKey, KeyID: "old"}), `kid "old"`},
		{"JWKS with a broken key", "keys.json", []byte(`{"keys":[{"kty":"RSA","n":"AQAB"}]}`), "key 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, t.TempDir(), tt.file, tt.data)
			_, err := auth.New(auth.Config{JWT: auth.JWTConfig{PublicKeysFile: path}})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("New took the file, want an error saying %q", tt.want)
			case tt.want != "" && (!strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path)):
				t.Fatalf("error %q does not name %s and say %q", err, path, tt.want)
			}
		})
	}
}

func TestLooksLikeJWT(t *testing.T) {
	t.Parallel()
	good := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice"}, "")
	segs := strings.Split(good, ".")
	b64 := base64.RawURLEncoding.EncodeToString
	tests := []struct {
		password string
		want     bool
	}{
		{good, true},
		{segs[0] + "." + segs[1] + ".", true}, // unsigned: checked, and refused, as a token
		{b64([]byte(`{"alg":"none"}`)) + "." + b64([]byte(`{}`)) + ".", true},
		{"", false},
		{"hunter2", false},
		{"correct.horse.battery", false},
		{"a.b.c", false},
		{segs[0] + "." + segs[1], false},
		{good + ".x", false},
		{"." + segs[1] + "." + segs[2], false},
		{segs[0] + ".." + segs[2], false},
		{segs[0] + "=." + segs[1] + "." + segs[2], false},
		{b64([]byte(`{"typ":"JWT"}`)) + "." + segs[1] + "." + segs[2], false},
		{b64([]byte(`{"alg":5}`)) + "." + segs[1] + "." + segs[2], false},
		{b64([]byte(`["alg"]`)) + "." + segs[1] + "." + segs[2], false},
		{" " + good, false},
	}
	for _, tt := range tests {
		if got := auth.LooksLikeJWT([]byte(tt.password)); got != tt.want {
			t.Errorf("LooksLikeJWT(%q) = %v, want %v", tt.password, got, tt.want)
		}
	}
}
