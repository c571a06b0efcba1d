package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/bench/result"
)

// fullFile is a run of the standard set where every target is met.
func fullFile() result.File {
	f := result.File{
		Started:  time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC),
		Duration: 242.5,
		Command:  "make bench",
		Machine: result.Machine{
			CPUs: 2, CPUModel: "Test CPU @ 2.0GHz", MemoryGiB: 3.8, Kernel: "6.1.0-test",
			Go: "go1.26.8", Mosquitto: "mosquitto version 2.0.11",
			Redis: "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=ae4d7c971a948f0",
		},
	}
	for _, sys := range Systems {
		presenced := isPresenced(sys)
		// steady
		steady := result.Run{System: sys, Scenario: result.ScenarioSteady,
			Params: map[string]any{"devices": 15000, "keepalive_s": 30},
			Metrics: result.Metrics{
				Sessions: 15000, PingsPerSec: 1000, CPUPerPingUs: 4.2,
				RSSPerSessionKiB: 9.5, RSSMiB: 180,
			}}
		if sys == result.SystemMochi {
			steady.Metrics.PingsPerSec = 1050
			steady.Metrics.RSSPerSessionKiB = 7.25
		}
		if sys == result.SystemRedis {
			steady.Metrics.RedisCmdsPerPing = 0.041
		}
		f.Runs = append(f.Runs, steady)

		// churn
		churn := result.Run{System: sys, Scenario: result.ScenarioChurn,
			Params: map[string]any{"rate": 1000},
			Metrics: result.Metrics{
				ChangesPerSec: 998, MessagesPerChange: 1,
				Latency:      &result.Summary{N: 5000, P50: 2.1, P99: 9.8, Max: 30},
				ObserverMsgs: 5000,
			},
			Samples: []float64{0.5, 1, 1, 2, 2.5, 3, 5, 8, 13, 21},
		}
		if sys == result.SystemMochi {
			churn.Metrics = result.Metrics{} // no presence: nothing to propagate
			churn.Samples = nil
		}
		f.Runs = append(f.Runs, churn)

		// storm
		f.Runs = append(f.Runs, result.Run{System: sys, Scenario: result.ScenarioStorm,
			Metrics: result.Metrics{Sessions: 10000, ConnectsPerSec: 9000, ConnackP99Ms: 40, ConvergeMs: 1200}})

		// silent
		silent := result.Run{System: sys, Scenario: result.ScenarioSilent,
			Metrics: result.Metrics{Detection: &result.Summary{N: 100, P50: 14.2, P99: 15.4, Max: 15.6}, DetectionLimitS: 16}}
		if sys == result.SystemMochi {
			silent.Metrics = result.Metrics{}
		}
		f.Runs = append(f.Runs, silent)

		// fanout
		f.Runs = append(f.Runs, result.Run{System: sys, Scenario: result.ScenarioFanout,
			Metrics: result.Metrics{Latency: &result.Summary{N: 100, P50: 5, P99: 20, Max: 25}, MessagesPerChange: 100, ObserverMsgs: 10000}})

		// flap
		flap := result.Run{System: sys, Scenario: result.ScenarioFlap,
			Metrics: result.Metrics{ConvergeMs: 300, MessagesPerChange: 1.5}}
		if !presenced && sys == result.SystemMosquitto {
			flap.Correct = result.Correctness{WrongOffline: 3, StaleOverwrites: 2}
		}
		f.Runs = append(f.Runs, flap)
	}
	return f
}

