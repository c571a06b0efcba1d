package report

import (
	"bytes"
	"fmt"
	"math"
	"sort"

	"github.com/presenced/presenced/bench/result"
)

// The targets of issue 23 against bare mochi's cycle (mochi-bare running
// the churn mix with the classic last-will pattern).
const (
	TargetCeilingOverMochiPct = 75.0 // presenced's ceiling, % of mochi-bare's
	TargetPresenceSharePct    = 25.0 // presence's CPU per change over mochi-bare's, % of mochi-bare's
)

// ceilingSystems are the systems compared in the ceiling scenario, in
// table order.
var ceilingSystems = []string{result.SystemMemory, result.SystemRedis, result.SystemMochi, result.SystemMosquitto}

// CeilingCompare puts the ceiling runs of f side by side: every system's
// ceiling with its CPU per change at it (the median of its rounds), its
// CPU per change at the common rate, and each presenced system against
// mochi-bare, round by round. The common rate of a round is the highest
// rate offered that every system of the round sustained: CPU per change
// depends on the rate (batching, idle time, contention), so the systems
// are compared at a rate each of them ran as well as it could. It is nil
// without ceiling runs.
func CeilingCompare(f result.File) *result.CeilingCompare {
	byRound := map[int]map[string]result.Run{}
	var order []int
	for _, r := range f.Runs {
		if r.Scenario != ScenarioCeiling || r.Error != "" || !isCeilingSystem(r.System) {
			continue
		}
		if byRound[r.Round] == nil {
			byRound[r.Round] = map[string]result.Run{}
			order = append(order, r.Round)
		}
		byRound[r.Round][r.System] = r
	}
	if len(byRound) == 0 {
		return nil
	}
	sort.Ints(order)
	out := &result.CeilingCompare{}
	type atRate struct{ rate, cpu, redis, load []float64 }
	common := map[string]*atRate{}
	ratios := map[string]*ratioRounds{}
	for _, round := range order {
		runs := byRound[round]
		mochi, haveMochi := runs[result.SystemMochi]
		if haveMochi {
			out.Rounds++
		}
		rate, ok := commonRate(runs)
		for sys, r := range runs {
			if !ok {
				continue
			}
			p, _ := pointAt(r, rate)
			a := common[sys]
			if a == nil {
				a = &atRate{}
				common[sys] = a
			}
			a.rate = append(a.rate, rate)
			a.cpu = append(a.cpu, p.CPUUsPerChange)
			a.redis = append(a.redis, p.RedisCPUUs)
			a.load = append(a.load, p.LoadCPUUs)
		}
		if !haveMochi {
			continue
		}
		for _, sys := range []string{result.SystemMemory, result.SystemRedis} {
			r, have := runs[sys]
			if !have {
				continue
			}
			rr := ratios[sys]
			if rr == nil {
				rr = &ratioRounds{}
				ratios[sys] = rr
			}
			if mc := mochi.Metrics.ChangesPerSec; mc > 0 {
				pct := 100 * r.Metrics.ChangesPerSec / mc
				rr.ceiling = append(rr.ceiling, pct)
				stolen, a := r.Extra["machine_stolen"]
				mochiStolen, b := mochi.Extra["machine_stolen"]
				if a && b { // runs made before the steal was read have none
					out.ByRound = append(out.ByRound, result.CeilingRound{Round: round, System: sys, CeilingPct: round1(pct),
						Stolen: stolen, MochiStolen: mochiStolen})
				}
			}
			if !ok {
				continue
			}
			p, _ := pointAt(r, rate)
			m, _ := pointAt(mochi, rate)
			if m.CPUUsPerChange <= 0 || p.CPUUsPerChange <= 0 {
				continue
			}
			rr.cpu = append(rr.cpu, 100*p.CPUUsPerChange/m.CPUUsPerChange)
			rr.share = append(rr.share, 100*(p.CPUUsPerChange-m.CPUUsPerChange)/m.CPUUsPerChange)
			if p.RedisCPUUs > 0 {
				rr.shareRedis = append(rr.shareRedis, 100*(p.CPUUsPerChange+p.RedisCPUUs-m.CPUUsPerChange)/m.CPUUsPerChange)
			}
		}
	}
	med, _ := Collapse(f)
	for _, sys := range ceilingSystems {
		r, ok := find(med, ScenarioCeiling, sys)
		if !ok {
			continue
		}
		s := result.CeilingSystem{System: sys, CeilingPerSec: r.Metrics.ChangesPerSec,
			CPUUsPerChange: r.Extra["cpu_us_per_change_at_ceiling"], RedisCPUUs: r.Extra["redis_cpu_us_per_change_at_ceiling"],
			LoadCPUUs: r.Extra["load_cpu_us_per_change_at_ceiling"], LoadShare: r.Extra["load_share_at_ceiling"],
			MachineBusy: r.Extra["machine_busy_at_ceiling"]}
		if v, ok := r.Extra["machine_stolen_at_ceiling"]; ok {
			s.MachineStolen = &v
		}
		if r.Metrics.Latency != nil {
			s.P99Ms = r.Metrics.Latency.P99
		}
		if a := common[sys]; a != nil {
			s.CommonPerSec, s.CommonCPUUs = lowerMedian(a.rate), lowerMedian(a.cpu)
			s.CommonRedisCPUUs, s.CommonLoadCPUUs = lowerMedian(a.redis), lowerMedian(a.load)
		}
		out.Systems = append(out.Systems, s)
	}
	for _, sys := range []string{result.SystemMemory, result.SystemRedis} {
		rr := ratios[sys]
		if rr == nil {
			continue
		}
		cr := result.CeilingRatio{System: sys, CeilingPct: spreadOf(rr.ceiling), CPUPct: spreadOf(rr.cpu), SharePct: spreadOf(rr.share)}
		if len(rr.shareRedis) > 0 {
			s := spreadOf(rr.shareRedis)
			cr.ShareWithRedisPct = &s
		}
		out.Ratios = append(out.Ratios, cr)
	}
	return out
}

