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
// # The cost of passwords
//
// A bcrypt comparison costs ~70 ms of a core, so [Authenticator.AuthenticateFrom]
// bounds the work ([PasswordLimits]): an address (IPv4, or IPv6 /64) that
// failed too many checks lately is refused with [ErrThrottled] before any
// hashing, the right password included (a check takes a token of its
// address before hashing and a success gives it back); at most one
// comparison per CPU runs at once, and a check that finds no turn within
// the queue wait is refused with [ErrBusy]; a verified password is cached
// per user as an HMAC-SHA-256 of user and password under a random
// per-process key, so that the same password again costs no bcrypt. The
// cache belongs to the loaded password file: a reload drops it.
// [Authenticator.Authenticate] does not throttle (it has no address).
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
