package presence

import (
	"errors"
	"testing"
	"time"
)

func TestParseExpect(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1h", time.Hour, true},
		{"90s", 90 * time.Second, true},
		{"1s", time.Second, true},
		{"168h", 7 * 24 * time.Hour, true},
		{"1h30m", 90 * time.Minute, true},
		{"999ms", 0, false},
		{"168h1s", 0, false},
		{"0s", 0, false},
		{"-1h", 0, false},
		{"", 0, false},
		{"1 hour", 0, false},
		{"3600", 0, false},
		{"1h" + string(make([]byte, 40)), 0, false},
	} {
		got, err := ParseExpect(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseExpect(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadPayload) {
			t.Errorf("ParseExpect(%q): %v does not wrap ErrBadPayload", tc.in, err)
		}
	}
}

func TestDormantMargin(t *testing.T) {
	for _, tc := range []struct {
		expect, configured, want time.Duration
	}{
		{time.Hour, 0, 6 * time.Minute},
		{10 * time.Second, 0, MinDormantMargin},
		{time.Minute, 0, 6 * time.Second},
		{time.Hour, 30 * time.Second, 30 * time.Second},
		{2 * time.Second, time.Second, time.Second},
	} {
		if got := DormantMargin(tc.expect, tc.configured); got != tc.want {
			t.Errorf("DormantMargin(%v, %v) = %v, want %v", tc.expect, tc.configured, got, tc.want)
		}
	}
}

// sleeper returns OpenArgs of a device that checks in every period.
func sleeper(id string, period, margin time.Duration) OpenArgs {
	a := args(id, "n1", "sensor")
	a.Expect, a.Margin = period, margin
	return a
}

