package redistest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// slotRange is an inclusive range of hash slots, lo..hi.
type slotRange struct{ lo, hi int }

func (r slotRange) String() string {
	if r.lo == r.hi {
		return strconv.Itoa(r.lo)
	}
	return fmt.Sprintf("%d-%d", r.lo, r.hi)
}

// clusterNode is one line of CLUSTER NODES: one node as the answering node
// sees it.
type clusterNode struct {
	id     string
	addr   string // "127.0.0.1:port", without the bus port
	flags  []string
	master string // the id of its master; "" for a master
	epoch  int64  // config epoch
	slots  []slotRange
}

func (n clusterNode) has(flag string) bool { return slices.Contains(n.flags, flag) }

// parseClusterNodes reads the reply of CLUSTER NODES:
//
//	<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv> <config-epoch> <link-state> <slot>...
//
// Slots being imported or migrated ("[slot->-id]") are left out.
func parseClusterNodes(s string) ([]clusterNode, error) {
	var nodes []clusterNode
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("short CLUSTER NODES line %q", line)
		}
		n := clusterNode{id: f[0], flags: strings.Split(f[2], ",")}
		n.addr, _, _ = strings.Cut(f[1], "@")
		if f[3] != "-" {
			n.master = f[3]
		}
		epoch, err := strconv.ParseInt(f[6], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("config epoch in CLUSTER NODES line %q: %v", line, err)
		}
		n.epoch = epoch
		for _, sl := range f[8:] {
			if strings.HasPrefix(sl, "[") {
				continue
			}
			r, err := parseSlotRange(sl)
			if err != nil {
				return nil, fmt.Errorf("slots in CLUSTER NODES line %q: %v", line, err)
			}
			n.slots = append(n.slots, r)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

func parseSlotRange(s string) (slotRange, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		hi = lo
	}
	l, err := strconv.Atoi(lo)
	if err != nil {
		return slotRange{}, err
	}
	h, err := strconv.Atoi(hi)
	if err != nil {
		return slotRange{}, err
	}
	if l < 0 || h < l || h >= clusterSlots {
		return slotRange{}, fmt.Errorf("bad slot range %q", s)
	}
	return slotRange{l, h}, nil
}

// myself is the answering node's own line.
func myself(nodes []clusterNode) (clusterNode, bool) {
	for _, n := range nodes {
		if n.has("myself") {
			return n, true
		}
	}
	return clusterNode{}, false
}

// byID finds a node of a view by its id.
func byID(nodes []clusterNode, id string) (clusterNode, bool) {
	for _, n := range nodes {
		if n.id == id {
			return n, true
		}
	}
	return clusterNode{}, false
}

// covers reports whether the slots of have include every slot of want.
func covers(have, want []slotRange) bool {
	merged := mergeSlots(have)
	for _, w := range want {
		if !slices.ContainsFunc(merged, func(h slotRange) bool { return h.lo <= w.lo && w.hi <= h.hi }) {
			return false
		}
	}
	return true
}

// mergeSlots sorts ranges and joins those that overlap or touch.
func mergeSlots(rs []slotRange) []slotRange {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b slotRange) int { return a.lo - b.lo })
	var out []slotRange
	for _, r := range rs {
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// hasSlot reports whether slot is in rs.
func hasSlot(rs []slotRange, slot int) bool {
	return slices.ContainsFunc(rs, func(r slotRange) bool { return r.lo <= slot && slot <= r.hi })
}

// spreadSlots splits the 16384 slots into masters contiguous ranges.
func spreadSlots(masters int) []slotRange {
	rs := make([]slotRange, masters)
	for i := range rs {
		rs[i] = slotRange{i * clusterSlots / masters, (i+1)*clusterSlots/masters - 1}
	}
	return rs
}
