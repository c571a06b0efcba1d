package presence

import (
	"testing"
	"time"
)

// paceStep is one input to a pacer: an offered aggregate (status and cause),
// or a release look at a time (release true).
type paceStep struct {
	at      time.Duration // since t0
	release bool
	status  Status
	cause   Cause
	want    Status // what is shown by this step ("" nothing)
}

func TestPacing(t *testing.T) {
	rules := Pacing{Grace: 5 * time.Second, Debounce: time.Second, WillDelayMax: 30 * time.Second,
		Dwell: time.Second, FlapWindow: time.Minute, FlapEnds: 3, FlapGrace: 30 * time.Second}
	net := Cause{Ended: EndNetwork}
	clean := Cause{Ended: EndClean}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := time.Second
	cases := []struct {
		name  string
		rules Pacing
		steps []paceStep
	}{
		{"first sight is shown at once", rules, []paceStep{
			{at: 0, status: Online, want: Online},
		}},
		{"a network drop is held for the grace, then shown", rules, []paceStep{
			{at: 0, status: Online, want: Online},
			{at: 10 * s, status: Offline, cause: net},
			{at: 14*s + 999*time.Millisecond, release: true},
			{at: 15 * s, release: true, want: Offline},
		}},
		{"a session back within the grace hides the drop", rules, []paceStep{
			{at: 0, status: Online, want: Online},
			{at: 10 * s, status: Offline, cause: net},
			{at: 11 * s, status: Online, want: Online},
			{at: 20 * s, release: true},
		}},
		{"every unclean reason gets the grace", rules, []paceStep{
			{at: 0, status: Online, want: Online},
			{at: 10 * s, status: Offline, cause: Cause{Ended: EndNodeLost}},
			{at: 14 * s, release: true},
			{at: 15 * s, release: true, want: Offline},
			{at: 20 * s, status: Online, want: Online},
			{at: 30 * s, status: Offline, cause: Cause{Ended: EndTimeout}},
			{at: 34 * s, release: true},
			{at: 35 * s, release: true, want: Offline},
		}},
		{"a clean disconnect is debounced only", rules, []paceStep{
			{at: 0, status: Online, want: Online},
			{at: 10 * s, status: Offline, cause: clean},
			{at: 10*s + 999*time.Millisecond, release: true},
			{at: 11 * s, release: true, want: Offline},
		}},
		{"a clean reconnect within the debounce is never shown", rules, []paceStep{
			{at: 0, status: Online, want: Online},
			{at: 10 * s, status: Offline, cause: clean},
			{at: 10*s + 20*time.Millisecond, status: Online, want: Online},
			{at: 12 * s, release: true},
		}},
		{"a will delay stretches the hold, capped", rules, []paceStep{
			{at: 0, status: Online, want: Online},
			{at: 10 * s, status: Offline, cause: Cause{Ended: EndNetwork, WillDelay: 20 * s}},
			{at: 29 * s, release: true},
			{at: 30 * s, release: true, want: Offline},
			{at: 40 * s, status: Online, want: Online},
			{at: 50 * s, status: Offline, cause: Cause{Ended: EndNetwork, WillDelay: time.Hour}},
			{at: 79 * s, release: true},
			{at: 80 * s, release: true, want: Offline},
		}},
		{"an offline whose end was coalesced away still gets the grace", rules, []paceStep{
			{at: 0, status: Online, want: Online},
			{at: 10 * s, status: Offline},
			{at: 14 * s, release: true},
			{at: 15 * s, release: true, want: Offline},
		}},
		{"a device dropping from two leaves the dot as the return says", rules, []paceStep{
			{at: 0, status: Online, want: Online},
			{at: 10 * s, status: Away, cause: net}, // the phone (online) dropped; the laptop says away
			{at: 12 * s, status: Online, want: Online},
			{at: 30 * s, release: true},
		}},
		{"a change of the held status keeps the held due time", rules, []paceStep{
			{at: 0, status: Online, want: Online},
			{at: 10 * s, status: Away, cause: net},
			{at: 11 * s, status: Away}, // the laptop's text changed
			{at: 14 * s, release: true},
			{at: 15 * s, release: true, want: Away},
		}},
		{"status changes are at least the dwell apart, and the last gets out", rules, []paceStep{
			{at: 0, status: Online, want: Online},
			{at: 10 * s, status: DND, want: DND},
			{at: 10*s + 200*time.Millisecond, status: Online},
			{at: 10*s + 400*time.Millisecond, status: Busy},
			{at: 10*s + 999*time.Millisecond, release: true},
			{at: 11 * s, release: true, want: Busy},
		}},
		{"a flapping user is held for the flap grace", rules, []paceStep{
			{at: 0, status: Online, want: Online},
			{at: 10 * s, status: Offline, cause: net},
			{at: 16 * s, release: true, want: Offline}, // 1st end: out for 6 s, shown
			{at: 18 * s, status: Online, want: Online},
			{at: 20 * s, status: Offline, cause: net},
			{at: 21 * s, status: Online, want: Online}, // 2nd end: hidden
			{at: 30 * s, status: Offline, cause: net},  // 3rd end within a minute: flapping
			{at: 36 * s, release: true},                // beyond the grace, still held
			{at: 42 * s, status: Online, want: Online},
			{at: 50 * s, status: Offline, cause: net},
			{at: 79 * s, release: true},
			{at: 80 * s, release: true, want: Offline}, // the final state gets out
		}},
		{"clean leaves are no flaps: the last is shown after the debounce", rules, []paceStep{
			{at: 0, status: Online, want: Online},
			{at: 1 * s, status: Offline, cause: clean},
			{at: 1*s + 10*time.Millisecond, status: Online, want: Online},
			{at: 2 * s, status: Offline, cause: clean},
			{at: 2*s + 10*time.Millisecond, status: Online, want: Online},
			{at: 3 * s, status: Offline, cause: clean},
			{at: 3*s + 10*time.Millisecond, status: Online, want: Online},
			{at: 4 * s, status: Offline, cause: clean},
			{at: 4*s + 999*time.Millisecond, release: true},
			{at: 5 * s, release: true, want: Offline},
		}},
		{"the zero pacing holds nothing", Pacing{}, []paceStep{
			{at: 0, status: Online, want: Online},
			{at: 1 * s, status: Offline, cause: net, want: Offline},
			{at: 1 * s, status: Online, want: Online},
			{at: 1 * s, status: Offline, cause: clean, want: Offline},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p Pace
			var shown Shown
			version := uint64(0)
			for i, st := range c.steps {
				now := t0.Add(st.at)
				var got Aggregate
				if st.release {
					p, got = c.rules.Release(p, shown, now)
				} else {
					version++
					a := Aggregate{User: "alice", Status: st.status, Version: version, Since: now}
					p, got = c.rules.Offer(p, shown, a, st.cause, now)
				}
				if got.Status != st.want {
					t.Fatalf("step %d (+%v): shown %q, want %q (pace %+v)", i, st.at, got.Status, st.want, p)
				}
				if got.Version != 0 {
					if got.Version <= shown.Version {
						t.Fatalf("step %d: version %d shown after %d", i, got.Version, shown.Version)
					}
					if got.Status == shown.Status && !got.Since.Equal(shown.Since) {
						t.Fatalf("step %d: since moved from %v to %v while the status stayed %s", i, shown.Since, got.Since, got.Status)
					}
					shown = Shown{Version: got.Version, Status: got.Status, Since: got.Since}
				}
			}
			if p.Holding() {
				t.Fatalf("a change is still held at the end: %+v", p.Held)
			}
		})
	}
}

