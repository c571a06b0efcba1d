package main

import (
	"bytes"
	"testing"
	"time"
)

const sec = time.Second

func msec(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// wild is an observer on presence/users/+ subscribed at 0.
func wild(tl Timeline) ObserverView {
	return ObserverView{TL: tl, Since: 0, Covers: func(string) bool { return true }}
}

func on(at time.Duration, gens ...Gen) Obs {
	return Obs{At: at, Online: true, Status: "online", Gens: gens}
}

func off(at time.Duration, gens ...Gen) Obs {
	return Obs{At: at, Online: false, Status: "offline", Gens: gens}
}

func versioned(o Obs, v uint64) Obs {
	o.Version = v
	o.Hash = v*31 + uint64(len(o.Status))
	return o
}

func TestGhostCounted(t *testing.T) {
	ivs := []Interval{{User: "u", Up: 0, Down: 10 * sec, Window: detectWindow(2 * sec)}}
	// Still shown online at death + window (10 s + 4 s): a ghost.
	ev := evaluate(ivs, []ObserverView{wild(Timeline{"u": {on(msec(5))}})}, 20*sec)
	if ev.Ghosts != 1 || ev.WrongOffline != 0 {
		t.Fatalf("ghost not counted: %+v", ev)
	}
	// Offline shown within the window: no ghost.
	ev = evaluate(ivs, []ObserverView{wild(Timeline{"u": {on(msec(5)), off(13 * sec)}})}, 20*sec)
	if ev.Ghosts != 0 {
		t.Fatalf("ghost counted for a death detected in time: %+v", ev)
	}
	// Offline shown only after the window: a ghost.
	ev = evaluate(ivs, []ObserverView{wild(Timeline{"u": {on(msec(5)), off(15 * sec)}})}, 20*sec)
	if ev.Ghosts != 1 {
		t.Fatalf("late detection not a ghost: %+v", ev)
	}
	// The run ended before the window: not judged.
	ev = evaluate(ivs, []ObserverView{wild(Timeline{"u": {on(msec(5))}})}, 12*sec)
	if ev.Ghosts != 0 {
		t.Fatalf("judged before the window: %+v", ev)
	}
	// A clean disconnect has a 1 s window.
	clean := []Interval{{User: "u", Up: 0, Down: 10 * sec, Window: cleanWindow}}
	ev = evaluate(clean, []ObserverView{wild(Timeline{"u": {on(msec(5)), off(10*sec + 1500*time.Millisecond)}})}, 20*sec)
	if ev.Ghosts != 1 {
		t.Fatalf("slow clean disconnect not a ghost: %+v", ev)
	}
	// Back online within the window: nothing to judge.
	back := []Interval{
		{User: "u", Up: 0, Down: 10 * sec, Window: detectWindow(2 * sec)},
		{User: "u", Up: 11 * sec, Down: forever},
	}
	ev = evaluate(back, []ObserverView{wild(Timeline{"u": {on(msec(5))}})}, 20*sec)
	if ev.Ghosts != 0 {
		t.Fatalf("ghost counted for a user live again: %+v", ev)
	}
}

func TestWrongOfflineCounted(t *testing.T) {
	// Two devices: the laptop leaves at 5 s, the phone stays.
	ivs := []Interval{
		{User: "u", Up: 0, Down: forever},
		{User: "u", Up: msec(100), Down: 5 * sec, Window: cleanWindow},
	}
	tl := Timeline{"u": {on(msec(3)), off(5*sec + msec(2)), on(5*sec + msec(500))}}
	ev := evaluate(ivs, []ObserverView{wild(tl)}, 10*sec)
	if ev.WrongOffline != 1 {
		t.Fatalf("wrong offline not counted: %+v", ev)
	}
	// A takeover: the old connection ends as the new one is up. The user
	// is live throughout, so an offline shown in between is wrong even
	// though the new connection is only milliseconds old.
	ivs = []Interval{
		{User: "u", Up: 0, Down: 5 * sec, Window: detectWindow(30 * sec)},
		{User: "u", Up: 5 * sec, Down: forever},
	}
	tl = Timeline{"u": {on(msec(3)), off(5*sec + msec(1)), on(5*sec + msec(3))}}
	if ev := evaluate(ivs, []ObserverView{wild(tl)}, 10*sec); ev.WrongOffline != 1 {
		t.Fatalf("takeover offline not counted: %+v", ev)
	}
	// Within the grace after coming up: not counted.
	ivs = []Interval{{User: "u", Up: 10 * sec, Down: forever}}
	tl = Timeline{"u": {off(msec(1)), on(10*sec + msec(600))}}
	if ev := evaluate(ivs, []ObserverView{wild(tl)}, 20*sec); ev.WrongOffline != 0 {
		t.Fatalf("offline within the grace counted: %+v", ev)
	}
	// Never shown a live user at all: the observer shows it offline.
	ivs = []Interval{{User: "u", Up: 0, Down: forever}}
	ev = evaluate(ivs, []ObserverView{wild(Timeline{})}, 20*sec)
	if ev.WrongOffline != 1 || ev.NeverShown != 1 {
		t.Fatalf("never shown not counted: %+v", ev)
	}
	// An observer whose subscription does not cover the user is not judged.
	narrow := ObserverView{TL: Timeline{}, Covers: func(u string) bool { return u == "v" }}
	if ev := evaluate(ivs, []ObserverView{narrow}, 20*sec); ev.WrongOffline != 0 {
		t.Fatalf("uncovered user judged: %+v", ev)
	}
}

func TestStaleOverwriteCounted(t *testing.T) {
	// The old connection's will arrives after the new connection's online.
	ivs := []Interval{
		{User: "u", Up: 0, Down: 5 * sec, Window: detectWindow(30 * sec)},
		{User: "u", Up: 5 * sec, Down: forever},
	}
	tl := Timeline{"u": {
		on(msec(3), Gen{"u-d", 1}),
		on(5*sec+msec(2), Gen{"u-d", 2}),
		off(5*sec+msec(4), Gen{"u-d", 1}),
	}}
	ev := evaluate(ivs, []ObserverView{wild(tl)}, 10*sec)
	if ev.StaleOverwrites != 1 {
		t.Fatalf("stale overwrite not counted: %+v", ev)
	}
	if ev.WrongOffline != 1 {
		t.Fatalf("the stale offline left shown is also a wrong offline: %+v", ev)
	}
	// In order: nothing stale.
	tl = Timeline{"u": {on(msec(3), Gen{"u-d", 1}), on(5*sec+msec(2), Gen{"u-d", 2})}}
	if ev := evaluate(ivs, []ObserverView{wild(tl)}, 10*sec); ev.StaleOverwrites != 0 {
		t.Fatalf("stale counted: %+v", ev)
	}
}

func TestBackwardVersionCounted(t *testing.T) {
	ivs := []Interval{{User: "u", Up: 0, Down: forever}}
	tl := Timeline{"u": {
		versioned(on(msec(3)), 5),
		versioned(on(msec(10)), 7),
		versioned(off(msec(1500)), 6), // backwards: dropped, so not shown
		versioned(on(msec(1600)), 7),  // the same message again: a duplicate
	}}
	ev := evaluate(ivs, []ObserverView{wild(tl)}, 10*sec)
	if ev.BackwardVersion != 1 {
		t.Fatalf("backward version not counted: %+v", ev)
	}
	if ev.Duplicates != 1 {
		t.Fatalf("duplicate not seen: %+v", ev)
	}
	if ev.WrongOffline != 0 {
		t.Fatalf("a dropped backward message was shown: %+v", ev)
	}
	// The same version with another payload is a fault too.
	other := versioned(off(msec(2000)), 7)
	other.Hash++
	tl["u"] = append(tl["u"], other)
	if ev := evaluate(ivs, []ObserverView{wild(tl)}, 10*sec); ev.BackwardVersion != 2 {
		t.Fatalf("equal version with another payload not counted: %+v", ev)
	}
	// Versions strictly increasing: nothing.
	tl = Timeline{"u": {versioned(on(msec(3)), 5), versioned(on(msec(10)), 6)}}
	if ev := evaluate(ivs, []ObserverView{wild(tl)}, 10*sec); ev.BackwardVersion != 0 {
		t.Fatalf("counted: %+v", ev)
	}
}

func TestSpansMergeTouching(t *testing.T) {
	sp := spans([]Interval{
		{Up: 5 * sec, Down: 9 * sec, Window: 1},
		{Up: 0, Down: 5 * sec, Window: 2},
		{Up: 10 * sec, Down: forever},
	})
	if len(sp) != 2 || sp[0].up != 0 || sp[0].down != 9*sec || sp[0].window != 1 || sp[1].down != forever {
		t.Fatalf("spans: %+v", sp)
	}
}

func TestParsePresenced(t *testing.T) {
	p := []byte(`{"user":"alice","status":"away","text":"t12","version":1764471000456001,"since":"2026-11-30T03:30:00.122Z","last_seen":null,"sessions":[{"id":"alice-phone","epoch":1764471000122000,"node":"n","device":"phone","status":"away","connected_at":"2026-11-30T03:30:00.122Z"}]}`)
	o, ok := parsePresenced("alice", p)
	if !ok || !o.Online || o.Status != "away" || o.Text != "t12" || o.Version != 1764471000456001 ||
		len(o.Gens) != 1 || o.Gens[0] != (Gen{"alice-phone", 1764471000122000}) {
		t.Fatalf("parsed %+v %v", o, ok)
	}
	o, ok = parsePresenced("alice", []byte(`{"user":"alice","status":"offline","text":"","version":9,"sessions":[]}`))
	if !ok || o.Online || len(o.Gens) != 0 {
		t.Fatalf("offline parsed %+v %v", o, ok)
	}
	if _, ok := parsePresenced("alice", []byte("online")); ok {
		t.Fatal("raw payload parsed as JSON")
	}
}

func TestParseLastWill(t *testing.T) {
	o, ok := parseLastWill("u", lwPayload("away", "u-d", 42, "t7"))
	if !ok || !o.Online || o.Status != "away" || o.Text != "t7" || len(o.Gens) != 1 || o.Gens[0] != (Gen{"u-d", 42}) {
		t.Fatalf("parsed %+v %v", o, ok)
	}
	o, ok = parseLastWill("u", lwPayload("offline", "u-d", 43, ""))
	if !ok || o.Online || o.Gens[0].Gen != 43 {
		t.Fatalf("parsed %+v %v", o, ok)
	}
	if _, ok := parseLastWill("u", []byte("garbage")); ok {
		t.Fatal("garbage parsed")
	}
}

func TestLatencyMatching(t *testing.T) {
	e := &runEnv{sys: &system{name: "presenced-memory"}}
	acts := []action{
		{kind: 'c', at: 0},
		{kind: 's', at: msec(500), tag: "t1"},
		{kind: 'd', at: msec(1000)},
		{kind: 'c', at: msec(1500)},
		{kind: 's', at: msec(1510), tag: "t2"},
		{kind: 'd', at: msec(2500)},
	}
	obs := []Obs{
		on(msec(2)),
		{At: msec(503), Online: true, Status: "away", Text: "t1"},
		off(msec(1004)),
		// connect and status coalesced into one change
		{At: msec(1520), Online: true, Status: "away", Text: "t2"},
	}
	lat, missed := e.latencies(acts, obs)
	want := []float64{2, 3, 4, 20, 10}
	if missed != 1 || len(lat) != len(want) {
		t.Fatalf("latencies %v missed %d", lat, missed)
	}
	for i := range want {
		if lat[i] != want[i] {
			t.Fatalf("latencies %v, want %v", lat, want)
		}
	}
}

func TestSummaries(t *testing.T) {
	var v []float64
	for i := 1; i <= 1000; i++ {
		v = append(v, float64(i))
	}
	sm := summarize(v)
	if sm.N != 1000 || sm.P50 != 500 || sm.P99 != 990 || sm.Max != 1000 {
		t.Fatalf("summary %+v", sm)
	}
	if summarize(nil) != nil {
		t.Fatal("summary of nothing")
	}
	th := thin(v, 100)
	if len(th) != 100 || th[0] != 1 || th[99] != 991 {
		t.Fatalf("thinned: %d values, %v … %v", len(th), th[0], th[len(th)-1])
	}
	if len(thin(v[:10], 2000)) != 10 {
		t.Fatal("thin grew")
	}
}

func TestFixedPackets(t *testing.T) {
	if !bytes.Equal(pingreqBytes, []byte{0xC0, 0x00}) {
		t.Fatalf("PINGREQ %x", pingreqBytes)
	}
	if !bytes.Equal(disconnectBytes, []byte{0xE0, 0x00}) {
		t.Fatalf("DISCONNECT %x", disconnectBytes)
	}
}

func TestConvergeAt(t *testing.T) {
	tl := Timeline{
		"a": {on(msec(10)), off(msec(20)), on(msec(40))},
		"b": {on(msec(15))},
	}
	at, ok := convergeAt(tl, []string{"a", "b"}, 0, online)
	if !ok || at != msec(15) {
		t.Fatalf("converge %v %v", at, ok)
	}
	at, ok = convergeAt(tl, []string{"a", "b"}, msec(16), online)
	if !ok || at != msec(40) {
		t.Fatalf("converge from 16 ms: %v %v", at, ok)
	}
}

// A group watcher may show a member offline for its batch window (plus the
// usual second) after the member came up; longer is a wrong offline.
func TestWrongOfflineBatchWindow(t *testing.T) {
	ivs := []Interval{{User: "u", Up: time.Second, Down: forever}}
	shown := func(onlineAt time.Duration) []ObserverView {
		return []ObserverView{{
			TL:     Timeline{"u": {{At: 0, Online: false}, {At: onlineAt, Online: true}}},
			Covers: func(string) bool { return true },
			Batch:  3 * time.Second,
		}}
	}
	if ev := evaluate(ivs, shown(4500*time.Millisecond), 10*time.Second); ev.WrongOffline != 0 {
		t.Fatalf("online 3.5 s after coming up, within the 3 s window + 1 s: %d wrong offline", ev.WrongOffline)
	}
	if ev := evaluate(ivs, shown(5500*time.Millisecond), 10*time.Second); ev.WrongOffline != 1 {
		t.Fatalf("online 4.5 s after coming up: %d wrong offline, want 1", ev.WrongOffline)
	}
}