// TestDormant walks a sleeping device through its cycle on a fake clock,
// step by step, and checks what observers are shown after each step.
func TestDormant(t *testing.T) {
	const period, margin = time.Hour, 6 * time.Minute
	type step struct {
		name string
		at   time.Duration
		do   func(t *testing.T, u User, now time.Time) User
		// what Derive shows after the step
		status Status
		next   time.Duration // NextExpected - base (dormant only)
	}
	open := func(a OpenArgs) func(*testing.T, User, time.Time) User {
		return func(t *testing.T, u User, now time.Time) User {
			u2, _, _, err := u.Open(a, now)
			if err != nil {
				t.Fatal(err)
			}
			return u2
		}
	}
	end := func(id string, reason EndReason) func(*testing.T, User, time.Time) User {
		return func(t *testing.T, u User, now time.Time) User {
			i, ok := u.find(id)
			if !ok {
				t.Fatalf("no live session %s", id)
			}
			u2, _, err := u.End(id, u.Sessions[i].Epoch, reason, nil, now)
			if err != nil {
				t.Fatal(err)
			}
			return u2
		}
	}
	miss := func(want bool) func(*testing.T, User, time.Time) User {
		return func(t *testing.T, u User, now time.Time) User {
			u2, m, ok := u.Miss(now)
			if ok != want {
				t.Fatalf("Miss at %v = %v, want %v", now.Sub(base), ok, want)
			}
			if ok && (m.EndReason != EndMissed || u2.Ended[0].EndReason != EndMissed || u2.Dormant != nil) {
				t.Fatalf("Miss ended %+v, record %+v", m, u2)
			}
			return u2
		}
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"checks in on time, again and again", []step{
			{"connect", 0, open(sleeper("s", period, margin)), Online, 0},
			{"clean end", time.Minute, end("s", EndClean), Dormant, time.Minute + period},
			{"reaper before due", time.Minute + period + margin - time.Millisecond, miss(false), Dormant, time.Minute + period},
			{"checks in late but within the margin", time.Minute + period + 5*time.Minute, open(sleeper("s", period, margin)), Online, 0},
			{"clean end again", 2*period + time.Minute, end("s", EndClean), Dormant, 3*period + time.Minute},
		}},
		{"misses its check-in", []step{
			{"connect", 0, open(sleeper("s", period, margin)), Online, 0},
			{"clean end", 0, end("s", EndClean), Dormant, period},
			{"reaper at due", period + margin, miss(true), Offline, 0},
			{"reaper again", period + 2*margin, miss(false), Offline, 0},
			{"comes back", 2 * period, open(sleeper("s", period, margin)), Online, 0},
		}},
		{"another client id checks in", []step{
			{"connect", 0, open(sleeper("s1", period, margin)), Online, 0},
			{"clean end", 0, end("s1", EndClean), Dormant, period},
			{"connects as s2", period, open(sleeper("s2", 2*period, margin)), Online, 0},
			{"nothing to miss", 2 * period, miss(false), Online, 0},
			{"s2 ends clean", 2 * period, end("s2", EndClean), Dormant, 4 * period},
		}},
		{"an unclean end is offline", []step{
			{"connect", 0, open(sleeper("s", period, margin)), Online, 0},
			{"network end", time.Minute, end("s", EndNetwork), Offline, 0},
			{"nothing to miss", 2 * period, miss(false), Offline, 0},
		}},
		{"a device that declared nothing is offline", []step{
			{"connect", 0, open(args("s", "n1", "")), Online, 0},
			{"clean end", time.Minute, end("s", EndClean), Offline, 0},
		}},
		{"another live session: no dormant", []step{
			{"phone", 0, open(args("phone", "n1", "phone")), Online, 0},
			{"sensor", 0, open(sleeper("s", period, margin)), Online, 0},
			{"sensor ends clean", time.Minute, end("s", EndClean), Online, 0},
			{"phone ends clean", 2 * time.Minute, end("phone", EndClean), Offline, 0},
		}},
		{"a node sweep does not end it", []step{
			{"connect", 0, open(sleeper("s", period, margin)), Online, 0},
			{"clean end", 0, end("s", EndClean), Dormant, period},
			{"node n1 lost", time.Minute, func(t *testing.T, u User, now time.Time) User {
				u2, ended := u.EndNode("n1", EndNodeLost, now)
				if len(ended) != 0 {
					t.Fatalf("EndNode ended %+v", ended)
				}
				return u2
			}, Dormant, period},
			{"renew does nothing", 2 * time.Minute, func(t *testing.T, u User, now time.Time) User {
				if _, err := u.Renew("s", u.Dormant.Epoch, now, time.Hour); err == nil {
					t.Fatal("Renew renewed a dormant session")
				}
				u2, reaped := u.Reap(now.Add(10 * time.Hour))
				if len(reaped) != 0 {
					t.Fatalf("Reap reaped %+v", reaped)
				}
				return u2
			}, Dormant, period},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var u User
			for _, st := range tc.steps {
				now := at(st.at)
				u = st.do(t, u, now)
				p := Derive(u, Rules{})
				if p.Status != st.status {
					t.Fatalf("%s: status %s, want %s", st.name, p.Status, st.status)
				}
				var next time.Time
				if st.status == Dormant {
					next = at(st.next)
					if len(p.Sessions) != 0 || p.LastSeen.IsZero() {
						t.Fatalf("%s: dormant with sessions %v, last seen %v", st.name, p.Sessions, p.LastSeen)
					}
				}
				if !p.NextExpected.Equal(next) {
					t.Fatalf("%s: next expected %v, want %v", st.name, p.NextExpected.Sub(base), st.next)
				}
			}
		})
	}
}

