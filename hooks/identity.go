package hooks

import (
	"fmt"
	"strings"

	"golang.org/x/text/cases"

	"github.com/presenced/presenced/presence"
)

// Identity is who a connection is: a user with an optional device label, or
// nobody (an observer, which has no session). A service account with a user
// has no session either, by default (see opensSession).
type Identity struct {
	User   string
	Device string
}

// Observer reports whether the connection has no user.
func (id Identity) Observer() bool { return id.User == "" }

// IdentityRule says where a connection's user comes from.
type IdentityRule struct {
	FromClientID bool   // false: the MQTT username; true: the client id
	Separator    string // with FromClientID: "alice/phone" is user alice, device phone
	// FoldCase makes names that differ only in case one user: the user is
	// the Unicode case folding of the name ("Alice" is "alice"). Off by
	// default: every account whose name folds to another's would share its
	// presence and client ids.
	FoldCase bool
}

// Identify derives a connection's identity from its username and client id,
// and checks it. From the username, an empty one means an observer. From the
// client id, the user is the part before the first separator and the device
// the part after; a client id without the separator means an observer (so
// tools such as mosquitto_sub, which pick random ids, only observe). A
// connection with a user must also have a client id that can name a session.
func (r IdentityRule) Identify(username, clientID string) (Identity, error) {
	var id Identity
	if r.FromClientID {
		user, device, ok := strings.Cut(clientID, r.Separator)
		if !ok {
			return Identity{}, nil
		}
		if user == "" {
			return Identity{}, fmt.Errorf("%w: client id %q has no user before the separator %q", presence.ErrBadName, clientID, r.Separator)
		}
		id = Identity{User: user, Device: device}
	} else {
		id = Identity{User: username}
	}
	if id.User == "" {
		return id, nil
	}
	if r.FoldCase {
		id.User = cases.Fold().String(id.User)
	}
	if err := presence.ValidUser(id.User); err != nil {
		return Identity{}, err
	}
	if err := presence.ValidSessionID(clientID); err != nil {
		return Identity{}, err
	}
	if id.Device != "" {
		if err := presence.ValidDevice(id.Device); err != nil {
			return Identity{}, err
		}
	}
	return id, nil
}

// opensSession reports whether a connection of id opens a presence session.
// It needs a user; and a service account (service: a user listed in
// presence.observers who authenticated by a method of
// auth.observer_methods, or a token's observer claim) is not a person, so
// it opens none unless serviceSessions (presence.observer_sessions, or no
// authentication, where every connection reads as a service account and
// nobody is named one).
func opensSession(id Identity, service, serviceSessions bool) bool {
	return !id.Observer() && (!service || serviceSessions)
}
