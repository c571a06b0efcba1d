package store

import (
	"context"
	_ "embed"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/presence"
)

// The node states: a hash P:nodestate, node -> its presence.NodeHistory
// (one JSON status per line), written by each node every few seconds and
// by a survivor that swept a dead one (node_state.lua), and read in one
// HGETALL by the nodes that show the node topics, while someone there
// watches them. Nothing is broadcast: each node writes its entry when it
// changes and reads one key, O(nodes) commands over the whole deployment
// instead of every node hearing every node's announcement.
var (
	//go:embed lua/node_state.lua
	luaNodeState    string
	scriptNodeState = redis.NewScript(luaNodeState)
)

// ownWord is this node's last word the store recorded, and when: a word
// that says the same again (its periodic announcement, every few seconds)
// is not written again unless Redis may have lost it since (an outage or a
// failover after it).
type ownWord struct {
	sync.Mutex
	st presence.NodeStatus
	at time.Time // zero: none
}

// AnnounceNode records a node's word in its history, as
// presence.NodeHistory.Record says (a refused word is no error): this
// node's own, or a survivor's report that a node it swept is down. A step
// that records forgets nodes down for longer than presence.NodeRetention.
// This node's word that says the same as the last one recorded costs
// nothing, unless Redis failed over or could not be reached since.
func (r *Redis) AnnounceNode(ctx context.Context, st presence.NodeStatus) error {
	if err := st.Validate(); err != nil {
		return err
	}
	own := st.Node == r.node && !st.Reported()
	if own && r.said(st) {
		return nil
	}
	b, err := st.MarshalJSON()
	if err != nil {
		return err
	}
	retention := r.nodeRetention
	if retention == 0 {
		retention = presence.NodeRetention
	}
	at := time.Now()
	recorded, err := scriptNodeState.Run(ctx, r.c, []string{r.k.nodeStates(), r.k.nodesDown()},
		st.Node, st.Incarnation, string(st.State), flag(st.Reported()), b, ms(retention)).Int()
	if err != nil {
		return r.fail("announce", err)
	}
	if own && recorded == 1 {
		r.own.Lock()
		r.own.st, r.own.at = st, at
		r.own.Unlock()
	}
	return nil
}

// said reports whether st says what this node's last recorded word said,
// and Redis cannot have lost it since.
func (r *Redis) said(st presence.NodeStatus) bool {
	r.own.Lock()
	defer r.own.Unlock()
	return !r.own.at.IsZero() && st.Same(r.own.st) && !r.down.Load() && r.own.at.UnixNano() > r.failoverAt.Load()
}

// NodeStates returns every node's history, by node; a history that does
// not decode is left out.
func (r *Redis) NodeStates(ctx context.Context) ([]presence.NodeHistory, error) {
	all, err := r.c.HGetAll(ctx, r.k.nodeStates()).Result()
	if err != nil {
		return nil, r.fail("node states", err)
	}
	out := make([]presence.NodeHistory, 0, len(all))
	for node, v := range all {
		h, err := decodeNodeHistory(node, v)
		if err != nil {
			r.log.Debug("node state left out", "node", node, "err", err)
			continue
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node() < out[j].Node() })
	return out, nil
}

// decodeNodeHistory reads node's entry of the node states: one status per
// line, oldest first, each of node and of one incarnation.
func decodeNodeHistory(node, v string) (presence.NodeHistory, error) {
	var h presence.NodeHistory
	for _, line := range strings.Split(v, "\n") {
		st, err := presence.ParseNodeStatus([]byte(line))
		if err != nil {
			return nil, err
		}
		if st.Node != node || len(h) > 0 && st.Incarnation != h[0].Incarnation {
			return nil, fmt.Errorf("%w: %s's history holds %s of incarnation %s", presence.ErrBadNode, node, st.Node, st.Incarnation)
		}
		h = append(h, st)
	}
	return h, nil
}
