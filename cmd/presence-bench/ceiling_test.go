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
	if err != nil || c.Ceiling.Start != 500 || c.Ceiling.P99 != 20*time.Millisecond || c.Ceiling.Max != 64000 || c.Scenarios[0] != scenarioCeiling {
		t.Fatalf("parsed %+v: %v", c.Ceiling, err)
	}
	for _, args := range [][]string{{"--ceiling-start", "0"}, {"--ceiling-start", "5000", "--ceiling-max", "1000"}, {"--ceiling-step", "100ms"}, {"--ceiling-bisect", "-1"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
