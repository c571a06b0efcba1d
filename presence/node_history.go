package presence

import "time"

// NodeRetention is how long a node that is down stays known: its state is
// forgotten by the store and by every node's topics after it, so that node
// ids that never come back (autoscaled pods) do not pile up.
const NodeRetention = time.Hour

// rank orders a node's states: within one incarnation it only moves up.
func (s NodeState) rank() int {
	switch s {
	case NodeUp:
		return 1
	case NodeDraining:
		return 2
	case NodeDown:
		return 3
	}
	return 0
}

// Before reports whether s comes before t in a node's life (up, draining,
// down).
func (s NodeState) Before(t NodeState) bool { return s.rank() < t.rank() }

// Reported reports whether another node (a survivor) said this.
func (n NodeStatus) Reported() bool { return n.ReportedBy != "" && n.ReportedBy != n.Node }

// Advances reports whether n replaces known (what is shown of its node; ok:
// whether anything is): it must supersede it (a survivor's report applies
// only to the incarnation it swept), never move one incarnation back
// (draining, then a late up), and say something new.
func (n NodeStatus) Advances(known NodeStatus, ok bool) bool {
	switch {
	case !n.Supersedes(known, ok):
		return false
	case !ok || known.Incarnation != n.Incarnation:
		return true
	case n.State.Before(known.State):
		return false
	}
	return !n.Same(known)
}

// Forgotten reports whether a node that said n is forgotten at now: down
// for NodeRetention or longer.
func (n NodeStatus) Forgotten(now time.Time) bool {
	return n.State == NodeDown && now.Sub(n.At) >= NodeRetention
}

// NodeHistory is what the store keeps of one node: its current
// incarnation's latest word in each state it reached, oldest first (at most
// up, draining, down). A node reading the states every few seconds may miss
// a step (a drain shorter than that): the history lets it show every step,
// in order.
type NodeHistory []NodeStatus

// Node returns the node the history is of ("" when empty).
func (h NodeHistory) Node() string {
	if len(h) == 0 {
		return ""
	}
	return h[0].Node
}

// Last returns the latest word of the history.
func (h NodeHistory) Last() (NodeStatus, bool) {
	if len(h) == 0 {
		return NodeStatus{}, false
	}
	return h[len(h)-1], true
}

// Record returns h with st recorded, and whether st was: a node's own word
// always is, except one that moves its incarnation back (a late "up" after
// its "down"); a new incarnation starts a new history (a restart). A
// survivor's report that the node is down is recorded only for the
// incarnation the history is of, unless the node is down already; it never
// buries a restarted node. The store applies it atomically (Redis: the
// Lua twin in store/lua/node_state.lua). h is not modified.
func (h NodeHistory) Record(st NodeStatus) (NodeHistory, bool) {
	last, ok := h.Last()
	switch {
	case !ok:
		return NodeHistory{st}, true
	case st.Reported() && (last.Incarnation != st.Incarnation || last.State == NodeDown):
		return h, false
	case last.Incarnation != st.Incarnation:
		return NodeHistory{st}, true
	case st.State.Before(last.State):
		return h, false
	}
	out := make(NodeHistory, 0, len(h)+1)
	for _, s := range h {
		if s.State.Before(st.State) {
			out = append(out, s)
		}
	}
	return append(out, st), true
}

// Since returns what an observer that was shown known (ok: whether it was
// shown anything of the node) has not seen of h, in order: every later
// step of the same incarnation, or only the latest word of another one (a
// restart, or a node not shown before), as long as it Advances.
func (h NodeHistory) Since(known NodeStatus, ok bool) []NodeStatus {
	last, any := h.Last()
	if !any {
		return nil
	}
	if !ok || known.Incarnation != last.Incarnation {
		if last.Advances(known, ok) {
			return []NodeStatus{last}
		}
		return nil
	}
	var out []NodeStatus
	cur := known
	for i, st := range h {
		later := known.State.Before(st.State) || i == len(h)-1
		if st.Incarnation == cur.Incarnation && later && st.Advances(cur, true) {
			out = append(out, st)
			cur = st
		}
	}
	return out
}
