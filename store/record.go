package store

import (
	"math"
	"time"

	"github.com/presenced/presenced/presence"
)

// record is how the memory store holds a user (issue 23): the fields of a
// presence.User but its current aggregate, with the version and the since
// of the last commit beside them. The rest of the aggregate is not kept:
// Derive, a pure function of the record, makes it again on read, and it is
// what the last commit derived (a commit stores Derive's result, or keeps
// the one before when Derive's result is the same: sameAs).
//
// A record is laid out for the user most of a node's users are: online,
// with no account setting, no recently ended session, no will text and no
// dormant device. Such a user is a 112-byte record and a 224-byte
// liveSession per session (a User is 504 bytes and a Session 312, in
// Go's 320-byte size class); what few users have waits behind more.
type record struct {
	name      string
	lastEpoch uint64
	sessions  []liveSession // the live sessions, when each is a liveSession (fits); else more.sessions
	lastSeen  time.Time
	version   uint64 // of the last committed aggregate; 0: none
	since     time.Time
	more      *recordMore // nil: none of its fields is set
}

// recordMore is what a record holds of few users.
type recordMore struct {
	account   presence.Account
	ended     []presence.Session
	lastWords string
	dormant   *presence.Session
	// sessions are the live sessions, as they are, of a user one of whose
	// live sessions does not fit a liveSession. The store's own writes
	// never make one; kept so that a record never loses what it was given.
	sessions []presence.Session
}

// liveSession is a live presence.Session without what the record or its
// liveness already tells: the user (record.name), and the end's time and
// reason (zero while it lives); its status and state are codes, and its
// connection's facts are laid out flat (224 bytes).
type liveSession struct {
	ID, Node, Device, Text            string
	Epoch                             uint64
	ConnectedAt, RenewedAt, ExpiresAt time.Time
	Expect, Margin                    time.Duration
	// The connection's facts (presence.Conn).
	username, ip, listener string
	expiry                 uint32
	keepAlive, port        uint16
	protoVer               uint8
	cleanStart             bool
	status, state          uint8 // an index in statusCodes and stateCodes
}

// The statuses and states a liveSession holds as codes: those a session
// has ("" included, as a record gives back what it was given).
var (
	statusCodes = [...]presence.Status{"", presence.Online, presence.Idle, presence.Away, presence.Busy, presence.DND, presence.Dormant, presence.Offline}
	stateCodes  = [...]presence.State{"", presence.Connecting, presence.Active, presence.Disconnected, presence.Expired}
)

// codeOf returns the index of v in codes, and whether it is there.
func codeOf[T comparable](codes []T, v T) (uint8, bool) {
	for i, c := range codes {
		if c == v {
			return uint8(i), true
		}
	}
	return 0, false
}

// fits reports whether each of sessions of user is a liveSession without
// loss.
func fits(user string, sessions []presence.Session) bool {
	for i := range sessions {
		s := &sessions[i]
		_, okStatus := codeOf(statusCodes[:], s.Status)
		_, okState := codeOf(stateCodes[:], s.State)
		if s.User != user || s.EndedAt != (time.Time{}) || s.EndReason != "" || !okStatus || !okState ||
			s.Conn.Port < 0 || s.Conn.Port > math.MaxUint16 {
			return false
		}
	}
	return true
}

// live is s as a liveSession; s fits.
func live(s *presence.Session) liveSession {
	status, _ := codeOf(statusCodes[:], s.Status)
	state, _ := codeOf(stateCodes[:], s.State)
	c := &s.Conn
	return liveSession{ID: s.ID, Node: s.Node, Device: s.Device, Text: s.Text, Epoch: s.Epoch,
		ConnectedAt: s.ConnectedAt, RenewedAt: s.RenewedAt, ExpiresAt: s.ExpiresAt, Expect: s.Expect, Margin: s.Margin,
		username: c.Username, ip: c.IP, listener: c.Listener, expiry: c.Expiry, keepAlive: c.KeepAlive,
		port: uint16(c.Port), protoVer: c.ProtoVer, cleanStart: c.CleanStart, status: status, state: state}
}