// section returns the text of the "## name" section of a Markdown document.
func section(t *testing.T, md, name string) string {
	t.Helper()
	start := strings.Index(md, "\n## "+name+"\n")
	if start < 0 {
		t.Fatalf("no section %q in\n%s", name, md)
	}
	rest := md[start+len("\n## "+name+"\n"):]
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

// table returns the header cells and the rows (cells) of the first table in
// text.
func table(t *testing.T, text string) (header []string, rows [][]string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "|") {
			lines = append(lines, l)
		} else if len(lines) > 0 {
			break
		}
	}
	if len(lines) < 2 {
		t.Fatalf("no table in\n%s", text)
	}
	split := func(l string) []string {
		l = strings.TrimSuffix(strings.TrimPrefix(l, "| "), " |")
		// Cells never contain an unescaped pipe.
		var cells []string
		var cur strings.Builder
		for i := 0; i < len(l); i++ {
			if l[i] == '\\' && i+1 < len(l) {
				cur.WriteByte(l[i])
				cur.WriteByte(l[i+1])
				i++
				continue
			}
			if strings.HasPrefix(l[i:], " | ") {
				cells = append(cells, cur.String())
				cur.Reset()
				i += 2
				continue
			}
			cur.WriteByte(l[i])
		}
		return append(cells, cur.String())
	}
	header = split(lines[0])
	for _, l := range lines[2:] {
		rows = append(rows, split(l))
	}
	return header, rows
}

func cols(metrics ...string) []string {
	out := append([]string{"system"}, metrics...)
	return append(out, CorrectnessHeaders...)
}

func TestScenarioTables(t *testing.T) {
	f := fullFile()
	// The mosquitto storm fails: its row is n/a, its metrics add no column.
	for i := range f.Runs {
		r := &f.Runs[i]
		if r.System == result.SystemMosquitto && r.Scenario == result.ScenarioStorm {
			r.Error = "mosquitto: connect: connection refused | retried 3×"
			r.Metrics.RedisCmdsPerPing = 7 // must not make a column appear
		}
	}
	md := string(Markdown(f))

	tests := []struct {
		scenario string
		cols     []string
		systems  []string
		naRow    string // system whose row is n/a
	}{
		{result.ScenarioSteady, cols("sessions", "PINGREQ/s", "CPU/PINGREQ (µs)", "RSS/session (KiB)", "RSS (MiB)", "Redis cmds/PINGREQ"), Systems, ""},
		{result.ScenarioChurn, cols("changes/s", "latency n", "p50 latency (ms)", "p99 latency (ms)", "max latency (ms)", "msgs/change", "observer msgs"), Systems, ""},
		{result.ScenarioStorm, cols("sessions", "connects/s", "CONNACK p99 (ms)", "converge (ms)"), Systems, result.SystemMosquitto},
		{result.ScenarioSilent, cols("detection n", "detection p50 (s)", "detection p99 (s)", "detection max (s)", "limit (s)"), Systems, ""},
		{result.ScenarioFanout, cols("latency n", "p50 latency (ms)", "p99 latency (ms)", "max latency (ms)", "msgs/change", "observer msgs"), Systems, ""},
		{result.ScenarioFlap, cols("converge (ms)", "msgs/change"), Systems, ""},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			header, rows := table(t, section(t, md, tt.scenario))
			if !slices.Equal(header, tt.cols) {
				t.Fatalf("columns\n got %q\nwant %q", header, tt.cols)
			}
			if len(rows) != len(tt.systems) {
				t.Fatalf("%d rows, want %d", len(rows), len(tt.systems))
			}
			for i, row := range rows {
				if len(row) != len(header) {
					t.Fatalf("row %d has %d cells, want %d: %q", i, len(row), len(header), row)
				}
				sys := strings.Fields(row[0])[0]
				if sys != tt.systems[i] {
					t.Fatalf("row %d is %q, want %q", i, sys, tt.systems[i])
				}
				na := 0
				for _, c := range row[1:] {
					if c == "n/a" {
						na++
					}
				}
				if sys == tt.naRow {
					if na != len(row)-1 {
						t.Fatalf("errored row not all n/a: %q", row)
					}
					if !strings.Contains(row[0], "[^e") {
						t.Fatalf("errored row has no footnote marker: %q", row[0])
					}
				} else if na != 0 {
					t.Fatalf("row of %s has n/a: %q", sys, row)
				}
			}
		})
	}

	storm := section(t, md, result.ScenarioStorm)
	if !strings.Contains(storm, `[^e1]: mosquitto-lastwill: mosquitto: connect: connection refused \| retried 3×`) {
		t.Fatalf("storm section lacks the error footnote:\n%s", storm)
	}
	// Backward versions mean nothing without presence.
	_, rows := table(t, section(t, md, result.ScenarioFlap))
	if got := rows[3][len(rows[3])-1]; got != "–" {
		t.Fatalf("mosquitto backward versions = %q, want –", got)
	}
	if got := rows[3][len(rows[3])-2]; got != "2" {
		t.Fatalf("mosquitto stale overwrites = %q, want 2", got)
	}
	// The bare broker has no presence: no correctness counts.
	_, rows = table(t, section(t, md, result.ScenarioSteady))
	if got := rows[2][len(rows[2])-4:]; !slices.Equal(got, []string{"–", "–", "–", "–"}) {
		t.Fatalf("mochi-bare correctness = %q, want –", got)
	}
	if got := rows[0][len(rows[0])-4:]; !slices.Equal(got, []string{"0", "0", "0", "0"}) {
		t.Fatalf("presenced-memory correctness = %q, want 0s", got)
	}
}

