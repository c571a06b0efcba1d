package presenced

import (
	"context"
	"strconv"
	"sync/atomic"

	"github.com/presenced/presenced/admin"
	"github.com/presenced/presenced/nodes"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/stats"
)

// The web console's feeds (admin.Source's Nodes, Events and Follow): what
// the admin API's events stream and node list read of presence.

// consoleFollows numbers the follows of the events streams (interest ids
// of their own, apart from the program's inline subscription ids).
var consoleFollows atomic.Int64

// Events returns the fan-out of the changes this node publishes (GET
// /api/v1/events): every retained user presence the pump publishes, and
// every node state shown here.
func (p *Plugin) Events() *admin.Events { return p.events }

// publishedEvent hands a change the publisher just published to the events
// streams (on the pump's goroutine; it never waits).
func (p *Plugin) publishedEvent(user string) {
	if !p.events.Active() {
		return
	}
	if b, ok := p.publisher.Get(user); ok {
		p.events.User(user, b)
	}
}

// Follow has this node hear users until stop is called, as an inline
// subscription to each user's topic would (package interest): their
// changes, made on any node, are published here and reach the events
// streams.
func (p *Plugin) Follow(users []string) (stop func()) {
	id := "console/" + strconv.FormatInt(consoleFollows.Add(1), 10)
	for _, u := range users {
		p.interest.Follow(id, p.publisher.Topic(u))
	}
	return func() {
		for _, u := range users {
			p.interest.Unfollow(id, p.publisher.Topic(u))
		}
	}
}

// NodeStates returns every node's latest state as the store keeps it, this
// node's own as it is now (its session count counted now).
func (p *Plugin) NodeStates(ctx context.Context) ([]presence.NodeStatus, error) {
	all, err := p.store.NodeStates(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]presence.NodeStatus, 0, len(all)+1)
	for _, h := range all {
		if st, ok := h.Last(); ok && st.Node != p.cfg.NodeID {
			out = append(out, st)
		}
	}
	self := presence.NodeStatus{Node: p.cfg.NodeID, State: p.nodes.State(), Incarnation: p.store.Incarnation(), At: p.now()}
	if self.State != presence.NodeDown {
		self.Sessions = p.hook.Sessions()
	}
	return append(out, self), nil
}

// nodeOutlet is the nodes stage's outlet, which also tells the events
// streams of every node state shown here.
type nodeOutlet struct {
	nodes.Outlet
	events *admin.Events
}

func (o nodeOutlet) Announce(topic string, payload []byte) error {
	err := o.Outlet.Announce(topic, payload)
	if o.events.Active() {
		if st, perr := presence.ParseNodeStatus(payload); perr == nil {
			o.events.Node(st)
		}
	}
	return err
}

// consoleStats are the figures of the events streams.
func (p *Plugin) consoleStats() []stats.Stat {
	e := p.events
	return []stats.Stat{
		gauge("admin_event_streams", "Readers of the admin API's events stream (GET /api/v1/events) now.", func() int64 { return int64(e.Readers()) }),
		counter("admin_event_streams_dropped_total", "Events stream readers dropped for falling more than admin.EventQueue events behind.", e.Dropped.Load),
		counter("admin_event_streams_refused_total", "Events streams refused: admin.MaxEventStreams were open.", e.Refused.Load),
	}
}
