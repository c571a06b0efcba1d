package presence

import (
	"maps"
	"slices"
	"testing"
	"time"
)

// SweepOverdue over successive passes of one sweeper, on a clock the test
// moves: what it sweeps at each pass, and what it remembers.
func TestSweepOverdue(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const grace = 2 * time.Second
	gone := Overdue{Member: "A|1", Inc: "1"}                 // its record expired
	restarted := Overdue{Member: "B|1", Inc: "1", Live: "2"} // its node runs incarnation 2
	alive := Overdue{Member: "C|1", Inc: "1", Live: "1"}     // overdue, but its record names it
	type pass struct {
		at       time.Duration // since t0
		overdue  []Overdue
		complete bool
		doubt    bool
		sweep    []string       // members swept
		seen     map[string]int // member -> seen at t0 + this many ms
	}
	cases := []struct {
		name   string
		passes []pass
	}{
		{"nothing overdue: nothing to read, nothing kept", []pass{
			{0, nil, true, false, nil, map[string]int{}},
		}},
		{"a gone record is swept at once", []pass{
			{0, []Overdue{gone, alive}, true, false, []string{"A|1"}, map[string]int{}},
		}},
		{"a restarted node's incarnation waits the grace, then is swept", []pass{
			{0, []Overdue{restarted}, true, false, nil, map[string]int{"B|1": 0}},
			{grace - time.Millisecond, []Overdue{restarted}, true, false, nil, map[string]int{"B|1": 0}},
			{grace, []Overdue{restarted}, true, false, []string{"B|1"}, map[string]int{}},
		}},
		{"gone in doubt waits the grace, even once the doubt is over", []pass{
			{0, []Overdue{gone}, true, true, nil, map[string]int{"A|1": 0}},
			{time.Second, []Overdue{gone}, true, false, nil, map[string]int{"A|1": 0}},
			{grace, []Overdue{gone}, true, false, []string{"A|1"}, map[string]int{}},
		}},
		{"a node that refreshes again is forgotten: the next failover waits anew", []pass{
			{0, []Overdue{gone}, true, true, nil, map[string]int{"A|1": 0}},
			{time.Second, nil, true, false, nil, map[string]int{}}, // its deadline moved ahead
			{time.Hour, []Overdue{gone}, true, true, nil, map[string]int{"A|1": 3600000}},
		}},
		{"a list cut at its limit forgets nobody it did not list", []pass{
			{0, []Overdue{gone, restarted}, true, true, nil, map[string]int{"A|1": 0, "B|1": 0}},
			{time.Second, []Overdue{gone}, false, true, nil, map[string]int{"A|1": 0, "B|1": 0}},
			{grace, []Overdue{restarted}, false, true, []string{"B|1"}, map[string]int{"A|1": 0}},
		}},
		{"overdue but alive: kept, nothing remembered", []pass{
			{0, []Overdue{alive}, true, true, nil, map[string]int{}},
		}},
	}
	for _, tc := range cases {
		seen := map[string]time.Time{}
		for i, p := range tc.passes {
			before := maps.Clone(seen)
			sweep, next := SweepOverdue(p.overdue, p.complete, p.doubt, seen, t0.Add(p.at), grace)
			if !maps.Equal(seen, before) {
				t.Errorf("%s, pass %d: seen was modified", tc.name, i)
			}
			var got []string
			for _, o := range sweep {
				got = append(got, o.Member)
			}
			if !slices.Equal(got, p.sweep) {
				t.Errorf("%s, pass %d: swept %v, want %v", tc.name, i, got, p.sweep)
			}
			want := map[string]time.Time{}
			for m, ms := range p.seen {
				want[m] = t0.Add(time.Duration(ms) * time.Millisecond)
			}
			if !maps.EqualFunc(next, want, time.Time.Equal) {
				t.Errorf("%s, pass %d: seen %v, want %v", tc.name, i, next, want)
			}
			seen = next
		}
	}
}
