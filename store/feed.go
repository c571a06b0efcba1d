package store

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

// EventKind says what a store reports on its feed.
type EventKind uint8

// The events of a feed.
const (
	// Changed: a user's aggregate was committed (or loaded) with a version.
	Changed EventKind = iota + 1
	// Reset: the store lost this node's sessions (Redis came back empty, or
	// this node was cut off for longer than its record lives and the other
	// nodes swept it). The node has a new incarnation by then; whoever runs
	// the node opens its live sessions again.
	Reset
	// NodeLost: this node swept the sessions of a dead incarnation.
	NodeLost
	// Recovered: Redis answers again after an outage, or a master was
	// replaced by its replica. Writes acknowledged just before may be lost
	// (replication is asynchronous); whoever runs the node has its sessions
	// checked against the store (Audit).
	Recovered
	// GroupChanged: a group's members changed, or the group was created or
	// deleted (Group names it): whoever runs the node reads it again.
	GroupChanged
	// GroupBatch: the leader committed a group topic's batch (Delta): every
	// node that listens to the group applies it to its group topics, in
	// order. Without a Delta: the batches of Group may have been missed (a
	// subscription lost and made again), read it again. Never coalesced.
	GroupBatch
	// NodeAnnounced: a node of an older version broadcast its state
	// (NodeStatus), or a survivor's report, on the change feed channel,
	// during a rolling upgrade (this version records node states in the
	// store instead: AnnounceNode, NodeStates): the node topics show it.
	// Coalesced per node and incarnation (the latest wins).
	NodeAnnounced
	// CommandReceived: an operator's action for this node, sent by another
	// (commands.go). Never coalesced.
	CommandReceived
)

// Event is one thing a store reports. The store never calls into the node:
// it reports, and whoever composes the parts decides what to do.
type Event struct {
	Kind EventKind
	// Aggregate is the committed aggregate (Changed).
	Aggregate presence.Aggregate
	// Cause is what made the change (Changed): an end, or nothing known.
	Cause presence.Cause
	// Settle is how long the other nodes may take to open their sessions
	// again, or to audit them, after the store lost some (Reset,
	// Recovered): users still unknown to the store after it were lost with
	// it.
	Settle time.Duration
	// Node, Incarnation and Sessions describe a swept incarnation (NodeLost).
	Node, Incarnation string
	Sessions          int
	// Group is the group that changed (GroupChanged), or whose batches may
	// have been missed (GroupBatch without a Delta).
	Group string
	// Delta is a group topic's batch (GroupBatch).
	Delta *roster.Delta
	// NodeStatus is a node's announcement (NodeAnnounced).
	NodeStatus presence.NodeStatus
	// Command is the command received (CommandReceived).
	Command *Command
	// At is when the node received the change (Changed), on the monotonic
	// clock, set by whoever pushes it (zero: not known). With the memory
	// store that is the commit; with Redis, the arrival of the feed message.
	// A change that replaces a waiting one brings its own.
	At time.Time
}

// Feed is a store's change feed: a queue that never blocks the store, which
// pushes to it while it commits. Changes coalesce per user (the highest
// version wins, carrying the sessions the changes it replaced ended) and the other events coalesce by kind and node, so it holds
// at most one event per user and per swept incarnation, whatever the rate
// of commits. The consumer waits on Ready and drains with Take.
type Feed struct {
	mu     sync.Mutex
	events []Event
	spare  []Event        // an emptied array handed back with Recycle, for the next events
	users  map[string]int // user -> index of its pending change in events
	ready  chan struct{}
	depth  atomic.Int64
	// endedDropped counts the ended sessions coalescing dropped for
	// presence.MaxEndedCarried.
	endedDropped atomic.Int64
}

// NewFeed returns an empty feed.
func NewFeed() *Feed {
	return &Feed{users: make(map[string]int), ready: make(chan struct{}, 1)}
}

