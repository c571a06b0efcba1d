package stats

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func table() *Table {
	opened, refused := int64(3), map[string]int64{"bad_identity": 2, "draining": 1}
	return New(
		Stat{Name: "sessions_opened_total", Help: "Sessions opened.", Kind: Counter,
			Read:   func(emit func(float64, ...string)) { emit(float64(opened)) },
			Legacy: map[string]string{"": "sessions_opened"}},
		Stat{Name: "connect_refusals_total", Help: "CONNECTs refused, by cause.", Kind: Counter, Labels: []string{"cause"},
			Read: func(emit func(float64, ...string)) {
				emit(float64(refused["bad_identity"]), "bad_identity")
				emit(float64(refused["draining"]), "draining")
			},
			Legacy: map[string]string{"draining": "drain_refused", "": "refused_total"}},
		Stat{Name: "legacy_only", Hidden: true, Read: func(emit func(float64, ...string)) { emit(7) },
			Legacy: map[string]string{"": "old_name"}},
		Stat{Name: "transitions_total", Help: "Transitions, from and to.", Kind: Counter, Labels: []string{"from", "to"},
			Read: func(emit func(float64, ...string)) { emit(4, "none", "online") }},
	)
}

// A snapshot reads every row by its name; its JSON holds the figures, the
// legacy names (a series', a labelled figure's sum, a hidden row's), and
// Extra; a hidden row has no name of its own.
func TestSnapshotJSON(t *testing.T) {
	s := table().Snapshot()
	if s.Get("sessions_opened_total") != 3 || s.Of("connect_refusals_total", "draining") != 1 || s.Sum("connect_refusals_total") != 3 ||
		s.Of("transitions_total", "none", "online") != 4 {
		t.Fatalf("read: %v %v %v", s.Get("sessions_opened_total"), s.Of("connect_refusals_total", "draining"), s.Sum("connect_refusals_total"))
	}
	s.Extra = map[string]any{"node": "a"}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"sessions_opened_total":  3.0,
		"sessions_opened":        3.0,
		"connect_refusals_total": map[string]any{"bad_identity": 2.0, "draining": 1.0},
		"drain_refused":          1.0,
		"refused_total":          3.0,
		"old_name":               7.0,
		"transitions_total":      map[string]any{"none,online": 4.0},
		"node":                   "a",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JSON %s\nwant %v", b, want)
	}
	if names := s.Names(); !reflect.DeepEqual(names, []string{"connect_refusals_total", "sessions_opened_total", "transitions_total"}) {
		t.Errorf("names %v", names)
	}
}

// The table is a Prometheus collector of the same figures under the
// namespace, without the hidden rows; Merge adds one snapshot to another.
func TestTableCollector(t *testing.T) {
	tb := table()
	problems, err := testutil.CollectAndLint(tb)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	if n := testutil.CollectAndCount(tb); n != 4 {
		t.Errorf("%d series, want 4 (the hidden row has none)", n)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(tb); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
		for m := range collect(tb) {
			if m.Desc().String() == tb.descs[0].String() {
				ch <- m
			}
		}
	})); v != 3 {
		t.Errorf("presenced_sessions_opened_total = %v, want 3", v)
	}
	var empty Snapshot
	m := empty.Merge(tb.Snapshot())
	if m.Get("sessions_opened_total") != 3 {
		t.Errorf("merged: %v", m.Get("sessions_opened_total"))
	}
}

// collect returns what a collector emits.
func collect(c prometheus.Collector) chan prometheus.Metric {
	ch := make(chan prometheus.Metric, 64)
	c.Collect(ch)
	close(ch)
	return ch
}
