package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
)

var b64 = base64.RawURLEncoding.EncodeToString

// jwksKeys are the keys of the JWKS parser's tests, made once.
var jwksKeys = sync.OnceValue(func() (k struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
	ed  ed25519.PublicKey
},
) {
	var err error
	if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
	if k.ed, _, err = ed25519.GenerateKey(rand.Reader); err != nil {
		panic(err)
	}
	return k
})

// jwkMembers are the members of the tests' keys: "rsa", "ec" and "ed".
func jwkMembers(kind string) map[string]any {
	k := jwksKeys()
	switch kind {
	case "rsa":
		return map[string]any{"kty": "RSA", "n": b64(k.rsa.N.Bytes()), "e": "AQAB"}
	case "ec":
		b, err := k.ec.PublicKey.Bytes()
		if err != nil {
			panic(err)
		}
		return map[string]any{"kty": "EC", "crv": "P-256", "x": b64(b[1:33]), "y": b64(b[33:])}
	case "ed":
		return map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(k.ed)}
	}
	panic(kind)
}

// with is m with the members of set changed (a nil value removes one).
func with(m map[string]any, set map[string]any) map[string]any {
	out := make(map[string]any, len(m)+len(set))
	for k, v := range m {
		out[k] = v
	}
	for k, v := range set {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// oneKeyDoc is a JWKS document of key and, when good, a usable RSA key
// after it (so that a skipped key is not an error of its own).
func oneKeyDoc(key map[string]any, good bool) []byte {
	keys := []map[string]any{key}
	if good {
		keys = append(keys, with(jwkMembers("rsa"), map[string]any{"kid": "good"}))
	}
	doc, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		panic(err)
	}
	return doc
}

// The JWKS parser refuses what cannot be a public key, names the key, and
// says why.
func TestJWKSRefusals(t *testing.T) {
	t.Parallel()
	rsaKey, ecKey, edKey := jwkMembers("rsa"), jwkMembers("ec"), jwkMembers("ed")
	huge := make([]byte, 1030) // 8,240 bits
	huge[0] = 0x80
	offCurve := b64(append([]byte{1}, make([]byte, 31)...))
	tests := []struct {
		name string
		key  map[string]any
		want string
	}{
		{"RSA private d", with(rsaKey, map[string]any{"d": "AQAB", "kid": "r"}), `key 0 (kid "r") is a private or symmetric key`},
		{"RSA private p", with(rsaKey, map[string]any{"p": "AQAB"}), `is a private or symmetric key: the file must hold public keys only (it has the member "p")`},
		{"RSA private q", with(rsaKey, map[string]any{"q": "AQAB"}), `(it has the member "q")`},
		{"EC private d", with(ecKey, map[string]any{"d": "AQAB"}), "private or symmetric"},
		{"Ed25519 private d", with(edKey, map[string]any{"d": "AQAB"}), "private or symmetric"},
		{"unknown type, private d", map[string]any{"kty": "XYZ", "d": "AQAB"}, "private or symmetric"},
		{"symmetric", map[string]any{"kty": "oct", "k": "c2VjcmV0"}, "private or symmetric"},
		{"symmetric without k", map[string]any{"kty": "oct"}, "private or symmetric"},
		{"no kty", with(rsaKey, map[string]any{"kty": nil}), `key 0: no member "kty"`},
		{"kty not a string", with(rsaKey, map[string]any{"kty": 5}), `member "kty" is not a string`},
		{"kid not a string", with(rsaKey, map[string]any{"kid": 5}), `key 0: member "kid" is not a string`},
		{"RSA without n", with(rsaKey, map[string]any{"n": nil}), `no member "n"`},
		{"RSA with N, not n", with(rsaKey, map[string]any{"n": nil, "N": rsaKey["n"]}), `no member "n"`},
		{"RSA without e", with(rsaKey, map[string]any{"e": nil, "kid": "r"}), `key 0 (kid "r"): no member "e"`},
		{"RSA bad base64", with(rsaKey, map[string]any{"n": "not+base64/url"}), `member "n" is not base64url`},
		{"RSA n not a string", with(rsaKey, map[string]any{"n": 12345}), `member "n" is not a string`},
		{"RSA huge n", with(rsaKey, map[string]any{"n": b64(huge)}), "an RSA key of 8240 bits: at most 8192 are taken"},
		{"RSA n too long to read", with(rsaKey, map[string]any{"n": strings.Repeat("A", 1<<20)}), `member "n" is 1048576 characters long`},
		{"RSA weak", with(rsaKey, map[string]any{"n": b64(jwksKeys().rsa.N.Bytes()[:64])}), "at least 2048 bits"},
		{"RSA e even", with(rsaKey, map[string]any{"e": b64(big.NewInt(65536).Bytes())}), `member "e" is not an odd exponent`},
		{"RSA e 1", with(rsaKey, map[string]any{"e": "AQ"}), `member "e" is not an odd exponent`},
		{"RSA e huge", with(rsaKey, map[string]any{"e": b64(huge)}), `member "e" is not an odd exponent`},
		{"EC short x", with(ecKey, map[string]any{"x": b64(make([]byte, 31))}), "x and y must be 32 bytes each (got 31 and 32)"},
		{"EC no y", with(ecKey, map[string]any{"y": nil}), `no member "y"`},
		{"EC off the curve", with(ecKey, map[string]any{"x": offCurve, "y": offCurve}), "not a point of P-256"},
		{"Ed25519 short x", with(edKey, map[string]any{"x": b64(make([]byte, 31))}), "x must be 32 bytes (got 31)"},
		{"Ed25519 identity", with(edKey, map[string]any{"x": b64(append([]byte{1}, make([]byte, 31)...))}), "low order"},
		{"Ed25519 zero", with(edKey, map[string]any{"x": b64(make([]byte, 32))}), "low order"},
	}
	for _, bad := range []string{`{"keys":[5]}`, `{"keys":{"kty":"RSA"}}`, `[]`} {
		if keys, err := parseJWKS([]byte(bad)); err == nil {
			t.Errorf("parseJWKS(%s) took %v, want an error", bad, keys)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			keys, err := parseJWKS(oneKeyDoc(tt.key, true))
			if err == nil {
				t.Fatalf("parseJWKS took %v, want an error saying %q", keys, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

// Keys presenced does not use are skipped (RFC 7517 section 5): another
// type or curve, a use other than sig, an alg other than the key's.
func TestJWKSSkips(t *testing.T) {
	t.Parallel()
	rsaKey, ecKey, edKey := jwkMembers("rsa"), jwkMembers("ec"), jwkMembers("ed")
	tests := []struct {
		name string
		key  map[string]any
	}{
		{"unknown type", map[string]any{"kty": "XYZ", "n": 5}},
		{"EC P-384", with(ecKey, map[string]any{"crv": "P-384"})},
		{"EC secp256k1", with(ecKey, map[string]any{"crv": "secp256k1"})},
		{"EC without crv", with(ecKey, map[string]any{"crv": nil})},
		{"OKP X25519", with(edKey, map[string]any{"crv": "X25519"})},
		{"OKP Ed448", with(edKey, map[string]any{"crv": "Ed448", "x": "AA"})},
		{"RSA for encryption", with(rsaKey, map[string]any{"use": "enc"})},
		{"RSA for RS512", with(rsaKey, map[string]any{"alg": "RS512"})},
		{"RSA for ES256", with(rsaKey, map[string]any{"alg": "ES256"})},
		{"EC for EdDSA", with(ecKey, map[string]any{"alg": "EdDSA"})},
		{"Ed25519 for RS256", with(edKey, map[string]any{"alg": "RS256"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			keys, err := parseJWKS(oneKeyDoc(tt.key, true))
			if err != nil {
				t.Fatalf("parseJWKS: %v", err)
			}
			if len(keys) != 1 || keys[0].kid != "good" {
				t.Fatalf("keys %+v, want the good key only", keys)
			}
			if _, err := parseJWKS(oneKeyDoc(tt.key, false)); err == nil || !strings.Contains(err.Error(), "no key for RS256, ES256 or EdDSA") {
				t.Fatalf("the key alone: error %v, want no key", err)
			}
		})
	}
}

// Each type of key is read whole, with its kid; trailing padding is taken.
func TestJWKSKeys(t *testing.T) {
	t.Parallel()
	k := jwksKeys()
	padded := jwkMembers("rsa")
	padded["e"], padded["kid"] = "AQAB==", "padded"
	doc := []byte(fmt.Sprintf(`{"keys":[%s,%s,%s,%s]}`,
		mustJSON(with(jwkMembers("rsa"), map[string]any{"kid": "r", "alg": "RS256", "use": "sig"})),
		mustJSON(with(jwkMembers("ec"), map[string]any{"kid": "e", "alg": "ES256"})),
		mustJSON(with(jwkMembers("ed"), map[string]any{"alg": "EdDSA"})),
		mustJSON(padded)))
	keys, err := parseJWKS(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 4 {
		t.Fatalf("%d keys, want 4", len(keys))
	}
	for i, want := range []struct {
		kid, alg string
		key      any
	}{{"r", algRS256, &k.rsa.PublicKey}, {"e", algES256, &k.ec.PublicKey}, {"", algEdDSA, k.ed}, {"padded", algRS256, &k.rsa.PublicKey}} {
		got := keys[i]
		equal, ok := got.key.(interface{ Equal(crypto.PublicKey) bool })
		if got.kid != want.kid || got.alg != want.alg || !ok || !equal.Equal(want.key) {
			t.Errorf("key %d: kid %q alg %s %T, want kid %q alg %s and the same key", i, got.kid, got.alg, got.key, want.kid, want.alg)
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// FuzzParseJWKS feeds the parser any bytes. It never panics, and every key
// it returns is one that verifies its algorithm: RSA of 2048 to 8192 bits
// with an odd exponent, P-256, or a 32-byte Ed25519 key.
func FuzzParseJWKS(f *testing.F) {
	for _, kind := range []string{"rsa", "ec", "ed"} {
		f.Add(oneKeyDoc(jwkMembers(kind), false))
	}
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"","y":""}]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"AA"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := parseJWKS(data)
		if err != nil {
			if keys != nil {
				t.Fatalf("keys %v with error %v", keys, err)
			}
			return
		}
		for _, k := range keys {
			switch key := k.key.(type) {
			case *rsa.PublicKey:
				if bits := key.N.BitLen(); k.alg != algRS256 || bits < minRSABits || bits > maxRSABits || key.E < 3 || key.E%2 == 0 {
					t.Fatalf("RSA key of %d bits, e %d, alg %s", bits, key.E, k.alg)
				}
			case *ecdsa.PublicKey:
				if k.alg != algES256 || key.Curve != elliptic.P256() {
					t.Fatalf("ECDSA key on %s, alg %s", key.Curve.Params().Name, k.alg)
				}
			case ed25519.PublicKey:
				if k.alg != algEdDSA || len(key) != ed25519.PublicKeySize {
					t.Fatalf("Ed25519 key of %d bytes, alg %s", len(key), k.alg)
				}
			default:
				t.Fatalf("a %T, alg %s", k.key, k.alg)
			}
		}
	})
}
