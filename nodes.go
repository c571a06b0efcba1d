package presenced

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"time"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/store"
)

// The node topics, retained presence/nodes/{node}, say which nodes are up,
// draining or down (presence.NodeStatus), on every node:
//
//   - A node announces itself through the store (store.AnnounceNode: with
//     Redis, a PUBLISH on the change feed channel, which every node
//     receives; in memory, its own feed): up when it starts and every
//     nodeAnnounceEvery after, with its session count; draining when a
//     drain begins; down when it stops.
//   - Every node's pump retains what it hears on presence/nodes/{node},
//     only when it changed (presence.NodeStatus.Same: the periodic
//     announcement that changes nothing costs a PUBLISH, not a retained
//     message). A node that starts learns the others within
//     nodeAnnounceEvery.
//   - A node that dies without a word (SIGKILL, a crash) is swept by a
//     survivor (store.NodeLost), which announces it down, reported_by
//     itself, for the incarnation it swept; such a report never buries a
//     restarted node (presence.NodeStatus.Supersedes).
//
// Reading them: everyone under presence.visibility open; service accounts
// only under self and groups (a node's session count says how many people
// are online).

// nodeRank orders a node's states: it only ever moves forward.
var nodeRank = map[presence.NodeState]int{presence.NodeUp: 1, presence.NodeDraining: 2, presence.NodeDown: 3}

// nodeAnnounceEvery is how often a node announces itself.
const nodeAnnounceEvery = 3 * time.Second

// nodes is what the pump knows of every node (the pump's alone) and this
// node's own state.
type nodes struct {
	known map[string]presence.NodeStatus // node -> what is retained; pump only

	// send serialises this node's announcements, so that a periodic "up"
	// read before a stop cannot reach the store after its "down". Lock
	// order: send, then mu.
	send  sync.Mutex
	mu    sync.Mutex
	state presence.NodeState // this node's
	inc   string             // the memory store's incarnation (Redis has its own)
}

func newNodes() nodes {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return nodes{
		known: make(map[string]presence.NodeStatus),
		state: presence.NodeUp,
		inc:   strconv.FormatInt(time.Now().UnixMilli(), 36) + "-" + hex.EncodeToString(b[:]),
	}
}

// nodesTopic is presence/nodes/ under the configured prefix.
func (p *Plugin) nodesTopic() string { return p.cfg.Presence.TopicPrefix + "/nodes/" }

// incarnation names this run of the node.
func (p *Plugin) incarnation() string {
	return p.store.Incarnation()
}

// NodeState returns this node's state.
func (p *Plugin) NodeState() presence.NodeState {
	p.nodes.mu.Lock()
	defer p.nodes.mu.Unlock()
	return p.nodes.state
}

// announce moves this node's state forward to state (up, then draining,
// then down; "" keeps it) and announces it through the store. A node that
// is down announces nothing more.
func (p *Plugin) announce(ctx context.Context, state presence.NodeState) error {
	p.nodes.send.Lock()
	defer p.nodes.send.Unlock()
	p.nodes.mu.Lock()
	if p.nodes.state == presence.NodeDown {
		p.nodes.mu.Unlock()
		return nil
	}
	if nodeRank[state] > nodeRank[p.nodes.state] {
		p.nodes.state = state
	}
	state = p.nodes.state
	p.nodes.mu.Unlock()
	st := presence.NodeStatus{Node: p.cfg.NodeID, State: state, Incarnation: p.incarnation(), At: p.now()}
	if state != presence.NodeDown {
		st.Sessions = p.Hook.Sessions()
	}
	return p.store.AnnounceNode(ctx, st)
}

// announceLoop announces this node's state every nodeAnnounceEvery.
func (p *Plugin) announceLoop() {
	p.every("announce", nodeAnnounceEvery, func(ctx context.Context) error {
		return p.announce(ctx, "")
	})
}

// nodeAnnounced retains an announcement that changes what is known of its
// node (pump only).
func (p *Plugin) nodeAnnounced(st presence.NodeStatus) {
	known, ok := p.nodes.known[st.Node]
	if !st.Supersedes(known, ok) || (ok && st.Same(known)) {
		return
	}
	b, err := st.MarshalJSON()
	if err != nil {
		return
	}
	p.nodes.known[st.Node] = st
	if err := p.outlet.Announce(p.nodesTopic()+st.Node, b); err != nil {
		p.log.Warn().Err(err).Str("node", st.Node).Msg("node state not published")
	}
}

// nodeLost announces down a node this one swept (pump only), unless its
// own last word for that incarnation already said so (a clean stop releases
// its record, and is swept after).
func (p *Plugin) nodeLost(e store.Event) {
	if known, ok := p.nodes.known[e.Node]; ok && known.Incarnation == e.Incarnation && known.State == presence.NodeDown {
		return
	}
	st := presence.NodeStatus{Node: e.Node, State: presence.NodeDown, Incarnation: e.Incarnation, At: p.now(), ReportedBy: p.cfg.NodeID}
	if st.Validate() != nil {
		return
	}
	p.wg.Add(1)
	go func() { // off the pump: a store call
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), nodeAnnounceEvery)
		defer cancel()
		if err := p.store.AnnounceNode(ctx, st); err != nil {
			p.log.Warn().Err(err).Str("node", e.Node).Msg("lost node not announced down")
		}
	}()
}

// refreshNodes stores every node state again as retained (mochi purges
// retained messages older than its maximum message expiry), pump only.
func (p *Plugin) refreshNodes() {
	for node, st := range p.nodes.known {
		if b, err := st.MarshalJSON(); err == nil {
			p.outlet.Retain(p.nodesTopic()+node, b)
		}
	}
}
