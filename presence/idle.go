package presence

import (
	"sync/atomic"
	"time"
)

// This file holds server-side idle (auto-away): a session whose own status
// is online and that shows no activity for IdleRules.After of its device
// label is shown idle by its node, and its next activity brings its own
// status back.
//
// Activity is a PUBLISH by the client to any topic it may publish to
// (presence/set included, and {"activity": true} there for an application
// that publishes nothing else). Keep-alive (PINGREQ), SUBSCRIBE,
// UNSUBSCRIBE and acknowledgements are not activity.

// IdleRules say after how long without activity a session is shown idle:
// Default for every device label, unless Devices names the label (0: never).
type IdleRules struct {
	Default time.Duration
	Devices map[string]time.Duration
}

// After returns the idle time of a session with device label device; 0
// means never.
func (r IdleRules) After(device string) time.Duration {
	if d, ok := r.Devices[device]; ok {
		return d
	}
	return r.Default
}

// Enabled reports whether any session can ever be shown idle.
func (r IdleRules) Enabled() bool {
	if r.Default > 0 {
		return true
	}
	for _, d := range r.Devices {
		if d > 0 {
			return true
		}
	}
	return false
}

// Shortest returns the shortest idle time above 0 (0 when none).
func (r IdleRules) Shortest() time.Duration {
	least := r.Default
	for _, d := range r.Devices {
		if d > 0 && (least <= 0 || d < least) {
			least = d
		}
	}
	return least
}

// IdleAction is what the node does about a session's idleness.
type IdleAction uint8

// Idle actions.
const (
	IdleKeep  IdleAction = iota // nothing to write
	IdleEnter                   // show the session idle (auto-idle)
	IdleLeave                   // show the session's own status again
)

func (a IdleAction) String() string {
	switch a {
	case IdleEnter:
		return "enter"
	case IdleLeave:
		return "leave"
	}
	return "keep"
}

// IdleDecide decides for one session, given its last activity, its own
// status (the one the client last set, or online), whether the node has
// shown it idle on its own (auto), its idle time (after; 0: never) and now:
//
//   - auto-idle is left when the session was active within after, when its
//     own status is no longer online (the client set one: it wins), or when
//     idle no longer applies to it (after is 0);
//   - auto-idle is entered only from an own status of online: away, busy,
//     dnd or idle set by the user are never overridden;
//   - otherwise nothing changes.
func IdleDecide(last time.Time, own Status, auto bool, after time.Duration, now time.Time) IdleAction {
	quiet := now.Sub(last) >= after
	if auto {
		if after <= 0 || own != Online || !quiet {
			return IdleLeave
		}
		return IdleKeep
	}
	if after > 0 && own == Online && quiet {
		return IdleEnter
	}
	return IdleKeep
}

// ShownStatus returns the status a session is shown with: idle while auto-idle
// over an own status of online, else its own status.
func ShownStatus(own Status, auto bool) Status {
	if auto && own == Online {
		return Idle
	}
	return own
}

// Activity is a session's activity as its node sees it: the time of its
// last activity and whether the node shows it idle on its own. The packet
// path records activity with Touch (atomics only, never a store write); the
// idle checker reads it.
type Activity struct {
	last atomic.Int64 // unix nanoseconds
	auto atomic.Bool
}

// NewActivity returns the activity of a session that starts at now.
func NewActivity(now time.Time) *Activity {
	a := new(Activity)
	a.last.Store(now.UnixNano())
	return a
}

// Touch records activity at now. It reports true once when the session was
// auto-idle, clearing the mark: the caller has its own status written back.
func (a *Activity) Touch(now time.Time) bool {
	a.last.Store(now.UnixNano())
	return a.auto.Load() && a.auto.CompareAndSwap(true, false)
}

// Last returns the time of the last activity.
func (a *Activity) Last() time.Time { return time.Unix(0, a.last.Load()) }

// MarkIdle marks the session auto-idle if it was not active after last
// (the activity IdleDecide saw). It reports false, marking nothing, when
// activity came in between: Touch stores the time then reads the mark, and
// MarkIdle stores the mark then reads the time, so one of them sees the
// other and no activity is missed.
func (a *Activity) MarkIdle(last time.Time) bool {
	a.auto.Store(true)
	if a.last.Load() != last.UnixNano() {
		a.auto.Store(false)
		return false
	}
	return true
}

// ClearIdle removes the auto-idle mark.
func (a *Activity) ClearIdle() { a.auto.Store(false) }

// AutoIdle reports whether the session is marked auto-idle.
func (a *Activity) AutoIdle() bool { return a.auto.Load() }
