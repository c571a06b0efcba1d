package nodes

import (
	"context"
	"sync"
	"time"

	"log/slog"

	"github.com/presenced/presenced/presence"
)

// Store is where a node announces itself: every node hears it
// (store.NodeAnnounced).
type Store interface {
	AnnounceNode(ctx context.Context, st presence.NodeStatus) error
	Incarnation() string
}

// Outlet is how the node topics reach subscribers: published retained, or
// stored again as retained without delivering anything.
type Outlet interface {
	Announce(topic string, payload []byte) error
	Retain(topic string, payload []byte)
}

// Options configure the stage.
type Options struct {
	Node   string        // this node's id
	Prefix string        // the topic prefix, e.g. "presence"
	Every  time.Duration // how often this node announces itself (default 3 s)
	Now    func() time.Time
	Log    *slog.Logger
	Store  Store
	Outlet Outlet
	// Sessions counts this node's sessions, for its announcements.
	Sessions func() int
}

// rank orders a node's states: it only ever moves forward.
var rank = map[presence.NodeState]int{presence.NodeUp: 1, presence.NodeDraining: 2, presence.NodeDown: 3}

// Nodes is the node topics' stage.
type Nodes struct {
	o      Options
	topics string // prefix/nodes/

	known map[string]presence.NodeStatus // node -> what is retained; the pump's alone

	send  sync.Mutex // serialises this node's announcements; before mu
	mu    sync.Mutex
	state presence.NodeState // this node's

	stop chan struct{}
	wg   sync.WaitGroup
}

// New returns the stage, this node up; Start starts the announcer.
func New(o Options) *Nodes {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Every <= 0 {
		o.Every = 3 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Nodes{o: o, topics: o.Prefix + "/nodes/", known: make(map[string]presence.NodeStatus),
		state: presence.NodeUp, stop: make(chan struct{})}
}

// Start announces this node up, and again every Options.Every until Stop.
func (n *Nodes) Start(ctx context.Context) {
	if err := n.Announce(ctx, presence.NodeUp); err != nil {
		n.o.Log.Warn("node state up not announced; announced again in a few seconds", "err", err)
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		t := time.NewTicker(n.o.Every)
		defer t.Stop()
		for {
			select {
			case <-n.stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), n.o.Every)
			if err := n.Announce(ctx, ""); err != nil {
				n.o.Log.Debug("node state not announced; announced again in a few seconds", "err", err)
			}
			cancel()
		}
	}()
}

// Stop stops the goroutines and waits for them: after the pump, which
// calls Lost. Announce the node down first.
func (n *Nodes) Stop() {
	close(n.stop)
	n.wg.Wait()
}

// State returns this node's state.
func (n *Nodes) State() presence.NodeState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state
}

// Announce moves this node's state forward to state (up, then draining,
// then down; "" keeps it) and announces it through the store. A node that
// is down announces nothing more.
func (n *Nodes) Announce(ctx context.Context, state presence.NodeState) error {
	n.send.Lock()
	defer n.send.Unlock()
	n.mu.Lock()
	if n.state == presence.NodeDown {
		n.mu.Unlock()
		return nil
	}
	if rank[state] > rank[n.state] {
		n.state = state
	}
	state = n.state
	n.mu.Unlock()
	st := presence.NodeStatus{Node: n.o.Node, State: state, Incarnation: n.o.Store.Incarnation(), At: n.o.Now()}
	if state != presence.NodeDown && n.o.Sessions != nil {
		st.Sessions = n.o.Sessions()
	}
	return n.o.Store.AnnounceNode(ctx, st)
}

// Announced retains an announcement that changes what is known of its node
// (the pump, on a NodeAnnounced event).
func (n *Nodes) Announced(st presence.NodeStatus) {
	known, ok := n.known[st.Node]
	if !st.Supersedes(known, ok) || (ok && st.Same(known)) {
		return
	}
	b, err := st.MarshalJSON()
	if err != nil {
		return
	}
	n.known[st.Node] = st
	if err := n.o.Outlet.Announce(n.topics+st.Node, b); err != nil {
		n.o.Log.Warn("node state not published", "err", err, "node", st.Node)
	}
}

// Lost announces down a node this one swept (the pump, on a NodeLost
// event), unless its own last word for that incarnation already said so (a
// clean stop releases its record, and is swept after). The store call runs
// off the pump.
func (n *Nodes) Lost(node, incarnation string) {
	if known, ok := n.known[node]; ok && known.Incarnation == incarnation && known.State == presence.NodeDown {
		return
	}
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
		}
	}()
}

// Refresh stores every node state again as retained (mochi purges retained
// messages older than its maximum message expiry); the pump's.
func (n *Nodes) Refresh() {
	for node, st := range n.known {
		if b, err := st.MarshalJSON(); err == nil {
			n.o.Outlet.Retain(n.topics+node, b)
		}
	}
}
