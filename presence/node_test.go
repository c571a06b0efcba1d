package presence

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNodeStatusRoundTrip(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 0, 0, 123e6, time.UTC)
	for _, n := range []NodeStatus{
		{Node: "A", State: NodeUp, Sessions: 3, Incarnation: "m1-ab", At: at},
		{Node: "node-1.example:x", State: NodeDraining, Sessions: 0, Incarnation: "i", At: at},
		{Node: "A", State: NodeDown, Incarnation: "m1-ab", At: at, ReportedBy: "B"},
	} {
		b, err := n.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseNodeStatus(b)
		if err != nil {
			t.Fatalf("ParseNodeStatus(%s): %v", b, err)
		}
		if !got.Same(n) || !got.At.Equal(n.At) {
			t.Errorf("round trip of %+v: %+v (%s)", n, got, b)
		}
	}
	b, _ := NodeStatus{Node: "A", State: NodeUp, Sessions: 1, Incarnation: "x", At: at}.MarshalJSON()
	if want := `{"node":"A","state":"up","sessions":1,"incarnation":"x","at":"2025-03-01T12:00:00.123Z"}`; string(b) != want {
		t.Errorf("payload %s, want %s", b, want)
	}
}

// Hostile or broken announcements are refused, each with ErrBadNode.
func TestParseNodeStatusRefuses(t *testing.T) {
	const at = `"at":"2025-03-01T12:00:00.000Z"`
	for name, in := range map[string]string{
		"not json":        `{`,
		"unknown field":   `{"node":"A","state":"up","sessions":1,"incarnation":"x",` + at + `,"evil":1}`,
		"bad state":       `{"node":"A","state":"sleeping","sessions":1,"incarnation":"x",` + at + `}`,
		"no node":         `{"node":"","state":"up","sessions":1,"incarnation":"x",` + at + `}`,
		"wildcard node":   `{"node":"A/#","state":"up","sessions":1,"incarnation":"x",` + at + `}`,
		"long node":       `{"node":"` + strings.Repeat("a", 254) + `","state":"up","sessions":1,"incarnation":"x",` + at + `}`,
		"negative count":  `{"node":"A","state":"up","sessions":-1,"incarnation":"x",` + at + `}`,
		"no incarnation":  `{"node":"A","state":"up","sessions":1,"incarnation":"",` + at + `}`,
		"bad time":        `{"node":"A","state":"up","sessions":1,"incarnation":"x","at":"yesterday"}`,
		"bad reporter":    `{"node":"A","state":"down","sessions":0,"incarnation":"x",` + at + `,"reported_by":"B+"}`,
		"count not a num": `{"node":"A","state":"up","sessions":"1","incarnation":"x",` + at + `}`,
	} {
		if _, err := ParseNodeStatus([]byte(in)); !errors.Is(err, ErrBadNode) {
			t.Errorf("%s: err %v, want ErrBadNode", name, err)
		}
	}
}

func TestNodeStatusSupersedes(t *testing.T) {
	up1 := NodeStatus{Node: "A", State: NodeUp, Incarnation: "1"}
	up2 := NodeStatus{Node: "A", State: NodeUp, Incarnation: "2"}
	down1ByB := NodeStatus{Node: "A", State: NodeDown, Incarnation: "1", ReportedBy: "B"}
	down1 := NodeStatus{Node: "A", State: NodeDown, Incarnation: "1"}
	for _, tc := range []struct {
		name  string
		n     NodeStatus
		known NodeStatus
		ok    bool
		want  bool
	}{
		{"first word", up1, NodeStatus{}, false, true},
		{"survivor's first word", down1ByB, NodeStatus{}, false, true},
		{"own word, same run", down1, up1, true, true},
		{"own word, a restart", up2, down1ByB, true, true},
		{"survivor buries the run it swept", down1ByB, up1, true, true},
		{"survivor cannot bury a restarted node", down1ByB, up2, true, false},
	} {
		if got := tc.n.Supersedes(tc.known, tc.ok); got != tc.want {
			t.Errorf("%s: Supersedes = %v, want %v", tc.name, got, tc.want)
		}
	}
}
