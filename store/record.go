package store

import (
	"time"

	"github.com/presenced/presenced/presence"
)

// record is how the memory store holds a user (issue 23): the fields of a
// presence.User but its current aggregate, with the version and the since
// of the last commit beside them. The rest of the aggregate is not kept:
// Derive, a pure function of the record, makes it again on read, and it is
// what the last commit derived (a commit stores Derive's result, or keeps
// the one before when Derive's result is the same: sameAs). A User is 504
// bytes, 280 of them the aggregate, which also points to a view of each
// live session (160 bytes a session); a record is 256 bytes and points to
// no view.
type record struct {
	name      string
	lastEpoch uint64
	account   presence.Account
	sessions  []presence.Session
	ended     []presence.Session
	lastSeen  time.Time
	lastWords string
	dormant   *presence.Session
	version   uint64 // of the last committed aggregate; 0: none
	since     time.Time
}

// pack is u as a record, with the version and since of its last commit.
func pack(u presence.User, version uint64, since time.Time) record {
	return record{name: u.Name, lastEpoch: u.LastEpoch, account: u.Account, sessions: u.Sessions, ended: u.Ended,
		lastSeen: u.LastSeen, lastWords: u.LastWords, dormant: u.Dormant, version: version, since: since}
}

// user is r as a presence.User without its current aggregate.
func (r record) user() presence.User {
	return presence.User{Name: r.name, LastEpoch: r.lastEpoch, Account: r.account, Sessions: r.sessions, Ended: r.ended,
		LastSeen: r.lastSeen, LastWords: r.lastWords, Dormant: r.dormant}
}

// lookup returns the user named name, its current aggregate derived again,
// and whether the store has it. Under mu.
func (m *Memory) lookup(name string) (presence.User, bool) {
	r, ok := m.users[name]
	if !ok {
		return presence.User{}, false
	}
	u := r.user()
	if r.version != 0 {
		u.Current = presence.Derive(u, m.rules)
		u.Current.Version, u.Current.Since = r.version, r.since
	}
	return u, true
}

// get is lookup without the second result: the zero User (a new one) when
// the store does not have it. Under mu.
func (m *Memory) get(name string) presence.User {
	u, _ := m.lookup(name)
	return u
}

// put keeps u, whose Current is the aggregate its last commit made. Under
// mu.
func (m *Memory) put(u presence.User) {
	m.users[u.Name] = pack(u, u.Current.Version, u.Current.Since)
}
