package presence

import (
	"fmt"
	"time"
)

// Devices that sleep by design (issue 22): battery sensors, NB-IoT, LoRa
// gateways connect, report and disconnect, and are back a period later.
// Such a device declares its check-in period (Expect: the MQTT 5 CONNECT
// user property expect, or its device label's in the configuration).
//
//   - A clean end (DISCONNECT) of a session that declared a period, leaving
//     the user no live session, keeps it as the user's Dormant session,
//     due at its end + Expect + Margin: the user is shown dormant, with
//     next_expected = its end + Expect.
//   - Any new session of the user (same or another client id) is the
//     check-in: the dormant session is dropped in the same step, so the
//     user goes from dormant to online, never through offline.
//   - When the due time passes with no check-in, the store's reaper ends it
//     as missed (Miss): the user is shown offline, reason missed.
//   - An unclean end (timeout, network, kicked, drain, node_lost ...) is
//     not sleep: the device did not say goodbye, and it is shown offline as
//     any other (after the grace).
//
// A dormant session is not live: a renewal does not renew it, a node sweep
// does not end it (its node no longer matters), and it is not in the
// aggregate's sessions (a dormant user's sessions are empty, as an offline
// user's). Its status is derived, never stored: Derive shows Dormant while
// User.Dormant is set.

// The bounds of a declared check-in period.
const (
	MinExpect = time.Second
	MaxExpect = 7 * 24 * time.Hour
)

// The default margin (DormantMargin): a tenth of the period, at least
// MinDormantMargin.
const (
	DormantMarginShare = 10 // percent of the period
	MinDormantMargin   = 5 * time.Second
)

// ParseExpect parses a declared check-in period: a Go duration ("90s",
// "1h", "1h30m") from MinExpect to MaxExpect. Anything else is an error
// wrapping ErrBadPayload.
func ParseExpect(v string) (time.Duration, error) {
	if len(v) > 32 {
		return 0, fmt.Errorf("%w: expect of %d bytes", ErrBadPayload, len(v))
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%w: expect %q is not a duration (e.g. 90s, 1h)", ErrBadPayload, v)
	}
	if d < MinExpect || d > MaxExpect {
		return 0, fmt.Errorf("%w: expect %v out of %v..%v", ErrBadPayload, d, MinExpect, MaxExpect)
	}
	return d, nil
}

// DormantMargin returns how late past its period a check-in may come before
// the device is shown offline (missed): configured when set (> 0), else
// DormantMarginShare percent of expect, at least MinDormantMargin.
func DormantMargin(expect, configured time.Duration) time.Duration {
	if configured > 0 {
		return configured
	}
	return max(expect*DormantMarginShare/100, MinDormantMargin)
}

// validExpect checks an open's period and margin (the stores take any
// period up to MaxExpect: the bounds of a declared one are the hook's).
func validExpect(expect, margin time.Duration) error {
	if expect < 0 || expect > MaxExpect || margin < 0 || margin > MaxExpect {
		return fmt.Errorf("%w: expect %v, margin %v", ErrBadTransition, expect, margin)
	}
	return nil
}

// NextExpected is when a dormant session's device is expected back: its end
// plus its period.
func (s Session) NextExpected() time.Time { return s.EndedAt.Add(s.Expect) }

// sleep returns the dormant session u keeps after ended ended (u's live
// sessions already without it): a new copy of ended, due at NextExpected +
// Margin, when it ended cleanly, declared a period and left no live
// session; else u's dormant session as it was (nil when none: Open drops
// it).
func (u User) sleep(ended Session) *Session {
	if ended.EndReason != EndClean || ended.Expect <= 0 || len(u.Sessions) > 0 {
		return u.Dormant
	}
	// A copy made here, not &ended: a parameter whose address is taken
	// lives on the heap from the call on, and every end would pay for it.
	d := ended
	d.ExpiresAt = d.NextExpected().Add(d.Margin)
	return &d
}

// dormant shows p (u's aggregate with no live session) dormant when u keeps
// a dormant session. Derive's.
func dormant(u User, p *Aggregate) {
	if u.Dormant == nil {
		return
	}
	p.Status = Dormant
	p.NextExpected = u.Dormant.NextExpected()
}

// DormantDeadline returns when u's dormant session is missed (false: none).
func (u User) DormantDeadline() (time.Time, bool) {
	if u.Dormant == nil {
		return time.Time{}, false
	}
	return u.Dormant.ExpiresAt, true
}

// Miss ends u's dormant session as missed when its due time has passed at
// now, and records it among the ended sessions (its clean end is recorded
// already: this is the second word on the same epoch). The user's last
// seen stays its end: the device was not seen since. ok is false, and u
// unchanged, when nothing is due.
func (u User) Miss(now time.Time) (User, Session, bool) {
	d, due := u.DormantDeadline()
	if !due || now.Before(d) {
		return u, Session{}, false
	}
	m := *u.Dormant // a copy: the dormant session may be shared with other Users
	m.State, m.EndReason, m.EndedAt = EndMissed.State(), EndMissed, now
	rec := make([]Session, 1, min(len(u.Ended)+1, MaxEnded))
	rec[0] = m
	u.Ended = append(rec, u.Ended[:cap(rec)-1]...)
	u.Dormant = nil
	u.LastWords = ""
	return u, m, true
}
