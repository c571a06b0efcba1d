package presence

import (
	"errors"
	"fmt"
	"time"
)

// LastSeenMode is how exactly others see a user's last_seen.
type LastSeenMode string

// The last_seen modes. The empty mode is LastSeenExact.
const (
	LastSeenExact   LastSeenMode = "exact"
	LastSeenQuarter LastSeenMode = "quarter" // rounded down to the quarter hour
	LastSeenHidden  LastSeenMode = "hidden"  // always null
)

// ErrBadPrivacy is a privacy setting that is not acceptable (an unknown
// last_seen mode, a privacy key at session scope); it comes wrapped with
// ErrBadPayload, so that a refusal is counted both ways.
var ErrBadPrivacy = errors.New("invalid privacy setting")

// ParseLastSeenMode parses a last_seen mode.
func ParseLastSeenMode(v string) (LastSeenMode, error) {
	switch m := LastSeenMode(v); m {
	case LastSeenExact, LastSeenQuarter, LastSeenHidden:
		return m, nil
	}
	return "", fmt.Errorf("%w: %w: last_seen %q (want exact, quarter or hidden)", ErrBadPayload, ErrBadPrivacy, v)
}

// Privacy is a user's account-level privacy setting: Invisible shows the
// user offline to everyone but themselves and service accounts; LastSeen
// says how exactly the others see last_seen. The zero Privacy hides
// nothing.
//
// Since and Seen are what the others are shown while the user is
// invisible, fixed when the user turned invisible (SetAccountAt), so that
// nothing the user does meanwhile moves them: offline since Since, last
// seen at Seen (zero: null). Both are zero while the user is visible.
type Privacy struct {
	Invisible bool         `json:"invisible,omitempty"`
	LastSeen  LastSeenMode `json:"last_seen,omitempty"`
	Since     time.Time    `json:"since,omitzero"`
	Seen      time.Time    `json:"seen,omitzero"`
}

// IsZero reports whether p hides nothing.
func (p Privacy) IsZero() bool {
	return !p.Invisible && (p.LastSeen == "" || p.LastSeen == LastSeenExact)
}

// Equal reports whether p and q are the same setting.
func (p Privacy) Equal(q Privacy) bool {
	return p.Invisible == q.Invisible && p.mode() == q.mode() && p.Since.Equal(q.Since) && p.Seen.Equal(q.Seen)
}

// mode is LastSeen with the empty mode spelt exact.
func (p Privacy) mode() LastSeenMode {
	if p.LastSeen == "" {
		return LastSeenExact
	}
	return p.LastSeen
}

// privacyOf is the privacy an aggregate of u carries (Derive): the
// account's, exact spelt "" so that both stores agree.
func privacyOf(u User) Privacy {
	p := u.Account.Privacy
	if p.LastSeen == LastSeenExact {
		p.LastSeen = ""
	}
	return p
}

// checkPrivacy refuses an update's privacy values that are not settings.
func (upd AccountUpdate) checkPrivacy() error {
	if upd.LastSeen != nil {
		if _, err := ParseLastSeenMode(string(*upd.LastSeen)); err != nil {
			return err
		}
	}
	return nil
}

// SetAccountAt changes the account setting at now (SetAccount), privacy
// included: turning invisible fixes what the others are shown meanwhile
// (Privacy.Since and Seen): while live, offline since now, last seen now;
// while offline, the offline since and last_seen they were shown then.
// Turning visible clears them. now is kept to the millisecond, as the
// Redis store keeps it.
func (u User) SetAccountAt(upd AccountUpdate, now time.Time) (User, error) {
	u, err := u.SetAccount(upd)
	if err != nil {
		return u, err
	}
	if upd.LastSeen != nil {
		u.Account.Privacy.LastSeen = *upd.LastSeen
		if *upd.LastSeen == LastSeenExact {
			u.Account.Privacy.LastSeen = ""
		}
	}
	if upd.Invisible == nil || *upd.Invisible == u.Account.Privacy.Invisible {
		return u, nil
	}
	pv := &u.Account.Privacy
	pv.Invisible = *upd.Invisible
	pv.Since, pv.Seen = time.Time{}, time.Time{}
	if !pv.Invisible {
		return u, nil
	}
	now = toMillis(now)
	switch {
	case len(u.Sessions) > 0:
		pv.Since, pv.Seen = now, now
	default:
		pv.Seen = toMillis(u.LastSeen)
		pv.Since = toMillis(u.Current.Since)
		if pv.Since.IsZero() {
			pv.Since = now
		}
	}
	return u, nil
}

