package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/presenced/presenced/bench/result"
)

// pt is a sustained (or not) step at rate with the broker's and
// redis-server's CPU per change.
func pt(rate float64, sustained bool, cpu, redis float64) result.Point {
	return result.Point{OfferedPerSec: rate, AchievedPerSec: rate, P99Ms: map[bool]float64{true: 10, false: 400}[sustained],
		Sustained: sustained, CPUUsPerChange: cpu, RedisCPUUs: redis, LoadCPUUs: 30, LoadShare: 0.3, MachineBusy: 0.9}
}

func ceilRound(sys string, round int, ceiling float64, curve ...result.Point) result.Run {
	r := result.Run{System: sys, Scenario: ScenarioCeiling, Round: round, Curve: curve,
		Metrics: result.Metrics{ChangesPerSec: ceiling, Latency: &result.Summary{N: 100, P50: 3, P99: 20, Max: 30}},
		Extra:   map[string]float64{"wrong_after_converge": 0}}
	for _, p := range curve {
		if p.Sustained && p.OfferedPerSec == ceiling {
			r.Extra["cpu_us_per_change_at_ceiling"] = p.CPUUsPerChange
			r.Extra["load_cpu_us_per_change_at_ceiling"] = p.LoadCPUUs
			r.Extra["load_share_at_ceiling"] = p.LoadShare
			r.Extra["machine_busy_at_ceiling"] = p.MachineBusy
			if p.RedisCPUUs > 0 {
				r.Extra["redis_cpu_us_per_change_at_ceiling"] = p.RedisCPUUs
			}
		}
	}
	return r
}

// ceilingFile: three rounds of the four systems. Round 1's common rate is
// 4,000/s (presenced-redis sustains no more), round 2's 8,000/s; in round
// 3 mochi-bare failed, so it gives no ratio.
func ceilingFile() result.File {
	mem, red, mochi, mosq := result.SystemMemory, result.SystemRedis, result.SystemMochi, result.SystemMosquitto
	return result.File{Repeat: 3, Runs: []result.Run{
		ceilRound(mem, 1, 8000, pt(4000, true, 60, 0), pt(8000, true, 56, 0), pt(16000, false, 50, 0)),
		ceilRound(red, 1, 4000, pt(4000, true, 70, 30), pt(8000, false, 65, 28)),
		ceilRound(mochi, 1, 16000, pt(4000, true, 40, 0), pt(8000, true, 38, 0), pt(16000, true, 36, 0), pt(32000, false, 35, 0)),
		ceilRound(mosq, 1, 16000, pt(4000, true, 20, 0), pt(8000, true, 19, 0), pt(16000, true, 18, 0), pt(32000, false, 18, 0)),

		ceilRound(mem, 2, 16000, pt(4000, true, 58, 0), pt(8000, true, 50, 0), pt(16000, true, 48, 0), pt(32000, false, 45, 0)),
		ceilRound(red, 2, 8000, pt(4000, true, 66, 31), pt(8000, true, 60, 30), pt(16000, false, 58, 29)),
		ceilRound(mochi, 2, 20000, pt(4000, true, 42, 0), pt(8000, true, 40, 0), pt(16000, true, 37, 0), pt(32000, false, 35, 0), pt(24000, false, 36, 0), pt(20000, true, 36, 0)),
		ceilRound(mosq, 2, 32000, pt(4000, true, 21, 0), pt(8000, true, 20, 0), pt(16000, true, 19, 0), pt(32000, true, 18, 0)),

		ceilRound(mem, 3, 8000, pt(4000, true, 61, 0), pt(8000, true, 57, 0), pt(16000, false, 50, 0)),
		{System: mochi, Scenario: ScenarioCeiling, Round: 3, Error: "timed out"},
	}}
}

