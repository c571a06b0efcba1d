package slo

import (
	"math"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
)

var t0 = time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)

func TestBound(t *testing.T) {
	for _, c := range []struct{ k, g, want time.Duration }{
		{2 * time.Second, 5 * time.Second, 9 * time.Second},
		{10 * time.Second, 0, 16 * time.Second},
		{time.Second, time.Second, 3500 * time.Millisecond},
	} {
		if got := Bound(c.k, c.g); got != c.want {
			t.Errorf("Bound(%v, %v) = %v, want %v", c.k, c.g, got, c.want)
		}
	}
}

// step is one call on the accounting at t0 + at.
type step struct {
	at   time.Duration
	do   string // detect, miss, prop, expose
	kind Kind
	v    time.Duration // latency, or connected
	off  time.Duration // expose: shown offline
}

func run(a *Accounting, steps []step) {
	for _, s := range steps {
		at := t0.Add(s.at)
		switch s.do {
		case "detect":
			a.Detected(at, s.kind, s.v, 10*time.Second)
		case "miss":
			a.Missed(at, s.kind, s.v)
		case "prop":
			a.Propagated(at, s.v)
		case "expose":
			a.Exposed(at, s.v, s.off)
		}
	}
}

func TestReport(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	cases := []struct {
		name   string
		window time.Duration
		steps  []step
		now    time.Duration
		check  func(t *testing.T, r Report, c Counts)
	}{
		{name: "empty: no budget spent", now: time.Minute, check: func(t *testing.T, r Report, c Counts) {
			if r.All.Ends != 0 || r.All.WithinRatio != 1 || r.All.P99 != -1 || r.PropagationP99 != -1 || r.FalseOfflinePerMillion != 0 {
				t.Errorf("empty report: %+v", r)
			}
		}},
		{name: "within and late per kind", steps: []step{
			{at: 1 * s, do: "detect", kind: Clean, v: 200 * ms},
			{at: 2 * s, do: "detect", kind: Clean, v: 300 * ms},
			{at: 3 * s, do: "detect", kind: Silence, v: 9 * s},
			{at: 4 * s, do: "detect", kind: Silence, v: 11 * s}, // late: bound 10 s
			{at: 5 * s, do: "detect", kind: Reset, v: -50 * ms}, // a clock ahead: zero
		}, now: time.Minute, check: func(t *testing.T, r Report, c Counts) {
			clean, rst, silence, drain := r.Detection[0], r.Detection[1], r.Detection[2], r.Detection[3]
			if clean.Ends != 2 || clean.Within != 2 || clean.WithinRatio != 1 || clean.P50 != 0.2 || clean.P99 != 0.3 {
				t.Errorf("clean: %+v", clean)
			}
			if silence.Ends != 2 || silence.Within != 1 || silence.WithinRatio != 0.5 || silence.P99 != 11 {
				t.Errorf("silence: %+v", silence)
			}
			if rst.P99 != 0 || rst.Within != 1 {
				t.Errorf("rst: %+v", rst)
			}
			if drain.Ends != 0 || drain.WithinRatio != 1 {
				t.Errorf("drain: %+v", drain)
			}
			if r.All.Ends != 5 || r.All.Within != 4 || r.All.P99 != 11 {
				t.Errorf("all: %+v", r.All)
			}
			if c.Ends != [4]int64{2, 1, 2, 0} || c.Late != [4]int64{0, 0, 1, 0} {
				t.Errorf("counts: %+v", c)
			}
		}},
		{name: "a miss is late, and counts as the time waited", steps: []step{
			{at: 1 * s, do: "detect", kind: Drain, v: 6 * s},
			{at: 2 * s, do: "miss", kind: Drain, v: 20 * s},
		}, now: time.Minute, check: func(t *testing.T, r Report, c Counts) {
			d := r.Detection[3]
			if d.Ends != 2 || d.Missed != 1 || d.Within != 1 || d.P50 != 6 || d.P99 != 20 {
				t.Errorf("drain: %+v", d)
			}
			if c.Missed[3] != 1 || c.Late[3] != 1 {
				t.Errorf("counts: %+v", c)
			}
		}},
		{name: "the window forgets, the counts do not", window: time.Minute, steps: []step{
			{at: 0, do: "detect", kind: Clean, v: 30 * s},
			{at: 0, do: "prop", v: 5 * s},
			{at: 0, do: "expose", v: 100 * s, off: 100 * s},
			{at: 90 * s, do: "detect", kind: Clean, v: 100 * ms},
			{at: 90 * s, do: "prop", v: 20 * ms},
			{at: 90 * s, do: "expose", v: 1000 * s, off: 0},
		}, now: 100 * time.Second, check: func(t *testing.T, r Report, c Counts) {
			if r.All.Ends != 1 || r.All.P99 != 0.1 || r.Propagations != 1 || r.PropagationP99 != 0.02 {
				t.Errorf("window kept an old sample: %+v", r)
			}
			if r.FalseOfflinePerMillion != 0 || r.ConnectedSeconds != 1000 {
				t.Errorf("exposure: %+v", r)
			}
			if c.Ends[0] != 2 || c.Late[0] != 1 || c.Connected != 1100 || c.FalseOff != 100 || c.Propagated != 2 {
				t.Errorf("counts: %+v", c)
			}
		}},
		{name: "false offline per million", steps: []step{
			{at: s, do: "expose", v: 1000 * s, off: 2 * s},
			{at: 2 * s, do: "expose", v: 1000 * s, off: 5000 * s}, // clamped to connected
		}, now: time.Minute, check: func(t *testing.T, r Report, c Counts) {
			if want := 1002.0 / 2000 * 1e6; math.Abs(r.FalseOfflinePerMillion-want) > 1e-6 {
				t.Errorf("per million %v, want %v", r.FalseOfflinePerMillion, want)
			}
		}},
		{name: "propagation p99 of 100 samples, one skewed", steps: func() []step {
			var st []step
			for i := range 100 {
				st = append(st, step{at: time.Duration(i) * ms, do: "prop", v: time.Duration(i) * ms})
			}
			return append(st, step{at: s, do: "prop", v: -time.Second})
		}(), now: time.Minute, check: func(t *testing.T, r Report, c Counts) {
			if r.Propagations != 101 || r.PropagationP99 != 0.098 || r.PropagationP50 != 0.049 {
				t.Errorf("propagation: %d p50 %v p99 %v", r.Propagations, r.PropagationP50, r.PropagationP99)
			}
			if c.Skewed != 1 {
				t.Errorf("skewed %d", c.Skewed)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New(Options{Window: c.window})
			run(a, c.steps)
			c.check(t, a.Report(t0.Add(c.now)), a.Counts())
		})
	}
}

// A full window drops its oldest sample, and counts it.
func TestMaxSamples(t *testing.T) {
	a := New(Options{MaxSamples: 3})
	for i := range 5 {
		a.Detected(t0.Add(time.Duration(i)*time.Second), Clean, time.Duration(i)*time.Second, time.Minute)
	}
	r := a.Report(t0.Add(10 * time.Second))
	if r.All.Ends != 3 || r.All.P50 != 3 {
		t.Errorf("kept %d, p50 %v: want the newest 3", r.All.Ends, r.All.P50)
	}
	if c := a.Counts(); c.Dropped != 2 || c.Ends[0] != 5 {
		t.Errorf("counts %+v", c)
	}
}

// Quantiles gives the p99s for the gauges, a miss as the time waited.
func TestQuantiles(t *testing.T) {
	clock := testkit.NewClock(t0)
	a := New(Options{})
	a.Missed(clock.Now(), Silence, 30*time.Second)
	a.Propagated(clock.Now(), 40*time.Millisecond)
	clock.Advance(time.Minute)
	d, p := a.Quantiles(clock.Now())
	if d[2] != 30 || d[0] != -1 || p != 0.04 {
		t.Errorf("quantiles %v %v", d, p)
	}
	clock.Advance(2 * time.Hour)
	if d, p := a.Quantiles(clock.Now()); d[2] != -1 || p != -1 {
		t.Errorf("after the window: %v %v", d, p)
	}
}

func TestKindValid(t *testing.T) {
	for _, k := range Kinds {
		if !k.Valid() {
			t.Errorf("%s invalid", k)
		}
	}
	if Kind("kill").Valid() {
		t.Error("kill valid")
	}
	a := New(Options{})
	a.Detected(t0, "kill", time.Second, time.Second)
	if c := a.Counts(); c.Ends != [4]int64{} {
		t.Errorf("unknown kind counted: %+v", c)
	}
}
