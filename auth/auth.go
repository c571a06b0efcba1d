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
	// Expires is when the credentials stop being valid (a token's exp),
	// zero for never. The Hook ends the connection then.
	Expires time.Time
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
	// ObserverMethods are the methods under which a user of Observers is a
	// service account (MethodPassword, MethodJWT, MethodCertificate); nil
	// means every method. Bind service accounts to the method that issues
	// their credentials: otherwise a device certificate or a token naming
	// the account is one too. A token's observer claim is not affected.
	ObserverMethods []string
	// CertUserFrom says where a verified client certificate names its user:
	// CertUserCN, CertUserSAN, or "" (a certificate names nobody).
	CertUserFrom string
	// Now is the clock for exp and nbf; nil means time.Now.
	Now func() time.Time
	// Passwords bound the work of password checks (the zero value takes
	// the defaults).
	Passwords PasswordLimits
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
	// RequireExp refuses a token without exp (which would never expire).
	RequireExp bool
	// MaxLifetime, when positive, refuses a token whose exp is further
	// than MaxLifetime (plus the leeway) from now.
	MaxLifetime time.Duration
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

	limits   PasswordLimits // with the defaults
	throttle *throttle      // failed password checks by address
	checks   chan struct{}  // one token per bcrypt comparison running
	pwStats  PasswordStats
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
	a.limits = c.Passwords.withDefaults()
	a.throttle = newThrottle(a.limits)
	a.checks = make(chan struct{}, a.limits.Concurrency)
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
		if m.passwords, err = loadPasswordFile(a.cfg.PasswordFile, a.limits.CacheSize); err != nil {
			return nil, err
		}
	}
	if f := a.cfg.JWT.HS256SecretFile; f != "" {
		if m.secret, err = LoadHS256Secret(f); err != nil {
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
// may be ErrClientIDDenied), or ErrBusy. Password failures are not
// throttled by address: see AuthenticateFrom.
func (a *Authenticator) Authenticate(username string, password []byte, clientID string, peer *x509.Certificate) (Identity, error) {
	return a.AuthenticateFrom("", username, password, clientID, peer)
}

// AuthenticateFrom is Authenticate for a connection from remote (its
// "host:port"): a password check from an address that failed too often
// lately is refused with ErrThrottled before any hashing (see
// PasswordLimits).
func (a *Authenticator) AuthenticateFrom(remote, username string, password []byte, clientID string, peer *x509.Certificate) (Identity, error) {
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
		if err := a.checkPassword(m.passwords, remote, username, password); err != nil {
			return Identity{}, err
		}
		return a.identity(username, MethodPassword), nil
	}
	return Identity{}, ErrNoCredentials
}

func (a *Authenticator) identity(user, method string) Identity {
	observer := a.observers[user] && (a.cfg.ObserverMethods == nil || slices.Contains(a.cfg.ObserverMethods, method))
	return Identity{User: user, Method: method, Observer: observer}
}

// Current reports whether the credentials of id still hold after a
// Reload: a password user still in the password file. A user given a
// new password keeps the connections made with the old one (a reload
// drops no connection of a user still in the file). Tokens and
// certificates are checked when they are presented (and tokens end at
// Expires).
func (a *Authenticator) Current(id Identity) bool {
	if id.Method != MethodPassword {
		return true
	}
	m := a.material.Load()
	if m.passwords == nil {
		return false
	}
	_, ok := m.passwords.hashes[id.User]
	return ok
}
