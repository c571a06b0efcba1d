package auth

import (
	"crypto/x509"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/connack"
	"github.com/presenced/presenced/listener"
)

// Credentials checks what a CONNECT brings (*Authenticator implements it).
type Credentials interface {
	// Enabled reports whether any method is configured.
	Enabled() bool
	// Authenticate returns who the connection is, ErrDenied, or
	// ErrNoCredentials.
	Authenticate(username string, password []byte, clientID string, peer *x509.Certificate) (Identity, error)
}

var _ Credentials = (*Authenticator)(nil)

// Hook is the binary's authentication hook: the user is whoever the
// credentials prove (a password, a JWT in the password, or a verified client
// certificate), never merely the username a client claims. It decides in
// OnConnect, so that it can answer each refusal with the CONNACK code that
// fits and so that presence's hooks, added after it, see the authenticated
// user: on success it sets the connection's username to the user. It
// answers no OnACLCheck (presence's delivery.Guard is then the server's one).
//
// Refusals: bad credentials get 0x86 (MQTT 3.1.1: 0x04); a client id the
// credentials do not allow, 0x85 (3.1.1: 0x02); a password from an address
// that failed too often lately, 0x9F (3.1.1: 0x03) before any hashing; a
// password check that found no turn (too many at once), 0x89 (3.1.1: 0x03). Each is counted, and logged
// at info with the remote address, at most once a second (the rest are
// counted in the next line), and never with the password or token.
type Hook struct {
	mqtt.HookBase
	o        HookOptions
	accounts sync.Map // *mqtt.Client -> account
	logs     logLimiter
	seen     atomic.Int64 // connections authenticated; every tidyAfter, a Tidy

	Stats Stats
}

// Stats are the hook's counts, read with atomic loads.
type Stats struct {
	Accepted       atomic.Int64
	Anonymous      atomic.Int64 // connections without credentials, let in as observers
	Refused        atomic.Int64 // bad or missing credentials
	ClientIDDenied atomic.Int64 // a client id the credentials do not allow
	Throttled      atomic.Int64 // password checks refused before hashing: the address failed too often
	Busy           atomic.Int64 // password checks refused: too many at once
	Expired        atomic.Int64 // connections ended when their token expired
	Revoked        atomic.Int64 // connections ended when their user was removed from the password file (reload)
}

// HookOptions configure the hook.
type HookOptions struct {
	Server      *mqtt.Server
	Credentials Credentials // nil or not Enabled: every client connects, with any username
	// AllowAnonymous lets a client without credentials in as an observer
	// (with Credentials enabled).
	AllowAnonymous bool
	// FromClientID and Separator are presence's identity rule
	// (identity.user_from client_id): the user named before the first
	// Separator of a client id must be the authenticated user.
	FromClientID bool
	Separator    string
	// Groups receives the groups a token claims (auth.jwt.groups_claim),
	// when the claim is present, for each connection accepted. It must not
	// block. Nil: claims are ignored.
	Groups func(user string, groups []string)
	Log    *slog.Logger
	Now    func() time.Time
}

type account struct {
	user     string
	observer bool
	id       Identity
}

// NewHook returns the hook.
func NewHook(o HookOptions) *Hook {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Hook{o: o, logs: logLimiter{every: time.Second}}
}

// ID implements mqtt.Hook.
func (a *Hook) ID() string { return "presence-auth" }

// Provides implements mqtt.Hook.
func (a *Hook) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnect, mqtt.OnConnectAuthenticate, mqtt.OnDisconnect:
		return true
	}
	return false
}

// errRefused stops a CONNECT the hook has already answered.
var errRefused = errors.New("presence: connection refused")

// OnConnect authenticates the connection (see Hook).
func (a *Hook) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	if a.o.Credentials == nil || !a.o.Credentials.Enabled() {
		return nil
	}
	username := string(cl.Properties.Username)
	peer, _ := listener.PeerCertificate(cl.Net.Conn)
	id, err := a.authenticate(cl, username, pk.Connect.Password, peer)
	switch {
	case errors.Is(err, ErrThrottled):
		a.Stats.Throttled.Add(1)
		a.logRefusal(cl, username, err)
		connack.Refuse(a.o.Server, cl, packets.ErrConnectionRateExceeded, packets.Err3ServerUnavailable)
		return errRefused
	case errors.Is(err, ErrBusy):
		a.Stats.Busy.Add(1)
		a.logRefusal(cl, username, err)
		connack.Refuse(a.o.Server, cl, packets.ErrServerBusy, packets.Err3ServerUnavailable)
		return errRefused
	case errors.Is(err, ErrNoCredentials) && username == "" && a.o.AllowAnonymous:
		a.Stats.Anonymous.Add(1) // no account: an observer, not a service account
		return nil
	case errors.Is(err, ErrClientIDDenied):
		a.Stats.ClientIDDenied.Add(1)
		a.logRefusal(cl, username, err)
		connack.Refuse(a.o.Server, cl, packets.ErrClientIdentifierNotValid, packets.Code{})
		return errRefused
	case err != nil:
		a.Stats.Refused.Add(1)
		a.logRefusal(cl, username, err)
		connack.Refuse(a.o.Server, cl, packets.ErrBadUsernameOrPassword, connack.Err3BadUsernameOrPassword)
		return errRefused
	}
	if why := a.clientIDDenied(cl.ID, id); why != "" {
		a.Stats.ClientIDDenied.Add(1)
		a.logRefusal(cl, username, errors.New(why))
		connack.Refuse(a.o.Server, cl, packets.ErrClientIdentifierNotValid, packets.Code{})
		return errRefused
	}
	cl.Properties.Username = []byte(id.User)
	if a.seen.Add(1)%tidyAfter == 0 {
		a.Tidy()
	}
	a.accounts.Store(cl, account{user: id.User, observer: id.Observer, id: id})
	a.Stats.Accepted.Add(1)
	if a.o.Groups != nil && id.Groups != nil && id.User != "" {
		a.o.Groups(id.User, id.Groups)
	}
	return nil
}

