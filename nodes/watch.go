package nodes

import "strings"

// Interest: this node reads the other nodes' states only while someone
// here watches the node topics, so a deployment of N nodes costs one read
// per watching node per Options.Every, not N deliveries per announcement.
//
// A subscription that can match a node topic is noted as it comes (Watch,
// from the Delivery hook's OnSubscribe: it never waits on the store), and
// the states are read at once. Afterwards the reader asks the broker's
// subscription index, before each read, whether anything here still
// matches: a topic with "+" for the node (every wildcard filter), every
// other node's topic shown here, and every node subscribed to by name (a
// name the store may not hold yet). This node's own topic needs no read.

// Watch notes a subscription to filter, which can match a node topic, and
// has the states read now. It returns at once.
func (n *Nodes) Watch(filter string) {
	n.watch.Lock()
	if name, ok := strings.CutPrefix(filter, n.topics); ok && name != "" && name != n.o.Node && !strings.ContainsAny(name, "+#/") {
		n.watch.names[name] = struct{}{}
	}
	n.watch.asked = true
	n.watch.Unlock()
	n.readSoon()
}

// watched reports whether the states are to be read: a subscription came
// since the last read, or one here still matches a node topic. It forgets
// the names nobody here subscribes to any more.
func (n *Nodes) watched() bool {
	n.watch.Lock()
	asked := n.watch.asked
	n.watch.asked = false
	named := make([]string, 0, len(n.watch.names))
	for name := range n.watch.names {
		named = append(named, name)
	}
	n.watch.Unlock()

	var gone []string
	watched := asked
	for _, name := range named {
		if n.o.Outlet.Subscribed(n.topics + name) {
			watched = true
		} else {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		n.watch.Lock()
		for _, name := range gone {
			delete(n.watch.names, name)
		}
		n.watch.Unlock()
	}
	if watched || n.o.Outlet.Subscribed(n.topics+"+") {
		return true
	}
	n.shown.Lock()
	shown := make([]string, 0, len(n.shown.known))
	for node := range n.shown.known {
		if node != n.o.Node { // its own state is shown without reading
			shown = append(shown, node)
		}
	}
	n.shown.Unlock()
	for _, node := range shown {
		if n.o.Outlet.Subscribed(n.topics + node) {
			return true
		}
	}
	return false
}
