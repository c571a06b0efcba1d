package stats

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every metric's name in Prometheus.
const Namespace = "presenced"

// Kind is a figure's kind.
type Kind int

// The kinds, as Prometheus has them.
const (
	Gauge   Kind = iota // a value now: it goes up and down
	Counter             // a count since the start: it only goes up
)

// Stat is one row of the table: a figure of presence, read when asked.
type Stat struct {
	// Name is the metric's name without Namespace, and the figure's key in
	// /api/v1/stats: the same name in both.
	Name string
	Help string
	Kind Kind
	// Labels are the names of the metric's labels (none for most). In
	// JSON a labelled figure is an object keyed by its label values,
	// joined with "," when there are several.
	Labels []string
	// Read reports the figure's values: once, with no label values, for an
	// unlabelled one; once per series for a labelled one.
	Read func(emit func(v float64, labels ...string))
	// Legacy are the JSON names this figure had before the table (kept for
	// one release, then dropped): the name of the whole figure (key "") or
	// of one series (key: its label values joined with ",").
	Legacy map[string]string
	// Hidden keeps the row out of Prometheus: a legacy JSON name whose
	// value no metric has.
	Hidden bool
}

// Table is the figures of presence (and of the binary around it), from
// which both /api/v1/stats and /metrics are made.
type Table struct {
	rows  []Stat
	descs []*prometheus.Desc // by row; nil for a hidden one
}

// New returns a table of rows.
func New(rows ...Stat) *Table {
	t := &Table{}
	t.Add(rows...)
	return t
}

// Add appends rows (before the table is registered anywhere).
func (t *Table) Add(rows ...Stat) {
	for _, r := range rows {
		var d *prometheus.Desc
		if !r.Hidden {
			d = prometheus.NewDesc(Namespace+"_"+r.Name, r.Help, r.Labels, nil)
		}
		t.rows = append(t.rows, r)
		t.descs = append(t.descs, d)
	}
}

// Describe implements prometheus.Collector.
func (t *Table) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range t.descs {
		if d != nil {
			ch <- d
		}
	}
}

// Collect implements prometheus.Collector: every row read now.
func (t *Table) Collect(ch chan<- prometheus.Metric) {
	for i, r := range t.rows {
		d := t.descs[i]
		if d == nil {
			continue
		}
		kind := prometheus.GaugeValue
		if r.Kind == Counter {
			kind = prometheus.CounterValue
		}
		r.Read(func(v float64, labels ...string) { ch <- prometheus.MustNewConstMetric(d, kind, v, labels...) })
	}
}

// Snapshot reads every row now.
func (t *Table) Snapshot() Snapshot {
	s := Snapshot{values: make(map[string]float64), series: make(map[string]map[string]float64), legacy: make(map[string]float64)}
	for _, r := range t.rows {
		r.Read(func(v float64, labels ...string) {
			key := strings.Join(labels, ",")
			switch {
			case r.Hidden: // a legacy name only
			case len(r.Labels) == 0:
				s.values[r.Name] = v
			default:
				if s.series[r.Name] == nil {
					s.series[r.Name] = make(map[string]float64)
				}
				s.series[r.Name][key] = v
			}
			if old, ok := r.Legacy[key]; ok {
				s.legacy[old] = v
			}
		})
		if old, ok := r.Legacy[""]; ok && len(r.Labels) > 0 {
			var sum float64
			for _, v := range s.series[r.Name] {
				sum += v
			}
			s.legacy[old] = sum
		}
	}
	return s
}

// Snapshot is the table read at one moment.
type Snapshot struct {
	values map[string]float64            // unlabelled figures, by name
	series map[string]map[string]float64 // labelled figures: name -> label values -> value
	legacy map[string]float64            // old JSON names
	// Extra holds what else the JSON carries beside the figures (a string
	// such as node_state, the runtime's figures, and legacy objects), by
	// key.
	Extra map[string]any
}

// Get returns the unlabelled figure name (0 when the table has none).
func (s Snapshot) Get(name string) int64 { return int64(s.values[name]) }

// Of returns the series of figure name with the label values labels.
func (s Snapshot) Of(name string, labels ...string) int64 {
	return int64(s.series[name][strings.Join(labels, ",")])
}

// Sum returns the sum of every series of figure name.
func (s Snapshot) Sum(name string) int64 {
	var sum float64
	for _, v := range s.series[name] {
		sum += v
	}
	return int64(sum)
}

// Names returns the figures' names, in order.
func (s Snapshot) Names() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for n := range s.values {
			if !yield(n) {
				return
			}
		}
		for n := range s.series {
			if !yield(n) {
				return
			}
		}
	})
}

// MarshalJSON writes one object: every figure by name (a labelled one as
// an object of its series), the legacy names, and Extra.
func (s Snapshot) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(s.values)+len(s.series)+len(s.legacy)+len(s.Extra))
	for k, v := range s.legacy {
		out[k] = v
	}
	for k, v := range s.values {
		out[k] = v
	}
	for k, v := range s.series {
		out[k] = v
	}
	maps.Copy(out, s.Extra)
	return json.Marshal(out)
}

// Merge adds o's figures, legacy names and Extra to s (o's win on a
// clash), and returns s.
func (s Snapshot) Merge(o Snapshot) Snapshot {
	if s.values == nil {
		s = Snapshot{values: map[string]float64{}, series: map[string]map[string]float64{}, legacy: map[string]float64{}}
	}
	maps.Copy(s.values, o.values)
	maps.Copy(s.series, o.series)
	maps.Copy(s.legacy, o.legacy)
	if len(o.Extra) > 0 && s.Extra == nil {
		s.Extra = make(map[string]any, len(o.Extra))
	}
	maps.Copy(s.Extra, o.Extra)
	return s
}
