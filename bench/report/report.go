package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/presenced/presenced/bench/result"
)

// Scenarios and Systems are the canonical orders of the tables.
var (
	Scenarios = []string{
		result.ScenarioSteady, result.ScenarioChurn, result.ScenarioStorm,
		result.ScenarioSilent, result.ScenarioFanout, result.ScenarioFlap,
	}
	Systems = []string{result.SystemMemory, result.SystemRedis, result.SystemMochi, result.SystemMosquitto}
)

// The targets of the benchmark.
const (
	TargetSessions         = 15000 // concurrent sessions on one node
	TargetRSSPerSessionKiB = 12.0  // per idle session
	TargetPingPercent      = 90.0  // PINGREQ/s with presence, % of bare mochi
	TargetRedisCmdsPerPing = 0.05  // at keep-alive 30 s
	TargetKeepAliveS       = 30.0
	TargetLatencyP99Memory = 25.0 // ms, at 1,000 changes/s
	TargetLatencyP99Redis  = 50.0 // ms, at 1,000 changes/s
	TargetChangesPerSec    = 1000.0
	TargetConnectsPerSec   = 8000.0 // with the Redis store
)

const notMeasured = "not measured"

// ---------------------------------------------------------------------------
// Markdown

// column is one metric column of a scenario table.
type column struct {
	header string
	value  func(result.Run) (float64, bool) // false: not measured
	format func(float64) string
}

func metric(get func(result.Metrics) float64) func(result.Run) (float64, bool) {
	return func(r result.Run) (float64, bool) {
		v := get(r.Metrics)
		return v, v != 0 && !math.IsNaN(v)
	}
}

func summary(get func(result.Metrics) *result.Summary, pick func(result.Summary) float64) func(result.Run) (float64, bool) {
	return func(r result.Run) (float64, bool) {
		s := get(r.Metrics)
		if s == nil || (s.N == 0 && s.P50 == 0 && s.P99 == 0 && s.Max == 0) {
			return 0, false
		}
		return pick(*s), true
	}
}

func latency(m result.Metrics) *result.Summary   { return m.Latency }
func detection(m result.Metrics) *result.Summary { return m.Detection }

// metricColumns are every metric a scenario may fill, in table order; a
// scenario's table keeps those that are non-zero in at least one run.
var metricColumns = []column{
	{"sessions", metric(func(m result.Metrics) float64 { return float64(m.Sessions) }), fmtInt},
	{"PINGREQ/s", metric(func(m result.Metrics) float64 { return m.PingsPerSec }), fmtNum},
	{"CPU/PINGREQ (µs)", metric(func(m result.Metrics) float64 { return m.CPUPerPingUs }), fmtNum},
	{"RSS/session (KiB)", metric(func(m result.Metrics) float64 { return m.RSSPerSessionKiB }), fmtNum},
	{"RSS (MiB)", metric(func(m result.Metrics) float64 { return m.RSSMiB }), fmtNum},
	{"connects/s", metric(func(m result.Metrics) float64 { return m.ConnectsPerSec }), fmtNum},
	{"CONNACK p99 (ms)", metric(func(m result.Metrics) float64 { return m.ConnackP99Ms }), fmtNum},
	{"converge (ms)", metric(func(m result.Metrics) float64 { return m.ConvergeMs }), fmtNum},
	{"changes/s", metric(func(m result.Metrics) float64 { return m.ChangesPerSec }), fmtNum},
	{"latency n", summary(latency, func(s result.Summary) float64 { return float64(s.N) }), fmtInt},
	{"p50 latency (ms)", summary(latency, func(s result.Summary) float64 { return s.P50 }), fmtNum},
	{"p99 latency (ms)", summary(latency, func(s result.Summary) float64 { return s.P99 }), fmtNum},
	{"max latency (ms)", summary(latency, func(s result.Summary) float64 { return s.Max }), fmtNum},
	{"detection n", summary(detection, func(s result.Summary) float64 { return float64(s.N) }), fmtInt},
	{"detection p50 (s)", summary(detection, func(s result.Summary) float64 { return s.P50 }), fmtNum},
	{"detection p99 (s)", summary(detection, func(s result.Summary) float64 { return s.P99 }), fmtNum},
	{"detection max (s)", summary(detection, func(s result.Summary) float64 { return s.Max }), fmtNum},
	{"limit (s)", metric(func(m result.Metrics) float64 { return m.DetectionLimitS }), fmtNum},
	{"msgs/change", metric(func(m result.Metrics) float64 { return m.MessagesPerChange }), fmtNum},
	{"observer msgs", metric(func(m result.Metrics) float64 { return float64(m.ObserverMsgs) }), fmtInt},
	{"Redis cmds/PINGREQ", metric(func(m result.Metrics) float64 { return m.RedisCmdsPerPing }), fmtNum},
}

// CorrectnessHeaders are the four counts, always shown.
var CorrectnessHeaders = []string{"ghosts", "wrong offline", "stale overwrites", "backward versions"}

