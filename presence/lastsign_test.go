package presence

import (
	"testing"
	"time"
)

// The grace of an unclean offline counts from the last sign of life
// (last_seen), not from the end: a keep-alive timeout, found 1.5 x
// keep-alive after the last packet, is shown at max(1.5 x keep-alive,
// grace) after it; an end with a recent sign of life keeps the whole grace;
// a clean end keeps the debounce; will delay and flap grace are as before.
func TestPacingGraceFromLastSign(t *testing.T) {
	rules := Pacing{Grace: 5 * time.Second, Debounce: time.Second, WillDelayMax: 30 * time.Second,
		FlapWindow: time.Minute, FlapEnds: 3, FlapGrace: 30 * time.Second}
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	s := time.Second
	cases := []struct {
		name    string
		rules   Pacing
		silence time.Duration // end - last_seen
		noEnded bool          // the aggregate says nothing of the end
		cause   Cause
		hold    time.Duration
	}{
		{"timeout at keep-alive 2 s: 3 s silent, 2 s left", rules, 3 * s, false, Cause{Ended: EndTimeout}, 2 * s},
		{"timeout at keep-alive 10 s: 15 s silent, shown at once", rules, 15 * s, false, Cause{Ended: EndTimeout}, 0},
		{"silence of exactly the grace: shown at once", rules, 5 * s, false, Cause{Ended: EndTimeout}, 0},
		{"a network end: last seen at the end, the whole grace", rules, 0, false, Cause{Ended: EndNetwork}, 5 * s},
		{"a network end 40 ms after its last sign", rules, 40 * time.Millisecond, false, Cause{Ended: EndNetwork}, 5*s - 40*time.Millisecond},
		{"a clean end keeps the debounce", rules, 3 * s, false, Cause{Ended: EndClean}, s},
		{"a kick keeps the debounce", rules, 3 * s, false, Cause{Ended: EndKicked}, s},
		{"a will delay is not shortened", rules, 3 * s, false, Cause{Ended: EndTimeout, WillDelay: 10 * s}, 10 * s},
		{"a will delay shorter than what is left", rules, 3 * s, false, Cause{Ended: EndTimeout, WillDelay: s}, 2 * s},
		{"an offline that says nothing of its end: the whole grace", rules, 3 * s, true, Cause{}, 5 * s},
		{"a coalesced cause: the silence still counts", rules, 3 * s, false, Cause{}, 2 * s},
		{"no grace, nothing held", Pacing{}, 3 * s, false, Cause{Ended: EndTimeout}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			shown := Shown{Version: 1, Status: Online, Since: t0}
			now := t0.Add(time.Minute)
			a := Aggregate{User: "alice", Status: Offline, Version: 2, LastSeen: now.Add(-c.silence)}
			if !c.noEnded {
				a.Ended = []EndedView{
					{SessionView: SessionView{ID: "old"}, Reason: EndClean, EndedAt: t0},
					{SessionView: SessionView{ID: "phone"}, Reason: c.cause.Ended, EndedAt: now},
				}
			}
			p, got := c.rules.Offer(Pace{}, shown, a, c.cause, now)
			if c.hold == 0 {
				if got.Status != Offline {
					t.Fatalf("held until %v, want shown at once", p.Due)
				}
				return
			}
			if got.Version != 0 || !p.Holding() {
				t.Fatalf("shown at once (%+v), want held %v", got, c.hold)
			}
			if d := p.Due.Sub(now); d != c.hold {
				t.Fatalf("held %v, want %v", d, c.hold)
			}
			if _, got = c.rules.Release(p, shown, p.Due.Add(-time.Nanosecond)); got.Version != 0 {
				t.Fatal("shown before its due time")
			}
			if _, got = c.rules.Release(p, shown, p.Due); got.Status != Offline {
				t.Fatal("not shown at its due time")
			}
		})
	}
}

// A flapping user's flap grace is not shortened by a long silence.
func TestPacingFlapGraceFromLastSign(t *testing.T) {
	r := Pacing{Grace: 5 * time.Second, FlapWindow: time.Minute, FlapEnds: 2, FlapGrace: 30 * time.Second}
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	var p Pace
	shown := Shown{Version: 1, Status: Online, Since: t0}
	v := uint64(1)
	for i := range 2 {
		now := t0.Add(time.Duration(i) * 10 * time.Second)
		v++
		off := Aggregate{User: "a", Status: Offline, Version: v, LastSeen: now.Add(-3 * time.Second),
			Ended: []EndedView{{Reason: EndTimeout, EndedAt: now}}}
		p, _ = r.Offer(p, shown, off, Cause{Ended: EndTimeout}, now)
		if i == 1 {
			if d := p.Due.Sub(now); d != 30*time.Second {
				t.Fatalf("flapping: held %v, want the 30 s flap grace", d)
			}
			return
		}
		if d := p.Due.Sub(now); d != 2*time.Second {
			t.Fatalf("held %v, want 2 s", d)
		}
		v++
		var got Aggregate
		p, got = r.Offer(p, shown, Aggregate{User: "a", Status: Online, Version: v}, Cause{}, now.Add(time.Second))
		shown = got.Shown()
	}
}

