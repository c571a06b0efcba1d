package report

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/presenced/presenced/bench/result"
)

// bar is one system's figure: the median of its rounds, and their min and
// max (equal to the median for a single round).
type bar struct {
	label         string
	value, lo, hi float64
	color         string
}

// ref is a horizontal reference line: a target or a limit.
type ref struct {
	label string
	value float64
}

// barsFor makes a bar per system of scenario, from what value gives of the
// median run and of each round.
func barsFor(f result.File, scenario string, value func(result.Run) (float64, bool)) []bar {
	c, rs := Collapse(f)
	var out []bar
	extra := 0
	for _, r := range scenarioRuns(c, scenario) {
		if r.Error != "" {
			continue
		}
		v, ok := value(r)
		if !ok {
			continue
		}
		lo, hi, _ := rs.spread(r, value)
		if lo == 0 && hi == 0 {
			lo, hi = v, v
		}
		col, ok := palette[r.System]
		if !ok {
			col = extraColors[extra%len(extraColors)]
			extra++
		}
		out = append(out, bar{label: r.System, value: v, lo: lo, hi: hi, color: col})
	}
	return out
}

// barsSVG draws one bar per system with its min–max whisker, and the
// reference lines, on a linear axis from zero.
func barsSVG(title, unit string, bars []bar, refs []ref) []byte {
	var b bytes.Buffer
	svgOpen(&b, title)
	if len(bars) == 0 {
		return svgNoData(&b, "not measured")
	}
	top := 0.0
	for _, x := range bars {
		top = max(top, x.hi, x.value)
	}
	for _, r := range refs {
		top = max(top, r.value)
	}
	step := niceStep(top / 5)
	top = math.Ceil(top*1.08/step) * step
	x0, x1 := padL, float64(svgW)-padR
	y0, y1 := float64(svgH)-padB, 50.0
	yOf := func(v float64) float64 { return y0 - v/top*(y0-y1) }
	b.WriteString(`<g stroke="#e0e0e0" stroke-width="1">` + "\n")
	for v := 0.0; v <= top+step/2; v += step {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", x0, yOf(v), x1, yOf(v))
	}
	b.WriteString("</g>\n")
	for v := 0.0; v <= top+step/2; v += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", x0-6, yOf(v), esc(fmtNum(v)))
	}
	fmt.Fprintf(&b, `<text x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">%s</text>`+"\n", (y0+y1)/2, (y0+y1)/2, esc(unit))
	slot := (x1 - x0) / float64(len(bars))
	w := math.Min(slot*0.6, 90)
	for i, x := range bars {
		cx := x0 + slot*(float64(i)+0.5)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
			cx-w/2, yOf(x.value), w, y0-yOf(x.value), x.color, esc(fmt.Sprintf("%s: %s %s", x.label, fmtNum(x.value), unit)))
		if x.hi > x.lo {
			fmt.Fprintf(&b, `<path d="M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fH%.1f" stroke="#333333" stroke-width="1.5"/>`+"\n",
				cx, yOf(x.lo), yOf(x.hi), cx-6, yOf(x.lo), cx+6, cx-6, yOf(x.hi), cx+6)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-weight="bold">%s</text>`+"\n", cx, yOf(math.Max(x.value, x.hi))-6, esc(fmtNum(x.value)))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", cx, y0+18, esc(x.label))
	}
	for _, r := range refs {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999999" stroke-dasharray="5 3"/>`+"\n", x0, yOf(r.value), x1, yOf(r.value))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="11" fill="#555555">%s</text>`+"\n", x1-4, yOf(r.value)-4, esc(r.label))
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#333333"/>`+"\n", x0, y1, x1-x0, y0-y1)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11" fill="#555555">%s</text>`+"\n", (x0+x1)/2, float64(svgH)-15, esc("bar: median of the rounds; whisker: min–max"))
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// line is one system's curve.
type line struct {
	label    string
	points   [][2]float64 // x, y; sorted by x
	color    string
	dashed   bool // a further round of a system already in the legend
	noLegend bool
}