func TestCeilingCompare(t *testing.T) {
	c := CeilingCompare(ceilingFile())
	if c == nil || c.Rounds != 2 || len(c.Systems) != 4 || len(c.Ratios) != 2 {
		t.Fatalf("compare %+v", c)
	}
	byName := map[string]result.CeilingSystem{}
	for _, s := range c.Systems {
		byName[s.System] = s
	}
	// Medians of the rounds: memory 8,000 (8,000, 16,000, 8,000); its
	// common rates 4,000, 8,000 and 8,000 (round 3: memory and
	// mosquitto-less, its own curve alone), CPU per change there 60, 50, 57.
	if m := byName[result.SystemMemory]; m.CeilingPerSec != 8000 || m.CPUUsPerChange != 56 || m.P99Ms != 20 ||
		m.LoadShare != 0.3 || m.MachineBusy != 0.9 || m.CommonPerSec != 8000 || m.CommonCPUUs != 57 {
		t.Errorf("presenced-memory %+v", m)
	}
	if r := byName[result.SystemRedis]; r.CeilingPerSec != 4000 || r.RedisCPUUs != 30 || r.CommonRedisCPUUs != 30 {
		t.Errorf("presenced-redis %+v", r)
	}
	if m := byName[result.SystemMochi]; m.CeilingPerSec != 16000 || m.CommonCPUUs != 40 {
		t.Errorf("mochi-bare %+v", m)
	}
	want := map[string]result.CeilingRatio{
		// Ceilings 8,000 ÷ 16,000 and 16,000 ÷ 20,000; CPU per change 60 ÷
		// 40 at 4,000/s and 50 ÷ 40 at 8,000/s.
		result.SystemMemory: {System: result.SystemMemory,
			CeilingPct: result.Spread{Median: 50, Min: 50, Max: 80, N: 2},
			CPUPct:     result.Spread{Median: 125, Min: 125, Max: 150, N: 2},
			SharePct:   result.Spread{Median: 25, Min: 25, Max: 50, N: 2}},
		// 4,000 ÷ 16,000 and 8,000 ÷ 20,000; 70 ÷ 40 and 60 ÷ 40; with
		// redis-server's 30 µs: (70 + 30 − 40) ÷ 40, (60 + 30 − 40) ÷ 40.
		result.SystemRedis: {System: result.SystemRedis,
			CeilingPct:        result.Spread{Median: 25, Min: 25, Max: 40, N: 2},
			CPUPct:            result.Spread{Median: 150, Min: 150, Max: 175, N: 2},
			SharePct:          result.Spread{Median: 50, Min: 50, Max: 75, N: 2},
			ShareWithRedisPct: &result.Spread{Median: 125, Min: 125, Max: 150, N: 2}},
	}
	for _, r := range c.Ratios {
		w := want[r.System]
		if r.CeilingPct != w.CeilingPct || r.CPUPct != w.CPUPct || r.SharePct != w.SharePct ||
			(r.ShareWithRedisPct == nil) != (w.ShareWithRedisPct == nil) || (r.ShareWithRedisPct != nil && *r.ShareWithRedisPct != *w.ShareWithRedisPct) {
			t.Errorf("%s: %+v (redis %+v), want %+v (redis %+v)", r.System, r, r.ShareWithRedisPct, w, w.ShareWithRedisPct)
		}
	}

	got := map[string]string{}
	for _, tg := range CapacityTargets(ceilingFile()) {
		got[tg.Target+" / "+tg.System] = tg.Result + " " + tg.Figure
	}
	for k, w := range map[string]string{
		"throughput ceiling ≥ 75 % of bare mochi's cycle (mochi-bare) in the same run (ceiling) / presenced-memory":                 Missed + " 50.0 % (50.0–80.0)",
		"presence's share of a change ≤ 25 % of bare mochi's CPU per change, at the common rate (ceiling) / presenced-memory":       Met + " +25.0 % (+25.0–+50.0)",
		"presence's share of a change ≤ 25 % of bare mochi's CPU per change, at the common rate (ceiling) / presenced-redis":        Missed + " +50.0 %",
		"throughput ceiling ≥ 75 % of bare mochi's cycle (mochi-bare) in the same run (ceiling) / presenced-redis":                  Missed + " 25.0 %",
		"beyond the ceiling, every observer converges to the truth once the load stops, nothing wrong (ceiling) / presenced-memory": Met,
		"throughput ceiling ≥ 20,000 changes/s at p99 ≤ 50 ms (ceiling) / presenced-memory":                                         Missed + " 8,000",
	} {
		if !strings.HasPrefix(got[k], w) {
			t.Errorf("%s: %q, want %q…", k, got[k], w)
		}
	}

	md := string(Markdown(ceilingFile()))
	sec := section(t, md, "Ceilings side by side: presenced against bare mochi's cycle")
	for _, w := range []string{
		"| presenced-memory | 8,000 | 20.0 | 56.0 | – | 30.0 | 30.0 % | 90.0 % | – | 8,000 | 57.0 | – | 30.0 |",
		"| mochi-bare | 16,000 |",
		"- presenced-memory: ceiling **50.0 % (50.0–80.0)** of mochi-bare's (target ≥ 75 %); CPU per change at the common rate **125.0 % (125.0–150.0)** of mochi-bare's: presence's share **+25.0 % (+25.0–+50.0)** (target ≤ 25 %) — over 2 round(s).",
		", +125.0 % (+125.0–+150.0) with redis-server's CPU",
	} {
		if !strings.Contains(sec, w) {
			t.Errorf("the section lacks %q:\n%s", w, sec)
		}
	}

	// Written with the runs, and read back.
	f := ceilingFile()
	f.Ceiling = CeilingCompare(f)
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var back result.File
	if err := json.Unmarshal(b, &back); err != nil || back.Ceiling == nil || back.Ceiling.Ratios[0].CeilingPct.Median != 50 {
		t.Fatalf("read back %+v: %v", back.Ceiling, err)
	}
	if CeilingCompare(result.File{Runs: []result.Run{churnRound(1, 1, 40, 0)}}) != nil {
		t.Errorf("a comparison without ceiling runs")
	}
}