// Push queues e. It never blocks.
func (f *Feed) Push(e Event) {
	f.mu.Lock()
	switch e.Kind {
	case Changed:
		if i, ok := f.users[e.Aggregate.User]; ok {
			if p := &f.events[i]; p.Aggregate.Version < e.Aggregate.Version {
				if e.Cause.Ended == "" && p.Aggregate.Status == e.Aggregate.Status {
					e.Cause = p.Cause // an end that made this status is still its cause
				}
				if len(p.Aggregate.Ended) > 0 {
					// The sessions the replaced change ended are still
					// ended: the lifecycle outputs learn each end.
					var dropped int
					e.Aggregate.Ended, dropped = presence.MergeEnded(p.Aggregate.Ended, e.Aggregate.Ended, presence.MaxEndedCarried)
					f.endedDropped.Add(int64(dropped))
				}
				*p = e
			}
			f.mu.Unlock()
			return
		}
		f.users[e.Aggregate.User] = len(f.events)
	case Recovered:
		for i := range f.events {
			if f.events[i].Kind == Recovered {
				f.events[i].Settle = max(f.events[i].Settle, e.Settle)
				f.mu.Unlock()
				return
			}
		}
	case Reset:
		for i := range f.events {
			if f.events[i].Kind == Reset {
				f.events[i].Settle = max(f.events[i].Settle, e.Settle)
				f.mu.Unlock()
				return
			}
		}
	case GroupChanged:
		for i := range f.events {
			if p := &f.events[i]; p.Kind == GroupChanged && p.Group == e.Group {
				f.mu.Unlock()
				return
			}
		}
	case NodeAnnounced:
		for i := range f.events {
			if p := &f.events[i]; p.Kind == NodeAnnounced && p.NodeStatus.Node == e.NodeStatus.Node && p.NodeStatus.Incarnation == e.NodeStatus.Incarnation {
				p.NodeStatus = e.NodeStatus
				f.mu.Unlock()
				return
			}
		}
	case NodeLost:
		for i := range f.events {
			if p := &f.events[i]; p.Kind == NodeLost && p.Node == e.Node && p.Incarnation == e.Incarnation {
				p.Sessions += e.Sessions
				f.mu.Unlock()
				return
			}
		}
	}
	f.events = append(f.events, e)
	f.depth.Store(int64(len(f.events)))
	f.mu.Unlock()
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

// Ready is signalled when events are waiting.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Take returns every waiting event in the order they were first pushed.
func (f *Feed) Take() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	evs := f.events
	f.events, f.spare = f.spare, nil
	if len(f.users) > maxSpare {
		// A burst's map: clear would keep its room for good (about
		// 30 bytes a user it held).
		f.users = make(map[string]int)
	} else {
		clear(f.users)
	}
	f.depth.Store(0)
	return evs
}

// maxSpare bounds the array Recycle keeps: a burst's larger one is left to
// the garbage collector. An Event is 512 bytes, and a feed holds two such
// arrays at rest (the one filling and the spare): at 1,024 that was 1 MiB
// held for good after the first burst (0.19 KiB a session of an idle node
// at 5,000: issue 23); at 256 it is 256 KiB, and a batch of more than 256
// changes (the pump takes the feed whenever it has changes: such a batch
// waited behind a burst) grows an array anew.
const maxSpare = 256

// Recycle hands back what Take returned, once the consumer is done with it
// and keeps no reference into it: its array then holds the events pushed
// after the next Take, instead of a new one growing from nothing with each
// batch. Optional; evs is cleared, so it holds on to nothing.
func (f *Feed) Recycle(evs []Event) {
	if cap(evs) == 0 || cap(evs) > maxSpare {
		return
	}
	clear(evs)
	f.mu.Lock()
	if f.spare == nil {
		f.spare = evs[:0]
	}
	f.mu.Unlock()
}

// Depth returns how many events are waiting.
func (f *Feed) Depth() int64 { return f.depth.Load() }

// EndedDropped returns how many ended sessions the feed dropped when it
// coalesced a user's changes (it keeps the newest presence.MaxEndedCarried
// of them per change).
func (f *Feed) EndedDropped() int64 { return f.endedDropped.Load() }
