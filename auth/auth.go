// Package auth decides who an MQTT connection is: presenced's
// authentication by password file, JSON Web Token or client certificate.
// [Authenticator] knows nothing of MQTT servers: a hook calls
// [Authenticator.Authenticate] with what the CONNECT packet and the TLS layer
// brought. [Hook] is that hook for a mochi server, the binary's: it answers
// each refusal with the CONNACK code that fits and sets the connection's
// username to the proven user. It does not depend on presence's hooks,
// which come after it.
//
// # The rules
//
// Authenticate tries the methods in this order and stops at the first that
// applies:
//
//  1. Certificate. When Config.CertUserFrom is set and the TLS layer verified
//     a client certificate, the certificate names the user (its subject CN,
//     or its first DNS, email or URI SAN). A non-empty MQTT username must
//     then equal that name. The password is not looked at.
//  2. Token. When a JWT key or secret is configured and the password looks
//     like a JWT (see [LooksLikeJWT]), the password is checked as a token and
//     only as a token. Its algorithm must be one the configured material
//     allows: HS256 with the shared secret, RS256, ES256 or EdDSA with the
//     public keys. "none" is never allowed, and a public key is never used as
//     an HMAC secret; keys named in the token (jku, jwk, x5u) are ignored,
//     and a token with critical header extensions (crit) is refused. Then
//     the signature, exp and nbf (with the leeway), and aud and iss when
//     they are configured. A token without exp does not expire. The user is the string claim JWTConfig.UserClaim ("sub" by
//     default); a non-empty MQTT username must equal it. When the token binds
//     the client id (JWTConfig.ClientIDClaim, JWTConfig.ClientIDPrefixClaim),
//     the connection's client id must match, else [ErrClientIDDenied].
//  3. Password. When a password file is configured and the MQTT username is
//     not empty, the password is compared with the user's bcrypt hash. A user
//     who is not in the file is compared with a dummy hash of the same cost,
//     so the time taken does not tell who exists.
//
// When none applies, the result is [ErrNoCredentials], and the caller decides
// (for example, to let anonymous observers in). A failed check is
// [ErrDenied], wrapped with a short reason such as "token expired" or
// "unknown user or wrong password"; a reason never says which of user and
// password was wrong, and no error ever holds the password or the token.
//
// The user of the [Identity] is the proven name, which may differ from an
// empty MQTT username: the caller uses it, not the username. Package auth
// does not judge whether a name suits presence (see presence.ValidUser);
// the caller does.
//
// A user is a service account ([Identity].Observer) when Config.Observers
// lists the name, or when the token's JWTConfig.ObserverClaim is true.
//
// # Reloading
//
// [New] reads every configured file once. [Authenticator.Reload] reads them
// all again (on SIGHUP, say) and swaps the new material in at once; when a
// file is unreadable or malformed it keeps what it had and returns the
// error. Authenticate may run on any number of goroutines meanwhile, and a
// connection already let in is never affected.
//
// [AddPassword] writes a password file in the format that `htpasswd -B`
// writes and New reads.
package auth

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The methods that an [Identity] can come from.
const (
	MethodPassword    = "password"
	MethodJWT         = "jwt"
	MethodCertificate = "certificate"
)

// Identity is who a connection authenticated as.
type Identity struct {
	// User is the user name: the MQTT username, the token's user claim or
	// the name in the client certificate.
	User string
	// Method is MethodPassword, MethodJWT or MethodCertificate.
	Method string
	// Groups are the token's groups claim (nil when it has none): the
	// node adds the user to them (presenced's Plugin.ClaimGroups).
	Groups []string
	// Observer marks a service account, which may read all presence: the
	// user is listed in Config.Observers, or the token's observer claim
	// is true.
	Observer bool
	// ClientID is the client id the token binds the connection to, ""
	// for none. Authenticate has already checked it.
	ClientID string
	// ClientIDPrefix is the prefix the token requires of the client id, ""
	// for none. Authenticate has already checked it.
	ClientIDPrefix string
}

