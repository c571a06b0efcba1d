package store

import (
	"math"
	"time"

	namecodes "github.com/presenced/presenced/internal/names" // names is a helper of the package's tests (list_test.go)
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
// dormant device. Such a user is an 80-byte record and a 144-byte
// liveSession per session (a User is 504 bytes and a Session 312, in
// Go's 320-byte size class); what few users have waits behind more.
//
// Its times are walls in Local, as the store's clock gives them: a last
// seen or since that is not (wallOf) is kept, with the other, in more.
type record struct {
	name       string
	lastEpoch  uint64
	sessions   []liveSession // the live sessions, when each is a liveSession (fits); else more.sessions
	lastSeenAt wall          // the user's LastSeen, in Local; else more.lastSeen (more.times)
	version    uint64        // of the last committed aggregate; 0: none
	sinceAt    wall          // the since of the last commit, in Local; else more.since (more.times)
	more       *recordMore   // nil: none of its fields is set
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
	// times: the record's last seen and since are these, as they are, for
	// one of them is not a wall in Local (the store's clock never makes
	// one).
	times           bool
	lastSeen, since time.Time
}

// wall is a time as its Unix nanoseconds (UnixNano), 0 for the zero time;
// where it is (Local or UTC) is told beside it. It holds every time from
// 1678 to 2262 but the Unix epoch's first nanosecond, in Local or UTC,
// without its monotonic clock reading (times compare by wall clock then,
// as they do read back from Redis).
type wall int64

// Where a time is, as wallOf tells it.
const (
	inNone  = 0 // the zero time: anywhere
	inLocal = 1
	inUTC   = 2
)

// wallOf returns t as a wall, where it is (inNone, inLocal or inUTC), and
// whether w.time(where == inUTC) gives t back, its monotonic clock reading
// dropped: t.Round(0) == w.time(...), location included.
func wallOf(t time.Time) (w wall, where uint8, ok bool) {
	if t == (time.Time{}) {
		return 0, inNone, true
	}
	t = t.Round(0)
	where = inLocal
	if t.Location() == time.UTC {
		where = inUTC
	}
	w = wall(t.UnixNano())                                 // wraps out of range: told by the comparison
	return w, where, w != 0 && w.time(where == inUTC) == t // == : the location too
}

// time is w in UTC when utc, else in Local.
func (w wall) time(utc bool) time.Time {
	if w == 0 {
		return time.Time{}
	}
	t := time.Unix(0, int64(w)) // in Local
	if utc {
		return t.UTC()
	}
	return t
}

// liveSession is a live presence.Session without what the record or its
// liveness already tells: the user (record.name), and the end's time and
// reason (zero while it lives); its status and state are codes, its node
// and its connection's listener the process's codes of those names
// (names.Code), its times walls in one location (utc), and its
// connection's facts are laid out flat (144 bytes).
type liveSession struct {
	ID, Device, Text                  string
	Epoch                             uint64
	ConnectedAt, RenewedAt, ExpiresAt wall
	Expect, Margin                    time.Duration
	// The connection's facts (presence.Conn).
	username, ip    string
	expiry          uint32
	keepAlive, port uint16
	protoVer        uint8
	cleanStart      bool
	status, state   uint8 // an index in statusCodes and stateCodes
	utc             bool  // its times are in UTC; else in Local
	node, listener  uint8 // the codes (names.Code) of its Node and its connection's Listener
}

// nameCode gives a name its code in the process's table, and tells
// whether it has one (names.Code): a variable so that a test can see the
// table full.
var nameCode = namecodes.Code

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
// loss (but the monotonic clock readings of its times): live.
func fits(user string, sessions []presence.Session) bool {
	for i := range sessions {
		if _, ok := live(user, &sessions[i]); !ok {
			return false
		}
	}
	return true
}

// walls are the times of s as walls, whether they are in UTC (else in
// Local), and whether they are walls in one location (wallOf).
func walls(s *presence.Session) (connected, renewed, expires wall, utc, ok bool) {
	connected, w1, ok1 := wallOf(s.ConnectedAt)
	renewed, w2, ok2 := wallOf(s.RenewedAt)
	expires, w3, ok3 := wallOf(s.ExpiresAt)
	where := w1 | w2 | w3
	return connected, renewed, expires, where == inUTC, ok1 && ok2 && ok3 && where != inLocal|inUTC
}

// live returns s, a session of user, as a liveSession, and whether that
// is without loss (but the monotonic clock readings of its times), which
// session tells back: a session of another user, an ended one, a status,
// state, port or time a liveSession cannot hold, or a node or listener
// without a code (the table full: nameCode) is not. It gives its node and
// listener codes (nameCode), once each.
func live(user string, s *presence.Session) (liveSession, bool) {
	status, okStatus := codeOf(statusCodes[:], s.Status)
	state, okState := codeOf(stateCodes[:], s.State)
	connected, renewed, expires, utc, okTimes := walls(s)
	c := &s.Conn
	if s.User != user || s.EndedAt != (time.Time{}) || s.EndReason != "" || !okStatus || !okState ||
		c.Port < 0 || c.Port > math.MaxUint16 || !okTimes {
		return liveSession{}, false
	}
	node, okNode := nameCode(s.Node)
	listener, okListener := nameCode(c.Listener)
	if !okNode || !okListener {
		return liveSession{}, false
	}
	return liveSession{ID: s.ID, Device: s.Device, Text: s.Text, Epoch: s.Epoch,
		ConnectedAt: connected, RenewedAt: renewed, ExpiresAt: expires, Expect: s.Expect, Margin: s.Margin,
		username: c.Username, ip: c.IP, expiry: c.Expiry, keepAlive: c.KeepAlive,
		port: uint16(c.Port), protoVer: c.ProtoVer, cleanStart: c.CleanStart, status: status, state: state, utc: utc,
		node: node, listener: listener}, true
}

// session is l as the presence.Session of user.
func (l *liveSession) session(user string) presence.Session {
	return presence.Session{User: user, ID: l.ID, Epoch: l.Epoch, Node: namecodes.Name(l.node), Device: l.Device,
		Status: statusCodes[l.status], Text: l.Text, State: stateCodes[l.state],
		ConnectedAt: l.ConnectedAt.time(l.utc), RenewedAt: l.RenewedAt.time(l.utc), ExpiresAt: l.ExpiresAt.time(l.utc),
		Expect: l.Expect, Margin: l.Margin,
		Conn: presence.Conn{Username: l.username, IP: l.ip, Port: int(l.port), Listener: namecodes.Name(l.listener),
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
	r := record{name: u.Name, lastEpoch: u.LastEpoch, version: version}
	seen, seenWhere, okSeen := wallOf(u.LastSeen)
	began, sinceWhere, okSince := wallOf(since)
	local := okSeen && okSince && seenWhere != inUTC && sinceWhere != inUTC
	if local {
		r.lastSeenAt, r.sinceAt = seen, began
	}
	// Each session is tested and made a liveSession at once (live, the
	// test fits makes), so that its node and listener are looked up once:
	// the first that does not fit (rare: the store's own writes make none
	// but when the table of names is full) drops what was made, which
	// nothing else holds.
	fit := true
	if u.Sessions != nil {
		if cap(was.sessions) >= len(u.Sessions) && was.sessions != nil {
			r.sessions = was.sessions[:len(u.Sessions)]
		} else {
			r.sessions = make([]liveSession, len(u.Sessions))
		}
		for i := range u.Sessions {
			if r.sessions[i], fit = live(u.Name, &u.Sessions[i]); !fit {
				r.sessions = nil
				break
			}
		}
		if fit {
			clear(r.sessions[len(r.sessions):cap(r.sessions)]) // no string of an ended session kept alive
		}
	}
	if !fit || !local || u.Account != (presence.Account{}) || u.Ended != nil || u.LastWords != "" || u.Dormant != nil {
		r.more = was.more
		if r.more == nil {
			r.more = new(recordMore)
		}
		*r.more = recordMore{account: u.Account, ended: u.Ended, lastWords: u.LastWords, dormant: u.Dormant}
		if !fit {
			r.more.sessions = u.Sessions
		}
		if !local {
			r.more.times, r.more.lastSeen, r.more.since = true, u.LastSeen, since
		}
	}
	return r
}

// lastSeen is the LastSeen of r's user.
func (r *record) lastSeen() time.Time {
	if r.more != nil && r.more.times {
		return r.more.lastSeen
	}
	return r.lastSeenAt.time(false)
}

// since is the since of r's last commit.
func (r *record) since() time.Time {
	if r.more != nil && r.more.times {
		return r.more.since
	}
	return r.sinceAt.time(false)
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
	} else if len(r.sessions) > 0 {
		// NextDeadline's rule on walls, which order as their times do (the
		// zero time, before every other, is 0): one time made at the end
		// (wall.time, inline).
		f, utc := r.sessions[0].ExpiresAt, r.sessions[0].utc
		for i := 1; i < len(r.sessions); i++ {
			if e := r.sessions[i].ExpiresAt; f == 0 || e == 0 || e < f {
				f, utc = e, r.sessions[i].utc
			}
		}
		if f != 0 {
			d = time.Unix(0, int64(f))
			if utc {
				d = d.UTC()
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
	u := presence.User{Name: r.name, LastEpoch: r.lastEpoch, LastSeen: r.lastSeen()}
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
		u.Current.Version, u.Current.Since = r.version, r.since()
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
