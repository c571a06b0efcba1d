package report

import (
	"strings"
	"testing"

	"github.com/presenced/presenced/bench/result"
)

func churnRound(round int, p99, perChange float64, wrong int) result.Run {
	return result.Run{System: result.SystemMemory, Scenario: result.ScenarioChurn, Round: round,
		Params:  map[string]any{"rate_per_s": 1000},
		Metrics: result.Metrics{ChangesPerSec: 1000, Latency: &result.Summary{N: 5001, P50: p99 / 4, P99: p99, Max: p99 * 2}},
		Correct: result.Correctness{WrongOffline: wrong},
		Samples: []float64{p99},
		Extra:   map[string]float64{"cpu_us_per_change": perChange}}
}

func TestCollapseTakesTheMedianOfTheRounds(t *testing.T) {
	f := result.File{Presenced: "presenced (devel) revision abc123 go1.26.8", Runs: []result.Run{
		churnRound(1, 0.9, 40, 0), churnRound(2, 3.0, 55, 2), churnRound(3, 1.2, 35, 0),
		{System: result.SystemMemory, Scenario: result.ScenarioChurn, Round: 4, Error: "observer lost"},
	}}
	c, rs := Collapse(f)
	if len(c.Runs) != 1 {
		t.Fatalf("%d runs, want the rounds collapsed into 1", len(c.Runs))
	}
	r := c.Runs[0]
	if r.Metrics.Latency.P99 != 1.2 || r.Metrics.Latency.P50 != 0.3 || r.Metrics.Latency.N != 5001 {
		t.Errorf("latency %+v, want the median round's p99 1.2, p50 0.3", *r.Metrics.Latency)
	}
	if r.Extra["cpu_us_per_change"] != 40 {
		t.Errorf("cpu per change %v, want the median 40", r.Extra["cpu_us_per_change"])
	}
	if r.Correct.WrongOffline != 2 {
		t.Errorf("wrong offline %d, want the worst round's 2", r.Correct.WrongOffline)
	}
	if len(r.Samples) != 3 || r.Error != "" {
		t.Errorf("samples %v, error %q: want every successful round's samples and no error", r.Samples, r.Error)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "round 4 failed: observer lost") {
		t.Errorf("notes %q, want the failed round", r.Notes)
	}
	p99 := func(x result.Run) (float64, bool) { return x.Metrics.Latency.P99, x.Metrics.Latency != nil }
	if lo, hi, several := rs.spread(r, p99); lo != 0.9 || hi != 3.0 || !several {
		t.Errorf("spread %v–%v (%v), want 0.9–3", lo, hi, several)
	}
	md := string(Markdown(f))
	for _, want := range []string{"median of the rounds", "| 1.20 (0.9–3.00) |", "cpu\\_us\\_per\\_change 40 (35–55)", "revision abc123"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestCollapseKeepsASingleRun(t *testing.T) {
	r := churnRound(0, 0.9, 40, 0)
	c, _ := Collapse(result.File{Runs: []result.Run{r}})
	if len(c.Runs) != 1 || c.Runs[0].Metrics.Latency.P99 != 0.9 || strings.Contains(string(Markdown(result.File{Runs: []result.Run{r}})), "median of the rounds") {
		t.Fatalf("a single run was changed: %+v", c.Runs)
	}
}

func TestCollapseAllRoundsFailed(t *testing.T) {
	f := result.File{Runs: []result.Run{
		{System: result.SystemRedis, Scenario: result.ScenarioChurn, Round: 1, Error: "a"},
		{System: result.SystemRedis, Scenario: result.ScenarioChurn, Round: 2, Error: "b"},
	}}
	c, _ := Collapse(f)
	if len(c.Runs) != 1 || c.Runs[0].Error != "a" {
		t.Fatalf("got %+v, want the first round's error", c.Runs)
	}
}

func TestPlotsDrawEveryMeasuredSystem(t *testing.T) {
	run := func(sys string, round int, kib, det float64) []result.Run {
		return []result.Run{
			{System: sys, Scenario: result.ScenarioSteady, Round: round, Metrics: result.Metrics{RSSPerSessionKiB: kib}},
			{System: sys, Scenario: result.ScenarioSilent, Round: round, Metrics: result.Metrics{DetectionLimitS: 4,
				Detection: &result.Summary{N: 200, P50: det, P99: det, Max: det}}},
		}
	}
	var f result.File
	for round := 1; round <= 3; round++ {
		f.Runs = append(f.Runs, run(result.SystemMemory, round, 30+float64(round), 3)...)
		f.Runs = append(f.Runs, run(result.SystemMosquitto, round, 1.4, 3.7)...)
	}
	mem := string(MemorySVG(f))
	for _, want := range []string{"presenced-memory: 32.0 KiB per session", "mosquitto-lastwill: 1.40 KiB", "target: 16 KiB", "Resident memory per session (steady)"} {
		if !strings.Contains(mem, want) {
			t.Errorf("memory plot lacks %q", want)
		}
	}
	if !strings.Contains(mem, "<path d=\"M") {
		t.Errorf("memory plot has no min–max whisker for the rounds that differ")
	}
	det := string(DetectionSVG(f))
	for _, want := range []string{"presenced-memory: 3.00 seconds", "mosquitto-lastwill: 3.70 seconds", "limit 1.5 × keep-alive + 1 s = 4"} {
		if !strings.Contains(det, want) {
			t.Errorf("detection plot lacks %q:\n%s", want, det)
		}
	}
	if s := string(MemorySVG(result.File{})); !strings.Contains(s, "not measured") {
		t.Errorf("an empty file's plot does not say so")
	}
}

func TestLinesSVG(t *testing.T) {
	s := string(linesSVG("t", "offered", "p99 ms", []line{{label: "a", points: [][2]float64{{1000, 1}, {2000, 80}}, color: "#000"}}, []ref{{"50 ms", 50}}))
	if strings.Count(s, "<circle") != 2 || !strings.Contains(s, "a: 80.0 p99 ms at 2,000") || !strings.Contains(s, "50 ms") {
		t.Errorf("line plot:\n%s", s)
	}
}

func TestCeilingSVG(t *testing.T) {
	var f result.File
	for round := 1; round <= 3; round++ {
		f.Runs = append(f.Runs, result.Run{System: result.SystemMemory, Scenario: ScenarioCeiling, Round: round,
			Metrics: result.Metrics{ChangesPerSec: float64(7000 + 1000*round)},
			Curve:   []result.Point{{OfferedPerSec: 4000, P99Ms: 5}, {OfferedPerSec: 2000, P99Ms: 2}, {OfferedPerSec: 8000, P99Ms: 300}}})
	}
	s := string(CeilingSVG(f))
	for _, want := range []string{"presenced-memory: ceiling 9,000 changes/s (8,000–10,000)", "bound: 50 ms", `stroke-dasharray="6 4"`} {
		if !strings.Contains(s, want) {
			t.Errorf("ceiling plot lacks %q", want)
		}
	}
	if n := strings.Count(s, "<circle"); n != 9 {
		t.Errorf("%d points, want 9 (3 per round)", n)
	}
	if strings.Count(s, "(8,000–10,000)</text>") != 1 {
		t.Errorf("the system is in the legend more than once")
	}
}

func TestCapacityTargets(t *testing.T) {
	mem := func(sys string, kib float64) result.Run {
		return result.Run{System: sys, Scenario: ScenarioMemory, Metrics: result.Metrics{Sessions: 15000, RSSPerSessionKiB: kib}}
	}
	ceil := func(sys string, rate, wrong float64) result.Run {
		return result.Run{System: sys, Scenario: ScenarioCeiling, Metrics: result.Metrics{ChangesPerSec: rate},
			Extra: map[string]float64{"wrong_after_converge": wrong, "max_converge_ms_beyond_ceiling": 420}}
	}
	f := result.File{Runs: []result.Run{
		mem(result.SystemMemory, 15.5), mem(result.SystemRedis, 17), mem(result.SystemMochi, 14),
		ceil(result.SystemMemory, 21000, 0), ceil(result.SystemRedis, 8000, 2),
	}}
	got := map[string]string{}
	for _, tg := range CapacityTargets(f) {
		got[tg.Target+" / "+tg.System] = tg.Result + " " + tg.Figure
	}
	for k, want := range map[string]string{
		"RSS ≤ 16 KiB per idle session at 15,000 sessions, after an idle minute (memory) / presenced-memory":                        Met,
		"RSS ≤ 16 KiB per idle session at 15,000 sessions, after an idle minute (memory) / presenced-redis":                         Missed,
		"presence adds ≤ 2 KiB per idle session over bare mochi (memory) / presenced-memory":                                        Met + " +1.50 KiB",
		"presence adds ≤ 2 KiB per idle session over bare mochi (memory) / presenced-redis":                                         Missed + " +3",
		"throughput ceiling ≥ 20,000 changes/s at p99 ≤ 50 ms (ceiling) / presenced-memory":                                         Met + " 21,000",
		"throughput ceiling ≥ 10,000 changes/s at p99 ≤ 50 ms (ceiling) / presenced-redis":                                          Missed + " 8,000",
		"beyond the ceiling, every observer converges to the truth once the load stops, nothing wrong (ceiling) / presenced-redis":  Missed + " 2 users wrong",
		"beyond the ceiling, every observer converges to the truth once the load stops, nothing wrong (ceiling) / presenced-memory": Met + " 0 users wrong; converged within 420 ms",
	} {
		if !strings.HasPrefix(got[k], want) {
			t.Errorf("%s: %q, want %q…", k, got[k], want)
		}
	}
	if len(CapacityTargets(result.File{Runs: []result.Run{mem(result.SystemMemory, 1)}[:0]})) != 0 {
		t.Errorf("capacity targets without a memory or ceiling run")
	}
	if md := string(Markdown(f)); !strings.Contains(md, "## Targets: memory per idle session and throughput ceiling") {
		t.Errorf("the report has no capacity targets section")
	}
}

// TestCapacityLiveHeap: with both systems' live heap per session measured,
// the "presence adds" figure shows its difference beside the RSS one, and
// the verdict stays the RSS's.
func TestCapacityLiveHeap(t *testing.T) {
	mem := func(sys string, kib, live float64) result.Run {
		return result.Run{System: sys, Scenario: ScenarioMemory, Metrics: result.Metrics{Sessions: 5000, RSSPerSessionKiB: kib},
			Extra: map[string]float64{"heap_live_kib_per_session": live}}
	}
	f := result.File{Runs: []result.Run{mem(result.SystemMemory, 41.5, 8.5), mem(result.SystemMochi, 38.25, 6.37)}}
	for _, tg := range CapacityTargets(f) {
		if tg.Target != "presence adds ≤ 2 KiB per idle session over bare mochi (memory)" || tg.System != result.SystemMemory {
			continue
		}
		if want := "+3.25 KiB (41.5 vs 38.2 KiB); live heap +2.13 KiB (8.50 vs 6.37)"; tg.Figure != want || tg.Result != Missed {
			t.Fatalf("figure %q, result %q; want %q, %q", tg.Figure, tg.Result, want, Missed)
		}
		return
	}
	t.Fatal("no 'presence adds' target for presenced-memory")
}