// fromAddress is Credentials that throttle password failures by the
// client's address (*Authenticator).
type fromAddress interface {
	AuthenticateFrom(remote, username string, password []byte, clientID string, peer *x509.Certificate) (Identity, error)
}

// authenticate asks the credentials, with the client's address when they
// take it.
func (a *Hook) authenticate(cl *mqtt.Client, username string, password []byte, peer *x509.Certificate) (Identity, error) {
	if f, ok := a.o.Credentials.(fromAddress); ok {
		return f.AuthenticateFrom(cl.Net.Remote, username, password, cl.ID, peer)
	}
	return a.o.Credentials.Authenticate(username, password, cl.ID, peer)
}

// clientIDDenied says why the credentials do not allow clientID, or "".
func (a *Hook) clientIDDenied(clientID string, id Identity) string {
	switch {
	case id.ClientID != "" && clientID != id.ClientID:
		return "the token binds another client id"
	case id.ClientIDPrefix != "" && !strings.HasPrefix(clientID, id.ClientIDPrefix):
		return "the token binds client ids with another prefix"
	case a.o.FromClientID:
		user, _, ok := strings.Cut(clientID, a.o.Separator)
		if ok && user != id.User {
			return "the client id names another user"
		}
	}
	return ""
}

func (a *Hook) logRefusal(cl *mqtt.Client, username string, err error) {
	a.logs.log(a.o.Log, a.o.Now(), "connection refused", "remote", cl.Net.Remote, "client", cl.ID, "username", username, "err", err)
}

// OnConnectAuthenticate lets in what OnConnect did not refuse.
func (a *Hook) OnConnectAuthenticate(*mqtt.Client, packets.Packet) bool { return true }

// OnDisconnect forgets the connection.
func (a *Hook) OnDisconnect(cl *mqtt.Client, _ error, _ bool) { a.accounts.Delete(cl) }

// Observer reports whether the connection authenticated as a service
// account (a token's observer claim, or a user listed as one).
func (a *Hook) Observer(cl *mqtt.Client) bool {
	v, ok := a.accounts.Load(cl)
	return ok && v.(account).observer
}

// tidyAfter is how many accepted connections pass between two Tidy calls:
// the accounts of connections that never got their CONNACK stay at most
// that long.
const tidyAfter = 1024

// Tidy forgets connections that ended without OnDisconnect (mochi calls it
// only for connections that got their CONNACK). OnConnect calls it every
// tidyAfter connections.
func (a *Hook) Tidy() {
	a.accounts.Range(func(k, _ any) bool {
		if cl := k.(*mqtt.Client); cl.Closed() {
			a.accounts.Delete(cl)
		}
		return true
	})
}

// ErrMaximumConnectTime is the MQTT 5 DISCONNECT reason for a connection
// whose token expired (0xA0, "maximum connect time").
var ErrMaximumConnectTime = packets.Code{Code: 0xA0, Reason: "maximum connect time"}

// current is what Credentials may also tell: whether an identity's
// credentials still hold after a reload (*Authenticator implements it).
type current interface{ Current(id Identity) bool }

// Revoke ends the connections whose credentials no longer hold at now: a
// token past its exp (plus the leeway) gets DISCONNECT 0xA0 "maximum
// connect time", a password user removed from the password file (after a
// reload) 0x87 "not authorized"; MQTT 3.1.1
// connections are closed. It returns how many of each it ended. The broker
// calls it every second and after a reload.
func (a *Hook) Revoke(now time.Time) (expired, revoked int) {
	cur, _ := a.o.Credentials.(current)
	a.accounts.Range(func(k, v any) bool {
		cl, acc := k.(*mqtt.Client), v.(account)
		if cl.Closed() {
			return true
		}
		switch {
		case !acc.id.Expires.IsZero() && !now.Before(acc.id.Expires):
			expired++
			a.Stats.Expired.Add(1)
			a.o.Log.Info("connection ended: its token expired", "remote", cl.Net.Remote, "user", acc.user)
			a.end(cl, ErrMaximumConnectTime)
		case cur != nil && acc.id.Method != "" && !cur.Current(acc.id):
			revoked++
			a.Stats.Revoked.Add(1)
			a.o.Log.Info("connection ended: its user was removed from the password file", "remote", cl.Net.Remote, "user", acc.user)
			a.end(cl, packets.ErrNotAuthorized)
		}
		return true
	})
	return expired, revoked
}

// end ends cl with code: a DISCONNECT first when writing it cannot block
// (presenced's listener), else only the socket is closed.
func (a *Hook) end(cl *mqtt.Client, code packets.Code) {
	if nb, ok := cl.Net.Conn.(interface{ WritesNeverBlock() bool }); a.o.Server != nil && ok && nb.WritesNeverBlock() {
		_ = a.o.Server.DisconnectClient(cl, code)
		return
	}
	cl.Stop(code)
}

// RunRevoke calls Revoke every interval until stop is closed.
func (a *Hook) RunRevoke(stop <-chan struct{}, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			a.Revoke(a.o.Now())
		}
	}
}
