package report

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/presenced/presenced/bench/result"
)

// A file whose scenarios ran in rounds (presence-bench --repeat) is
// reported as one run per scenario and system: the median of its rounds,
// shown with the rounds' min and max. Correctness counts are the worst
// round's: one wrong state in any round is one too many.

// key is a scenario and a system.
type key struct{ scenario, system string }

// rounds are every round's run of each scenario and system, in file order.
type rounds map[key][]result.Run

// of returns the successful rounds of r's scenario and system.
func (rs rounds) of(r result.Run) []result.Run {
	var ok []result.Run
	for _, x := range rs[key{r.Scenario, r.System}] {
		if x.Error == "" {
			ok = append(ok, x)
		}
	}
	return ok
}

// spread returns min and max of what value gives over the successful
// rounds of r's scenario and system, and whether there are several.
func (rs rounds) spread(r result.Run, value func(result.Run) (float64, bool)) (lo, hi float64, several bool) {
	n := 0
	for _, x := range rs.of(r) {
		v, ok := value(x)
		if !ok {
			continue
		}
		if n == 0 || v < lo {
			lo = v
		}
		if n == 0 || v > hi {
			hi = v
		}
		n++
	}
	return lo, hi, n > 1
}

// withSpread formats the median v, followed by the rounds' min–max when
// there are several and they differ.
func (rs rounds) withSpread(r result.Run, v float64, value func(result.Run) (float64, bool), format func(float64) string) string {
	s := format(v)
	if lo, hi, several := rs.spread(r, value); several && format(lo) != format(hi) {
		s += " (" + format(lo) + "–" + format(hi) + ")"
	}
	return s
}

// maxRounds is the most rounds any scenario and system has.
func (rs rounds) maxRounds() int {
	n := 0
	for _, l := range rs {
		n = max(n, len(l))
	}
	return n
}

// Collapse returns f with one run per scenario and system, in order of
// first appearance: the median of its rounds (a run without rounds is kept
// as it is), and every round by scenario and system.
func Collapse(f result.File) (result.File, rounds) {
	rs := rounds{}
	var order []key
	for _, r := range f.Runs {
		k := key{r.Scenario, r.System}
		if _, ok := rs[k]; !ok {
			order = append(order, k)
		}
		rs[k] = append(rs[k], r)
	}
	out := f
	out.Runs = make([]result.Run, 0, len(order))
	for _, k := range order {
		out.Runs = append(out.Runs, median(rs[k]))
	}
	return out, rs
}

// median makes one run of the rounds of a scenario and system: every
// figure the median of the successful rounds' (the lower middle one for
// an even count, so that it is a figure some round measured), the
// correctness counts the worst round's, the latency samples of every round
// (thinned), and every note. A round that failed is a note when others
// succeeded; when all failed the first one's error stands.
func median(runs []result.Run) result.Run {
	if len(runs) == 1 {
		r := runs[0]
		r.Round = 0
		return r
	}
	var ok []result.Run
	var failed []string
	for _, r := range runs {
		if r.Error == "" {
			ok = append(ok, r)
		} else {
			failed = append(failed, fmt.Sprintf("round %d failed: %s", r.Round, r.Error))
		}
	}
	if len(ok) == 0 {
		r := runs[0]
		r.Round = 0
		for _, x := range runs[1:] {
			r.Notes = append(r.Notes, x.Notes...)
		}
		return r
	}
	m := ok[0]
	m.Round = 0
	m.Notes = nil
	for _, r := range runs {
		for _, n := range r.Notes {
			if r.Round > 0 {
				n = fmt.Sprintf("round %d: %s", r.Round, n)
			}
			m.Notes = append(m.Notes, n)
		}
	}
	m.Notes = append(m.Notes, failed...)
	metrics := make([]map[string]any, len(ok))
	for i, r := range ok {
		metrics[i] = toMap(r.Metrics)
	}
	if b, err := json.Marshal(medianMap(metrics)); err == nil {
		var mm result.Metrics
		if json.Unmarshal(b, &mm) == nil {
			m.Metrics = mm
		}
	}
	m.Extra = nil
	extras := map[string][]float64{}
	for _, r := range ok {
		for k, v := range r.Extra {
			extras[k] = append(extras[k], v)
		}
	}
	if len(extras) > 0 {
		m.Extra = make(map[string]float64, len(extras))
		for k, vs := range extras {
			m.Extra[k] = lowerMedian(vs)
		}
	}
	m.Samples = nil
	for _, r := range ok {
		m.Samples = append(m.Samples, r.Samples...)
		c := r.Correct
		m.Correct.Ghosts = max(m.Correct.Ghosts, c.Ghosts)
		m.Correct.WrongOffline = max(m.Correct.WrongOffline, c.WrongOffline)
		m.Correct.StaleOverwrites = max(m.Correct.StaleOverwrites, c.StaleOverwrites)
		m.Correct.BackwardVersion = max(m.Correct.BackwardVersion, c.BackwardVersion)
	}
	m.Samples = thinSorted(m.Samples, 2000)
	return m
}

func toMap(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// medianMap takes the median of every number in ms, key by key, nested
// objects included; other values are the first map's.
func medianMap(ms []map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		for k, v := range m {
			if _, done := out[k]; done {
				continue
			}
			switch v.(type) {
			case float64:
				var vs []float64
				for _, o := range ms {
					if x, ok := o[k].(float64); ok {
						vs = append(vs, x)
					}
				}
				out[k] = lowerMedian(vs)
			case map[string]any:
				var sub []map[string]any
				for _, o := range ms {
					if x, ok := o[k].(map[string]any); ok {
						sub = append(sub, x)
					}
				}
				out[k] = medianMap(sub)
			default:
				out[k] = v
			}
		}
	}
	return out
}

// lowerMedian is the median of vs, the lower middle one for an even count.
func lowerMedian(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return s[(len(s)-1)/2]
}

// thinSorted returns at most n of xs, sorted, evenly picked.
func thinSorted(xs []float64, n int) []float64 {
	if len(xs) == 0 {
		return nil
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) <= n {
		return s
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = s[i*(len(s)-1)/(n-1)]
	}
	return out
}