func TestPacingIgnoresOldVersions(t *testing.T) {
	r := Pacing{Grace: 5 * time.Second}
	now := time.Unix(1e9, 0)
	shown := Shown{Version: 10, Status: Online, Since: now}
	p, got := r.Offer(Pace{}, shown, Aggregate{User: "a", Status: Offline, Version: 9}, Cause{Ended: EndNetwork}, now)
	if got.Version != 0 || p.Holding() {
		t.Fatalf("an old version was taken: %+v %+v", got, p)
	}
	p, _ = r.Offer(Pace{}, shown, Aggregate{User: "a", Status: Offline, Version: 12}, Cause{Ended: EndNetwork}, now)
	p2, got := r.Offer(p, shown, Aggregate{User: "a", Status: Offline, Version: 11}, Cause{}, now)
	if got.Version != 0 || p2.Held.Version != 12 {
		t.Fatalf("a version below the held one replaced it: %+v", p2.Held)
	}
}

func TestPacingFlappingAndDormant(t *testing.T) {
	r := Pacing{Grace: time.Second, FlapWindow: time.Minute, FlapEnds: 2, FlapGrace: 10 * time.Second, Dwell: time.Second}
	t0 := time.Unix(1e9, 0)
	shown := Shown{Version: 1, Status: Online, Since: t0}
	var p Pace
	v := uint64(1)
	for i := 0; i < 2; i++ {
		v++
		p, _ = r.Offer(p, shown, Aggregate{User: "a", Status: Offline, Version: v}, Cause{Ended: EndNetwork}, t0.Add(time.Duration(i)*time.Second))
		v++
		var got Aggregate
		p, got = r.Offer(p, shown, Aggregate{User: "a", Status: Online, Version: v}, Cause{}, t0.Add(time.Duration(i)*time.Second+100*time.Millisecond))
		shown = Shown{Version: got.Version, Status: got.Status, Since: got.Since}
	}
	if !r.Flapping(p, t0.Add(2*time.Second)) {
		t.Fatal("two ends within the window: not flapping")
	}
	if r.Flapping(p, t0.Add(time.Minute+2*time.Second)) {
		t.Fatal("still flapping once the window passed")
	}
	if r.Dormant(p, t0.Add(2*time.Second)) {
		t.Fatal("dormant while flapping")
	}
	if !r.Dormant(p, t0.Add(2*time.Minute)) {
		t.Fatal("not dormant long after")
	}
}

// TestPacingCarriesEnded: a held change replaced by a newer one hands on
// the sessions it ended, so that the shown lifecycle outputs tell each end.
func TestPacingCarriesEnded(t *testing.T) {
	r := Pacing{Grace: 5 * time.Second}
	now := time.Unix(1e9, 0)
	shown := Shown{Version: 10, Status: Online, Since: now}
	e1 := EndedView{SessionView: SessionView{ID: "phone", Epoch: 1}, Reason: EndNetwork, EndedAt: now}
	p, got := r.Offer(Pace{}, shown, Aggregate{User: "a", Status: Offline, Version: 11, Ended: []EndedView{e1}}, Cause{Ended: EndNetwork}, now)
	if got.Version != 0 || !p.Holding() {
		t.Fatalf("the offline was not held: %+v", p)
	}
	back := Aggregate{User: "a", Status: Online, Version: 12, Sessions: []SessionView{{ID: "phone", Epoch: 2}}}
	p, got = r.Offer(p, shown, back, Cause{}, now.Add(time.Second))
	if got.Version != 12 || len(got.Ended) != 1 || got.Ended[0] != e1 {
		t.Fatalf("shown %+v, want version 12 carrying the held change's end %+v", got, e1)
	}
	if len(back.Ended) != 0 {
		t.Fatal("the offered aggregate's array was written to")
	}
}