// ratioRounds are a presenced system's ratios to mochi-bare, one per round.
type ratioRounds struct{ ceiling, cpu, share, shareRedis []float64 }

func isCeilingSystem(s string) bool {
	for _, x := range ceilingSystems {
		if x == s {
			return true
		}
	}
	return false
}

// commonRate is the highest rate offered that every run of a round
// sustained; false when there is none.
func commonRate(runs map[string]result.Run) (float64, bool) {
	var rates map[float64]bool
	for _, r := range runs {
		mine := map[float64]bool{}
		for _, p := range r.Curve {
			if p.Sustained {
				mine[p.OfferedPerSec] = true
			}
		}
		if rates == nil {
			rates = mine
			continue
		}
		for v := range rates {
			if !mine[v] {
				delete(rates, v)
			}
		}
	}
	best, ok := 0.0, false
	for v := range rates {
		if v > best {
			best, ok = v, true
		}
	}
	return best, ok
}

// pointAt is the sustained point of r's curve at the offered rate (the
// last one, should the rate have been offered twice).
func pointAt(r result.Run, rate float64) (result.Point, bool) {
	for i := len(r.Curve) - 1; i >= 0; i-- {
		if p := r.Curve[i]; p.OfferedPerSec == rate && p.Sustained {
			return p, true
		}
	}
	return result.Point{}, false
}

