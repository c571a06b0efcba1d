package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// The token algorithms that presenced verifies.
const (
	algHS256 = "HS256"
	algRS256 = "RS256"
	algES256 = "ES256"
	algEdDSA = "EdDSA"
)

// minSecretBytes is the shortest HS256 secret taken: RFC 7518 asks for a
// key at least as long as the hash, 256 bits.
const minSecretBytes = 32

// minRSABits is the smallest RSA modulus taken.
const minRSABits = 2048

// publicKey is a key that verifies one algorithm.
type publicKey struct {
	kid string // "" for PEM keys and JWKS keys without one
	alg string // algRS256, algES256 or algEdDSA
	key crypto.PublicKey
}

// LoadHS256Secret reads an HS256 secret file (auth.jwt.hs256_secret_file)
// as the broker reads it: the whole file less one trailing newline (LF or
// CRLF), at least 32 bytes. presenced token signs with it.
func LoadHS256Secret(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: HS256 secret file: %w", err)
	}
	if bytes.HasSuffix(data, []byte("\n")) {
		data = bytes.TrimSuffix(data[:len(data)-1], []byte("\r"))
	}
	if len(data) < minSecretBytes {
		return nil, fmt.Errorf("auth: HS256 secret file %s: the secret is %d bytes, at least %d are needed", path, len(data), minSecretBytes)
	}
	return data, nil
}

// loadPublicKeys reads a PEM or JWKS file of public keys.
func loadPublicKeys(path string) ([]publicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: public keys file: %w", err)
	}
	var keys []publicKey
	if strings.HasSuffix(strings.ToLower(path), ".json") || bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		keys, err = parseJWKS(data)
	} else {
		keys, err = parsePEMKeys(data)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: public keys file %s: %w", path, err)
	}
	return keys, nil
}

// parsePEMKeys parses PUBLIC KEY, RSA PUBLIC KEY and CERTIFICATE blocks.
// Every key must be usable.
func parsePEMKeys(data []byte) ([]publicKey, error) {
	var keys []publicKey
	for n := 1; ; n++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		var key any
		var err error
		switch block.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				key = cert.PublicKey
			}
		default:
			return nil, fmt.Errorf("PEM block %d is %q: only PUBLIC KEY, RSA PUBLIC KEY and CERTIFICATE blocks are taken", n, block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("PEM block %d (%s): %w", n, block.Type, err)
		}
		alg, err := algorithmOf(key)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d (%s): %w", n, block.Type, err)
		}
		keys = append(keys, publicKey{alg: alg, key: key})
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM block, and not a JWKS document")
	}
	return keys, nil
}

var errWeakKey = fmt.Errorf("an RSA key must have at least %d bits", minRSABits)

// algorithmOf is the one algorithm that key verifies.
func algorithmOf(key any) (string, error) {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return "", errWeakKey
		}
		return algRS256, nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("an ECDSA key on %s: only P-256 (ES256) is taken", k.Curve.Params().Name)
		}
		return algES256, nil
	case ed25519.PublicKey:
		return algEdDSA, nil
	}
	return "", fmt.Errorf("a %T: only RSA, ECDSA P-256 and Ed25519 keys are taken", key)
}