func TestMarkdownHeaderAndSections(t *testing.T) {
	f := fullFile()
	f.Runs[0].Notes = []string{"RSS measured after GC"}
	for i := range f.Runs {
		r := &f.Runs[i]
		if r.Scenario == result.ScenarioSteady && r.System == result.SystemRedis {
			r.Params["redis_window_s"] = 5.0
			r.Extra = map[string]float64{"pings": 90272, "rss_empty_mib": 11.9}
		}
		if r.Scenario == result.ScenarioSteady && r.System == result.SystemMochi {
			r.Params["keepalive_s"] = 60
		}
	}
	md := string(Markdown(f))
	for _, want := range []string{
		"2 CPUs (Test CPU @ 2.0GHz)", "3.80 GiB memory", "kernel 6.1.0-test", "Go 1.26.8",
		"Parameters: devices 15000.\n\n- presenced-memory: keepalive\\_s 30\n- presenced-redis: keepalive\\_s 30, redis\\_window\\_s 5\n- mochi-bare: keepalive\\_s 60\n- mosquitto-lastwill: keepalive\\_s 30\n",
		"Parameters: rate 1000.\n", "- presenced-redis: pings 90,272, rss\\_empty\\_mib 11.9\n",
		"mosquitto 2.0.11", "redis 7.0.15", "2026-11-30 04:00:00 UTC", "4m2s", "`make bench`",
		"## Ratios", "## Targets", "## Run notes", "- steady / presenced-memory: RSS measured after GC",
		"PINGREQ/s is **95.2 %** of mochi-bare's",
		"RSS/session of presenced-memory is 9.50 KiB vs 7.25 KiB for mochi-bare: +2.25 KiB",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	// Order of sections.
	last := -1
	for _, h := range []string{"## steady", "## churn", "## storm", "## silent", "## fanout", "## flap", "## Ratios", "## Targets", "## Run notes"} {
		i := strings.Index(md, "\n"+h+"\n")
		if i <= last {
			t.Fatalf("section %q out of order or missing", h)
		}
		last = i
	}
}

func TestMarkdownEmptyFile(t *testing.T) {
	md := string(Markdown(result.File{}))
	for _, sc := range Scenarios {
		if !strings.Contains(section(t, md, sc), "Not run.") {
			t.Errorf("%s: no 'Not run.'", sc)
		}
	}
	_, rows := table(t, section(t, md, "Targets"))
	for _, r := range rows {
		if r[3] != NotMeasured {
			t.Errorf("target %q / %s: %q, want not measured", r[0], r[1], r[3])
		}
	}
}

// edit returns fullFile with fn applied to the run of scenario and system.
func edit(scenario, system string, fn func(*result.Run)) result.File {
	f := fullFile()
	for i := range f.Runs {
		if f.Runs[i].Scenario == scenario && f.Runs[i].System == system {
			fn(&f.Runs[i])
		}
	}
	return f
}

func drop(scenario, system string) result.File {
	f := fullFile()
	f.Runs = slices.DeleteFunc(f.Runs, func(r result.Run) bool { return r.Scenario == scenario && r.System == system })
	return f
}

func TestTargets(t *testing.T) {
	const (
		rssT   = "15,000 concurrent sessions on one node, RSS ≤ 12 KiB per idle session (steady)"
		pingT  = "PINGREQ throughput with presence on ≥ 90 % of bare mochi (steady)"
		redisT = "≤ 0.05 Redis commands per PINGREQ at keep-alive 30 s (steady)"
		latMT  = "propagation latency p99 ≤ 25 ms at 1,000 changes/s (churn)"
		latRT  = "propagation latency p99 ≤ 50 ms at 1,000 changes/s (churn)"
		stormT = "connect storm ≥ 8,000 connects/s with the Redis store, every observer right at the end (storm)"
		silT   = "silent death detected within 1.5 × keep-alive + 1 s at p99 (silent)"
		corT   = "zero ghosts, wrong offline, stale overwrites, backward versions in every scenario"
		mem    = result.SystemMemory
		red    = result.SystemRedis
		mos    = result.SystemMosquitto
	)
	steady := func(sys string, fn func(*result.Run)) result.File { return edit(result.ScenarioSteady, sys, fn) }
	tests := []struct {
		name       string
		f          result.File
		target     string
		system     string
		want       string
		figureHas  string
		otherMetOK bool // every other target still met
	}{
		{"rss exactly 12 KiB", steady(mem, func(r *result.Run) { r.Metrics.RSSPerSessionKiB = 12 }), rssT, mem, Met, "15,000 sessions, 12.00 KiB/session", true},
		{"rss 12.01 KiB", steady(mem, func(r *result.Run) { r.Metrics.RSSPerSessionKiB = 12.01 }), rssT, mem, Missed, "12.01 KiB", true},
		{"rss 12.004 KiB reads above 12", steady(red, func(r *result.Run) { r.Metrics.RSSPerSessionKiB = 12.004 }), rssT, red, Missed, "12.004 KiB", true},
		{"14,999 sessions", steady(red, func(r *result.Run) { r.Metrics.Sessions = 14999 }), rssT, red, Missed, "14,999 sessions", true},
		{"rss not measured", steady(mem, func(r *result.Run) { r.Metrics.RSSPerSessionKiB = 0 }), rssT, mem, NotMeasured, "", false},
		{"steady errored", steady(mem, func(r *result.Run) { r.Error = "boom" }), rssT, mem, NotMeasured, "", false},
		{"steady missing", drop(result.ScenarioSteady, red), rssT, red, NotMeasured, "", false},

		{"ping exactly 90 %", steady(mem, func(r *result.Run) { r.Metrics.PingsPerSec = 945 }), pingT, mem, Met, "90.0 %", true},
		{"ping 89.99 %", steady(mem, func(r *result.Run) { r.Metrics.PingsPerSec = 944.9 }), pingT, mem, Missed, "89.99 %", true},
		{"ping above mochi", steady(red, func(r *result.Run) { r.Metrics.PingsPerSec = 1100 }), pingT, red, Met, "104.8 %", true},
		{"mochi missing", drop(result.ScenarioSteady, result.SystemMochi), pingT, mem, NotMeasured, "", false},
		{"mochi errored", steady(result.SystemMochi, func(r *result.Run) { r.Error = "x" }), pingT, red, NotMeasured, "", false},

		{"redis cmds exactly 0.05", steady(red, func(r *result.Run) { r.Metrics.RedisCmdsPerPing = 0.05 }), redisT, red, Met, "0.050 cmds/PINGREQ at keep-alive 30 s", true},
		{"redis cmds 0.0501", steady(red, func(r *result.Run) { r.Metrics.RedisCmdsPerPing = 0.0501 }), redisT, red, Missed, "0.0501 cmds", true},
		{"redis cmds at keep-alive 60", steady(red, func(r *result.Run) { r.Params["keepalive_s"] = 60.0 }), redisT, red, NotMeasured, "at keep-alive 60 s (not the target's keep-alive)", false},
		{"redis cmds without keep-alive param", steady(red, func(r *result.Run) { delete(r.Params, "keepalive_s") }), redisT, red, Met, "0.041 cmds/PINGREQ", true},

		{"latency memory exactly 25", edit(result.ScenarioChurn, mem, func(r *result.Run) { r.Metrics.Latency.P99 = 25 }), latMT, mem, Met, "p99 25.00 ms at 998 changes/s (below 1,000 changes/s)", true},
		{"latency memory 25.01", edit(result.ScenarioChurn, mem, func(r *result.Run) { r.Metrics.Latency.P99 = 25.01 }), latMT, mem, Missed, "p99 25.01 ms", true},
		{"latency redis exactly 50", edit(result.ScenarioChurn, red, func(r *result.Run) { r.Metrics.Latency.P99 = 50; r.Metrics.ChangesPerSec = 1001 }), latRT, red, Met, "p99 50.00 ms at 1,001 changes/s", true},
		{"latency redis 50.1", edit(result.ScenarioChurn, red, func(r *result.Run) { r.Metrics.Latency.P99 = 50.1 }), latRT, red, Missed, "p99 50.10 ms", true},
		{"latency not measured", edit(result.ScenarioChurn, red, func(r *result.Run) { r.Metrics.Latency = nil }), latRT, red, NotMeasured, "", false},

		{"storm exactly 8000", edit(result.ScenarioStorm, red, func(r *result.Run) { r.Metrics.ConnectsPerSec = 8000 }), stormT, red, Met, "8,000 connects/s, converged in 1,200 ms, 0 ghosts, 0 wrong offline", true},
		{"storm 7999.6", edit(result.ScenarioStorm, red, func(r *result.Run) { r.Metrics.ConnectsPerSec = 7999.6 }), stormT, red, Missed, "7999.6 connects/s", true},
		{"storm never converged", edit(result.ScenarioStorm, red, func(r *result.Run) { r.Metrics.ConvergeMs = 0 }), stormT, red, Missed, "observers never converged", true},
		{"storm ghost", edit(result.ScenarioStorm, red, func(r *result.Run) { r.Correct.Ghosts = 1 }), stormT, red, Missed, "1 ghosts", false},
		{"storm wrong offline", edit(result.ScenarioStorm, red, func(r *result.Run) { r.Correct.WrongOffline = 2 }), stormT, red, Missed, "2 wrong offline", false},
		{"storm memory does not count", edit(result.ScenarioStorm, mem, func(r *result.Run) { r.Metrics.ConnectsPerSec = 10 }), stormT, red, Met, "9,000 connects/s", true},

		{"silent p99 at the limit", edit(result.ScenarioSilent, mem, func(r *result.Run) { r.Metrics.Detection.P99 = 16 }), silT, mem, Met, "p99 16.00 s, limit 16 s", true},
		{"silent p99 above", edit(result.ScenarioSilent, red, func(r *result.Run) { r.Metrics.Detection.P99 = 16.001 }), silT, red, Missed, "p99 16.001 s", true},
		{"silent no limit", edit(result.ScenarioSilent, red, func(r *result.Run) { r.Metrics.DetectionLimitS = 0 }), silT, red, NotMeasured, "", false},
		{"silent no detection", edit(result.ScenarioSilent, mem, func(r *result.Run) { r.Metrics.Detection = nil }), silT, mem, NotMeasured, "", false},

		{"all correct", fullFile(), corT, mem, Met, "0 ghosts, 0 wrong offline, 0 stale overwrites, 0 backward versions over 6 of 6 scenarios", true},
		{"one stale overwrite", edit(result.ScenarioFlap, red, func(r *result.Run) { r.Correct.StaleOverwrites = 1 }), corT, red, Missed, "1 stale overwrites", true},
		{"one backward version", edit(result.ScenarioFanout, mem, func(r *result.Run) { r.Correct.BackwardVersion = 1 }), corT, mem, Missed, "1 backward versions", true},
		{"a scenario missing", drop(result.ScenarioFanout, mem), corT, mem, Met, "over 5 of 6 scenarios (fanout not measured)", true},
		{"mosquitto beside", fullFile(), corT, mos, Reference, "0 ghosts, 3 wrong offline, 2 stale overwrites over 6 of 6 scenarios", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *Target
			targets := Targets(tt.f)
			for i := range targets {
				if targets[i].Target == tt.target && targets[i].System == tt.system {
					got = &targets[i]
				}
			}
			if got == nil {
				t.Fatalf("no target %q for %s in %+v", tt.target, tt.system, targets)
			}
			if got.Result != tt.want {
				t.Fatalf("result %q (figure %q), want %q", got.Result, got.Figure, tt.want)
			}
			if !strings.Contains(got.Figure, tt.figureHas) {
				t.Fatalf("figure %q lacks %q", got.Figure, tt.figureHas)
			}
			if tt.want == NotMeasured && got.Figure != "" && !strings.Contains(got.Figure, "keep-alive") {
				t.Fatalf("not measured with a figure: %q", got.Figure)
			}
			if tt.otherMetOK {
				for _, o := range targets {
					if &o != got && !(o.Target == tt.target && o.System == tt.system) && o.Result != Met && o.Result != Reference {
						t.Errorf("other target %q / %s: %s (%s)", o.Target, o.System, o.Result, o.Figure)
					}
				}
			}
			// The Markdown shows the same verdict.
			md := section(t, string(Markdown(tt.f)), "Targets")
			_, rows := table(t, md)
			found := false
			for _, r := range rows {
				if r[0] == mdEscape(tt.target) && r[1] == mdEscape(tt.system) {
					found = true
					if r[3] != tt.want {
						t.Fatalf("Markdown verdict %q, want %q", r[3], tt.want)
					}
				}
			}
			if !found {
				t.Fatalf("target row missing from Markdown:\n%s", md)
			}
		})
	}
}

