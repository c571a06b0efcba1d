package main

import (
	"io"
	"testing"
	"time"

	"github.com/presenced/presenced/bench/result"
)

// The ceiling search on presenced-memory at tiny rates: it doubles up to
// the largest rate allowed, each step converges with no user left wrong,
// and the ceiling, the curve and CPU per change are reported.
func TestCeilingSmoke(t *testing.T) {
	c := smokeConfig(t)
	c.Systems, c.Scenarios = []string{result.SystemMemory}, []string{scenarioCeiling}
	c.Ceiling = ceilingConfig{Start: 100, Max: 200, Step: time.Second, P99: 500 * time.Millisecond, Bisect: 1, Budget: 10 * time.Second, Converge: 10 * time.Second}
	f, err := runBench(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Runs) != 1 || f.Runs[0].Error != "" {
		t.Fatalf("runs: %+v", f.Runs)
	}
	r := f.Runs[0]
	if len(r.Curve) != 2 || r.Curve[0].OfferedPerSec != 100 || r.Curve[1].OfferedPerSec != 200 {
		t.Fatalf("curve: %+v (notes %v)", r.Curve, r.Notes)
	}
	for _, p := range r.Curve {
		if !p.Sustained || p.Wrong != 0 || p.AchievedPerSec < 0.9*p.OfferedPerSec || p.P99Ms <= 0 || p.CPUUsPerChange <= 0 || p.LoadCPUUs <= 0 || p.ConvergeMs > 10000 {
			t.Errorf("point %+v (notes %v)", p, r.Notes)
		}
	}
	if r.Metrics.ChangesPerSec < 180 || r.Metrics.Latency == nil || r.Extra["wrong_after_converge"] != 0 {
		t.Fatalf("ceiling %v latency %+v extra %v", r.Metrics.ChangesPerSec, r.Metrics.Latency, r.Extra)
	}
}

