package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// maxRSABits is the largest RSA modulus taken from a JWKS document: a
// bigger number is refused before it is decoded.
const maxRSABits = 8192

// privateMembers are the JWK members that only a private or symmetric key
// has (RFC 7518 sections 6.2.2, 6.3.2 and 6.4; RFC 8037 section 2).
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

// parseJWKS parses a JWKS document (RFC 7517) with the standard library.
// Keys that presenced cannot use (for encryption, of another type, curve or
// algorithm) are skipped, as RFC 7517 section 5 asks; private and symmetric
// keys, weak RSA keys and broken keys are errors.
//
// The members taken are kty, kid, use and alg, then by type: RSA n and e;
// EC crv (P-256) with x and y; OKP crv (Ed25519) with x. Other members
// (x5c, key_ops, ...) are not read.
func parseJWKS(data []byte) ([]publicKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS document: %w", err)
	}
	var keys []publicKey
	for i, raw := range set.Keys {
		k, err := parseJWK(raw)
		if errors.Is(err, errPrivateKey) {
			return nil, fmt.Errorf("key %d (kid %q) %w", i, k.kid, err)
		}
		if err != nil {
			if k.kid != "" {
				return nil, fmt.Errorf("key %d (kid %q): %w", i, k.kid, err)
			}
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		if k.key != nil {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no key for RS256, ES256 or EdDSA signatures")
	}
	return keys, nil
}

// errPrivateKey refuses a private or symmetric key in a file of public keys.
var errPrivateKey = errors.New("is a private or symmetric key: the file must hold public keys only")

// parseJWK parses one key of a JWKS document. A key that presenced does
// not use comes back without its key (nil), and no error. The kid is set
// whenever it could be read, also with an error.
func parseJWK(raw json.RawMessage) (publicKey, error) {
	var members map[string]json.RawMessage // exact names: encoding/json would match "N" for "n"
	if err := json.Unmarshal(raw, &members); err != nil {
		return publicKey{}, fmt.Errorf("not a JSON object: %w", err)
	}
	str := func(name string) (string, error) {
		v, ok := members[name]
		if !ok {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("member %q is not a string", name)
		}
		return s, nil
	}
	var k publicKey
	var err error
	if k.kid, err = str("kid"); err != nil {
		return k, err
	}
	for _, m := range privateMembers {
		if _, ok := members[m]; ok {
			return k, fmt.Errorf("%w (it has the member %q)", errPrivateKey, m)
		}
	}
	var kty, use, alg, crv string
	for _, f := range []struct {
		name string
		v    *string
	}{{"kty", &kty}, {"use", &use}, {"alg", &alg}, {"crv", &crv}} {
		if *f.v, err = str(f.name); err != nil {
			return k, err
		}
	}
	member := func(name string) ([]byte, error) {
		s, err := str(name)
		if err != nil {
			return nil, err
		}
		if s == "" {
			return nil, fmt.Errorf("no member %q", name)
		}
		return decodeJWKNumber(name, s)
	}
	switch {
	case kty == "":
		return k, errors.New("no member \"kty\"")
	case kty == "oct":
		return k, errPrivateKey
	case kty == "RSA":
		k.key, err = jwkRSA(member)
	case kty == "EC" && crv == "P-256":
		k.key, err = jwkP256(member)
	case kty == "OKP" && crv == "Ed25519":
		k.key, err = jwkEd25519(member)
	default: // another type or curve: not for presenced
		return k, nil
	}
	if err != nil {
		k.key = nil
		return k, err
	}
	if k.alg, err = algorithmOf(k.key); err != nil {
		k.key = nil
		return k, err // only errWeakKey: the types above are the ones algorithmOf takes
	}
	if use == "enc" || alg != "" && alg != k.alg {
		k.key = nil // for encryption, or for another algorithm
	}
	return k, nil
}

// jwkRSA makes an RSA public key of the members n and e.
func jwkRSA(member func(string) ([]byte, error)) (*rsa.PublicKey, error) {
	n, err := member("n")
	if err != nil {
		return nil, err
	}
	e, err := member("e")
	if err != nil {
		return nil, err
	}
	key := &rsa.PublicKey{N: new(big.Int).SetBytes(n)}
	if bits := key.N.BitLen(); bits > maxRSABits {
		return nil, fmt.Errorf("an RSA key of %d bits: at most %d are taken", bits, maxRSABits)
	}
	eb := new(big.Int).SetBytes(e)
	if eb.BitLen() > 31 || eb.Int64() < 3 || eb.Bit(0) == 0 {
		return nil, errors.New("member \"e\" is not an odd exponent from 3 to 2^31-1")
	}
	key.E = int(eb.Int64())
	return key, nil
}

// jwkP256 makes a P-256 public key of the members x and y.
func jwkP256(member func(string) ([]byte, error)) (*ecdsa.PublicKey, error) {
	const size = 32 // RFC 7518 section 6.2.1.2: the full size of a coordinate
	x, err := member("x")
	if err != nil {
		return nil, err
	}
	y, err := member("y")
	if err != nil {
		return nil, err
	}
	if len(x) != size || len(y) != size {
		return nil, fmt.Errorf("a P-256 key's x and y must be %d bytes each (got %d and %d)", size, len(x), len(y))
	}
	key, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		return nil, errors.New("x and y are not a point of P-256")
	}
	return key, nil
}

// jwkEd25519 makes an Ed25519 public key of the member x.
func jwkEd25519(member func(string) ([]byte, error)) (ed25519.PublicKey, error) {
	x, err := member("x")
	if err != nil {
		return nil, err
	}
	if len(x) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("an Ed25519 key's x must be %d bytes (got %d)", ed25519.PublicKeySize, len(x))
	}
	if lowOrderEd25519[hex.EncodeToString(x)] {
		return nil, errors.New("an Ed25519 key of low order, which would verify forged signatures")
	}
	return ed25519.PublicKey(x), nil
}

// maxJWKNumber is the longest base64url member read: the bytes of an RSA
// modulus of maxRSABits, and a few more for padding and leading zeros.
const maxJWKNumber = (maxRSABits/8 + 8) * 4 / 3

// decodeJWKNumber decodes a base64url member (RFC 7515 section 2: without
// padding; trailing '=' are taken, as some issuers write them).
func decodeJWKNumber(name, s string) ([]byte, error) {
	if len(s) > maxJWKNumber {
		return nil, fmt.Errorf("member %q is %d characters long, more than any key presenced takes", name, len(s))
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, fmt.Errorf("member %q is not base64url", name)
	}
	return b, nil
}

// lowOrderEd25519 are the encodings (canonical or not) of the points of
// small order on Ed25519: a signature checked with one of them as the
// public key proves nothing (the identity verifies S·B = R for every
// message). crypto/ed25519 does not refuse them.
var lowOrderEd25519 = map[string]bool{
	"0000000000000000000000000000000000000000000000000000000000000000": true,
	"0000000000000000000000000000000000000000000000000000000000000080": true,
	"0100000000000000000000000000000000000000000000000000000000000000": true,
	"0100000000000000000000000000000000000000000000000000000000000080": true,
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05": true,
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85": true,
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a": true,
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa": true,
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f": true,
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff": true,
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f": true,
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff": true,
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f": true,
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff": true,
}
