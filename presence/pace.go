package presence

import "time"

// Pacing is the rule of when observers are shown a committed change: the
// store holds the truth at once, and Pacing decides how long a change that
// would only blink is held back first. It spends the few seconds of
// staleness users forgive on not strobing:
//
//   - a change an unclean end made (network, timeout, node_lost, drain,
//     shutdown) is held for Grace, and a clean DISCONNECT (or a kick) for
//     Debounce; a session coming back in the meantime replaces the held
//     change, so the end is never shown;
//   - the Grace of an unclean offline counts from the user's last sign of
//     life, not from the end: it is held for Grace - (end - last_seen),
//     clamped to [0, Grace] (see Silence). A keep-alive timeout is found
//     1.5 x keep-alive after the last packet, and the store records that
//     packet's time as last_seen (presence.EndArgs.LastSign), so a silent
//     death is shown max(1.5 x keep-alive, Grace) after the last packet,
//     while an end with a recent sign of life (a reset, a closed socket:
//     last_seen is the end) keeps the whole Grace;
//   - an MQTT 5 will delay stretches the hold to the delay, capped at
//     WillDelayMax, as MQTT 5 holds the will itself;
//   - a user whose unclean ends would have shown them offline FlapEnds
//     times within FlapWindow flaps: their offline is held for FlapGrace
//     instead (a clean leave is never a flap: it is shown after Debounce);
//   - two shown status changes of one user are at least Dwell apart;
//   - every aggregate shown while the user flaps (Flapping at the moment it
//     is shown) carries Link LinkFlaky, and every other one Link "": the
//     flag comes with the first change shown once the user flaps (their
//     return, usually, as their offline is held) and goes with the first
//     change shown after the flap window. Nothing is shown again only to
//     set or clear it: a change is only ever a committed aggregate, whose
//     version the store gave, so the flag describes the user when the
//     change was shown, and stays on a retained message until the next.
//
// A change that keeps the shown status (a session list that moved, a new
// text) is never held, unless a held change of the same status is waiting,
// whose due time it keeps. Whatever is held is shown at its due time unless
// something newer replaced it: the final state always gets out, and what is
// shown is always a committed aggregate, so versions only grow.
//
// The zero Pacing holds nothing.
type Pacing struct {
	Grace        time.Duration
	Debounce     time.Duration
	WillDelayMax time.Duration
	Dwell        time.Duration
	FlapWindow   time.Duration
	FlapEnds     int
	FlapGrace    time.Duration
}

// Cause is what made a committed change: the reason its session ended when
// an end made it (empty otherwise), and the will delay that session asked
// for (MQTT 5; zero when none).
type Cause struct {
	Ended     EndReason
	WillDelay time.Duration
}

// Shown is what observers were last shown of a user (Status "" when
// nothing yet).
type Shown struct {
	Version  uint64
	Status   Status
	Since    time.Time
	Text     string
	LastSeen time.Time
}

// Shown is what observers are shown of a.
func (a Aggregate) Shown() Shown {
	return Shown{Version: a.Version, Status: a.Status, Since: a.Since, Text: a.Text, LastSeen: a.LastSeen}
}

// Pace is one user's pacing state.
type Pace struct {
	Held      Aggregate // the change held back (Version 0: none)
	HeldCause Cause
	Due       time.Time   // when Held is shown
	ChangedAt time.Time   // when the shown status last changed
	Ends      []time.Time // recent ends that would have shown the user offline, oldest first
}

// Holding reports whether a change is held.
func (p Pace) Holding() bool { return p.Held.Version != 0 }