var (
	// ErrDenied is a failed check: a wrong password, an unknown user, a
	// bad or expired token, a user name that does not match. The error
	// returned wraps it with a short reason. An MQTT server answers it with
	// CONNACK 0x86 (MQTT 5) or 0x04 (MQTT 3.1.1).
	ErrDenied = errors.New("auth: denied")
	// ErrNoCredentials means the connection brought nothing that a
	// configured method can check: no verified certificate, no token, no
	// username for the password file.
	ErrNoCredentials = errors.New("auth: no credentials that a configured method can check")
	// ErrClientIDDenied means that a valid token binds the connection to
	// another client id (see JWTConfig.ClientIDClaim). It wraps ErrDenied;
	// a caller that tells it apart can answer CONNACK 0x85 (MQTT 3.1.1:
	// 0x02) instead.
	ErrClientIDDenied = fmt.Errorf("%w: the token does not allow this client id", ErrDenied)
)

// denied returns ErrDenied with a reason. The reason is a fixed phrase or
// names configuration only: never a password, a token or a claim's value.
func denied(reason string) error { return fmt.Errorf("%w: %s", ErrDenied, reason) }

// Config says which methods are on and where their material is. The zero
// Config turns every method off.
type Config struct {
	// PasswordFile is a password file in the format of `htpasswd -B`: one
	// "user:$2y$..." line per user ($2a$ and $2b$ hashes too); lines whose
	// first non-blank character is '#' and blank lines are skipped. ""
	// turns passwords off.
	PasswordFile string
	// JWT configures tokens.
	JWT JWTConfig
	// Observers lists the users that are service accounts.
	Observers []string
	// CertUserFrom says where a verified client certificate names its user:
	// CertUserCN, CertUserSAN, or "" (a certificate names nobody).
	CertUserFrom string
	// Now is the clock for exp and nbf; nil means time.Now.
	Now func() time.Time
}

// The values of Config.CertUserFrom.
const (
	// CertUserCN takes the user from the certificate's subject common name.
	CertUserCN = "cn"
	// CertUserSAN takes the user from the certificate's first DNS name, or
	// else its first email address, or else its first URI.
	CertUserSAN = "san"
)

// JWTConfig configures JSON Web Tokens. Tokens are on when
// HS256SecretFile or PublicKeysFile is set.
type JWTConfig struct {
	// HS256SecretFile holds the shared secret for HS256: the whole file,
	// less one trailing newline. It must be at least 32 bytes.
	HS256SecretFile string
	// PublicKeysFile holds the public keys for RS256 (RSA, 2048 bits or
	// more), ES256 (ECDSA P-256) and EdDSA (Ed25519), either as PEM (one
	// or more PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE blocks) or as a
	// JWKS document (a name ending in .json, or content starting with
	// '{'). A token whose kid names a key of a JWKS is checked with that
	// key only. JWKS keys for encryption or for other algorithms are
	// skipped; private and symmetric keys are refused.
	PublicKeysFile string
	// UserClaim is the string claim naming the user; "" means "sub".
	UserClaim string
	// GroupsClaim is the claim listing the user's groups, a JSON array of
	// strings (or one string); "" means "groups".
	GroupsClaim string
	// ObserverClaim, when set, is a boolean claim that makes the user a
	// service account.
	ObserverClaim string
	// ClientIDClaim, when set, is a string claim that the connection's
	// client id must equal (a token without it binds nothing).
	ClientIDClaim string
	// ClientIDPrefixClaim, when set, is a string claim that the
	// connection's client id must start with (a token without it binds
	// nothing).
	ClientIDPrefixClaim string
	// Audience, when set, must be one of the token's aud values.
	Audience string
	// Issuer, when set, must equal the token's iss.
	Issuer string
	// Leeway is the clock skew allowed for exp and nbf: 0 means 30s, and
	// a negative value means none.
	Leeway time.Duration
}

// DefaultLeeway is the clock skew allowed for exp and nbf when
// JWTConfig.Leeway is 0.
const DefaultLeeway = 30 * time.Second

func (j JWTConfig) enabled() bool { return j.HS256SecretFile != "" || j.PublicKeysFile != "" }

// Authenticator checks connections against the loaded configuration. It
// is safe for use by many goroutines.
type Authenticator struct {
	cfg       Config
	observers map[string]bool
	now       func() time.Time
	leeway    time.Duration

	reloading sync.Mutex // one Reload at a time: an older read never replaces a newer one
	material  atomic.Pointer[material]
}

