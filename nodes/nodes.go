package nodes

import (
	"context"
	"sync"
	"time"

	"log/slog"

	"github.com/presenced/presenced/presence"
)

// Store is where the node states live: each node records its own word
// there, a survivor its report of a node it swept, and the nodes that show
// the node topics read them all (store.Store's AnnounceNode, NodeStates).
type Store interface {
	AnnounceNode(ctx context.Context, st presence.NodeStatus) error
	NodeStates(ctx context.Context) ([]presence.NodeHistory, error)
	Incarnation() string
}

// Outlet is how the node topics reach subscribers on this node: published
// retained, stored again as retained without delivering anything, or
// cleared; and whether any subscription here matches a topic.
type Outlet interface {
	Announce(topic string, payload []byte) error
	Retain(topic string, payload []byte)
	Clear(topic string)
	Subscribed(topic string) bool
}

// Options configure the stage.
type Options struct {
	Node   string        // this node's id
	Prefix string        // the topic prefix, e.g. "presence"
	Every  time.Duration // how often this node announces itself, and reads the others while watched (default 3 s)
	Now    func() time.Time
	Log    *slog.Logger
	Store  Store
	Outlet Outlet
	// Sessions counts this node's sessions, for its announcements.
	Sessions func() int
}

// Nodes is the node topics' stage.
type Nodes struct {
	o      Options
	topics string // prefix/nodes/

	mu    sync.Mutex
	state presence.NodeState // this node's

	// shown is what this node retains on the node topics, and the lock of
	// every change to it: a publish here is a local delivery, never a
	// store call.
	shown struct {
		sync.Mutex
		known map[string]presence.NodeStatus
	}
	watch struct {
		sync.Mutex
		names map[string]struct{} // nodes subscribed to by name (no wildcard)
		asked bool                // a subscription came since the last read
	}
	kick   chan struct{} // read the states now (a subscription, a lost node announced)
	lastAt time.Time     // the last read's start; the reader's alone

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
	n := &Nodes{o: o, topics: o.Prefix + "/nodes/", state: presence.NodeUp,
		kick: make(chan struct{}, 1), stop: make(chan struct{})}
	n.shown.known = make(map[string]presence.NodeStatus)
	n.watch.names = make(map[string]struct{})
	return n
}

// Start announces this node up, then, until Stop, every Options.Every:
// announces it again and, while someone on this node watches the node
// topics, reads every node's state and shows what changed (and at once
// when a subscription to them comes, or a lost node was announced down).
func (n *Nodes) Start(ctx context.Context) {
	if err := n.Announce(ctx, presence.NodeUp); err != nil {
		n.o.Log.Warn("node state up not announced; announced again in a few seconds", "err", err)
	}
	n.wg.Add(1)
	go n.run()
}

// run is the announcer and reader.
func (n *Nodes) run() {
	defer n.wg.Done()
	t := time.NewTicker(n.o.Every)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), n.o.Every)
			if err := n.Announce(ctx, ""); err != nil {
				n.o.Log.Debug("node state not announced; announced again in a few seconds", "err", err)
			}
			n.readIfWatched(ctx)
			cancel()
		case <-n.kick:
			if !n.pause(time.Until(n.lastAt.Add(n.o.Every / 10))) {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), n.o.Every)
			n.readIfWatched(ctx)
			cancel()
		}
	}
}

// pause waits d (a kicked read comes at most every Every/10, however many
// subscriptions ask); false when the stage stops meanwhile.
func (n *Nodes) pause(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-n.stop:
		return false
	case <-t.C:
		return true
	}
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
// then down; "" keeps it), shows it on this node at once, and records it in
// the store. A node that is down announces nothing more. Concurrent
// announcements need no order: a word that would move the state back (a
// periodic "up" read before a "down") is refused here and by the store.
func (n *Nodes) Announce(ctx context.Context, state presence.NodeState) error {
	n.mu.Lock()
	if n.state == presence.NodeDown {
		n.mu.Unlock()
		return nil
	}
	if n.state.Before(state) {
		n.state = state
	}
	state = n.state
	n.mu.Unlock()
	st := presence.NodeStatus{Node: n.o.Node, State: state, Incarnation: n.o.Store.Incarnation(), At: n.o.Now()}
	if state != presence.NodeDown && n.o.Sessions != nil {
		st.Sessions = n.o.Sessions()
	}
	n.show(st)
	return n.o.Store.AnnounceNode(ctx, st)
}