// session is l as the presence.Session of user.
func (l *liveSession) session(user string) presence.Session {
	return presence.Session{User: user, ID: l.ID, Epoch: l.Epoch, Node: l.Node, Device: l.Device,
		Status: statusCodes[l.status], Text: l.Text, State: stateCodes[l.state],
		ConnectedAt: l.ConnectedAt, RenewedAt: l.RenewedAt, ExpiresAt: l.ExpiresAt, Expect: l.Expect, Margin: l.Margin,
		Conn: presence.Conn{Username: l.username, IP: l.ip, Port: int(l.port), Listener: l.listener,
			ProtoVer: l.protoVer, CleanStart: l.cleanStart, KeepAlive: l.keepAlive, Expiry: l.expiry}}
}

// pack is u as a record, with the version and since of its last commit.
func pack(u presence.User, version uint64, since time.Time) record {
	return repack(record{}, u, version, since)
}

// repack is pack reusing what was the record of u, which nothing else
// holds (user copies out of a record), so that a write of a user with the
// same number of live sessions allocates nothing.
func repack(was record, u presence.User, version uint64, since time.Time) record {
	r := record{name: u.Name, lastEpoch: u.LastEpoch, lastSeen: u.LastSeen, version: version, since: since}
	fit := fits(u.Name, u.Sessions)
	if fit && u.Sessions != nil {
		if cap(was.sessions) >= len(u.Sessions) && was.sessions != nil {
			r.sessions = was.sessions[:len(u.Sessions)]
		} else {
			r.sessions = make([]liveSession, len(u.Sessions))
		}
		for i := range u.Sessions {
			r.sessions[i] = live(&u.Sessions[i])
		}
		clear(r.sessions[len(r.sessions):cap(r.sessions)]) // no string of an ended session kept alive
	}
	if !fit || u.Account != (presence.Account{}) || u.Ended != nil || u.LastWords != "" || u.Dormant != nil {
		r.more = was.more
		if r.more == nil {
			r.more = new(recordMore)
		}
		*r.more = recordMore{account: u.Account, ended: u.Ended, lastWords: u.LastWords, dormant: u.Dormant}
		if !fit {
			r.more.sessions = u.Sessions
		}
	}
	return r
}

// due is when the reaper has something to do for r's user: the earlier of
// its live sessions' first expiry (presence.User.NextDeadline) and its
// dormant session's due time (DormantDeadline); false: nothing.
func (r *record) due() (time.Time, bool) {
	var d time.Time
	if r.more != nil && r.more.sessions != nil {
		for i := range r.more.sessions {
			if e := r.more.sessions[i].ExpiresAt; d.IsZero() || e.Before(d) {
				d = e
			}
		}
	} else {
		for i := range r.sessions {
			if e := r.sessions[i].ExpiresAt; d.IsZero() || e.Before(d) {
				d = e
			}
		}
	}
	ok := !d.IsZero()
	if r.more != nil && r.more.dormant != nil {
		if dd := r.more.dormant.ExpiresAt; !ok || dd.Before(d) {
			d, ok = dd, true
		}
	}
	return d, ok
}

// live is how many live sessions r holds.
func (r record) live() int {
	if r.more != nil && r.more.sessions != nil {
		return len(r.more.sessions)
	}
	return len(r.sessions)
}

// user is r as a presence.User without its current aggregate.
func (r record) user() presence.User {
	u := presence.User{Name: r.name, LastEpoch: r.lastEpoch, LastSeen: r.lastSeen}
	if r.sessions != nil {
		u.Sessions = make([]presence.Session, len(r.sessions))
		for i := range r.sessions {
			u.Sessions[i] = r.sessions[i].session(r.name)
		}
	}
	if m := r.more; m != nil {
		u.Account, u.Ended, u.LastWords, u.Dormant = m.account, m.ended, m.lastWords, m.dormant
		if m.sessions != nil {
			u.Sessions = m.sessions
		}
	}
	return u
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
	if r := m.users[u.Name]; r != nil {
		*r = repack(*r, u, u.Current.Version, u.Current.Since)
		return
	}
	r := pack(u, u.Current.Version, u.Current.Since)
	m.users[u.Name] = &r
}