func spreadOf(vs []float64) result.Spread {
	if len(vs) == 0 {
		return result.Spread{}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return result.Spread{Median: round1(lowerMedian(vs)), Min: round1(lo), Max: round1(hi), N: len(vs)}
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// fmtSpread formats a spread of percentages: the median, and min–max when
// there are several rounds and they differ.
func fmtSpread(s result.Spread, sign bool) string {
	f := fmtPct
	if sign {
		f = signedPct
	}
	out := f(s.Median) + " %"
	if s.N > 1 && s.Min != s.Max {
		out += " (" + f(s.Min) + "–" + f(s.Max) + ")"
	}
	return out
}

// writeCeilingCompare writes the ceiling's systems side by side and
// presenced's ratios to bare mochi's cycle.
func writeCeilingCompare(b *bytes.Buffer, f result.File) {
	c := CeilingCompare(f)
	if c == nil || len(c.Systems) == 0 {
		return
	}
	b.WriteString("## Ceilings side by side: presenced against bare mochi's cycle\n\n")
	b.WriteString("mochi-bare is the same binary with presence off, its devices running the classic last-will pattern on the same churn cycle. " +
		"Figures are the medians of the rounds; the ratios are taken round by round, both systems of the same round. " +
		"CPU per change is user + system time from `/proc/<pid>/stat` over a step and its convergence, divided by the changes made. " +
		"The common rate is the highest rate offered that every system of the round sustained.\n\n")
	b.WriteString("| system | ceiling (changes/s, p99 ≤ 50 ms) | p99 (ms) | broker µs/change | redis-server µs/change | generator µs/change | generator's share of the machine | machine busy | stolen by the hypervisor | common rate (changes/s) | broker µs/change there | redis-server µs/change there | generator µs/change there |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	opt := func(v float64) string {
		if v == 0 {
			return "–"
		}
		return fmtNum(v)
	}
	pct := func(v float64) string {
		if v == 0 {
			return "–"
		}
		return fmtPct(100*v) + " %"
	}
	stolen := func(v *float64) string {
		if v == nil {
			return "–"
		}
		return pct0(*v)
	}
	for _, s := range c.Systems {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", mdEscape(s.System),
			opt(s.CeilingPerSec), opt(s.P99Ms), opt(s.CPUUsPerChange), opt(s.RedisCPUUs), opt(s.LoadCPUUs), pct(s.LoadShare), pct(s.MachineBusy), stolen(s.MachineStolen),
			opt(s.CommonPerSec), opt(s.CommonCPUUs), opt(s.CommonRedisCPUUs), opt(s.CommonLoadCPUUs))
	}
	b.WriteString("\n")
	for _, r := range c.Ratios {
		fmt.Fprintf(b, "- %s: ceiling ", mdEscape(r.System))
		if r.CeilingPct.N > 0 {
			fmt.Fprintf(b, "**%s** of mochi-bare's (target ≥ 75 %%)", fmtSpread(r.CeilingPct, false))
		} else {
			b.WriteString("not measured against mochi-bare's")
		}
		if r.CPUPct.N > 0 {
			fmt.Fprintf(b, "; CPU per change at the common rate **%s** of mochi-bare's: presence's share **%s** (target ≤ 25 %%)",
				fmtSpread(r.CPUPct, false), fmtSpread(r.SharePct, true))
			if r.ShareWithRedisPct != nil {
				fmt.Fprintf(b, ", %s with redis-server's CPU", fmtSpread(*r.ShareWithRedisPct, true))
			}
		} else {
			b.WriteString("; CPU per change not compared (no rate every system sustained)")
		}
		fmt.Fprintf(b, " — over %d round(s).\n", max(r.CeilingPct.N, r.CPUPct.N))
	}
	if len(c.Ratios) > 0 {
		b.WriteString("\n")
	}
	if len(c.ByRound) > 0 {
		b.WriteString("Round by round, with the share of the machine's CPU time the hypervisor took (`/proc/stat` steal) during each system's whole search:\n\n")
		b.WriteString("| round | system | ceiling ÷ mochi-bare's | stolen during its search | stolen during mochi-bare's |\n|--:|---|--:|--:|--:|\n")
		for _, r := range c.ByRound {
			fmt.Fprintf(b, "| %d | %s | %s %% | %s | %s |\n", r.Round, mdEscape(r.System), fmtPct(r.CeilingPct), pct0(r.Stolen), pct0(r.MochiStolen))
		}
		b.WriteString("\n")
	}
}

// pct0 formats a share (0–1) as a percentage, 0 included: none stolen is
// a reading, not a missing one.
func pct0(v float64) string { return fmtPct(100*v) + " %" }

// ceilingRatioTargets are issue 23's targets against mochi-bare: the
// ceiling ≥ 75 % of mochi-bare's and presence's share of a change ≤ 25 %,
// per presenced system.
func ceilingRatioTargets(f result.File) []Target {
	if len(scenarioRuns(f, ScenarioCeiling)) == 0 {
		return nil
	}
	c := CeilingCompare(f)
	var out []Target
	for _, sys := range []string{result.SystemMemory, result.SystemRedis} {
		var r *result.CeilingRatio
		if c != nil {
			for i := range c.Ratios {
				if c.Ratios[i].System == sys {
					r = &c.Ratios[i]
				}
			}
		}
		t := Target{Target: "throughput ceiling ≥ 75 % of bare mochi's cycle (mochi-bare) in the same run (ceiling)", System: sys, Result: NotMeasured}
		if r != nil && r.CeilingPct.N > 0 {
			t.Figure = fmtSpread(r.CeilingPct, false)
			t.Result = verdict(r.CeilingPct.Median >= TargetCeilingOverMochiPct)
		}
		out = append(out, t)
		t = Target{Target: "presence's share of a change ≤ 25 % of bare mochi's CPU per change, at the common rate (ceiling)", System: sys, Result: NotMeasured}
		if r != nil && r.SharePct.N > 0 {
			t.Figure = fmtSpread(r.SharePct, true)
			t.Result = verdict(r.SharePct.Median <= TargetPresenceSharePct)
		}
		out = append(out, t)
	}
	return out
}
