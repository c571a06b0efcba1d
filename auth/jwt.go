package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// header is the part of a token's header that picks its key.
type header struct {
	Alg  string
	Kid  string
	Crit bool // the header lists critical extensions, which none is understood
}

// LooksLikeJWT reports whether a password is shaped like a JSON Web Token
// (compact form): three segments of base64url separated by dots, the first
// two not empty, the first decoding to a JSON object with an "alg" string.
// The signature may be empty, so that an unsigned token is refused as a
// token rather than tried as a password. A password of this shape is
// checked only as a token when tokens are configured.
func LooksLikeJWT(password []byte) bool {
	_, ok := parseHeader(password)
	return ok
}

// parseHeader decodes the header of a token shaped like a JWT.
func parseHeader(token []byte) (header, bool) {
	segs := bytes.Split(token, []byte("."))
	if len(segs) != 3 || len(segs[0]) == 0 || len(segs[1]) == 0 {
		return header{}, false
	}
	for _, s := range segs {
		for _, c := range s {
			if !(c == '-' || c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
				return header{}, false
			}
		}
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(segs[0]))
	if err != nil {
		return header{}, false
	}
	var h struct {
		Alg  *string `json:"alg"`
		Kid  any     `json:"kid"`
		Crit any     `json:"crit"`
	}
	if json.Unmarshal(raw, &h) != nil || h.Alg == nil {
		return header{}, false
	}
	kid, _ := h.Kid.(string)
	return header{Alg: *h.Alg, Kid: kid, Crit: h.Crit != nil}, true
}

// verificationKeys are the keys that may verify a token with header h:
// the secret for HS256; for the other algorithms, the keys of that
// algorithm whose kid is the token's, or when none is, those without a kid
// (all of them when the token has no kid). The reason says why there are
// none.
func (m *material) verificationKeys(h header) (jwt.VerificationKeySet, string) {
	var set jwt.VerificationKeySet
	if h.Alg == algHS256 {
		if m.secret == nil {
			return set, "algorithm not allowed"
		}
		set.Keys = append(set.Keys, m.secret)
		return set, ""
	}
	var ofAlg []publicKey
	for _, k := range m.keys {
		if k.alg == h.Alg {
			ofAlg = append(ofAlg, k)
		}
	}
	if len(ofAlg) == 0 {
		return set, "algorithm not allowed"
	}
	pick := func(match func(publicKey) bool) {
		for _, k := range ofAlg {
			if match(k) {
				set.Keys = append(set.Keys, k.key)
			}
		}
	}
	if h.Kid == "" {
		pick(func(publicKey) bool { return true })
		return set, ""
	}
	if pick(func(k publicKey) bool { return k.kid == h.Kid }); len(set.Keys) > 0 {
		return set, ""
	}
	if pick(func(k publicKey) bool { return k.kid == "" }); len(set.Keys) > 0 {
		return set, ""
	}
	return set, "unknown key id"
}

// checkToken checks a token whose header is h and makes the identity it
// proves.
func (a *Authenticator) checkToken(m *material, h header, username, token, clientID string) (Identity, error) {
	if h.Crit {
		return Identity{}, denied("the token has critical header extensions") // RFC 7515 section 4.1.11
	}
	keys, reason := m.verificationKeys(h)
	if reason != "" {
		return Identity{}, denied(reason)
	}
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{h.Alg}),
		jwt.WithLeeway(a.leeway),
		jwt.WithTimeFunc(a.now),
	)
	parsed, err := parser.Parse(token, func(*jwt.Token) (any, error) { return keys, nil })
	if err != nil {
		return Identity{}, denied(tokenReason(err))
	}
	claims, ok := parsed.Claims.(jwt.MapClaims)
	if !ok {
		return Identity{}, denied("malformed token")
	}
	c := a.cfg.JWT
	exp, err := claims.GetExpirationTime()
	switch {
	case err != nil:
		return Identity{}, denied("malformed exp")
	case exp == nil && (c.RequireExp || c.MaxLifetime > 0):
		return Identity{}, denied("the token has no exp")
	case exp != nil && c.MaxLifetime > 0 && exp.After(a.now().Add(c.MaxLifetime+a.leeway)):
		return Identity{}, denied("the token lives longer than auth.jwt.max_lifetime")
	}
	if c.Audience != "" {
		aud, err := claims.GetAudience()
		if err != nil || !slices.Contains(aud, c.Audience) {
			return Identity{}, denied("wrong audience")
		}
	}
	if c.Issuer != "" {
		iss, err := claims.GetIssuer()
		if err != nil || iss != c.Issuer {
			return Identity{}, denied("wrong issuer")
		}
	}
	user, ok := claims[c.UserClaim].(string)
	if !ok || user == "" {
		return Identity{}, denied(fmt.Sprintf("the token has no string claim %q naming the user", c.UserClaim))
	}
	if username != "" && username != user {
		return Identity{}, denied("username does not match the token")
	}
	id := a.identity(user, MethodJWT)
	if exp != nil {
		id.Expires = exp.Add(a.leeway)
	}
	if id.Groups, ok = stringList(claims[c.GroupsClaim]); !ok {
		return Identity{}, denied(fmt.Sprintf("the token's claim %q is not a list of strings", c.GroupsClaim))
	}
	if c.ObserverClaim != "" {
		switch v := claims[c.ObserverClaim].(type) {
		case nil:
		case bool:
			id.Observer = id.Observer || v
		default:
			return Identity{}, denied(fmt.Sprintf("the token's claim %q is not a boolean", c.ObserverClaim))
		}
	}
	if id.ClientID, ok = optionalString(claims, c.ClientIDClaim); !ok {
		return Identity{}, denied(fmt.Sprintf("the token's claim %q is not a string", c.ClientIDClaim))
	}
	if id.ClientIDPrefix, ok = optionalString(claims, c.ClientIDPrefixClaim); !ok {
		return Identity{}, denied(fmt.Sprintf("the token's claim %q is not a string", c.ClientIDPrefixClaim))
	}
	if (id.ClientID != "" && clientID != id.ClientID) || !strings.HasPrefix(clientID, id.ClientIDPrefix) {
		return Identity{}, ErrClientIDDenied
	}
	return id, nil
}

// tokenReason is the short reason for an error from the JWT parser.
func tokenReason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed token"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "bad signature"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "token not valid yet"
	}
	return "invalid claims"
}

// stringList reads a groups claim: absent, one string, or an array of
// strings.
func stringList(v any) ([]string, bool) {
	switch v := v.(type) {
	case nil:
		return nil, true
	case string:
		return []string{v}, true
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// optionalString reads a string claim that may be absent or unconfigured.
func optionalString(claims jwt.MapClaims, name string) (string, bool) {
	if name == "" {
		return "", true
	}
	switch v := claims[name].(type) {
	case nil:
		return "", true
	case string:
		return v, true
	}
	return "", false
}
