package canary

import (
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/slo"
)

var t0 = time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)

func TestPlanRoundTrip(t *testing.T) {
	p := Plan{Kind: slo.Silence, End: t0.Add(1500 * time.Microsecond), Bound: 9500 * time.Millisecond, Cycle: 7}
	for _, sep := range []string{"/", "", ":"} {
		user := UserName("node/a", 2, sep)
		id := p.ClientID(user, sep)
		got, ok := ParsePlan(user, sep, id)
		if !ok || got.Kind != p.Kind || !got.End.Equal(p.End) || got.Bound != p.Bound || got.Cycle != p.Cycle {
			t.Errorf("sep %q: %q -> %+v %v", sep, id, got, ok)
		}
		if err := presence.ValidUser(user); err != nil {
			t.Errorf("sep %q: user %q: %v", sep, user, err)
		}
	}
	if UserName("a/b", 0, "/") != "presenced-canary-a_b-0" || ObserverID("a/b", "/") != "presenced-canary-a_b-observer" {
		t.Error("the separator is not kept out of the names")
	}
	for _, id := range []string{"x", "presenced-canary-n-0/kill.1.1.0", "presenced-canary-n-0/clean.x.1.0", "presenced-canary-n-0/clean.1.1",
		"presenced-canary-n-0/clean.1.0.0", "presenced-canary-n-0/clean.1.1.-1", "presenced-canary-n-0/clean.1.1.0.0"} {
		if _, ok := ParsePlan("presenced-canary-n-0", "/", id); ok {
			t.Errorf("%q parsed", id)
		}
	}
	if !IsUser("presenced-canary-n-0") || IsUser("alice") {
		t.Error("IsUser")
	}
}

// online is user's payload showing session p at version v (µs).
func online(user string, v time.Time, plans ...Plan) presence.Aggregate {
	a := presence.Aggregate{User: user, Status: presence.Online, Version: uint64(v.UnixMicro())}
	for _, p := range plans {
		a.Sessions = append(a.Sessions, presence.SessionView{ID: p.ClientID(user, "/")})
	}
	return a
}

func offline(user string, v time.Time) presence.Aggregate {
	return presence.Aggregate{User: user, Status: presence.Offline, Version: uint64(v.UnixMicro())}
}

// The first message after a follow is the user's state then, not a change:
// no propagation sample, but its session is followed.
func TestWatcherFirstMessage(t *testing.T) {
	const u = "presenced-canary-b-0"
	acct := slo.New(slo.Options{})
	w := newWatcher(acct, "/", slo.Kinds)
	w.follow(u)
	p := Plan{Kind: slo.Clean, End: t0.Add(10 * time.Second), Bound: 5 * time.Second}
	w.shown(t0, online(u, t0.Add(-8*time.Second), p))
	w.shown(t0.Add(11*time.Second), offline(u, t0.Add(11*time.Second)))
	if r := acct.Report(t0.Add(time.Minute)); r.Propagations != 0 || r.All.Ends != 1 || r.All.P99 != 1 {
		t.Errorf("%+v", r)
	}
}

// next says when a tick has something to decide.
func TestWatcherNext(t *testing.T) {
	const u = "presenced-canary-b-0"
	w := newWatcher(slo.New(slo.Options{}), "/", slo.Kinds)
	w.follow(u)
	if got := w.next(t0); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("nothing pending: %v", got)
	}
	p := Plan{Kind: slo.Clean, End: t0.Add(10 * time.Second), Bound: 5 * time.Second}
	w.shown(t0, online(u, t0, p))
	if got := w.next(t0); !got.Equal(t0.Add(20*time.Second + time.Millisecond)) {
		t.Errorf("a miss pending: %v", got)
	}
	w.shown(t0.Add(2*time.Second), offline(u, t0.Add(2*time.Second)))
	if got := w.next(t0.Add(2 * time.Second)); !got.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("an early offline: %v", got)
	}
	if got := w.next(t0.Add(11 * time.Second)); !got.Equal(t0.Add(11*time.Second + 100*time.Millisecond)) {
		t.Errorf("overdue: %v", got)
	}
}

