package presence

import (
	"testing"
	"time"
)

// The idle decision with a fake clock: every row is one session at one
// instant.
func TestIdleDecide(t *testing.T) {
	const after = 10 * time.Minute
	last := base
	cases := []struct {
		name  string
		now   time.Time
		own   Status
		auto  bool
		after time.Duration
		want  IdleAction
	}{
		{"active just now: nothing", at(0), Online, false, after, IdleKeep},
		{"quiet for less than idle_after: nothing", at(after - time.Nanosecond), Online, false, after, IdleKeep},
		{"quiet for idle_after: enter", at(after), Online, false, after, IdleEnter},
		{"quiet for long: enter", at(5 * after), Online, false, after, IdleEnter},
		{"off (0): never", at(24 * time.Hour), Online, false, 0, IdleKeep},
		{"away set by the user is kept", at(5 * after), Away, false, after, IdleKeep},
		{"busy set by the user is kept", at(5 * after), Busy, false, after, IdleKeep},
		{"dnd set by the user is kept", at(5 * after), DND, false, after, IdleKeep},
		{"idle set by the user is the user's, not auto", at(5 * after), Idle, false, after, IdleKeep},
		{"auto-idle and still quiet: nothing (one write per transition)", at(5 * after), Online, true, after, IdleKeep},
		{"auto-idle, active again: leave", at(after - time.Second), Online, true, after, IdleLeave},
		{"auto-idle, the user set away: leave (the user wins)", at(5 * after), Away, true, after, IdleLeave},
		{"auto-idle, idle switched off for the label: leave", at(5 * after), Online, true, 0, IdleLeave},
		{"clock stepped back: not quiet", at(-time.Hour), Online, false, after, IdleKeep},
	}
	for _, tc := range cases {
		if got := IdleDecide(last, tc.own, tc.auto, tc.after, tc.now); got != tc.want {
			t.Errorf("%s: IdleDecide = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A session through a day, driven by a fake clock: the decision is applied
// as the tracker applies it, and each transition happens once.
func TestIdleLifecycle(t *testing.T) {
	const after = time.Minute
	a := NewActivity(at(0))
	own := Online
	var transitions []string
	check := func(now time.Time) {
		switch IdleDecide(a.Last(), own, a.AutoIdle(), after, now) {
		case IdleEnter:
			if a.MarkIdle(a.Last()) {
				transitions = append(transitions, "idle")
			}
		case IdleLeave:
			a.ClearIdle()
			transitions = append(transitions, "back")
		}
	}
	for s := time.Duration(0); s <= 3*after; s += 10 * time.Second {
		check(at(s)) // quiet: idle once at 1m, then nothing
	}
	if a.Touch(at(3*after + time.Second)) { // activity: back at once (the hook's path)
		transitions = append(transitions, "back")
	}
	check(at(3*after + 2*time.Second))
	own = Away // the user sets away; quiet for long: never auto-idle
	check(at(10 * after))
	want := []string{"idle", "back"}
	if len(transitions) != len(want) || transitions[0] != want[0] || transitions[1] != want[1] {
		t.Fatalf("transitions %v, want %v", transitions, want)
	}
}

// Activity that comes while the checker marks the session idle is never
// lost: MarkIdle refuses when the time moved after the decision.
func TestActivityRace(t *testing.T) {
	a := NewActivity(at(0))
	seen := a.Last()
	a.Touch(at(time.Second)) // activity after the checker read the time
	if a.MarkIdle(seen) {
		t.Fatal("MarkIdle marked a session that was active after the decision")
	}
	if a.AutoIdle() {
		t.Fatal("mark left behind")
	}
	if !a.MarkIdle(a.Last()) || !a.AutoIdle() {
		t.Fatal("MarkIdle refused without activity in between")
	}
	if !a.Touch(at(2*time.Second)) || a.AutoIdle() {
		t.Fatal("Touch of an auto-idle session did not report it once and clear it")
	}
	if a.Touch(at(3 * time.Second)) {
		t.Fatal("Touch reported auto-idle twice")
	}
}

func TestIdleRules(t *testing.T) {
	r := IdleRules{Default: 10 * time.Minute, Devices: map[string]time.Duration{"sensor": 0, "desktop": 5 * time.Minute}}
	for dev, want := range map[string]time.Duration{"": 10 * time.Minute, "phone": 10 * time.Minute, "sensor": 0, "desktop": 5 * time.Minute} {
		if got := r.After(dev); got != want {
			t.Errorf("After(%q) = %v, want %v", dev, got, want)
		}
	}
	if !r.Enabled() || r.Shortest() != 5*time.Minute {
		t.Errorf("Enabled %v Shortest %v", r.Enabled(), r.Shortest())
	}
	off := IdleRules{Devices: map[string]time.Duration{"sensor": 0}}
	if off.Enabled() || off.Shortest() != 0 {
		t.Errorf("off: Enabled %v Shortest %v", off.Enabled(), off.Shortest())
	}
	onlyDesk := IdleRules{Devices: map[string]time.Duration{"desktop": time.Minute}}
	if !onlyDesk.Enabled() || onlyDesk.Shortest() != time.Minute || onlyDesk.After("phone") != 0 {
		t.Errorf("per label only: %v %v %v", onlyDesk.Enabled(), onlyDesk.Shortest(), onlyDesk.After("phone"))
	}
}

// Plan writes the shown status: idle while auto-idle over online, the own
// status otherwise, one update per transition.
func TestPlanAutoIdle(t *testing.T) {
	plan := Plan{Node: "n1", TTL: time.Minute}
	open := Written{Conn: 1, User: "alice", Epoch: 7, Open: true, Status: Online}
	w := Wanted{Conn: 1, User: "alice", Status: Online, Established: true, Live: true, AutoIdle: true}
	got := plan.Next("s", w, open)
	if got.Kind != WriteUpdate || got.Update.Status == nil || *got.Update.Status != Idle || got.Update.Text != nil {
		t.Fatalf("enter: %+v", got)
	}
	h, _ := Applied(open, 1, got, Done, 0)
	if next := plan.Next("s", w, h); next.Kind != WriteNone {
		t.Fatalf("auto-idle written: %+v, want nothing", next)
	}
	w.AutoIdle = false
	if got := plan.Next("s", w, h); got.Kind != WriteUpdate || *got.Update.Status != Online {
		t.Fatalf("leave: %+v", got)
	}
	// Opened again (a store reset) while auto-idle: opened idle.
	w.AutoIdle = true
	if got := plan.Next("s", w, Written{}); got.Kind != WriteOpen || got.Open.Status != Idle {
		t.Fatalf("reopen: %+v", got)
	}
	// Auto-idle never shows over a status the user set.
	w.Status = Away
	if got := plan.Next("s", w, open); got.Kind != WriteUpdate || *got.Update.Status != Away {
		t.Fatalf("away: %+v", got)
	}
}