// toMillis is t to the millisecond, in UTC (zero stays zero).
func toMillis(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// quarterHour is the grain of LastSeenQuarter.
const quarterHour = 15 * time.Minute

// epoch is the since of an invisible user whose record says nothing
// (never the case for a record this version wrote): a time that tells
// nothing.
var epoch = time.Unix(0, 0).UTC()

// Public returns what p shows a viewer who is neither the user nor a
// service account (Entitled), under p.Privacy; the zero Privacy shows p
// as it is. It is what presence/users/{user} carries by default and what
// feeds the group topics:
//
//   - invisible: offline, no sessions, text "", no reason, link nor
//     next_expected, offline since Privacy.Since and last seen at
//     Privacy.Seen (what the others last saw), whatever the user does;
//   - last_seen quarter: last_seen rounded down to the quarter hour, and
//     so is the since of an offline or dormant user (it is last_seen),
//     and next_expected rounded up to it;
//   - last_seen hidden: last_seen null, an offline or dormant user's
//     since rounded down to the day (UTC), no next_expected.
//
// The result carries the zero Privacy and no ended sessions; Public of it
// is itself.
func (p Aggregate) Public() Aggregate {
	pv := p.Privacy
	p.Privacy = Privacy{}
	if pv.IsZero() {
		return p
	}
	p.Ended = nil
	if pv.Invisible {
		p.Status = Offline
		p.Sessions = []SessionView{}
		p.Text, p.Reason, p.Link = "", "", ""
		p.NextExpected = time.Time{}
		p.LastSeen = pv.Seen
		p.Since = pv.Since
		if p.Since.IsZero() {
			p.Since = epoch
		}
	}
	gone := p.Status == Offline || p.Status == Dormant
	switch pv.mode() {
	case LastSeenQuarter:
		p.LastSeen = floor(p.LastSeen, quarterHour)
		if gone {
			p.Since = floor(p.Since, quarterHour)
		}
		if !p.NextExpected.IsZero() {
			p.NextExpected = ceil(p.NextExpected, quarterHour)
		}
	case LastSeenHidden:
		p.LastSeen = time.Time{}
		p.NextExpected = time.Time{}
		if gone {
			p.Since = floor(p.Since, 24*time.Hour)
		}
	}
	return p
}

// Entitled reports whether viewer (a user name, "" for an observer; a
// service account when service) sees user's true presence rather than
// Public: the user themself and service accounts.
func Entitled(viewer string, service bool, user string) bool {
	return service || (viewer != "" && viewer == user)
}

// SamePublic reports whether two public views show the same (everything
// but the version): a change of what only the user and service accounts
// see leaves the public view as it was, and is not published to others.
func SamePublic(p, q Aggregate) bool {
	return p.sameAs(q) && p.Since.Equal(q.Since) && p.Link == q.Link
}

// floor rounds t down to a multiple of d since 1970 (zero stays zero).
func floor(t time.Time, d time.Duration) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli() - mod(t.UnixMilli(), d.Milliseconds())).UTC()
}

// ceil rounds t up to a multiple of d since 1970 (zero stays zero).
func ceil(t time.Time, d time.Duration) time.Time {
	f := floor(t, d)
	if f.Equal(t) || t.IsZero() {
		return f
	}
	return f.Add(d)
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// setPrivacy reads the privacy keys of a presence/set into r: invisible
// (true or false) and last_seen (exact, quarter or hidden), at account
// scope only; null is the same as leaving a key out.
func (r *SetRequest) setPrivacy(w wireSet) error {
	if w.Invisible == nil && w.LastSeen == nil {
		return nil
	}
	if r.Scope != ScopeAccount {
		return fmt.Errorf("%w: %w: invisible and last_seen are account settings (give \"scope\": \"account\")", ErrBadPayload, ErrBadPrivacy)
	}
	r.Invisible = w.Invisible
	if w.LastSeen != nil {
		m, err := ParseLastSeenMode(*w.LastSeen)
		if err != nil {
			return err
		}
		r.LastSeen = &m
	}
	return nil
}
