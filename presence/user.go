package presence

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// MaxEnded is how many ended sessions a user record keeps, newest first, so
// that an operator can read how recent sessions ended.
const MaxEnded = 8

// Account is the account-level setting: an override status (away, busy, dnd,
// or empty for none) and a text.
type Account struct {
	Status Status `json:"status,omitempty"`
	Text   string `json:"text,omitempty"`
	// Privacy is who sees the user's presence, and how exactly their
	// last_seen (issue 22; zero: everyone sees everything).
	Privacy Privacy `json:"privacy,omitzero"`
}

// AccountUpdate is a partial change of the account setting. Status Online
// clears the override; Text "" clears the text; nil leaves a field as it is.
type AccountUpdate struct {
	Status *Status
	Text   *string
	// Invisible and LastSeen change the privacy setting; nil leaves it.
	Invisible *bool
	LastSeen  *LastSeenMode
}

// User is everything a store holds for one user. Stores treat it as a value:
// every operation below returns a new User and leaves its receiver unchanged.
type User struct {
	Name      string    `json:"name"`
	LastEpoch uint64    `json:"last_epoch"` // the last epoch handed out
	Account   Account   `json:"account"`
	Sessions  []Session `json:"sessions"` // live sessions, sorted by id
	Ended     []Session `json:"ended"`    // recently ended sessions, newest first
	LastSeen  time.Time `json:"last_seen,omitzero"`
	LastWords string    `json:"last_words,omitempty"` // text of the will that took the user offline
	Current   Aggregate `json:"current"`              // the last committed aggregate
	// Dormant is the session of a device that sleeps by design, kept after
	// its clean end while its check-in is awaited (dormant.go); nil when
	// none. Only a user without a live session has one. It is held by
	// pointer because most users never have one (a Session inline would be
	// 320 of the record's bytes), and it is never changed in place: Users
	// are values, and their copies share it, so an operation that changes
	// it assigns a new one (copy on write).
	Dormant *Session `json:"dormant,omitzero"`
}

// UnmarshalJSON implements json.Unmarshaler: the record as encoding/json
// reads it, with two differences the pointer Dormant needs. A dormant
// session without an id is none (nil), as a zero one was when Dormant was
// held inline; and u's dormant session is copied before the decoding, which
// would otherwise write into the Session it points to, shared with u's
// copies.
func (u *User) UnmarshalJSON(b []byte) error {
	type plain User // User without this method
	if u.Dormant != nil {
		d := *u.Dormant
		u.Dormant = &d
	}
	if err := json.Unmarshal(b, (*plain)(u)); err != nil {
		return err
	}
	if u.Dormant != nil && u.Dormant.ID == "" {
		u.Dormant = nil
	}
	return nil
}

// OpenArgs describes a new session.
type OpenArgs struct {
	User   string
	ID     string
	Node   string
	Device string
	Status Status // empty means online
	Text   string
	TTL    time.Duration
	// Expect is the check-in period the device declared (MQTT 5 CONNECT
	// user property expect, or its device label's in the configuration):
	// a device that sleeps by design. Zero: none.
	Expect time.Duration
	// Margin is how late past Expect a check-in may come before the device
	// is shown offline as missed (DormantMargin); used only with Expect.
	Margin time.Duration
	// Conn is the connection's facts, kept with the session (lifecycle
	// outputs).
	Conn Conn
}

// Validate checks the names and values of an open.
func (a OpenArgs) Validate() error {
	if err := ValidUser(a.User); err != nil {
		return err
	}
	if err := ValidSessionID(a.ID); err != nil {
		return err
	}
	if a.Device != "" {
		if err := ValidDevice(a.Device); err != nil {
			return err
		}
	}
	if a.Status != "" && !a.Status.SessionStatus() {
		return fmt.Errorf("%w: %q on a session", ErrBadStatus, a.Status)
	}
	if err := ValidText(a.Text); err != nil {
		return err
	}
	if a.TTL <= 0 {
		return fmt.Errorf("%w: session ttl %v", ErrBadTransition, a.TTL)
	}
	return validExpect(a.Expect, a.Margin)
}

func (u User) find(id string) (int, bool) {
	return slices.BinarySearchFunc(u.Sessions, id, func(s Session, id string) int {
		switch {
		case s.ID < id:
			return -1
		case s.ID > id:
			return 1
		}
		return 0
	})
}