// With no rate sustained by every system of a round, CPU per change is not
// compared; the ceilings still are.
func TestCeilingCompareNoCommonRate(t *testing.T) {
	f := result.File{Runs: []result.Run{
		ceilRound(result.SystemMemory, 0, 2000, pt(4000, false, 60, 0), pt(2000, true, 70, 0)),
		ceilRound(result.SystemMochi, 0, 8000, pt(4000, true, 40, 0), pt(8000, true, 38, 0)),
	}}
	c := CeilingCompare(f)
	if c == nil || len(c.Ratios) != 1 || c.Ratios[0].CeilingPct.Median != 25 || c.Ratios[0].CPUPct.N != 0 || c.Ratios[0].SharePct.N != 0 {
		t.Fatalf("compare %+v", c)
	}
	if md := string(Markdown(f)); !strings.Contains(md, "CPU per change not compared (no rate every system sustained)") {
		t.Errorf("report:\n%s", md)
	}
}

// The churn scenario with mochi-bare's cycle: CPU per change against it
// in the ratios, and mochi-bare's correctness counts shown for reference.
func TestChurnAgainstMochiBare(t *testing.T) {
	m := churnRound(0, 2, 45, 0)
	m.System = result.SystemMochi
	f := result.File{Runs: []result.Run{churnRound(0, 3, 60, 0), m}}
	md := string(Markdown(f))
	if !strings.Contains(md, "- churn: CPU per change of presenced-memory is 60.0 µs vs 45.0 µs for mochi-bare's cycle (the classic last-will pattern, presence off): **133.3 %** of it, presence's share +33.3 %.") {
		t.Errorf("ratios:\n%s", section(t, md, "Ratios"))
	}
	_, rows := table(t, section(t, md, result.ScenarioChurn))
	if got := rows[1][len(rows[1])-4:]; got[0] != "0" || got[3] != "–" {
		t.Errorf("mochi-bare churn correctness %q, want counts and – for versions", got)
	}
}

// What the hypervisor took is read beside each round's ratio: the steal of
// each system's whole search by round, and the median at the ceiling step
// in the systems' table; runs made before it was read show none (–), and
// a round missing it on either side gives no row.
func TestCeilingCompareStolen(t *testing.T) {
	f := ceilingFile()
	for i, r := range f.Runs {
		if r.Error != "" {
			continue
		}
		// round 1: 2 % for presenced's searches, 1 % for mochi-bare's;
		// round 2: 20 % and 3 %; round 3 left as before the reading.
		stolen := map[int]map[bool]float64{1: {true: 0.02, false: 0.01}, 2: {true: 0.20, false: 0.03}}[r.Round]
		if stolen == nil {
			continue
		}
		v := stolen[r.System != result.SystemMochi]
		f.Runs[i].Extra["machine_stolen"] = v
		f.Runs[i].Extra["machine_stolen_at_ceiling"] = v / 2
	}
	c := CeilingCompare(f)
	want := []result.CeilingRound{
		{Round: 1, System: result.SystemMemory, CeilingPct: 50, Stolen: 0.02, MochiStolen: 0.01},
		{Round: 1, System: result.SystemRedis, CeilingPct: 25, Stolen: 0.02, MochiStolen: 0.01},
		{Round: 2, System: result.SystemMemory, CeilingPct: 80, Stolen: 0.20, MochiStolen: 0.03},
		{Round: 2, System: result.SystemRedis, CeilingPct: 40, Stolen: 0.20, MochiStolen: 0.03},
	}
	if len(c.ByRound) != len(want) {
		t.Fatalf("by round %+v", c.ByRound)
	}
	for i, w := range want {
		if c.ByRound[i] != w {
			t.Errorf("row %d: %+v, want %+v", i, c.ByRound[i], w)
		}
	}
	for _, s := range c.Systems {
		if s.MachineStolen == nil {
			t.Errorf("%s: no stolen share at the ceiling", s.System)
		}
	}
	sec := section(t, string(Markdown(f)), "Ceilings side by side: presenced against bare mochi's cycle")
	for _, w := range []string{
		// presenced-redis's ceiling steps: rounds 1 and 2 (1 % and 10 %), the lower middle.
		"| presenced-redis | 4,000 | 20.0 | 60.0 | 30.0 | 30.0 | 30.0 % | 90.0 % | 1.0 % |",
		"| round | system | ceiling ÷ mochi-bare's | stolen during its search | stolen during mochi-bare's |",
		"| 2 | presenced-redis | 40.0 % | 20.0 % | 3.0 % |",
	} {
		if !strings.Contains(sec, w) {
			t.Errorf("the section lacks %q:\n%s", w, sec)
		}
	}
	if strings.Contains(section(t, string(Markdown(ceilingFile())), "Ceilings side by side: presenced against bare mochi's cycle"), "| round | system |") {
		t.Errorf("a by-round table from runs without the steal reading")
	}
}
