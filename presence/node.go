package presence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// NodeState is where a node is in its life, as presence/nodes/{node} says.
//
//	up --drain (SIGTERM, admin)--> draining --stop--> down
//	up --stop------------------------------------> down
//	up --killed: a survivor sweeps it-------------> down (reported_by the survivor)
type NodeState string

// Node states.
const (
	NodeUp       NodeState = "up"
	NodeDraining NodeState = "draining"
	NodeDown     NodeState = "down"
)

// Valid reports whether s is a known node state.
func (s NodeState) Valid() bool { return s == NodeUp || s == NodeDraining || s == NodeDown }

// ErrBadNode: a node announcement that cannot be used.
var ErrBadNode = errors.New("bad node announcement")

// maxNodeBytes bounds a node id (a DNS name) and an incarnation.
const maxNodeBytes = 253

// NodeStatus is the payload of the retained presence/nodes/{node}:
//
//	{"node":"A","state":"draining","sessions":1200,"incarnation":"m1x2-ab12","at":"2025-01-01T00:00:00.000Z"}
//
// Sessions is the count of presence sessions on the node when it announced
// (0 when down); Incarnation names the run of the node (a restart has a new
// one); At is when the announcement that changed what is retained was made.
// ReportedBy is set when another node announced it (a survivor reporting a
// node that died): then it names the survivor.
type NodeStatus struct {
	Node        string    `json:"node"`
	State       NodeState `json:"state"`
	Sessions    int       `json:"sessions"`
	Incarnation string    `json:"incarnation"`
	At          time.Time `json:"at"`
	ReportedBy  string    `json:"reported_by,omitempty"`
}

// ValidNode checks a node id as it may appear in a topic level: 1 to 253
// bytes of letters, digits, '.', '-', '_' and ':' (configs' node_id rule).
func ValidNode(s string) error {
	if s == "" || len(s) > maxNodeBytes {
		return fmt.Errorf("%w: node id of %d bytes", ErrBadNode, len(s))
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' || r == ':'
		if !ok {
			return fmt.Errorf("%w: node id %q", ErrBadNode, s)
		}
	}
	return nil
}

// Validate checks every field.
func (n NodeStatus) Validate() error {
	if err := ValidNode(n.Node); err != nil {
		return err
	}
	if !n.State.Valid() {
		return fmt.Errorf("%w: state %q", ErrBadNode, n.State)
	}
	if n.Sessions < 0 {
		return fmt.Errorf("%w: %d sessions", ErrBadNode, n.Sessions)
	}
	if n.Incarnation == "" || len(n.Incarnation) > maxNodeBytes {
		return fmt.Errorf("%w: incarnation of %d bytes", ErrBadNode, len(n.Incarnation))
	}
	if n.ReportedBy != "" {
		if err := ValidNode(n.ReportedBy); err != nil {
			return err
		}
	}
	return nil
}

// MarshalJSON writes the payload with At in TimeLayout (UTC, ms).
func (n NodeStatus) MarshalJSON() ([]byte, error) {
	type plain NodeStatus
	return json.Marshal(struct {
		plain
		At string `json:"at"`
	}{plain(n), n.At.UTC().Format(TimeLayout)})
}

// ParseNodeStatus reads a presence/nodes/{node} payload strictly: unknown
// fields, a bad state or a bad node id are errors.
func ParseNodeStatus(b []byte) (NodeStatus, error) {
	var w struct {
		Node        string    `json:"node"`
		State       NodeState `json:"state"`
		Sessions    int       `json:"sessions"`
		Incarnation string    `json:"incarnation"`
		At          string    `json:"at"`
		ReportedBy  string    `json:"reported_by"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return NodeStatus{}, fmt.Errorf("%w: %v", ErrBadNode, err)
	}
	at, err := time.Parse(time.RFC3339Nano, w.At)
	if err != nil {
		return NodeStatus{}, fmt.Errorf("%w: at %q", ErrBadNode, w.At)
	}
	n := NodeStatus{Node: w.Node, State: w.State, Sessions: w.Sessions, Incarnation: w.Incarnation, At: at.UTC(), ReportedBy: w.ReportedBy}
	return n, n.Validate()
}

// Same reports whether a and b say the same thing (At aside): a node's
// periodic announcement that changes nothing is not published again.
func (a NodeStatus) Same(b NodeStatus) bool {
	return a.Node == b.Node && a.State == b.State && a.Sessions == b.Sessions &&
		a.Incarnation == b.Incarnation && a.ReportedBy == b.ReportedBy
}

// Supersedes reports whether announcement n replaces what is known of its
// node (known, ok: whether anything is). A node's own word always does (a
// restart comes with a new incarnation). A survivor's report that the node
// is down applies only to the incarnation it swept: it must not bury a
// restarted node that announced itself since.
func (n NodeStatus) Supersedes(known NodeStatus, ok bool) bool {
	if !ok || n.ReportedBy == "" || n.ReportedBy == n.Node {
		return true
	}
	return known.Incarnation == n.Incarnation
}
