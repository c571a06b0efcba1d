package hooks

import (
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
)

// gate serialises the establishment of connections that share a client id.
//
// mochi v2.7.9 looks up the existing client of an id (inheritClientSession,
// which disconnects it) and registers the new one (Clients.Add) without a lock
// across the two. Two CONNECTs racing with the same id can therefore both
// take over the old client, and the one whose Add comes first is overwritten
// in the map and never disconnected: a live connection the broker has lost
// track of. The gate is taken in OnSessionEstablish and released in
// OnSessionEstablished, so the lookup, the takeover and the Add of one
// connection finish before the next connection with that id begins.
//
// If a connection fails between the two hooks (its CONNACK cannot be written)
// mochi calls neither OnSessionEstablished nor OnDisconnect; a waiter then
// sees the holder closed and goes ahead, and never waits longer than maxWait.
type gate struct {
	mu   sync.Mutex
	held map[string]*gateEntry
}

type gateEntry struct {
	owner *mqtt.Client
	done  chan struct{} // made by the first waiter (under mu): most ids have none
}

const (
	gatePoll    = 10 * time.Millisecond
	gateMaxWait = 5 * time.Second
)

// enter blocks until cl may establish its id. It runs on cl's own goroutine
// before CONNACK, never on an established connection's packet path.
func (g *gate) enter(cl *mqtt.Client) {
	start := time.Now()
	for {
		g.mu.Lock()
		if g.held == nil {
			g.held = make(map[string]*gateEntry)
		}
		e := g.held[cl.ID]
		if e == nil || e.owner.Closed() || time.Since(start) > gateMaxWait {
			g.held[cl.ID] = &gateEntry{owner: cl}
			g.mu.Unlock()
			return
		}
		if e.done == nil {
			e.done = make(chan struct{})
		}
		done := e.done
		g.mu.Unlock()
		t := time.NewTimer(gatePoll)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
}

// leave releases the id if cl holds it.
func (g *gate) leave(cl *mqtt.Client) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.held[cl.ID]; e != nil && e.owner == cl {
		delete(g.held, cl.ID)
		e.release()
	}
}

// leaveWith releases the id if cl holds it, first running fn while no other
// connection can take the id: when cl holds it, or nobody does (enter takes
// g.mu). fn must not block.
func (g *gate) leaveWith(cl *mqtt.Client, fn func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.held[cl.ID]
	if e != nil && e.owner != cl {
		return // another connection with the id is establishing
	}
	fn()
	if e != nil {
		delete(g.held, cl.ID)
		e.release()
	}
}

// release wakes the waiters, if any (under mu).
func (e *gateEntry) release() {
	if e.done != nil {
		close(e.done)
	}
}

// await blocks while another connection holds cl's id (it is taking cl
// over, or establishing after it), until that one is established or
// closed, and never longer than gateMaxWait. It runs on cl's own goroutine,
// after its read loop has ended.
func (g *gate) await(cl *mqtt.Client) {
	start := time.Now()
	for {
		g.mu.Lock()
		e := g.held[cl.ID]
		if e == nil || e.owner == cl || e.owner.Closed() || time.Since(start) > gateMaxWait {
			g.mu.Unlock()
			return
		}
		if e.done == nil {
			e.done = make(chan struct{})
		}
		done := e.done
		g.mu.Unlock()
		t := time.NewTimer(gatePoll)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
}
