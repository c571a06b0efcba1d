package node

import (
	"context"
	"time"

	presenced "github.com/presenced/presenced"
)

// StopTimeout bounds the stop that ends a drain: writing the sessions'
// ends to the store and announcing the node down.
const StopTimeout = 10 * time.Second

// Draining reports whether the node drains (or has drained and stopped).
func (n *Node) Draining() bool { return n.draining.Load() }

// Drained is closed once a drain has stopped the node.
func (n *Node) Drained() <-chan struct{} { return n.drained }

// StartDrain starts Drain in the background (the admin API's POST
// /api/v1/drain) and returns at once; false when a drain had begun already.
// Stop waits for it.
func (n *Node) StartDrain() bool {
	n.drainMu.Lock() // no Add once Stop waits
	defer n.drainMu.Unlock()
	if n.halt.Err() != nil || !n.draining.CompareAndSwap(false, true) {
		return false
	}
	n.drainWG.Add(1)
	go func() {
		defer n.drainWG.Done()
		_ = n.Drain()
	}()
	return true
}

// Drain drains the node, then stops it (SIGTERM, or StartDrain):
//
//  1. /readyz answers 503 "draining", and presence/nodes/{node} says
//     draining;
//  2. new CONNECTs are refused, and the connected clients are asked to
//     move, drain.rate a second (see presenced.Plugin.Drain);
//  3. when no client is left, or after drain.timeout, the node stops: what
//     is left ends as shutdown, presence/nodes/{node} says down.
//
// Later calls wait for the first and return its result. Stop during a
// drain ends it at once.
func (n *Node) Drain() error {
	n.drainOnce.Do(func() {
		defer close(n.drained)
		n.draining.Store(true)
		ctx, cancel := context.WithTimeout(n.halt, n.cfg.Drain.Timeout.D())
		if n.Presence != nil {
			n.Presence.Drain(ctx, presenced.DrainOptions{Rate: n.cfg.Drain.Rate, ServerReference: n.cfg.Drain.ServerReference})
		}
		cancel()
		sctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		n.drainErr = n.stop(sctx)
	})
	<-n.drained
	return n.drainErr
}