func TestWatcher(t *testing.T) {
	const u = "presenced-canary-b-0"
	s := time.Second
	bound := 10 * s
	type ev struct {
		at  time.Duration
		agg func(now time.Time) presence.Aggregate // nil: a tick
	}
	planAt := func(k slo.Kind, end time.Duration) Plan { return Plan{Kind: k, End: t0.Add(end), Bound: bound} }
	cases := []struct {
		name  string
		evs   []ev
		check func(t *testing.T, r slo.Report, c slo.Counts)
	}{
		{"shown within bound", []ev{
			{1 * s, func(now time.Time) presence.Aggregate {
				return online(u, now.Add(-20*time.Millisecond), planAt(slo.Reset, 20*s))
			}},
			{26 * s, func(now time.Time) presence.Aggregate { return offline(u, now) }},
			{27 * s, nil},
		}, func(t *testing.T, r slo.Report, c slo.Counts) {
			d := r.Detection[1]
			if d.Ends != 1 || d.Within != 1 || d.P99 != 6 {
				t.Errorf("rst: %+v", d)
			}
			if r.Propagations != 1 || r.PropagationP99 != 0.02 {
				t.Errorf("propagation %d %v", r.Propagations, r.PropagationP99)
			}
			if r.ConnectedSeconds != 19 || r.FalseOfflineSeconds != 0 {
				t.Errorf("exposure %v %v", r.ConnectedSeconds, r.FalseOfflineSeconds)
			}
		}},
		{"late", []ev{
			{1 * s, func(now time.Time) presence.Aggregate { return online(u, now, planAt(slo.Silence, 20*s)) }},
			{31 * s, func(now time.Time) presence.Aggregate { return offline(u, now) }},
		}, func(t *testing.T, r slo.Report, c slo.Counts) {
			if d := r.Detection[2]; d.Ends != 1 || d.Within != 0 || d.P99 != 11 || c.Late[2] != 1 {
				t.Errorf("silence: %+v %+v", d, c)
			}
		}},
		{"missed: never shown", []ev{
			{1 * s, func(now time.Time) presence.Aggregate { return online(u, now, planAt(slo.Drain, 20*s)) }},
			{39 * s, nil},
			{41 * s, nil},
			{50 * s, func(now time.Time) presence.Aggregate { return offline(u, now) }}, // after the miss: not counted twice
		}, func(t *testing.T, r slo.Report, c slo.Counts) {
			if d := r.Detection[3]; d.Ends != 1 || d.Missed != 1 || c.Missed[3] != 1 {
				t.Errorf("drain: %+v %+v", d, c)
			}
		}},
		{"missed: the next session came first", []ev{
			{1 * s, func(now time.Time) presence.Aggregate { return online(u, now, planAt(slo.Clean, 20*s)) }},
			{25 * s, func(now time.Time) presence.Aggregate {
				return online(u, now, planAt(slo.Clean, 20*s), planAt(slo.Reset, 44*s))
			}},
		}, func(t *testing.T, r slo.Report, c slo.Counts) {
			if c.Missed[0] != 1 || c.Ends[1] != 0 || r.Propagations != 2 {
				t.Errorf("%+v %+v", r, c)
			}
		}},
		{"sessions never shown: the cycles between are missed", []ev{
			{1 * s, func(now time.Time) presence.Aggregate {
				return online(u, now, Plan{Kind: slo.Silence, End: t0.Add(5 * s), Bound: bound, Cycle: 2})
			}},
			{6 * s, func(now time.Time) presence.Aggregate { return offline(u, now) }},
			{50 * s, func(now time.Time) presence.Aggregate {
				return online(u, now, Plan{Kind: slo.Reset, End: t0.Add(55 * s), Bound: bound, Cycle: 5})
			}},
			{60 * s, func(now time.Time) presence.Aggregate {
				return online(u, now, Plan{Kind: slo.Clean, End: t0.Add(65 * s), Bound: bound, Cycle: 0}) // its node restarted
			}},
		}, func(t *testing.T, r slo.Report, c slo.Counts) {
			// cycles 3 (drain) and 4 (clean) were never shown; 5 is missed too (the restart's session came first).
			if c.Missed != [4]int64{1, 1, 0, 1} || c.Ends != [4]int64{1, 1, 1, 1} {
				t.Errorf("%+v", c)
			}
		}},
		{"false offline, then back online, then the end", []ev{
			{0, func(now time.Time) presence.Aggregate { return online(u, now, planAt(slo.Clean, 20*s)) }},
			{5 * s, func(now time.Time) presence.Aggregate { return offline(u, now) }},
			{8 * s, func(now time.Time) presence.Aggregate { return online(u, now, planAt(slo.Clean, 20*s)) }},
			{20*s + 100*time.Millisecond, func(now time.Time) presence.Aggregate { return offline(u, now) }},
		}, func(t *testing.T, r slo.Report, c slo.Counts) {
			if r.ConnectedSeconds != 20 || r.FalseOfflineSeconds != 3 || r.FalseOfflinePerMillion != 150000 {
				t.Errorf("exposure %+v", r)
			}
			if d := r.Detection[0]; d.Ends != 1 || d.P99 != 0.1 {
				t.Errorf("clean %+v", d)
			}
		}},
		{"shown offline early and never back: detected at its end, offline counted to it", []ev{
			{0, func(now time.Time) presence.Aggregate { return online(u, now, planAt(slo.Reset, 20*s)) }},
			{15 * s, func(now time.Time) presence.Aggregate { return offline(u, now) }},
			{21 * s, nil},
		}, func(t *testing.T, r slo.Report, c slo.Counts) {
			if r.FalseOfflineSeconds != 5 || r.ConnectedSeconds != 20 || r.Detection[1].Ends != 1 || r.Detection[1].P99 != 0 {
				t.Errorf("%+v", r)
			}
		}},
		{"an old version or another user changes nothing", []ev{
			{0, func(now time.Time) presence.Aggregate { return online(u, now, planAt(slo.Reset, 20*s)) }},
			{21 * s, func(now time.Time) presence.Aggregate { return offline(u, t0.Add(-time.Second)) }},
			{21 * s, func(now time.Time) presence.Aggregate { return offline("alice", now) }},
		}, func(t *testing.T, r slo.Report, c slo.Counts) {
			if c.Ends != [4]int64{} {
				t.Errorf("%+v", c)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := testkit.NewClock(t0)
			acct := slo.New(slo.Options{})
			w := newWatcher(acct, "/", slo.Kinds)
			w.follow(u)
			w.shown(t0.Add(-time.Hour), offline(u, t0.Add(-time.Hour))) // its state when followed
			for _, e := range c.evs {
				clock.Advance(t0.Add(e.at).Sub(clock.Now()))
				if e.agg == nil {
					w.tick(clock.Now())
				} else {
					w.shown(clock.Now(), e.agg(clock.Now()))
				}
			}
			c.check(t, acct.Report(clock.Now()), acct.Counts())
		})
	}
}