// linesSVG draws curves on a linear x axis and a log y axis, with
// horizontal reference lines.
func linesSVG(title, xUnit, yUnit string, lines []line, refs []ref) []byte {
	var b bytes.Buffer
	svgOpen(&b, title)
	p, ok := newLinesPlot(lines, refs)
	if !ok {
		return svgNoData(&b, "not measured")
	}
	p.axes(&b, xUnit, yUnit)
	for _, r := range refs {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999999" stroke-dasharray="5 3"/>`+"\n", p.x0, p.yOf(r.value), p.x1, p.yOf(r.value))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="11" fill="#555555">%s</text>`+"\n", p.x1-4, p.yOf(r.value)-4, esc(r.label))
	}
	row := 0
	for _, l := range lines {
		p.curve(&b, l, yUnit)
		if l.noLegend {
			continue
		}
		y := legendTop + legendRowH*float64(row) + legendRowH/2
		row++
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", p.x0, y, p.x0+22, y, l.color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`+"\n", p.x0+28, y, esc(l.label))
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#333333"/>`+"\n", p.x0, p.y1, p.x1-p.x0, p.y0-p.y1)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// linesPlot is the layout of a linesSVG plot: the frame (x0–x1 left to
// right, y0 at the bottom, y1 at the top, below the legend), the linear x
// axis up to xHi in steps of step, and the decades of the log y axis.
type linesPlot struct {
	x0, x1, y0, y1 float64
	xHi, step      float64
	dLo, dHi       int
}

// newLinesPlot lays a linesSVG plot out from every positive point of lines
// and every reference line; false when no point is positive.
func newLinesPlot(lines []line, refs []ref) (*linesPlot, bool) {
	var xs, ys []float64
	for _, l := range lines {
		for _, p := range l.points {
			if p[1] > 0 {
				xs, ys = append(xs, p[0]), append(ys, p[1])
			}
		}
	}
	if len(xs) == 0 {
		return nil, false
	}
	for _, r := range refs {
		ys = append(ys, r.value)
	}
	xHi, yLo, yHi := 0.0, math.Inf(1), 0.0
	for _, x := range xs {
		xHi = max(xHi, x)
	}
	for _, y := range ys {
		yLo, yHi = min(yLo, y), max(yHi, y)
	}
	p := &linesPlot{step: niceStep(xHi / 5)}
	p.xHi = math.Ceil(xHi*1.05/p.step) * p.step
	p.dLo, p.dHi = int(math.Floor(math.Log10(yLo))), int(math.Ceil(math.Log10(yHi)))
	if p.dHi <= p.dLo {
		p.dHi = p.dLo + 1
	}
	legend := 0
	for _, l := range lines {
		if !l.noLegend {
			legend++
		}
	}
	p.x0, p.x1 = padL, float64(svgW)-padR
	p.y0, p.y1 = float64(svgH)-padB, legendTop+legendRowH*float64(legend)+10
	return p, true
}

// xOf is the x of a value on the linear axis.
func (p *linesPlot) xOf(v float64) float64 { return p.x0 + v/p.xHi*(p.x1-p.x0) }

// yOf is the y of a positive value on the log axis.
func (p *linesPlot) yOf(v float64) float64 {
	return p.y0 - (math.Log10(v)-float64(p.dLo))/float64(p.dHi-p.dLo)*(p.y0-p.y1)
}

// axes draws the grid, the tick labels and the axis titles.
func (p *linesPlot) axes(b *bytes.Buffer, xUnit, yUnit string) {
	x0, x1, y0, y1, xHi, step := p.x0, p.x1, p.y0, p.y1, p.xHi, p.step
	b.WriteString(`<g stroke="#e0e0e0" stroke-width="1">` + "\n")
	for v := 0.0; v <= xHi+step/2; v += step {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", p.xOf(v), y0, p.xOf(v), y1)
	}
	for d := p.dLo; d <= p.dHi; d++ {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", x0, p.yOf(math.Pow10(d)), x1, p.yOf(math.Pow10(d)))
	}
	b.WriteString("</g>\n")
	for v := 0.0; v <= xHi+step/2; v += step {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", p.xOf(v), y0+18, esc(fmtInt(v)))
	}
	for d := p.dLo; d <= p.dHi; d++ {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", x0-6, p.yOf(math.Pow10(d)), esc(tickLabel(math.Pow10(d))))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, float64(svgH)-15, esc(xUnit))
	fmt.Fprintf(b, `<text x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">%s</text>`+"\n", (y0+y1)/2, (y0+y1)/2, esc(yUnit+" (log scale)"))
}

// curve draws one line through its positive points, and a dot with a
// tooltip at each.
func (p *linesPlot) curve(b *bytes.Buffer, l line, yUnit string) {
	var d strings.Builder
	for j, pt := range l.points {
		if pt[1] <= 0 {
			continue
		}
		cmd := "L"
		if j == 0 || d.Len() == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&d, "%s%.1f %.1f", cmd, p.xOf(pt[0]), p.yOf(pt[1]))
	}
	dash := ""
	if l.dashed {
		dash = ` stroke-dasharray="6 4" stroke-opacity="0.6"`
	}
	fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"%s><title>%s</title></path>`+"\n", d.String(), l.color, dash, esc(l.label))
	for _, pt := range l.points {
		if pt[1] > 0 {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s</title></circle>`+"\n", p.xOf(pt[0]), p.yOf(pt[1]), l.color,
				esc(fmt.Sprintf("%s: %s %s at %s", l.label, fmtNum(pt[1]), yUnit, fmtInt(pt[0]))))
		}
	}
}

// svgNoData ends a plot that has nothing to draw with text in its middle.
func svgNoData(b *bytes.Buffer, text string) []byte {
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" font-size="14" fill="#555555">%s</text>`+"\n", svgW/2, svgH/2, esc(text))
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func svgOpen(b *bytes.Buffer, title string) {
	fmt.Fprintf(b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(b, "<title>%s</title>\n", esc(title))
	fmt.Fprintf(b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", svgW, svgH)
	fmt.Fprintf(b, `<text x="%d" y="25" text-anchor="middle" font-size="16" font-weight="bold">%s</text>`+"\n", svgW/2, esc(title))
}

// niceStep rounds a raw axis step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow10(int(math.Floor(math.Log10(raw))))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// DetectionSVG draws the silent-death detection time of each system: the
// p99 of the median round, with the limit 1.5 × keep-alive + 1 s.
func DetectionSVG(f result.File) []byte {
	p99 := func(r result.Run) (float64, bool) {
		if r.Metrics.Detection == nil || r.Metrics.Detection.N == 0 {
			return 0, false
		}
		return r.Metrics.Detection.P99, true
	}
	var refs []ref
	if r, ok := find(mustCollapse(f), result.ScenarioSilent, result.SystemMemory); ok && r.Metrics.DetectionLimitS > 0 {
		refs = append(refs, ref{label: fmt.Sprintf("limit 1.5 × keep-alive + 1 s = %s s", fmtNum(r.Metrics.DetectionLimitS)), value: r.Metrics.DetectionLimitS})
	}
	return barsSVG("Silent death: detection time, p99 (silent)", "seconds", barsFor(f, result.ScenarioSilent, p99), refs)
}

// MemorySVG draws the resident memory per idle session of each system:
// the memory scenario's when it ran, else the steady scenario's.
func MemorySVG(f result.File) []byte {
	kib := func(r result.Run) (float64, bool) { return r.Metrics.RSSPerSessionKiB, r.Metrics.RSSPerSessionKiB > 0 }
	scenario, title := ScenarioMemory, "Resident memory per idle session (memory)"
	if len(barsFor(f, scenario, kib)) == 0 {
		scenario, title = result.ScenarioSteady, "Resident memory per session (steady)"
	}
	return barsSVG(title, "KiB per session", barsFor(f, scenario, kib), []ref{{label: "target: 16 KiB", value: 16}})
}

// ScenarioMemory is the idle-memory scenario's name.
const ScenarioMemory = "memory"

func mustCollapse(f result.File) result.File {
	c, _ := Collapse(f)
	return c
}

// CeilingSVG draws the throughput search of each system: propagation p99
// against the offered rate of changes, one line per round (the first
// solid, the others dashed), with the 50 ms bound.
func CeilingSVG(f result.File) []byte {
	c, rs := Collapse(f)
	var lines []line
	extra := 0
	for _, med := range scenarioRuns(c, ScenarioCeiling) {
		col, ok := palette[med.System]
		if !ok {
			col = extraColors[extra%len(extraColors)]
			extra++
		}
		first := true
		for _, r := range rs[key{med.Scenario, med.System}] {
			if r.Error != "" || len(r.Curve) == 0 {
				continue
			}
			pts := make([][2]float64, 0, len(r.Curve))
			for _, p := range r.Curve {
				pts = append(pts, [2]float64{p.OfferedPerSec, p.P99Ms})
			}
			sort.Slice(pts, func(i, j int) bool { return pts[i][0] < pts[j][0] })
			label := med.System
			if med.Error == "" && med.Metrics.ChangesPerSec > 0 {
				label += fmt.Sprintf(": ceiling %s changes/s", fmtInt(med.Metrics.ChangesPerSec))
				if lo, hi, several := rs.spread(med, func(x result.Run) (float64, bool) {
					return x.Metrics.ChangesPerSec, x.Metrics.ChangesPerSec > 0
				}); several {
					label += fmt.Sprintf(" (%s–%s)", fmtInt(lo), fmtInt(hi))
				}
			}
			lines = append(lines, line{label: label, points: pts, color: col, dashed: !first, noLegend: !first})
			first = false
		}
	}
	return linesSVG("Throughput ceiling: p99 against the offered rate (ceiling)", "offered presence changes per second", "propagation p99 (ms)",
		lines, []ref{{label: "bound: 50 ms", value: 50}})
}

// ScenarioCeiling is the throughput search's name.
const ScenarioCeiling = "ceiling"
