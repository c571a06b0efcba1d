package store

import (
	"context"
	"sort"

	"github.com/presenced/presenced/presence"
)

// AnnounceNode records a node's word in its history, as
// presence.NodeHistory.Record says (one node: its own), and forgets the
// nodes down for longer than presence.NodeRetention, as Redis does.
func (m *Memory) AnnounceNode(_ context.Context, st presence.NodeStatus) error {
	if err := st.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nodes == nil {
		m.nodes = make(map[string]presence.NodeHistory)
	}
	if h, ok := m.nodes[st.Node].Record(st); ok {
		m.nodes[st.Node] = h
	}
	now := m.now()
	for node, h := range m.nodes {
		if last, _ := h.Last(); last.Forgotten(now) {
			delete(m.nodes, node)
		}
	}
	return nil
}

// NodeStates returns every node's history, by node.
func (m *Memory) NodeStates(context.Context) ([]presence.NodeHistory, error) {
	m.mu.Lock()
	out := make([]presence.NodeHistory, 0, len(m.nodes))
	for _, h := range m.nodes {
		out = append(out, append(presence.NodeHistory(nil), h...))
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Node() < out[j].Node() })
	return out, nil
}