// clone returns u with a copy of its live sessions: they are the only array
// an operation changes in place (UpdateSession, Renew). Ended and Current's sessions are
// never changed in place: retire and Miss build a new Ended, and Commit
// replaces Current with sessions Derive made anew, so the receiver's stay
// as they were and the copies would buy nothing (they were 13 % of the
// bytes a churning broker allocated).
func (u User) clone() User {
	u.Sessions = slices.Clone(u.Sessions)
	return u
}

// retire removes live session i, which has ended, and records it. It
// builds new Sessions and Ended rather than change the arrays in place, so
// it needs no clone first: the arrays may be shared with other Users.
func (u *User) retire(i int, ended Session) {
	live := make([]Session, 0, len(u.Sessions)-1)
	live = append(live, u.Sessions[:i]...)
	u.Sessions = append(live, u.Sessions[i+1:]...)
	rec := make([]Session, 1, min(len(u.Ended)+1, MaxEnded))
	rec[0] = ended
	u.Ended = append(rec, u.Ended[:cap(rec)-1]...)
	if len(u.Sessions) == 0 {
		u.LastSeen = ended.EndedAt
	}
}

// Open starts a new session with the next epoch and establishes it. A live
// session with the same id is ended first as a takeover, in the same step, so
// the user never shows offline in between. It returns the new session and the
// one it took over, if any.
func (u User) Open(a OpenArgs, now time.Time) (User, Session, *Session, error) {
	if err := a.Validate(); err != nil {
		return u, Session{}, nil, err
	}
	if u.Name != "" && u.Name != a.User {
		return u, Session{}, nil, fmt.Errorf("%w: record of %q asked to open for %q", ErrBadName, u.Name, a.User)
	}
	u = u.clone()
	u.Name = a.User
	var taken *Session
	if i, ok := u.find(a.ID); ok {
		old, err := u.Sessions[i].End(u.Sessions[i].Epoch, EndTakeover, now)
		if err != nil {
			return u, Session{}, nil, err
		}
		seen := u.LastSeen
		u.retire(i, old)
		u.LastSeen = seen // the new session replaces it in the same step: the user never went offline
		taken = &old
	}
	u.LastEpoch = NextStamp(u.LastEpoch, now)
	s := NewSession(a.User, a.ID, u.LastEpoch, a.Node, now, a.TTL)
	s.Device = a.Device
	if a.Status != "" {
		s.Status = a.Status
	}
	s.Text = a.Text
	s.Conn = a.Conn
	s.Expect, s.Margin = a.Expect, a.Margin
	u.Dormant = nil // a new connection is the sleeper's check-in (dormant.go)
	s, err := s.Establish(s.Epoch, now)
	if err != nil {
		return u, Session{}, nil, err
	}
	i, _ := u.find(a.ID)
	u.Sessions = slices.Insert(u.Sessions, i, s)
	u.LastWords = ""
	return u, s, taken, nil
}

// End ends the live session id at epoch. lastWords, when not nil and the end
// is unclean, is the text of the session's will.
func (u User) End(id string, epoch uint64, reason EndReason, lastWords *string, now time.Time) (User, Session, error) {
	i, ok := u.find(id)
	if !ok {
		return u, Session{}, fmt.Errorf("%w: no live session %s/%s (write has epoch %d)", ErrStaleEpoch, u.Name, id, epoch)
	}
	ended, err := u.Sessions[i].End(epoch, reason, now)
	if err != nil {
		return u, Session{}, err
	}
	u.retire(i, ended) // new Sessions and Ended: no clone of them needed
	u.Dormant = u.sleep(ended)
	if len(u.Sessions) == 0 {
		u.LastWords = ""
		if lastWords != nil && !reason.Clean() {
			u.LastWords = *lastWords
		}
	}
	return u, ended, nil
}

// UpdateSession changes the live session id at epoch.
func (u User) UpdateSession(id string, epoch uint64, upd Update) (User, Session, error) {
	i, ok := u.find(id)
	if !ok {
		return u, Session{}, fmt.Errorf("%w: no live session %s/%s (write has epoch %d)", ErrStaleEpoch, u.Name, id, epoch)
	}
	s, err := u.Sessions[i].Update(epoch, upd)
	if err != nil {
		return u, Session{}, err
	}
	u = u.clone()
	u.Sessions[i] = s
	return u, s, nil
}