func TestCeilingFlags(t *testing.T) {
	c, err := parseFlags([]string{"--scenarios", "ceiling", "--ceiling-start", "500", "--ceiling-p99", "20ms"}, io.Discard)
	if err != nil || c.Ceiling.Start != 500 || c.Ceiling.P99 != 20*time.Millisecond || c.Ceiling.Max != 64000 || c.Scenarios[0] != scenarioCeiling || !c.Ceiling.Common {
		t.Fatalf("parsed %+v: %v", c.Ceiling, err)
	}
	if c, err := parseFlags([]string{"--ceiling-common=false"}, io.Discard); err != nil || c.Ceiling.Common {
		t.Fatalf("--ceiling-common=false: %v %v", c.Ceiling.Common, err)
	}
	for _, args := range [][]string{{"--ceiling-start", "0"}, {"--ceiling-start", "5000", "--ceiling-max", "1000"}, {"--ceiling-step", "100ms"}, {"--ceiling-bisect", "-1"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// mochi-bare runs bare mochi's cycle: churn and ceiling, with the classic
// last-will pattern; in its other scenarios its devices have no will and
// publish nothing retained.
func TestMochiBareCycle(t *testing.T) {
	c, err := parseFlags([]string{"--systems", "mochi-bare,presenced-memory", "--scenarios", "churn,ceiling,memory,steady"}, io.Discard)
	if err != nil || len(c.Systems) != 2 || len(c.Scenarios) != 4 {
		t.Fatalf("parsed %v %v: %v", c.Systems, c.Scenarios, err)
	}
	for _, sc := range []string{result.ScenarioChurn, scenarioCeiling, result.ScenarioSteady, result.ScenarioStorm, scenarioMemory} {
		if why := notApplicable(result.SystemMochi, sc); why != "" {
			t.Errorf("mochi-bare %s: %q", sc, why)
		}
	}
	for _, sc := range []string{result.ScenarioSilent, result.ScenarioFanout, result.ScenarioFlap, scenarioTeam, scenarioCrash} {
		if why := notApplicable(result.SystemMochi, sc); why == "" {
			t.Errorf("mochi-bare %s applies", sc)
		}
	}
	for _, x := range []struct {
		sys, scenario string
		lastWill      bool
	}{
		{result.SystemMochi, result.ScenarioChurn, true},
		{result.SystemMochi, scenarioCeiling, true},
		{result.SystemMochi, scenarioMemory, false},
		{result.SystemMochi, result.ScenarioSteady, false},
		{result.SystemMochi, result.ScenarioStorm, false},
		{result.SystemMemory, result.ScenarioChurn, false},
		{result.SystemRedis, scenarioCeiling, false},
		{result.SystemMosquitto, scenarioMemory, true},
	} {
		s := &system{name: x.sys, classic: classicCycle(x.sys, x.scenario)}
		if s.lastWill() != x.lastWill {
			t.Errorf("%s %s: lastWill %v, want %v", x.sys, x.scenario, s.lastWill(), x.lastWill)
		}
		if _, ok := s.parser()("u", lwPayload("online", "u-d", 1, "")); ok != x.lastWill {
			t.Errorf("%s %s: the parser reads a last-will payload: %v", x.sys, x.scenario, ok)
		}
	}
}

// The ceiling search on mochi-bare: bare mochi's cycle, the classic
// last-will pattern with presence off, sustained at tiny rates with
// nothing shown wrongly and its CPU per change measured.
func TestCeilingSmokeMochiBare(t *testing.T) {
	c := smokeConfig(t)
	c.Systems, c.Scenarios = []string{result.SystemMochi}, []string{scenarioCeiling}
	c.Ceiling = ceilingConfig{Start: 100, Max: 200, Step: time.Second, P99: 500 * time.Millisecond, Bisect: 1, Budget: 10 * time.Second, Converge: 10 * time.Second}
	f, err := runBench(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Runs) != 1 || f.Runs[0].Error != "" {
		t.Fatalf("runs: %+v", f.Runs)
	}
	r := f.Runs[0]
	if r.Params["pattern"] != "last-will" || len(r.Curve) != 2 {
		t.Fatalf("params %v curve %+v (notes %v)", r.Params, r.Curve, r.Notes)
	}
	for _, p := range r.Curve {
		if !p.Sustained || p.Wrong != 0 || p.CPUUsPerChange <= 0 || p.LoadCPUUs <= 0 || p.LoadShare <= 0 || p.MachineBusy <= 0 {
			t.Errorf("point %+v (notes %v)", p, r.Notes)
		}
	}
	if r.Metrics.ChangesPerSec < 180 || r.Extra["wrong_after_converge"] != 0 || r.Extra["load_share_at_ceiling"] <= 0 {
		t.Fatalf("ceiling %v extra %v", r.Metrics.ChangesPerSec, r.Extra)
	}
}

func TestParseMachineCPU(t *testing.T) {
	busy, total, err := parseMachineCPU("cpu  100 5 50 1000 20 1 2 3 7 0")
	if err != nil || busy != 161 || total != 1181 {
		t.Fatalf("busy %d total %d: %v", busy, total, err)
	}
	for _, l := range []string{"", "cpu0 1 2 3 4", "cpu 1 x 3 4"} {
		if _, _, err := parseMachineCPU(l); err == nil {
			t.Errorf("%q accepted", l)
		}
	}
}

// After a round, a system whose search did not sustain the round's lowest
// ceiling offers it once more on a fresh broker, and the point joins its
// curve marked common; a system that sustained it, or that has no
// ceiling, is left alone.
func TestCeilingCommonSteps(t *testing.T) {
	c := smokeConfig(t)
	c.Ceiling = ceilingConfig{Start: 100, Max: 400, Step: time.Second, P99: 500 * time.Millisecond, Bisect: 1, Budget: 10 * time.Second, Converge: 10 * time.Second, Common: true}
	ceil := func(sys string, ceiling float64, curve ...result.Point) result.Run {
		return result.Run{System: sys, Scenario: scenarioCeiling, Curve: curve, Extra: map[string]float64{"ceiling_offered_per_s": ceiling}}
	}
	runs := []result.Run{
		ceil(result.SystemMemory, 100, result.Point{OfferedPerSec: 200}, result.Point{OfferedPerSec: 100, Sustained: true}),
		ceil(result.SystemMochi, 400, result.Point{OfferedPerSec: 200, Sustained: true}, result.Point{OfferedPerSec: 400, Sustained: true}),
		ceil(result.SystemMosquitto, 0, result.Point{OfferedPerSec: 200}),
		{System: result.SystemMochi, Scenario: result.ScenarioChurn},
	}
	ceilingCommonSteps(c, runs, raiseFileLimit())
	if len(runs[0].Curve) != 2 || len(runs[2].Curve) != 1 || runs[2].Extra["common_rate_per_s"] != 0 {
		t.Errorf("curves changed: %+v %+v", runs[0].Curve, runs[2])
	}
	m := runs[1]
	if len(m.Curve) != 3 || m.Extra["common_rate_per_s"] != 100 {
		t.Fatalf("mochi-bare: curve %+v extra %v notes %v", m.Curve, m.Extra, m.Notes)
	}
	if p := m.Curve[2]; !p.Common || p.OfferedPerSec != 100 || !p.Sustained || p.CPUUsPerChange <= 0 {
		t.Errorf("the common step %+v (notes %v)", p, m.Notes)
	}
	// A round of one system has nothing to compare.
	one := []result.Run{ceil(result.SystemMemory, 100, result.Point{OfferedPerSec: 200, Sustained: true})}
	ceilingCommonSteps(c, one, raiseFileLimit())
	if len(one[0].Curve) != 1 {
		t.Errorf("a lone system got a common step: %+v", one[0].Curve)
	}
}

// The steal is /proc/stat's 8th figure, part of busy; a share of the time
// between two readings.
func TestParseMachineTicks(t *testing.T) {
	a, err := parseMachineTicks("cpu  100 5 50 1000 20 1 2 3 7 0")
	if err != nil || a.busy != 161 || a.total != 1181 || a.stolen != 3 {
		t.Fatalf("%+v: %v", a, err)
	}
	b, err := parseMachineTicks("cpu  200 5 50 1750 20 1 2 103 7 0")
	if err != nil || b.total != 2131 {
		t.Fatalf("%+v: %v", b, err)
	}
	if got := a.stolenShare(b); got != round3(100.0/950) {
		t.Errorf("stolen share %v", got)
	}
	if got := b.stolenShare(a); got != 0 {
		t.Errorf("stolen share backwards %v", got)
	}
	if old, err := parseMachineTicks("cpu  1 2 3 4 5 6 7"); err != nil || old.stolen != 0 {
		t.Errorf("a line without steal: %+v %v", old, err)
	}
	for _, l := range []string{"", "cpu0 1 2 3 4", "cpu 1 2 3 4 5 6 7 x"} {
		if _, err := parseMachineTicks(l); err == nil {
			t.Errorf("%q accepted", l)
		}
	}
}
