package report

import (
	"bytes"
	"fmt"

	"github.com/presenced/presenced/bench/result"
)

// The capacity targets (memory per idle session, throughput ceiling).
const (
	TargetIdleKiB       = 16.0    // RSS per idle session at 15,000 sessions, after an idle minute
	TargetOverMochiKiB  = 2.0     // what presence adds per idle session over bare mochi
	TargetCeilingMemory = 20000.0 // changes/s at p99 ≤ 50 ms, memory store
	TargetCeilingRedis  = 10000.0 // changes/s at p99 ≤ 50 ms, Redis store
	TargetCeilingP99Ms  = 50.0
)

// CapacityTargets checks the memory and throughput targets against the
// medians of the memory and ceiling scenarios, and the ceiling's ratios to
// bare mochi's cycle round by round; it is empty when neither ran.
func CapacityTargets(f result.File) []Target {
	ratios := ceilingRatioTargets(f) // round by round
	f, _ = Collapse(f)
	var out []Target
	_, haveMem := find(f, ScenarioMemory, result.SystemMemory)
	_, haveRed := find(f, ScenarioMemory, result.SystemRedis)
	if haveMem || haveRed {
		mochi, okM := find(f, ScenarioMemory, result.SystemMochi)
		for _, sys := range []string{result.SystemMemory, result.SystemRedis} {
			t := Target{Target: "RSS ≤ 16 KiB per idle session at 15,000 sessions, after an idle minute (memory)", System: sys, Result: NotMeasured}
			r, ok := find(f, ScenarioMemory, sys)
			if ok && r.Metrics.RSSPerSessionKiB > 0 {
				t.Figure = fmt.Sprintf("%s sessions, %s KiB/session", fmtInt(float64(r.Metrics.Sessions)), fmtAgainst(r.Metrics.RSSPerSessionKiB, TargetIdleKiB, 2))
				t.Result = verdict(r.Metrics.Sessions >= TargetSessions && r.Metrics.RSSPerSessionKiB <= TargetIdleKiB)
			}
			out = append(out, t)
			t = Target{Target: "presence adds ≤ 2 KiB per idle session over bare mochi (memory)", System: sys, Result: NotMeasured}
			if ok && okM && r.Metrics.RSSPerSessionKiB > 0 && mochi.Metrics.RSSPerSessionKiB > 0 {
				d := r.Metrics.RSSPerSessionKiB - mochi.Metrics.RSSPerSessionKiB
				t.Figure = fmt.Sprintf("%s KiB (%s vs %s KiB)", signed(d), fmtNum(r.Metrics.RSSPerSessionKiB), fmtNum(mochi.Metrics.RSSPerSessionKiB))
				// The live heap beside it: what the broker keeps, without
				// the garbage the RSS holds until the next collection.
				lp, okP := r.Extra["heap_live_kib_per_session"]
				lm, okL := mochi.Extra["heap_live_kib_per_session"]
				if okP && okL {
					t.Figure += fmt.Sprintf("; live heap %s KiB (%s vs %s)", signed(lp-lm), fmtNum(lp), fmtNum(lm))
				}
				t.Result = verdict(d <= TargetOverMochiKiB)
			}
			out = append(out, t)
		}
	}
	for _, c := range []struct {
		sys    string
		target float64
	}{{result.SystemMemory, TargetCeilingMemory}, {result.SystemRedis, TargetCeilingRedis}} {
		r, ok := find(f, ScenarioCeiling, c.sys)
		if !ok && len(scenarioRuns(f, ScenarioCeiling)) == 0 {
			continue
		}
		t := Target{Target: fmt.Sprintf("throughput ceiling ≥ %s changes/s at p99 ≤ 50 ms (ceiling)", fmtInt(c.target)), System: c.sys, Result: NotMeasured}
		if ok && r.Metrics.ChangesPerSec > 0 {
			t.Figure = fmt.Sprintf("%s changes/s", fmtInt(r.Metrics.ChangesPerSec))
			t.Result = verdict(r.Metrics.ChangesPerSec >= c.target)
		}
		out = append(out, t)
		t = Target{Target: "beyond the ceiling, every observer converges to the truth once the load stops, nothing wrong (ceiling)", System: c.sys, Result: NotMeasured}
		if ok {
			wrong, hasW := r.Extra["wrong_after_converge"]
			if hasW {
				t.Figure = fmt.Sprintf("%s users wrong; converged within %s ms", fmtInt(wrong), fmtNum(r.Extra["max_converge_ms_beyond_ceiling"]))
				t.Result = verdict(wrong == 0)
			}
		}
		out = append(out, t)
	}
	return append(out, ratios...)
}

func writeCapacityTargets(b *bytes.Buffer, f result.File) {
	ts := CapacityTargets(f)
	if len(ts) == 0 {
		return
	}
	b.WriteString("## Targets: memory per idle session and throughput ceiling\n\n")
	b.WriteString("| target | system | figure | result |\n|---|---|---|---|\n")
	for _, t := range ts {
		fig := t.Figure
		if fig == "" {
			fig = "–"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", mdEscape(t.Target), mdEscape(t.System), mdEscape(fig), t.Result)
	}
	b.WriteString("\n")
}