// Offer decides about a, the user's newest committed aggregate, made by c,
// at now, given what is shown. It returns the new pace and what to show now
// (Version 0: nothing now). A held change replaced by a is dropped.
func (r Pacing) Offer(p Pace, shown Shown, a Aggregate, c Cause, now time.Time) (Pace, Aggregate) {
	if a.Version <= shown.Version || (p.Holding() && a.Version <= p.Held.Version) {
		return p, Aggregate{}
	}
	if p.Holding() && len(p.Held.Ended) > 0 {
		// a replaces the held change: the sessions that one ended go on
		// with it (the shown lifecycle outputs tell each end once).
		a.Ended, _ = MergeEnded(p.Held.Ended, a.Ended, MaxEndedCarried)
	}
	p.Ends = r.recentEnds(p.Ends, now)
	if p.Holding() && c.Ended == "" && a.Status == p.Held.Status && a.Status != shown.Status {
		p.Held = a // the end that made the held change still explains it: same cause, same due time
		return p, Aggregate{}
	}
	left := c.Ended == EndClean || c.Ended == EndKicked || c.Ended == EndMissed // the user left, was made to, or slept and did not come back: not a flap
	goingOffline := a.Status == Offline && shown.Status != Offline && shown.Status != "" &&
		!(p.Holding() && p.Held.Status == Offline)
	if goingOffline && !left {
		p.Ends = append(p.Ends[:len(p.Ends):len(p.Ends)], now) // a copy: paces are values
		if r.FlapEnds > 0 && len(p.Ends) > r.FlapEnds {
			p.Ends = p.Ends[len(p.Ends)-r.FlapEnds:]
		}
	}
	if shown.Status == "" || a.Status == shown.Status {
		p.Held, p.HeldCause, p.Due = Aggregate{}, Cause{}, time.Time{}
		return r.show(p, shown, a, now)
	}
	var hold time.Duration
	if c.Ended != "" || a.Status == Offline { // an offline with no known cause came from an end whose report was coalesced
		hold = r.Grace
		if left {
			hold = r.Debounce
		} else if a.Status == Offline {
			hold = r.Grace - min(Silence(a), r.Grace)
		}
		if c.WillDelay > 0 {
			hold = max(hold, min(c.WillDelay, r.WillDelayMax))
		}
		if a.Status == Offline && !left && r.flapping(p) {
			hold = max(hold, r.FlapGrace)
		}
	}
	if c.Ended == EndMissed {
		hold = 0 // a missed check-in waited out its margin already (dormant.go)
	}
	due := now.Add(hold)
	if r.Dwell > 0 && !p.ChangedAt.IsZero() && p.ChangedAt.Add(r.Dwell).After(due) {
		due = p.ChangedAt.Add(r.Dwell)
	}
	if !due.After(now) {
		p.Held, p.HeldCause, p.Due = Aggregate{}, Cause{}, time.Time{}
		return r.show(p, shown, a, now)
	}
	p.Held, p.HeldCause, p.Due = a, c, due
	return p, Aggregate{}
}

// Release returns the held change when its due time has come at now.
func (r Pacing) Release(p Pace, shown Shown, now time.Time) (Pace, Aggregate) {
	if !p.Holding() || now.Before(p.Due) {
		return p, Aggregate{}
	}
	a := p.Held
	p.Held, p.HeldCause, p.Due = Aggregate{}, Cause{}, time.Time{}
	if a.Version <= shown.Version {
		return p, Aggregate{}
	}
	return r.show(p, shown, a, now)
}

// show shows a: observers who never saw the status change keep its since;
// a carries LinkFlaky while the user flaps.
func (r Pacing) show(p Pace, shown Shown, a Aggregate, now time.Time) (Pace, Aggregate) {
	a.Link = ""
	if r.Flapping(p, now) {
		a.Link = LinkFlaky
	}
	if shown.Status != "" && a.Status == shown.Status {
		a.Since = shown.Since
	} else {
		p.ChangedAt = now
	}
	return p, a
}

// Flapping reports whether the user flaps at now: FlapEnds ends that would
// have shown them offline within FlapWindow.
func (r Pacing) Flapping(p Pace, now time.Time) bool {
	p.Ends = r.recentEnds(p.Ends, now)
	return r.flapping(p)
}

func (r Pacing) flapping(p Pace) bool { return r.FlapEnds > 0 && len(p.Ends) >= r.FlapEnds }

// Dormant reports whether p holds nothing that matters at now, so that it
// can be forgotten.
func (r Pacing) Dormant(p Pace, now time.Time) bool {
	return !p.Holding() && len(r.recentEnds(p.Ends, now)) == 0 &&
		(p.ChangedAt.IsZero() || !now.Before(p.ChangedAt.Add(r.Dwell)))
}

// recentEnds drops the ends older than the flap window (all of them when
// flap control is off). It may reuse ends' array.
func (r Pacing) recentEnds(ends []time.Time, now time.Time) []time.Time {
	if r.FlapEnds <= 0 || r.FlapWindow <= 0 {
		return nil
	}
	cut := now.Add(-r.FlapWindow)
	i := 0
	for i < len(ends) && !ends[i].After(cut) {
		i++
	}
	if i == len(ends) {
		return nil
	}
	return ends[i:]
}

// Silence is how long an offline aggregate's user had given no sign of life
// when the end that took them offline was recorded: the newest end of
// a.Ended minus a.LastSeen, both the store's times (so the clock of
// whoever paces does not matter), never negative. Zero when a is not
// offline or says nothing of the end (then the whole grace applies).
func Silence(a Aggregate) time.Duration {
	if a.Status != Offline || a.LastSeen.IsZero() {
		return 0
	}
	var end time.Time
	for _, e := range a.Ended {
		if e.EndedAt.After(end) {
			end = e.EndedAt
		}
	}
	if end.IsZero() || !end.After(a.LastSeen) {
		return 0
	}
	return end.Sub(a.LastSeen)
}
