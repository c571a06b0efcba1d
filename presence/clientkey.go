package presence

import "strings"

// Client ids belong to a user.
//
// A client id is the user's: two users may use the same id string without
// meeting, and one can never take over, block or inherit another's session.
// The broker keys a connection's session (mochi's client list, its
// persisted session, its takeover) by ClientKey(owner, id), where the owner
// is the connection's user (or, for an observer, its authenticated user
// name; an anonymous connection's key is its bare id). The separator is
// U+0000, which MQTT forbids in a client id and a user name (mochi refuses
// a CONNECT holding one), so no client id is ever another's key. What
// presence shows is the client id as the client sent it (ClientIDOf).

const clientKeySep = "\x00"

// ClientKey returns the broker's key of client id id of owner.
func ClientKey(owner, id string) string {
	if owner == "" {
		return id
	}
	return owner + clientKeySep + id
}

// ClientIDOf returns the client id of a key made by ClientKey (a bare id
// is its own).
func ClientIDOf(key string) string {
	if _, id, ok := strings.Cut(key, clientKeySep); ok {
		return id
	}
	return key
}

// Scoped reports whether key was made by ClientKey with an owner.
func Scoped(key string) bool { return strings.Contains(key, clientKeySep) }