func TestTargetsAfterJSONRoundTrip(t *testing.T) {
	// Params come back from JSON as float64.
	b, err := json.Marshal(fullFile())
	if err != nil {
		t.Fatal(err)
	}
	var f result.File
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, tg := range Targets(f) {
		if tg.Result != Met && tg.Result != Reference {
			t.Errorf("%q / %s: %s (%s)", tg.Target, tg.System, tg.Result, tg.Figure)
		}
	}
	if !bytes.Equal(Markdown(f), Markdown(fullFile())) {
		t.Errorf("Markdown differs after a JSON round trip:\n%s\n---\n%s", Markdown(f), Markdown(fullFile()))
	}
}

// svgInfo decodes an SVG to EOF and returns its paths and character data.
type svgInfo struct {
	root  string
	attrs map[string]string
	paths []map[string]string
	text  []string
}

func parseSVG(t *testing.T, b []byte) svgInfo {
	t.Helper()
	var info svgInfo
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not XML: %v\n%s", err, b)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			attrs := map[string]string{}
			for _, a := range x.Attr {
				attrs[a.Name.Local] = a.Value
			}
			if info.root == "" {
				info.root = x.Name.Local
				info.attrs = attrs
				if x.Name.Space != "http://www.w3.org/2000/svg" {
					t.Fatalf("root namespace %q", x.Name.Space)
				}
			}
			if x.Name.Local == "path" {
				info.paths = append(info.paths, attrs)
			}
			for _, bad := range []string{"script", "image", "use", "style", "foreignObject", "a"} {
				if x.Name.Local == bad {
					t.Fatalf("SVG has a <%s> element", bad)
				}
			}
			for k, v := range attrs {
				if strings.Contains(k, "href") || strings.Contains(v, "url(") {
					t.Fatalf("external reference %s=%q", k, v)
				}
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(x)); s != "" {
				info.text = append(info.text, s)
			}
		}
	}
	if info.root != "svg" {
		t.Fatalf("root element %q", info.root)
	}
	return info
}

