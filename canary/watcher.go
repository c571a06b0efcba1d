package canary

import (
	"time"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/slo"
)

// The observer's bookkeeping, pure: what it was shown of each synthetic
// user it watches, and when, turned into the SLIs (slo.Accounting). Every
// time is the observer node's clock, but a plan's end (the origin's clock)
// and a version (the store's clock at the commit: Redis's TIME, or the
// node's with the memory store).

// missAfter is how many bounds after its planned end an end not shown
// counts as missed. The next session of the user begins at least this late
// (configs checks canary.interval against the bound).
const missAfter = 2

// watch is what the observer knows of one synthetic user.
type watch struct {
	version  uint64
	id       string    // the session whose plan is followed; "" for none
	plan     Plan      // its plan
	onlineAt time.Time // when its session was first shown
	done     bool      // its end was counted (shown or missed)
	offSince time.Time // shown offline before its planned end, since (zero: not)
	offTotal time.Duration
}

// maxUnseen bounds the sessions counted as missed for one gap in the
// cycles an observer was shown.
const maxUnseen = 1000

// watcher is the observer's state, on the observer's goroutine only.
type watcher struct {
	acct      *slo.Accounting
	separator string
	ends      []slo.Kind // the rotation, to name the kind of a session never shown
	users     map[string]*watch
}

func newWatcher(acct *slo.Accounting, separator string, ends []slo.Kind) *watcher {
	if len(ends) == 0 {
		ends = []slo.Kind{slo.Clean}
	}
	return &watcher{acct: acct, separator: separator, ends: ends, users: make(map[string]*watch)}
}

// follow starts watching user (no-op when watched).
func (w *watcher) follow(user string) {
	if w.users[user] == nil {
		w.users[user] = &watch{}
	}
}

// forget stops watching user: an open plan is dropped uncounted (its node
// left the cluster's list: the node's own ends are not the canary's).
func (w *watcher) forget(user string) { delete(w.users, user) }

// shown takes a presence payload shown at now.
func (w *watcher) shown(now time.Time, a presence.Aggregate) {
	st := w.users[a.User]
	if st == nil || a.Version <= st.version {
		return
	}
	// The first message after the observer began to follow the user is
	// its state then (retained, or read on demand), not a change: no
	// propagation sample.
	live := st.version != 0
	st.version = a.Version
	if a.Status == presence.Offline {
		w.offline(now, st)
		return
	}
	id, plan, ok := w.newest(a)
	if !ok {
		return
	}
	if id != st.id {
		w.close(now, st, true)
		w.unseen(now, st, plan)
		*st = watch{version: st.version, id: id, plan: plan, onlineAt: now}
		// The first message that shows a session is its open's commit.
		if live {
			w.acct.Propagated(now, now.Sub(time.UnixMicro(int64(a.Version))))
		}
		return
	}
	if !st.offSince.IsZero() { // online again: a false offline ends
		st.offTotal += now.Sub(st.offSince)
		st.offSince = time.Time{}
	}
}

// unseen counts as missed the sessions between st's and next that the
// observer was never shown (they came and went while it, or the path to
// it, stalled): their kind is the rotation's (canary.ends, the same on
// every node). A cycle number that went back is the origin's restart.
func (w *watcher) unseen(now time.Time, st *watch, next Plan) {
	if st.id == "" {
		return
	}
	for c := st.plan.Cycle + 1; c < next.Cycle && c <= st.plan.Cycle+maxUnseen; c++ {
		w.acct.Missed(now, w.ends[c%int64(len(w.ends))], missAfter*next.Bound)
	}
}

// newest is the session of a with a plan that ends last.
func (w *watcher) newest(a presence.Aggregate) (string, Plan, bool) {
	var id string
	var best Plan
	for _, s := range a.Sessions {
		if p, ok := ParsePlan(a.User, w.separator, s.ID); ok && (id == "" || p.End.After(best.End)) {
			id, best = s.ID, p
		}
	}
	return id, best, id != ""
}

// offline takes an offline shown at now.
func (w *watcher) offline(now time.Time, st *watch) {
	if st.id == "" || st.done {
		return
	}
	if now.Before(st.plan.End) { // shown offline while in fact connected
		if st.offSince.IsZero() {
			st.offSince = now
		}
		return
	}
	w.acct.Detected(now, st.plan.Kind, now.Sub(st.plan.End), st.plan.Bound)
	w.close(now, st, false)
}

// tick counts what time alone decides at now: an end shown offline
// before it happened is detected (at once) when it happens, and an end
// never shown is missed missAfter bounds after.
func (w *watcher) tick(now time.Time) {
	for _, st := range w.users {
		switch {
		case st.id == "" || st.done:
		case !st.offSince.IsZero() && !now.Before(st.plan.End):
			w.acct.Detected(now, st.plan.Kind, 0, st.plan.Bound)
			w.close(now, st, false)
		case now.Sub(st.plan.End) > missAfter*st.plan.Bound:
			w.close(now, st, true)
		}
	}
}

// next is when tick next has something to decide (a planned end of a
// user shown offline before it, or a miss), at least 100 ms after now; a
// far time when nothing is pending.
func (w *watcher) next(now time.Time) time.Time {
	t := now.Add(time.Hour)
	for _, st := range w.users {
		switch {
		case st.id == "" || st.done:
		case !st.offSince.IsZero():
			t = earliest(t, st.plan.End)
		default:
			t = earliest(t, st.plan.End.Add(missAfter*st.plan.Bound+time.Millisecond))
		}
	}
	return earliest(now.Add(time.Hour), later(t, now.Add(100*time.Millisecond)))
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// close counts st's plan done at now: its exposure (connected from when
// it was shown to its planned end, of which shown offline), and, when
// missed, a miss (a plan closed before its end is not counted: the
// observer lost sight of it).
func (w *watcher) close(now time.Time, st *watch, missed bool) {
	if st.id == "" || st.done {
		return
	}
	st.done = true
	end := st.plan.End
	if now.Before(end) {
		return
	}
	off := st.offTotal
	if !st.offSince.IsZero() {
		off += end.Sub(st.offSince)
	}
	w.acct.Exposed(now, end.Sub(st.onlineAt), off)
	if missed {
		w.acct.Missed(now, st.plan.Kind, now.Sub(end))
	}
}