// Renew extends the live session id at epoch to now+ttl.
func (u User) Renew(id string, epoch uint64, now time.Time, ttl time.Duration) (User, error) {
	i, ok := u.find(id)
	if !ok {
		return u, fmt.Errorf("%w: no live session %s/%s (write has epoch %d)", ErrStaleEpoch, u.Name, id, epoch)
	}
	s, err := u.Sessions[i].Renew(epoch, now, ttl)
	if err != nil {
		return u, err
	}
	u = u.clone()
	u.Sessions[i] = s
	return u, nil
}

// SetAccount changes the account setting.
func (u User) SetAccount(upd AccountUpdate) (User, error) {
	if upd.Status != nil && *upd.Status != Online && !upd.Status.AccountStatus() {
		return u, fmt.Errorf("%w: %q at account scope (want away, busy, dnd, or online to clear)", ErrBadStatus, *upd.Status)
	}
	if upd.Text != nil {
		if err := ValidText(*upd.Text); err != nil {
			return u, err
		}
	}
	if err := upd.checkPrivacy(); err != nil { // applied by SetAccountAt (privacy.go)
		return u, err
	}
	u = u.clone()
	if upd.Status != nil {
		u.Account.Status = *upd.Status
		if *upd.Status == Online {
			u.Account.Status = ""
		}
	}
	if upd.Text != nil {
		u.Account.Text = *upd.Text
	}
	return u, nil
}

// Reap ends every live session whose expiry has passed at now, as timeouts.
func (u User) Reap(now time.Time) (User, []Session) {
	return u.endWhere(func(s Session) bool { return s.Due(now) }, EndTimeout, now)
}

// EndNode ends every live session of node as reason (node loss).
func (u User) EndNode(node string, reason EndReason, now time.Time) (User, []Session) {
	if !reason.Valid() {
		return u, nil
	}
	return u.endWhere(func(s Session) bool { return s.Node == node }, reason, now)
}

// endWhere ends, for reason, every live session that match selects. The
// receiver's arrays are left as they are (retire builds new ones, and
// Commit replaces Current).
func (u User) endWhere(match func(Session) bool, reason EndReason, now time.Time) (User, []Session) {
	var ended []Session
	for i := 0; i < len(u.Sessions); {
		s := u.Sessions[i]
		if !match(s) {
			i++
			continue
		}
		e, _ := s.End(s.Epoch, reason, now)
		u.retire(i, e) // new Sessions and Ended: the receiver's are left as they are
		u.LastWords = ""
		ended = append(ended, e)
	}
	return u, ended
}

// NextDeadline returns the earliest expiry of the user's live sessions.
func (u User) NextDeadline() (time.Time, bool) {
	var min time.Time
	for _, s := range u.Sessions {
		if min.IsZero() || s.ExpiresAt.Before(min) {
			min = s.ExpiresAt
		}
	}
	return min, !min.IsZero()
}

// Commit derives the aggregate of u under rules. When it differs from the last
// committed one, it is given the next version (and a new since when the status
// changed) and becomes Current; changed is then true. Every store operation
// ends with Commit, so versions move exactly when what observers see moves.
//
// Commit leaves its receiver unchanged, like every operation, but unlike
// the others its result shares the receiver's Sessions and Ended arrays:
// it only replaces Current (with sessions Derive made anew), and stores
// call it on the fresh result of an operation, so a copy of every session
// on each change would buy nothing.
func (u User) Commit(rules Rules, now time.Time) (User, Aggregate, bool) {
	p := Derive(u, rules)
	if u.Current.Version != 0 && p.sameAs(u.Current) {
		return u, u.Current, false
	}
	p.Version = NextStamp(u.Current.Version, now)
	p.Since = u.Current.Since
	if p.Status != u.Current.Status || p.Since.IsZero() {
		p.Since = now
		if p.Status == Offline && !u.LastSeen.IsZero() {
			p.Since = u.LastSeen
		}
	}
	u.Current = p // replaced, not changed in place: Derive made p's sessions anew
	return u, p, true
}