func TestLatencySVG(t *testing.T) {
	withName := func(name string) result.File {
		f := fullFile()
		f.Runs = append(f.Runs, result.Run{System: name, Scenario: result.ScenarioChurn, Samples: []float64{3, 4, 5}})
		return f
	}
	tests := []struct {
		name    string
		f       result.File
		paths   int
		hasText []string
	}{
		{"standard set", fullFile(), 3, []string{
			"Propagation latency (churn), CDF",
			"presenced-memory: p50 2.10 ms, p99 9.80 ms (n=10)",
			"presenced-redis: p50 2.10 ms, p99 9.80 ms (n=10)",
			"mosquitto-lastwill: p50 2.10 ms, p99 9.80 ms (n=10)",
			"0.1", "1", "10", "100", "0 %", "100 %",
		}},
		{"no samples", result.File{}, 0, []string{"no latency samples"}},
		{"samples only in another scenario", func() result.File {
			f := result.File{Runs: []result.Run{{System: result.SystemMemory, Scenario: result.ScenarioFanout, Samples: []float64{1, 2}}}}
			return f
		}(), 0, []string{"no latency samples"}},
		{"errored run is left out", edit(result.ScenarioChurn, result.SystemRedis, func(r *result.Run) { r.Error = "x" }), 2, nil},
		{"escaped system name", withName(`evil <&> "sys"`), 4, []string{`evil <&> "sys": p50 4.00 ms, p99 5.00 ms (n=3)`}},
		{"percentiles from samples without a summary", result.File{Runs: []result.Run{{
			System: result.SystemMemory, Scenario: result.ScenarioChurn,
			Samples: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 100},
		}}}, 1, []string{"presenced-memory: p50 5.00 ms, p99 100 ms (n=10)"}},
		{"single value and zero", result.File{Runs: []result.Run{{
			System: result.SystemMemory, Scenario: result.ScenarioChurn, Samples: []float64{0, 7, 7, 7},
		}}}, 1, []string{"1", "10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := LatencySVG(tt.f)
			info := parseSVG(t, b)
			if info.attrs["width"] != "800" || info.attrs["height"] != "450" {
				t.Fatalf("size %sx%s", info.attrs["width"], info.attrs["height"])
			}
			if len(info.paths) != tt.paths {
				t.Fatalf("%d paths, want %d", len(info.paths), tt.paths)
			}
			colors := map[string]bool{}
			for _, p := range info.paths {
				if p["d"] == "" || p["stroke"] == "" {
					t.Fatalf("path without d or stroke: %v", p)
				}
				colors[p["stroke"]] = true
			}
			if len(colors) != tt.paths {
				t.Fatalf("colors not distinct: %v", colors)
			}
			for _, want := range tt.hasText {
				if !slices.Contains(info.text, want) {
					t.Errorf("no text %q in %q", want, info.text)
				}
			}
			if tt.paths > 0 && slices.Contains(info.text, "no latency samples") {
				t.Error("says no latency samples although it has some")
			}
		})
	}
}