// material is everything read from files: immutable once published, so
// that Authenticate reads one consistent set without locks.
type material struct {
	passwords *passwordTable // nil when passwords are off
	secret    []byte         // HS256; nil when off
	keys      []publicKey    // RS256, ES256, EdDSA
}

// New checks c and reads its files. An unreadable or malformed file is an
// error that names it.
func New(c Config) (*Authenticator, error) {
	switch c.CertUserFrom {
	case "", CertUserCN, CertUserSAN:
	default:
		return nil, fmt.Errorf("auth: cert user from %q: want %q, %q or nothing", c.CertUserFrom, CertUserCN, CertUserSAN)
	}
	c.Observers = slices.Clone(c.Observers)
	if c.JWT.UserClaim == "" {
		c.JWT.UserClaim = "sub"
	}
	if c.JWT.GroupsClaim == "" {
		c.JWT.GroupsClaim = "groups"
	}
	a := &Authenticator{cfg: c, observers: make(map[string]bool), now: c.Now, leeway: c.JWT.Leeway}
	for _, u := range c.Observers {
		a.observers[u] = true
	}
	if a.now == nil {
		a.now = time.Now
	}
	switch {
	case a.leeway == 0:
		a.leeway = DefaultLeeway
	case a.leeway < 0:
		a.leeway = 0
	}
	m, err := a.load()
	if err != nil {
		return nil, err
	}
	a.material.Store(m)
	return a, nil
}

// Enabled reports whether at least one method is configured. When none is,
// Authenticate always returns ErrNoCredentials.
func (a *Authenticator) Enabled() bool {
	return a.cfg.PasswordFile != "" || a.cfg.JWT.enabled() || a.cfg.CertUserFrom != ""
}

// Reload reads every configured file again and puts the new material in
// use at once. On error it keeps the material it had and returns the error.
func (a *Authenticator) Reload() error {
	a.reloading.Lock()
	defer a.reloading.Unlock()
	m, err := a.load()
	if err != nil {
		return err
	}
	a.material.Store(m)
	return nil
}

// load reads every configured file.
func (a *Authenticator) load() (*material, error) {
	m := new(material)
	var err error
	if a.cfg.PasswordFile != "" {
		if m.passwords, err = loadPasswordFile(a.cfg.PasswordFile); err != nil {
			return nil, err
		}
	}
	if f := a.cfg.JWT.HS256SecretFile; f != "" {
		if m.secret, err = loadSecret(f); err != nil {
			return nil, err
		}
	}
	if f := a.cfg.JWT.PublicKeysFile; f != "" {
		if m.keys, err = loadPublicKeys(f); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Authenticate decides who a connection is, by the rules in the package
// documentation. username, password and clientID come from the CONNECT
// packet. peer is the client's leaf certificate, and only when the TLS
// layer verified it against the client CAs; otherwise nil.
//
// The error is ErrNoCredentials, or ErrDenied wrapped with a reason (which
// may be ErrClientIDDenied).
func (a *Authenticator) Authenticate(username string, password []byte, clientID string, peer *x509.Certificate) (Identity, error) {
	m := a.material.Load()
	if peer != nil && a.cfg.CertUserFrom != "" {
		user := certUser(peer, a.cfg.CertUserFrom)
		if user == "" {
			return Identity{}, denied("the certificate names no user")
		}
		if username != "" && username != user {
			return Identity{}, denied("username does not match the certificate")
		}
		return a.identity(user, MethodCertificate), nil
	}
	if m.secret != nil || len(m.keys) > 0 {
		if h, ok := parseHeader(password); ok {
			return a.checkToken(m, h, username, string(password), clientID)
		}
	}
	if m.passwords != nil && username != "" {
		if !m.passwords.check(username, password) {
			return Identity{}, denied("unknown user or wrong password")
		}
		return a.identity(username, MethodPassword), nil
	}
	return Identity{}, ErrNoCredentials
}

func (a *Authenticator) identity(user, method string) Identity {
	return Identity{User: user, Method: method, Observer: a.observers[user]}
}