func correctness(c result.Correctness) []int {
	return []int{c.Ghosts, c.WrongOffline, c.StaleOverwrites, c.BackwardVersion}
}

// isPresenced reports whether the system is presenced with presence on: only
// those have versions, so "backward versions" means nothing for the others.
func isPresenced(system string) bool {
	return system == result.SystemMemory || system == result.SystemRedis || system == result.SystemGroup
}

// Markdown renders the whole report.
func Markdown(f result.File) []byte {
	var b bytes.Buffer
	b.WriteString("# presenced benchmark\n\n")
	writeHeader(&b, f)
	all := f // every round, for the figures taken round by round
	f, rs := Collapse(f)
	if n := rs.maxRounds(); n > 1 {
		fmt.Fprintf(&b, "Every scenario ran %d times against every system, round after round. Each figure is the **median of the rounds**, followed by the rounds' (min–max) when they differ; the correctness counts are the worst round's.\n\n", n)
	}

	// A file of other scenarios only (the resilience or the team
	// scenarios, written as a file set of their own) has no standard
	// sections, ratios or targets.
	standard := hasStandard(f)
	notes := 0
	foot := 0
	for _, sc := range orderedScenarios(f) {
		runs := scenarioRuns(f, sc)
		if len(runs) == 0 && !standard {
			continue
		}
		fmt.Fprintf(&b, "## %s\n\n", mdEscape(sc))
		if len(runs) == 0 {
			b.WriteString("Not run.\n\n")
			continue
		}
		writeParams(&b, runs)
		foot = writeTable(&b, runs, foot, rs)
		writeExtra(&b, runs, rs)
		for _, r := range runs {
			notes += len(r.Notes)
		}
	}

	if standard {
		writeRatios(&b, f)
		writeTargets(&b, f)
	}
	writeCeilingCompare(&b, all)
	writeCapacityTargets(&b, all)

	if notes > 0 {
		b.WriteString("## Run notes\n\n")
		for _, sc := range orderedScenarios(f) {
			for _, r := range scenarioRuns(f, sc) {
				for _, n := range r.Notes {
					fmt.Fprintf(&b, "- %s / %s: %s\n", mdEscape(sc), mdEscape(r.System), mdEscape(n))
				}
			}
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

func writeHeader(b *bytes.Buffer, f result.File) {
	m := f.Machine
	parts := []string{}
	if m.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d CPUs", m.CPUs))
	} else {
		parts = append(parts, "CPUs unknown")
	}
	if m.CPUModel != "" {
		parts[0] += " (" + mdEscape(m.CPUModel) + ")"
	}
	if m.MemoryGiB > 0 {
		parts = append(parts, fmt.Sprintf("%s GiB memory", fmtNum(m.MemoryGiB)))
	} else {
		parts = append(parts, "memory unknown")
	}
	parts = append(parts, "kernel "+orNA(m.Kernel), "Go "+orNA(strings.TrimPrefix(m.Go, "go")),
		"mosquitto "+orNA(version(m.Mosquitto, "mosquitto version ")), "redis "+orNA(version(m.Redis, "v=")))

	started := "unknown"
	if !f.Started.IsZero() {
		started = f.Started.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	dur := "unknown"
	if f.Duration > 0 {
		dur = (time.Duration(f.Duration*float64(time.Second)) / time.Second * time.Second).String()
	}
	cmd := "not recorded"
	if strings.TrimSpace(f.Command) != "" {
		cmd = codeSpan(f.Command)
	}
	fmt.Fprintf(b, "**Machine:** %s. **Started:** %s. **Duration:** %s. **Reproduce:** %s\n\n",
		strings.Join(parts, ", "), started, dur, cmd)
	if f.Presenced != "" {
		fmt.Fprintf(b, "**Measured build:** %s\n\n", codeSpan(f.Presenced))
	}
	b.WriteString("Targets and how each figure is measured: see `bench/README.md`.\n\n")
}

// version extracts the version from a program's banner: the word after
// marker ("mosquitto version 2.0.11", "Redis server v=7.0.15 sha=…"), or the
// whole banner when the marker is not in it.
func version(banner, marker string) string {
	_, after, ok := strings.Cut(banner, marker)
	if !ok {
		return banner
	}
	if f := strings.Fields(after); len(f) > 0 {
		return f[0]
	}
	return banner
}

func orNA(s string) string {
	if strings.TrimSpace(s) == "" {
		return "n/a"
	}
	return mdEscape(s)
}

// hasStandard tells whether the file has a run of a standard scenario, or
// no run at all.
func hasStandard(f result.File) bool {
	if len(f.Runs) == 0 {
		return true
	}
	for _, r := range f.Runs {
		for _, sc := range Scenarios {
			if r.Scenario == sc {
				return true
			}
		}
	}
	return false
}

// orderedScenarios: the standard six, then any other scenario in the file in
// order of first appearance.
func orderedScenarios(f result.File) []string {
	out := append([]string(nil), Scenarios...)
	seen := map[string]bool{}
	for _, s := range out {
		seen[s] = true
	}
	for _, r := range f.Runs {
		if !seen[r.Scenario] {
			seen[r.Scenario] = true
			out = append(out, r.Scenario)
		}
	}
	return out
}

// scenarioRuns returns the runs of a scenario, the standard systems first in
// their order, then any other system in file order.
func scenarioRuns(f result.File, scenario string) []result.Run {
	var runs []result.Run
	for _, r := range f.Runs {
		if r.Scenario == scenario {
			runs = append(runs, r)
		}
	}
	sort.SliceStable(runs, func(i, j int) bool { return systemRank(runs[i].System) < systemRank(runs[j].System) })
	return runs
}

func systemRank(s string) int {
	for i, x := range Systems {
		if x == s {
			return i
		}
	}
	return len(Systems)
}

// writeParams lists the parameters the runs of a scenario share, then, per
// system, those that differ or that only some runs have. Runs without
// parameters (a run that did not apply) are left out.
func writeParams(b *bytes.Buffer, runs []result.Run) {
	var with []result.Run
	for _, r := range runs {
		if len(r.Params) > 0 {
			with = append(with, r)
		}
	}
	if len(with) == 0 {
		return
	}
	common := map[string]any{}
	for k, v := range with[0].Params {
		shared := true
		for _, r := range with[1:] {
			w, ok := r.Params[k]
			if !ok || paramText(w) != paramText(v) {
				shared = false
				break
			}
		}
		if shared {
			common[k] = v
		}
	}
	if p := paramString(common); p != "" {
		fmt.Fprintf(b, "Parameters: %s.\n\n", p)
	}
	own := 0
	for _, r := range with {
		rest := map[string]any{}
		for k, v := range r.Params {
			if _, ok := common[k]; !ok {
				rest[k] = v
			}
		}
		if p := paramString(rest); p != "" {
			fmt.Fprintf(b, "- %s: %s\n", mdEscape(r.System), p)
			own++
		}
	}
	if own > 0 {
		b.WriteString("\n")
	}
}

// paramText is how a parameter reads: numbers as the shortest decimal.
func paramText(v any) string {
	if x, ok := toFloat(v); ok {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

func paramString(p map[string]any) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, mdEscape(k)+" "+mdEscape(paramText(p[k])))
	}
	return strings.Join(parts, ", ")
}

// writeTable writes one scenario's table and the footnotes of its errors;
// foot is the number of footnotes so far (they are numbered through the
// document), returned updated.
func writeTable(b *bytes.Buffer, runs []result.Run, foot int, rs rounds) int {
	var cols []column
	for _, c := range metricColumns {
		for _, r := range runs {
			if r.Error != "" {
				continue
			}
			if _, ok := c.value(r); ok {
				cols = append(cols, c)
				break
			}
		}
	}

	headers := []string{"system"}
	for _, c := range cols {
		headers = append(headers, c.header)
	}
	headers = append(headers, CorrectnessHeaders...)
	b.WriteString("| " + strings.Join(headers, " | ") + " |\n")
	b.WriteString("|---")
	for range headers[1:] {
		b.WriteString("|--:")
	}
	b.WriteString("|\n")

	var errs []string
	for _, r := range runs {
		cells := []string{mdEscape(r.System)}
		if r.Error != "" {
			foot++
			cells[0] += fmt.Sprintf(" [^e%d]", foot)
			errs = append(errs, fmt.Sprintf("[^e%d]: %s: %s", foot, mdEscape(r.System), mdEscape(r.Error)))
			for range headers[1:] {
				cells = append(cells, "n/a")
			}
		} else {
			for _, c := range cols {
				if v, ok := c.value(r); ok {
					cells = append(cells, rs.withSpread(r, v, c.value, c.format))
				} else {
					cells = append(cells, "–")
				}
			}
			for i, n := range correctness(r.Correct) {
				// The bare broker has no presence to be wrong about, and
				// only presenced has versions.
				if (r.System == result.SystemMochi && !classicScenario(r.Scenario)) || (i == 3 && !isPresenced(r.System)) {
					cells = append(cells, "–")
					continue
				}
				cells = append(cells, fmtInt(float64(n)))
			}
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	b.WriteString("\n")
	for _, e := range errs {
		b.WriteString(e + "\n")
	}
	if len(errs) > 0 {
		b.WriteString("\n")
	}
	return foot
}

func writeExtra(b *bytes.Buffer, runs []result.Run, rs rounds) {
	started := false
	for _, r := range runs {
		if len(r.Extra) == 0 {
			continue
		}
		if !started {
			b.WriteString("Other figures:\n\n")
			started = true
		}
		keys := make([]string, 0, len(r.Extra))
		for k := range r.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			get := func(x result.Run) (float64, bool) { v, ok := x.Extra[k]; return v, ok }
			parts = append(parts, mdEscape(k)+" "+rs.withSpread(r, r.Extra[k], get, fmtFigure))
		}
		fmt.Fprintf(b, "- %s: %s\n", mdEscape(r.System), strings.Join(parts, ", "))
	}
	if started {
		b.WriteString("\n")
	}
}

// find returns the run of a scenario and system; ok is false when there is
// none or it failed.
func find(f result.File, scenario, system string) (result.Run, bool) {
	var found *result.Run
	for i := range f.Runs {
		r := &f.Runs[i]
		if r.Scenario != scenario || r.System != system {
			continue
		}
		if r.Error == "" {
			return *r, true
		}
		if found == nil {
			found = r
		}
	}
	if found != nil {
		return *found, false
	}
	return result.Run{}, false
}

func writeRatios(b *bytes.Buffer, f result.File) {
	b.WriteString("## Ratios\n\n")
	lines := 0
	for _, sys := range []string{result.SystemMemory, result.SystemRedis} {
		for _, sc := range orderedScenarios(f) {
			p, okP := find(f, sc, sys)
			m, okM := find(f, sc, result.SystemMochi)
			if !okP || !okM || p.Metrics.PingsPerSec == 0 || m.Metrics.PingsPerSec == 0 {
				continue
			}
			fmt.Fprintf(b, "- %s: %s PINGREQ/s is **%s %%** of %s's (%s vs %s PINGREQ/s).\n",
				mdEscape(sc), sys, fmtPct(100*p.Metrics.PingsPerSec/m.Metrics.PingsPerSec),
				result.SystemMochi, fmtNum(p.Metrics.PingsPerSec), fmtNum(m.Metrics.PingsPerSec))
			lines++
		}
	}
	for _, sc := range orderedScenarios(f) {
		p, okP := find(f, sc, result.SystemMemory)
		m, okM := find(f, sc, result.SystemMochi)
		if !okP || !okM || p.Metrics.RSSPerSessionKiB == 0 || m.Metrics.RSSPerSessionKiB == 0 {
			continue
		}
		pk, mk := p.Metrics.RSSPerSessionKiB, m.Metrics.RSSPerSessionKiB
		fmt.Fprintf(b, "- %s: RSS/session of %s is %s KiB vs %s KiB for %s: %s KiB per session for presence (%s×).\n",
			mdEscape(sc), result.SystemMemory, fmtNum(pk), fmtNum(mk), result.SystemMochi,
			signed(pk-mk), fmtNum(pk/mk))
		lines++
	}
	for _, sys := range []string{result.SystemMemory, result.SystemRedis} {
		p, okP := find(f, result.ScenarioChurn, sys)
		m, okM := find(f, result.ScenarioChurn, result.SystemMochi)
		pc, mc := p.Extra["cpu_us_per_change"], m.Extra["cpu_us_per_change"]
		if !okP || !okM || pc <= 0 || mc <= 0 {
			continue
		}
		fmt.Fprintf(b, "- churn: CPU per change of %s is %s µs vs %s µs for %s's cycle (the classic last-will pattern, presence off): **%s** of it, presence's share %s %%",
			sys, fmtNum(pc), fmtNum(mc), result.SystemMochi, fmtPct(100*pc/mc)+" %", signedPct(100*(pc-mc)/mc))
		if rc := p.Extra["redis_cpu_us_per_change"]; rc > 0 {
			fmt.Fprintf(b, " (%s %% with redis-server's %s µs)", signedPct(100*(pc+rc-mc)/mc), fmtNum(rc))
		}
		b.WriteString(".\n")
		lines++
	}
	if lines == 0 {
		b.WriteString("Not measured: no successful runs of presenced and mochi-bare with the same figure.\n")
	}
	b.WriteString("\n")
}

func signedPct(v float64) string {
	if v >= 0 {
		return "+" + fmtPct(v)
	}
	return "−" + fmtPct(-v)
}

// classicScenario tells whether mochi-bare's devices follow the classic
// last-will pattern in the scenario (bare mochi's cycle): it then has
// correctness counts, shown for reference as mosquitto-lastwill's are.
func classicScenario(scenario string) bool {
	return scenario == result.ScenarioChurn || scenario == ScenarioCeiling
}

func signed(v float64) string {
	if v >= 0 {
		return "+" + fmtNum(v)
	}
	return "−" + fmtNum(-v)
}

// Verdicts.
const (
	Met         = "met"
	Missed      = "**missed**"
	NotMeasured = notMeasured
	Reference   = "reference"
)

// Target is one row of the targets table.
type Target struct {
	Target string
	System string
	Figure string
	Result string // Met, Missed, NotMeasured or Reference
}

// Targets checks every target of the benchmark against the file.
func Targets(f result.File) []Target {
	f, _ = Collapse(f) // the median of the rounds
	var out []Target
	out = append(out, sessionTargets(f)...)
	out = append(out, pingTargets(f)...)
	out = append(out, redisPingTarget(f))
	out = append(out, latencyTargets(f)...)
	out = append(out, stormTarget(f))
	out = append(out, silentTargets(f)...)
	out = append(out, correctnessTargets(f)...)
	return out
}

// sessionTargets is target 1, sessions and memory (steady), per presenced
// system.
func sessionTargets(f result.File) []Target {
	var out []Target
	for _, sys := range []string{result.SystemMemory, result.SystemRedis} {
		t := Target{Target: "15,000 concurrent sessions on one node, RSS ≤ 12 KiB per idle session (steady)", System: sys, Result: NotMeasured}
		if r, ok := find(f, result.ScenarioSteady, sys); ok && r.Metrics.Sessions > 0 && r.Metrics.RSSPerSessionKiB > 0 {
			m := r.Metrics
			t.Figure = fmt.Sprintf("%s sessions, %s KiB/session", fmtInt(float64(m.Sessions)), fmtAgainst(m.RSSPerSessionKiB, TargetRSSPerSessionKiB, 2))
			t.Result = verdict(m.Sessions >= TargetSessions && m.RSSPerSessionKiB <= TargetRSSPerSessionKiB)
		}
		out = append(out, t)
	}
	return out
}

// pingTargets is target 2, PINGREQ throughput against bare mochi (steady),
// per presenced system.
func pingTargets(f result.File) []Target {
	var out []Target
	for _, sys := range []string{result.SystemMemory, result.SystemRedis} {
		t := Target{Target: "PINGREQ throughput with presence on ≥ 90 % of bare mochi (steady)", System: sys, Result: NotMeasured}
		p, okP := find(f, result.ScenarioSteady, sys)
		m, okM := find(f, result.ScenarioSteady, result.SystemMochi)
		if okP && okM && p.Metrics.PingsPerSec > 0 && m.Metrics.PingsPerSec > 0 {
			pct := 100 * p.Metrics.PingsPerSec / m.Metrics.PingsPerSec
			ok := p.Metrics.PingsPerSec*100 >= TargetPingPercent*m.Metrics.PingsPerSec
			t.Figure = fmt.Sprintf("%s %% (%s vs %s PINGREQ/s)", fmtPctAgainst(pct, ok), fmtNum(p.Metrics.PingsPerSec), fmtNum(m.Metrics.PingsPerSec))
			t.Result = verdict(ok)
		}
		out = append(out, t)
	}
	return out
}

// redisPingTarget is target 3, Redis commands per PINGREQ (steady, Redis
// store).
func redisPingTarget(f result.File) Target {
	t := Target{Target: "≤ 0.05 Redis commands per PINGREQ at keep-alive 30 s (steady)", System: result.SystemRedis, Result: NotMeasured}
	if r, ok := find(f, result.ScenarioSteady, result.SystemRedis); ok && r.Metrics.RedisCmdsPerPing > 0 {
		v := r.Metrics.RedisCmdsPerPing
		ka, hasKA := param(r.Params, "keepalive_s")
		t.Figure = fmt.Sprintf("%s cmds/PINGREQ", fmtAgainst(v, TargetRedisCmdsPerPing, 3))
		if hasKA {
			t.Figure += fmt.Sprintf(" at keep-alive %s s", strconv.FormatFloat(ka, 'f', -1, 64))
		}
		if hasKA && ka != TargetKeepAliveS {
			t.Figure += " (not the target's keep-alive)"
		} else {
			t.Result = verdict(v <= TargetRedisCmdsPerPing)
		}
	}
	return t
}

// latencyTargets is target 4, propagation latency p99 (churn), per
// presenced system with its own limit.
func latencyTargets(f result.File) []Target {
	var out []Target
	for _, c := range []struct {
		sys   string
		limit float64
	}{{result.SystemMemory, TargetLatencyP99Memory}, {result.SystemRedis, TargetLatencyP99Redis}} {
		t := Target{
			Target: fmt.Sprintf("propagation latency p99 ≤ %s ms at 1,000 changes/s (churn)", strconv.FormatFloat(c.limit, 'f', -1, 64)),
			System: c.sys, Result: NotMeasured,
		}
		if r, ok := find(f, result.ScenarioChurn, c.sys); ok && r.Metrics.Latency != nil && r.Metrics.Latency.N > 0 {
			p99 := r.Metrics.Latency.P99
			t.Figure = fmt.Sprintf("p99 %s ms", fmtAgainst(p99, c.limit, 2))
			if cps := r.Metrics.ChangesPerSec; cps > 0 {
				t.Figure += fmt.Sprintf(" at %s changes/s", fmtNum(cps))
				if cps < TargetChangesPerSec {
					t.Figure += " (below 1,000 changes/s)"
				}
			} else {
				t.Figure += " (changes/s not measured)"
			}
			t.Result = verdict(p99 <= c.limit)
		}
		out = append(out, t)
	}
	return out
}

// stormTarget is target 5, the connect storm with the Redis store (storm).
func stormTarget(f result.File) Target {
	t := Target{Target: "connect storm ≥ 8,000 connects/s with the Redis store, every observer right at the end (storm)", System: result.SystemRedis, Result: NotMeasured}
	if r, ok := find(f, result.ScenarioStorm, result.SystemRedis); ok && r.Metrics.ConnectsPerSec > 0 {
		m, c := r.Metrics, r.Correct
		conv := "observers never converged"
		if m.ConvergeMs > 0 {
			conv = fmt.Sprintf("converged in %s ms", fmtNum(m.ConvergeMs))
		}
		t.Figure = fmt.Sprintf("%s connects/s, %s, %d ghosts, %d wrong offline",
			fmtAgainst(m.ConnectsPerSec, TargetConnectsPerSec, 0), conv, c.Ghosts, c.WrongOffline)
		t.Result = verdict(m.ConnectsPerSec >= TargetConnectsPerSec && m.ConvergeMs > 0 && c.Ghosts == 0 && c.WrongOffline == 0)
	}
	return t
}

// silentTargets is target 6, silent-death detection p99 within its limit
// (silent), per presenced system.
func silentTargets(f result.File) []Target {
	var out []Target
	for _, sys := range []string{result.SystemMemory, result.SystemRedis} {
		t := Target{Target: "silent death detected within 1.5 × keep-alive + 1 s at p99 (silent)", System: sys, Result: NotMeasured}
		if r, ok := find(f, result.ScenarioSilent, sys); ok && r.Metrics.Detection != nil && r.Metrics.Detection.N > 0 && r.Metrics.DetectionLimitS > 0 {
			p99, lim := r.Metrics.Detection.P99, r.Metrics.DetectionLimitS
			t.Figure = fmt.Sprintf("p99 %s s, limit %s s", fmtAgainst(p99, lim, 2), strconv.FormatFloat(lim, 'f', -1, 64))
			t.Result = verdict(p99 <= lim)
		}
		out = append(out, t)
	}
	return out
}

// correctnessTargets is target 7, the correctness counts summed over every
// standard scenario, per system (mosquitto as a reference).
func correctnessTargets(f result.File) []Target {
	var out []Target
	for _, sys := range []string{result.SystemMemory, result.SystemRedis, result.SystemMosquitto} {
		t := Target{Target: "zero ghosts, wrong offline, stale overwrites, backward versions in every scenario", System: sys, Result: NotMeasured}
		var sum result.Correctness
		var measured, missing []string
		for _, sc := range Scenarios {
			r, ok := find(f, sc, sys)
			if !ok {
				missing = append(missing, sc)
				continue
			}
			measured = append(measured, sc)
			sum.Ghosts += r.Correct.Ghosts
			sum.WrongOffline += r.Correct.WrongOffline
			sum.StaleOverwrites += r.Correct.StaleOverwrites
			sum.BackwardVersion += r.Correct.BackwardVersion
		}
		if len(measured) > 0 {
			t.Figure = fmt.Sprintf("%d ghosts, %d wrong offline, %d stale overwrites", sum.Ghosts, sum.WrongOffline, sum.StaleOverwrites)
			if isPresenced(sys) {
				t.Figure += fmt.Sprintf(", %d backward versions", sum.BackwardVersion)
			}
			t.Figure += fmt.Sprintf(" over %d of %d scenarios", len(measured), len(Scenarios))
			if len(missing) > 0 {
				t.Figure += " (" + strings.Join(missing, ", ") + " not measured)"
			}
			if isPresenced(sys) {
				t.Result = verdict(sum == result.Correctness{})
			} else {
				t.Result = Reference
			}
		}
		out = append(out, t)
	}
	return out
}

func verdict(ok bool) string {
	if ok {
		return Met
	}
	return Missed
}

func writeTargets(b *bytes.Buffer, f result.File) {
	b.WriteString("## Targets\n\n")
	b.WriteString("| target | system | figure | result |\n|---|---|---|---|\n")
	for _, t := range Targets(f) {
		fig := t.Figure
		if fig == "" {
			fig = "–"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", mdEscape(t.Target), mdEscape(t.System), mdEscape(fig), t.Result)
	}
	b.WriteString("\n")
}

// param reads a numeric parameter (JSON numbers decode as float64; Go
// callers may use any integer or float type).
func param(p map[string]any, key string) (float64, bool) {
	v, ok := p[key]
	if !ok {
		return 0, false
	}
	return toFloat(v)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint64:
		return float64(x), true
	case uint32:
		return float64(x), true
	case interface{ Float64() (float64, error) }: // json.Number
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// ---------------------------------------------------------------------------
// Formatting

// fmtNum formats a figure with a precision suited to its size.
func fmtNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 1000:
		return fmtInt(v)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// fmtInt formats a rounded number with thousands separators.
func fmtInt(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// fmtFigure formats a whole number as an integer, anything else as fmtNum.
func fmtFigure(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmtInt(v)
	}
	return fmtNum(v)
}

func fmtPct(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// fmtAgainst formats v with at least dec decimals, and with more when fewer
// would round it onto or across the limit it is compared with, so that a
// missed figure never reads as the limit itself.
func fmtAgainst(v, limit float64, dec int) string {
	for d := dec; d <= 6; d++ {
		s := strconv.FormatFloat(v, 'f', d, 64)
		p, _ := strconv.ParseFloat(s, 64)
		if p == v || (p != limit && (p < limit) == (v < limit)) {
			if d == 0 && math.Abs(v) >= 1000 {
				return fmtInt(v)
			}
			return s
		}
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// fmtPctAgainst formats a percentage compared with TargetPingPercent, where
// ok is the exact comparison.
func fmtPctAgainst(pct float64, ok bool) string {
	for d := 1; d <= 6; d++ {
		s := strconv.FormatFloat(pct, 'f', d, 64)
		p, _ := strconv.ParseFloat(s, 64)
		if (p >= TargetPingPercent) == ok && (ok || p != TargetPingPercent) {
			return s
		}
	}
	return strconv.FormatFloat(pct, 'g', -1, 64)
}

// mdEscape makes text safe in Markdown prose and table cells: every ASCII
// punctuation that Markdown or HTML could read is backslash-escaped, and
// line breaks become spaces.
func mdEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\\', '`', '*', '_', '[', ']', '<', '>', '|', '&', '#', '!', '~':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n', '\r', '\t':
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// codeSpan wraps s in a Markdown code span whose fence is longer than any
// run of backticks in s.
func codeSpan(s string) string {
	s = strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if longest > 0 || strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// ---------------------------------------------------------------------------
// SVG

const (
	svgW, svgH               = 800, 450
	padL, padR, padB float64 = 70, 20, 55
)

var palette = map[string]string{
	result.SystemMemory:    "#0072B2",
	result.SystemRedis:     "#D55E00",
	result.SystemMochi:     "#009E73",
	result.SystemMosquitto: "#CC79A7",
}

var extraColors = []string{"#E69F00", "#56B4E9", "#000000", "#F0E442", "#999999"}

type series struct {
	system   string
	samples  []float64 // sorted, finite
	p50, p99 float64
	color    string
}

// LatencySVG renders the empirical CDF of the churn latency samples of each
// system on a log-scaled x axis.
func LatencySVG(f result.File) []byte {
	ss := latencySeries(f)
	var b bytes.Buffer
	svgOpen(&b, "Propagation latency (churn), CDF")
	if len(ss) == 0 {
		return svgNoData(&b, "no latency samples")
	}
	p := newCDFPlot(ss)
	p.grid(&b)
	p.ticks(&b)
	p.steps(&b)
	p.legend(&b)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// latencySeries is a series per system with churn latency samples (every
// round's), its finite samples sorted, with its colour.
func latencySeries(f result.File) []series {
	f, _ = Collapse(f) // every round's samples
	var ss []series
	extra := 0
	for _, r := range scenarioRuns(f, result.ScenarioChurn) {
		if r.Error != "" {
			continue
		}
		var xs []float64
		for _, v := range r.Samples {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				xs = append(xs, v)
			}
		}
		if len(xs) == 0 {
			continue
		}
		sort.Float64s(xs)
		s := series{system: r.System, samples: xs}
		if l := r.Metrics.Latency; l != nil && l.N > 0 {
			s.p50, s.p99 = l.P50, l.P99
		} else {
			s.p50, s.p99 = quantile(xs, 0.50), quantile(xs, 0.99)
		}
		if c, ok := palette[r.System]; ok {
			s.color = c
		} else {
			s.color = extraColors[extra%len(extraColors)]
			extra++
		}
		ss = append(ss, s)
	}
	return ss
}

// The legend of a plot sits between its title and its frame: legendTop is
// its top, legendRowH the height of one of its rows.
const legendTop, legendRowH = 38.0, 18.0

// cdfPlot is the layout of the latency CDF: its series with their legend
// labels, the frame (x0–x1 left to right, y0 at 0 %, y1 at 100 %), the
// decades of the log x axis and the legend's columns.
type cdfPlot struct {
	ss             []series
	labels         []string
	x0, x1, y0, y1 float64
	dLo, dHi       int
	legCols        int
	legColW        float64
}

// newCDFPlot lays the CDF of ss out: the x range in whole decades around
// every positive sample, and the legend in two columns when the labels
// fit, else one.
func newCDFPlot(ss []series) *cdfPlot {
	p := &cdfPlot{ss: ss}
	// x range in decades.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, v := range s.samples {
			if v > 0 {
				lo = math.Min(lo, v)
				hi = math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) { // every sample ≤ 0
		lo, hi = 1, 1
	}
	p.dLo, p.dHi = int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	if p.dHi <= p.dLo {
		p.dHi = p.dLo + 1
	}
	// Legend layout: two columns when the labels fit, else one.
	p.labels = make([]string, len(ss))
	longest := 0
	for i, s := range ss {
		p.labels[i] = fmt.Sprintf("%s: p50 %s ms, p99 %s ms (n=%d)", s.system, fmtNum(s.p50), fmtNum(s.p99), len(s.samples))
		longest = max(longest, utf8.RuneCountInString(p.labels[i]))
	}
	p.x0, p.x1 = padL, float64(svgW)-padR
	p.legCols, p.legColW = 1, p.x1-p.x0
	if need := 28 + 6.8*float64(longest) + 10; len(ss) > 1 && need <= (p.x1-p.x0)/2 { // about 6.8 px per character at 12 px
		p.legCols, p.legColW = 2, (p.x1-p.x0)/2
	}
	legRows := (len(ss) + p.legCols - 1) / p.legCols
	p.y0, p.y1 = float64(svgH)-padB, legendTop+legendRowH*float64(legRows)+10 // y0: 0 %, y1: 100 %
	return p
}

// xOf is the x of a latency on the log axis (the left edge for v ≤ 0).
func (p *cdfPlot) xOf(v float64) float64 {
	if v <= 0 {
		return p.x0
	}
	t := (math.Log10(v) - float64(p.dLo)) / float64(p.dHi-p.dLo)
	return p.x0 + t*(p.x1-p.x0)
}

// yOf is the y of a fraction of the changes received (0 to 1).
func (p *cdfPlot) yOf(q float64) float64 { return p.y0 + q*(p.y1-p.y0) }

// grid draws the grid (1–9 × each decade, every 10 %), the dashed 99 %
// guide and the frame.
func (p *cdfPlot) grid(b *bytes.Buffer) {
	x0, x1, y0, y1 := p.x0, p.x1, p.y0, p.y1
	b.WriteString(`<g stroke="#e0e0e0" stroke-width="1">` + "\n")
	for d := p.dLo; d <= p.dHi; d++ {
		for m := 1; m <= 9; m++ {
			if d == p.dHi && m > 1 {
				break
			}
			x := p.xOf(float64(m) * math.Pow10(d))
			col := ""
			if m == 1 {
				col = ` stroke="#c8c8c8"`
			}
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"%s/>`+"\n", x, y0, x, y1, col)
		}
	}
	for q := 0; q <= 100; q += 10 {
		y := p.yOf(float64(q) / 100)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", x0, y, x1, y)
	}
	b.WriteString("</g>\n")
	// 99 % guide.
	y99 := p.yOf(0.99)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999999" stroke-dasharray="4 3"/>`+"\n", x0, y99, x1, y99)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="10" fill="#777777">p99</text>`+"\n", x1-3, y99+11)
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#333333"/>`+"\n", x0, y1, x1-x0, y0-y1)
}

// ticks draws the tick labels of both axes and the axis titles.
func (p *cdfPlot) ticks(b *bytes.Buffer) {
	x0, x1, y0, y1 := p.x0, p.x1, p.y0, p.y1
	for d := p.dLo; d <= p.dHi; d++ {
		v := math.Pow10(d)
		anchor := "middle"
		if d == p.dHi {
			anchor = "end" // keep the last label inside the picture
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="%s">%s</text>`+"\n", p.xOf(v), y0+18, anchor, esc(tickLabel(v)))
	}
	for q := 0; q <= 100; q += 20 {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%d %%</text>`+"\n", x0-6, p.yOf(float64(q)/100), q)
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, float64(svgH)-15, esc("latency (ms, log scale)"))
	fmt.Fprintf(b, `<text x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">%s</text>`+"\n", (y0+y1)/2, (y0+y1)/2, esc("changes received (%)"))
}

// steps draws one step line per system.
func (p *cdfPlot) steps(b *bytes.Buffer) {
	for _, s := range p.ss {
		n := float64(len(s.samples))
		var d strings.Builder
		fmt.Fprintf(&d, "M%.2f %.2f", p.xOf(s.samples[0]), p.y0)
		for i, v := range s.samples {
			if i+1 < len(s.samples) && s.samples[i+1] == v {
				continue // one vertical step per distinct value
			}
			fmt.Fprintf(&d, "H%.2fV%.2f", p.xOf(v), p.yOf(float64(i+1)/n))
		}
		fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"><title>%s</title></path>`+"\n",
			d.String(), s.color, esc(s.system))
	}
}

// legend draws the legend between the title and the plot: it never covers
// a line.
func (p *cdfPlot) legend(b *bytes.Buffer) {
	for i, s := range p.ss {
		col, row := i%p.legCols, i/p.legCols
		x := p.x0 + float64(col)*p.legColW
		y := legendTop + legendRowH*float64(row) + legendRowH/2
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", x, y, x+22, y, s.color)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`+"\n", x+28, y, esc(p.labels[i]))
	}
}

// quantile is the nearest-rank quantile of sorted xs.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	i = max(0, min(i, len(xs)-1))
	return xs[i]
}

func tickLabel(v float64) string {
	if v >= 1000 {
		return fmtInt(v)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// esc escapes text for XML character data and attribute values.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