func TestEscaping(t *testing.T) {
	const name = "a<&>b|c"
	f := fullFile()
	f.Runs = append(f.Runs, result.Run{System: name, Scenario: result.ScenarioChurn,
		Metrics: result.Metrics{ChangesPerSec: 5}, Samples: []float64{1, 2},
		Notes: []string{"note <script>"}})
	f.Machine.CPUModel = "<b>cpu</b>"
	f.Command = "bin/presence-bench --x `y`"

	svg := LatencySVG(f)
	if bytes.Contains(svg, []byte(name)) || bytes.Contains(svg, []byte("<&>")) {
		t.Fatal("SVG contains the raw name")
	}
	if !bytes.Contains(svg, []byte("a&lt;&amp;&gt;b|c")) {
		t.Fatal("SVG lacks the escaped name")
	}
	parseSVG(t, svg)

	md := string(Markdown(f))
	for _, raw := range []string{"<&>", "<b>", "<script>"} {
		if strings.Contains(md, raw) {
			t.Errorf("Markdown contains raw %q", raw)
		}
	}
	for _, want := range []string{`a\<\&\>b\|c`, `\<b\>cpu\</b\>`, "`` bin/presence-bench --x `y` ``", `note \<script\>`} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	// The odd system is a row of the churn table, after the standard ones.
	header, rows := table(t, section(t, md, result.ScenarioChurn))
	if len(rows) != 5 || rows[4][0] != `a\<\&\>b\|c` || len(rows[4]) != len(header) {
		t.Fatalf("churn rows %q", rows)
	}
}

