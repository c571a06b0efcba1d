package nodes

import (
	"context"
	"time"

	"github.com/presenced/presenced/presence"
)

// show retains st on its node's topic when it advances what is shown
// (presence.NodeStatus.Advances: a survivor's report never buries a
// restarted node, a state never moves back, a word that changes nothing
// but its time is not published again).
func (n *Nodes) show(st presence.NodeStatus) {
	n.shown.Lock()
	defer n.shown.Unlock()
	n.showLocked(st)
}

func (n *Nodes) showLocked(st presence.NodeStatus) bool {
	known, ok := n.shown.known[st.Node]
	if !st.Advances(known, ok) {
		return false
	}
	b, err := st.MarshalJSON()
	if err != nil {
		return false
	}
	n.shown.known[st.Node] = st
	if err := n.o.Outlet.Announce(n.topics+st.Node, b); err != nil {
		n.o.Log.Warn("node state not published", "err", err, "node", st.Node)
	}
	return true
}

// read reads every node's history from the store and shows, in order,
// what this node has not shown yet (presence.NodeHistory.Since: every step
// of a drain shorter than a read). This node's own entry is skipped: it
// shows its own word at once (Announce). A node down for longer than
// presence.NodeRetention that the store forgot is forgotten here too: its
// retained message cleared.
func (n *Nodes) read(ctx context.Context) {
	all, err := n.o.Store.NodeStates(ctx)
	if err != nil {
		n.o.Log.Debug("node states not read; read again in a few seconds", "err", err)
		return
	}
	now := n.o.Now()
	stored := make(map[string]bool, len(all))
	n.shown.Lock()
	defer n.shown.Unlock()
	for _, h := range all {
		node := h.Node()
		stored[node] = true
		if node == n.o.Node {
			continue
		}
		known, ok := n.shown.known[node]
		for _, st := range h.Since(known, ok) {
			n.showLocked(st)
		}
	}
	for node, st := range n.shown.known {
		if node != n.o.Node && !stored[node] && st.Forgotten(now) {
			delete(n.shown.known, node)
			n.o.Outlet.Clear(n.topics + node)
		}
	}
}

// readIfWatched reads the states when someone on this node watches the
// node topics, or a subscription to them came since the last read.
func (n *Nodes) readIfWatched(ctx context.Context) {
	if !n.watched() {
		return
	}
	n.lastAt = time.Now()
	n.read(ctx)
}

// Announced shows a node's word heard on the store's feed: from a node of
// an older version, which still broadcasts it, during a rolling upgrade
// (the pump, on a NodeAnnounced event).
func (n *Nodes) Announced(st presence.NodeStatus) { n.show(st) }

// Lost records down a node this one swept (the pump, on a NodeLost event):
// a survivor's report, which the store records only for the incarnation it
// swept, unless its own last word already said down. The store call runs
// off the pump; the states are read right after it.
func (n *Nodes) Lost(node, incarnation string) {
	st := presence.NodeStatus{Node: node, State: presence.NodeDown, Incarnation: incarnation, At: n.o.Now(), ReportedBy: n.o.Node}
	if st.Validate() != nil {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), n.o.Every)
		defer cancel()
		if err := n.o.Store.AnnounceNode(ctx, st); err != nil {
			n.o.Log.Warn("lost node not announced down", "err", err, "node", node)
			return
		}
		n.readSoon()
	}()
}

// readSoon has the reader read the states now (coalesced).
func (n *Nodes) readSoon() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// Refresh stores every node state again as retained (mochi purges retained
// messages older than its maximum message expiry); the pump's.
func (n *Nodes) Refresh() {
	n.shown.Lock()
	defer n.shown.Unlock()
	for node, st := range n.shown.known {
		if b, err := st.MarshalJSON(); err == nil {
			n.o.Outlet.Retain(n.topics+node, b)
		}
	}
}
