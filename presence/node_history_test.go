package presence

import (
	"slices"
	"testing"
	"time"
)

// st builds a status of node A: "up1" is up in incarnation 1, "down1B" is
// down in incarnation 1 as reported by B; sessions tell two words of one
// state apart.
func st(state NodeState, inc, by string, sessions int) NodeStatus {
	return NodeStatus{Node: "A", State: state, Incarnation: inc, ReportedBy: by, Sessions: sessions}
}

var (
	up1      = st(NodeUp, "1", "", 0)
	up1b     = st(NodeUp, "1", "", 5)
	drain1   = st(NodeDraining, "1", "", 0)
	down1    = st(NodeDown, "1", "", 0)
	down1ByB = st(NodeDown, "1", "B", 0)
	down1ByC = st(NodeDown, "1", "C", 0)
	up2      = st(NodeUp, "2", "", 0)
	down2ByB = st(NodeDown, "2", "B", 0)
)

func TestNodeHistoryRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    NodeHistory
		st   NodeStatus
		want NodeHistory
		ok   bool
	}{
		{"first word", nil, up1, NodeHistory{up1}, true},
		{"a survivor's first word", nil, down1ByB, NodeHistory{down1ByB}, true},
		{"the periodic word replaces the last", NodeHistory{up1}, up1b, NodeHistory{up1b}, true},
		{"draining after up", NodeHistory{up1}, drain1, NodeHistory{up1, drain1}, true},
		{"down after draining", NodeHistory{up1, drain1}, down1, NodeHistory{up1, drain1, down1}, true},
		{"down straight from up", NodeHistory{up1}, down1, NodeHistory{up1, down1}, true},
		{"a late up after draining", NodeHistory{up1, drain1}, up1b, NodeHistory{up1, drain1}, false},
		{"a late up after down", NodeHistory{up1, down1}, up1b, NodeHistory{up1, down1}, false},
		{"a survivor buries the run it swept", NodeHistory{up1, drain1}, down1ByB, NodeHistory{up1, drain1, down1ByB}, true},
		{"a survivor cannot bury a restarted node", NodeHistory{up2}, down1ByB, NodeHistory{up2}, false},
		{"a survivor does not bury a node down already", NodeHistory{up1, down1}, down1ByB, NodeHistory{up1, down1}, false},
		{"the first survivor's word stays", NodeHistory{up1, down1ByB}, down1ByC, NodeHistory{up1, down1ByB}, false},
		{"the node's own down replaces a survivor's", NodeHistory{up1, down1ByB}, down1, NodeHistory{up1, down1}, true},
		{"a restart starts a new history", NodeHistory{up1, drain1, down1}, up2, NodeHistory{up2}, true},
		{"a restart after being swept", NodeHistory{up1, down1ByB}, up2, NodeHistory{up2}, true},
		{"a survivor buries the restarted run it swept", NodeHistory{up2}, down2ByB, NodeHistory{up2, down2ByB}, true},
	} {
		before := slices.Clone(tc.h)
		got, ok := tc.h.Record(tc.st)
		if ok != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
		if !slices.Equal(tc.h, before) {
			t.Errorf("%s: the history was modified", tc.name)
		}
	}
}

func TestNodeHistorySince(t *testing.T) {
	none := NodeStatus{}
	for _, tc := range []struct {
		name  string
		h     NodeHistory
		known NodeStatus
		ok    bool
		want  []NodeStatus
	}{
		{"nothing stored", nil, up1, true, nil},
		{"a node not shown: its latest word only", NodeHistory{up1, drain1, down1}, none, false, []NodeStatus{down1}},
		{"nothing new", NodeHistory{up1}, up1, true, nil},
		{"a new count", NodeHistory{up1b}, up1, true, []NodeStatus{up1b}},
		{"a drain shorter than a read: every step", NodeHistory{up1b, drain1, down1}, up1, true, []NodeStatus{drain1, down1}},
		{"from draining", NodeHistory{up1, drain1, down1}, drain1, true, []NodeStatus{down1}},
		{"a survivor's down", NodeHistory{up1, down1ByB}, up1, true, []NodeStatus{down1ByB}},
		{"the node's own down after a survivor's", NodeHistory{up1, down1}, down1ByB, true, []NodeStatus{down1}},
		{"a restart: its latest word", NodeHistory{up2}, down1, true, []NodeStatus{up2}},
		{"a store gone back (a failover) does not move a state back", NodeHistory{up1}, drain1, true, nil},
		{"a stale survivor's report never buries a restarted node", NodeHistory{up1, down1ByB}, up2, true, nil},
	} {
		if got := tc.h.Since(tc.known, tc.ok); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNodeStatusAdvancesAndForgotten(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     NodeStatus
		known NodeStatus
		ok    bool
		want  bool
	}{
		{"first word", up1, NodeStatus{}, false, true},
		{"the same again", up1, up1, true, false},
		{"a new count", up1b, up1, true, true},
		{"forward", drain1, up1, true, true},
		{"back", up1b, drain1, true, false},
		{"a restart", up2, down1, true, true},
		{"a survivor, the run it swept", down1ByB, drain1, true, true},
		{"a survivor, a restarted node", down1ByB, up2, true, false},
	} {
		if got := tc.n.Advances(tc.known, tc.ok); got != tc.want {
			t.Errorf("%s: Advances = %v, want %v", tc.name, got, tc.want)
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	down := NodeStatus{Node: "A", State: NodeDown, Incarnation: "1", At: t0}
	up := NodeStatus{Node: "A", State: NodeUp, Incarnation: "1", At: t0}
	for _, tc := range []struct {
		n    NodeStatus
		now  time.Time
		want bool
	}{
		{down, t0.Add(NodeRetention - time.Millisecond), false},
		{down, t0.Add(NodeRetention), true},
		{up, t0.Add(100 * NodeRetention), false},
	} {
		if got := tc.n.Forgotten(tc.now); got != tc.want {
			t.Errorf("%s at %v: Forgotten = %v, want %v", tc.n.State, tc.now.Sub(t0), got, tc.want)
		}
	}
}