func TestFormatting(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{fmtInt(15000), "15,000"},
		{fmtInt(999), "999"},
		{fmtInt(1234567), "1,234,567"},
		{fmtInt(-1234), "-1,234"},
		{fmtNum(0.041), "0.041"},
		{fmtNum(4.2), "4.20"},
		{fmtNum(12.34), "12.3"},
		{fmtNum(180), "180"},
		{fmtNum(9000), "9,000"},
		{fmtAgainst(12, 12, 2), "12.00"},
		{fmtAgainst(11.996, 12, 2), "11.996"},
		{fmtAgainst(12.0049, 12, 2), "12.005"},
		{fmtAgainst(8000, 8000, 0), "8,000"},
		{fmtAgainst(7999.6, 8000, 0), "7999.6"},
		{fmtPctAgainst(89.999, false), "89.999"},
		{fmtPctAgainst(90, true), "90.0"},
		{codeSpan("make bench"), "`make bench`"},
		{codeSpan("a `b`"), "`` a `b` ``"},
		{tickLabel(0.1), "0.1"},
		{tickLabel(10000), "10,000"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// The group topic's watchers get versions too: its backward-versions cell
// is a count, not "–" (which stays for mosquitto).
func TestBackwardVersionsOfTheGroupTopic(t *testing.T) {
	f := result.File{Runs: []result.Run{
		{System: result.SystemGroup, Scenario: "team"},
		{System: result.SystemMosquitto, Scenario: "team"},
	}}
	md := string(Markdown(f))
	rows := map[string]string{}
	for _, line := range strings.Split(md, "\n") {
		for _, sys := range []string{result.SystemGroup, result.SystemMosquitto} {
			if strings.HasPrefix(line, "| "+sys+" |") {
				rows[sys] = line
			}
		}
	}
	if !strings.HasSuffix(rows[result.SystemGroup], "| 0 |") || !strings.HasSuffix(rows[result.SystemMosquitto], "| – |") {
		t.Fatalf("rows:\n%s\n%s", rows[result.SystemGroup], rows[result.SystemMosquitto])
	}
}

// TestMarkdownOtherScenariosOnly: a file of other scenarios only (the
// resilience set) has their sections and notes, and no standard sections,
// ratios or targets.
func TestMarkdownOtherScenariosOnly(t *testing.T) {
	f := result.File{Runs: []result.Run{
		{System: result.SystemRedis, Scenario: "crash", Params: map[string]any{"sessions": 5000},
			Metrics: result.Metrics{Sessions: 5000, ConvergeMs: 2100}, Extra: map[string]float64{"users_shown_offline": 3},
			Notes: []string{"target 0 users shown offline: 3: missed"}},
		{System: result.SystemMosquitto, Scenario: "battle", Metrics: result.Metrics{Sessions: 5}},
	}}
	md := string(Markdown(f))
	for _, want := range []string{"## crash\n", "## battle\n", "users\\_shown\\_offline 3", "- crash / presenced-redis: target 0 users shown offline: 3: missed"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	for _, not := range []string{"## steady", "## flap\n", "Not run.", "## Ratios", "## Targets"} {
		if strings.Contains(md, not) {
			t.Errorf("Markdown has %q:\n%s", not, md)
		}
	}
}