func TestSilence(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	end := func(at time.Time) EndedView { return EndedView{EndedAt: at} }
	for _, c := range []struct {
		name string
		a    Aggregate
		want time.Duration
	}{
		{"online", Aggregate{Status: Online, LastSeen: t0, Ended: []EndedView{end(t0.Add(time.Second))}}, 0},
		{"no last seen", Aggregate{Status: Offline, Ended: []EndedView{end(t0)}}, 0},
		{"no end", Aggregate{Status: Offline, LastSeen: t0}, 0},
		{"the newest end counts", Aggregate{Status: Offline, LastSeen: t0,
			Ended: []EndedView{end(t0.Add(3 * time.Second)), end(t0.Add(-time.Hour))}}, 3 * time.Second},
		{"an end before last seen", Aggregate{Status: Offline, LastSeen: t0, Ended: []EndedView{end(t0.Add(-time.Second))}}, 0},
	} {
		if got := Silence(c.a); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// The offline aggregate says why the user went: the reason of the newest
// ended session, whose end left none live.
func TestDeriveReason(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	ended := func(id string, r EndReason) Session {
		return Session{User: "u", ID: id, Epoch: 1, EndReason: r, State: r.State(), EndedAt: t0}
	}
	live := Session{User: "u", ID: "desk", Epoch: 2, Status: Online, State: Active, ConnectedAt: t0}
	for _, c := range []struct {
		name string
		u    User
		want EndReason
	}{
		{"never seen", User{Name: "u"}, ""},
		{"clean", User{Name: "u", Ended: []Session{ended("a", EndClean)}}, EndClean},
		{"the newest end: timeout", User{Name: "u", Ended: []Session{ended("a", EndTimeout), ended("b", EndClean)}}, EndTimeout},
		{"network", User{Name: "u", Ended: []Session{ended("a", EndNetwork)}}, EndNetwork},
		{"kicked", User{Name: "u", Ended: []Session{ended("a", EndKicked)}}, EndKicked},
		{"node lost", User{Name: "u", Ended: []Session{ended("a", EndNodeLost)}}, EndNodeLost},
		{"drain", User{Name: "u", Ended: []Session{ended("a", EndDrain)}}, EndDrain},
		{"shutdown", User{Name: "u", Ended: []Session{ended("a", EndShutdown)}}, EndShutdown},
		{"online: none", User{Name: "u", Sessions: []Session{live}, Ended: []Session{ended("a", EndNetwork)}}, ""},
	} {
		if got := Derive(c.u, NewRules(nil)).Reason; got != c.want {
			t.Errorf("%s: reason %q, want %q", c.name, got, c.want)
		}
	}
}

// SeenAt: last_seen is the last sign of life, within the session's life.
func TestSeenAt(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	s := Session{ID: "a", ConnectedAt: t0, EndedAt: t0.Add(time.Minute)}
	base := User{Name: "u", LastSeen: s.EndedAt}
	for _, c := range []struct {
		name string
		u    User
		sign time.Time
		want time.Time
	}{
		{"no sign: the end", base, time.Time{}, s.EndedAt},
		{"the sign", base, t0.Add(57 * time.Second), t0.Add(57 * time.Second)},
		{"never before the connect", base, t0.Add(-time.Hour), t0},
		{"never after the end", base, t0.Add(time.Hour), s.EndedAt},
		{"another session still live: untouched", User{Name: "u", LastSeen: t0.Add(-time.Hour), Sessions: []Session{{ID: "b"}}},
			t0.Add(57 * time.Second), t0.Add(-time.Hour)},
	} {
		got := c.u.SeenAt(s, c.sign)
		if !got.LastSeen.Equal(c.want) {
			t.Errorf("%s: last seen %v, want %v", c.name, got.LastSeen, c.want)
		}
		if !c.u.LastSeen.Equal(base.LastSeen) && c.name != "another session still live: untouched" {
			t.Errorf("%s: receiver changed", c.name)
		}
	}
}

// The flaky link: every aggregate shown while the user flaps carries it,
// every other one does not, and nothing is shown only to set or clear it.
func TestPacingFlakyLink(t *testing.T) {
	r := Pacing{Grace: time.Second, FlapWindow: time.Minute, FlapEnds: 2, FlapGrace: 10 * time.Second}
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	s := time.Second
	type step struct {
		at      time.Duration
		release bool
		status  Status
		want    Status // shown ("" nothing)
		link    string // of what is shown
	}
	steps := []step{
		{at: 0, status: Online, want: Online},
		{at: 1 * s, status: Offline},                                   // 1st end
		{at: 1*s + 500*time.Millisecond, status: Online, want: Online}, // hidden, not yet flapping
		{at: 10 * s, status: Offline},                                  // 2nd end: flapping, held 10 s
		{at: 15 * s, release: true},                                    // the flap grace holds it
		{at: 16 * s, status: Online, want: Online, link: LinkFlaky},    // the return carries the flag
		{at: 20 * s, status: Away, want: Away, link: LinkFlaky},
		{at: 30 * s, status: Offline},                               // 3rd end, held the flap grace
		{at: 40 * s, release: true, want: Offline, link: LinkFlaky}, // the final state, flagged
		{at: 65 * s, status: Online, want: Online, link: LinkFlaky}, // the 2nd and 3rd ends are within the window
		{at: 91 * s, status: Away, want: Away},                      // the window passed: no flag
	}
	var p Pace
	var shown Shown
	v := uint64(0)
	for i, st := range steps {
		now := t0.Add(st.at)
		var got Aggregate
		if st.release {
			p, got = r.Release(p, shown, now)
		} else {
			v++
			a := Aggregate{User: "a", Status: st.status, Version: v, Since: now}
			c := Cause{}
			if st.status == Offline {
				c.Ended = EndNetwork
				a.LastSeen = now
				a.Ended = []EndedView{{Reason: EndNetwork, EndedAt: now}}
			}
			p, got = r.Offer(p, shown, a, c, now)
		}
		if got.Status != st.want || got.Link != st.link {
			t.Fatalf("step %d (+%v): shown %q link %q, want %q link %q", i, st.at, got.Status, got.Link, st.want, st.link)
		}
		if got.Version != 0 {
			shown = got.Shown()
		}
	}
}