// TestDormantCommit: the versions move with dormant, next_expected and the
// missed end, and since is the end's (dormant) and last seen (offline).
func TestDormantCommit(t *testing.T) {
	var u User
	u, _ = mustOpen(t, u, sleeper("s", time.Hour, time.Minute), base)
	u, _, _ = u.Commit(Rules{}, base)
	u, _, err := u.End("s", u.Sessions[0].Epoch, EndClean, nil, at(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	u, p, changed := u.Commit(Rules{}, at(time.Second))
	if !changed || p.Status != Dormant || !p.Since.Equal(at(time.Second)) || !p.NextExpected.Equal(at(time.Hour+time.Second)) {
		t.Fatalf("after the clean end: %v %+v", changed, p)
	}
	if _, _, changed := u.Commit(Rules{}, at(2*time.Second)); changed {
		t.Fatal("a second commit changed")
	}
	u, _, ok := u.Miss(at(time.Hour + time.Minute + time.Second))
	if !ok {
		t.Fatal("not missed")
	}
	_, p, changed = u.Commit(Rules{}, at(time.Hour+time.Minute+time.Second))
	if !changed || p.Status != Offline || !p.NextExpected.IsZero() || !p.LastSeen.Equal(at(time.Second)) || !p.Since.Equal(at(time.Second)) {
		t.Fatalf("after the miss: %v %+v", changed, p)
	}
}

func TestOpenArgsExpect(t *testing.T) {
	for _, tc := range []struct {
		expect, margin time.Duration
		ok             bool
	}{
		{0, 0, true}, {time.Hour, time.Minute, true}, {-1, 0, false}, {time.Hour, -1, false}, {MaxExpect + 1, 0, false},
	} {
		a := sleeper("s", tc.expect, tc.margin)
		if err := a.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(expect %v, margin %v) = %v", tc.expect, tc.margin, err)
		}
	}
}

// TestPacingDormant: a clean end to dormant is debounced as a clean end
// to offline is; a missed check-in is shown at once (its margin was its
// grace), and is no flap.
func TestPacingDormant(t *testing.T) {
	rules := Pacing{Grace: 5 * time.Second, Debounce: time.Second, WillDelayMax: 30 * time.Second,
		FlapWindow: time.Minute, FlapEnds: 3, FlapGrace: 30 * time.Second}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := time.Second
	steps := []paceStep{
		{at: 0, status: Online, want: Online},
		{at: 10 * s, status: Dormant, cause: Cause{Ended: EndClean}},
		{at: 10*s + 999*time.Millisecond, release: true},
		{at: 11 * s, release: true, want: Dormant},
		{at: 20 * s, status: Online, want: Online}, // checks in
		{at: 21 * s, status: Dormant, cause: Cause{Ended: EndClean}},
		{at: 22 * s, release: true, want: Dormant},
		{at: 30 * s, status: Offline, cause: Cause{Ended: EndMissed}, want: Offline},
	}
	var p Pace
	var shown Shown
	v := uint64(0)
	for i, st := range steps {
		now := t0.Add(st.at)
		var got Aggregate
		if st.release {
			p, got = rules.Release(p, shown, now)
		} else {
			v++
			p, got = rules.Offer(p, shown, Aggregate{User: "u", Status: st.status, Version: v, Since: now}, st.cause, now)
		}
		if got.Status != st.want {
			t.Fatalf("step %d (+%v): shown %q, want %q (pace %+v)", i, st.at, got.Status, st.want, p)
		}
		if got.Version != 0 {
			shown = Shown{Version: got.Version, Status: got.Status, Since: got.Since}
		}
	}
	if len(p.Ends) != 0 {
		t.Fatalf("a missed check-in counted as a flap: %v", p.Ends)
	}
}

// The tracker's plan opens a session with the period and margin its
// connection declared.
func TestPlanCarriesExpect(t *testing.T) {
	w := Wanted{Conn: 1, User: "alice", Status: Online, Established: true, Live: true, Expect: time.Hour, Margin: time.Minute}
	got := Plan{Node: "n1", TTL: time.Minute}.Next("s", w, Written{})
	if got.Kind != WriteOpen || got.Open.Expect != time.Hour || got.Open.Margin != time.Minute {
		t.Fatalf("Next = %+v", got)
	}
}
