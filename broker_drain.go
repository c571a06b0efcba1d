package presenced

import (
	"context"
	"time"
)

// StopTimeout bounds the stop that ends a drain: writing the sessions'
// ends to the store and announcing the node down.
const StopTimeout = 10 * time.Second

// Draining reports whether the broker drains (or has drained and stopped).
func (b *Broker) Draining() bool { return b.draining.Load() }

// Drained is closed once a drain has stopped the broker.
func (b *Broker) Drained() <-chan struct{} { return b.drained }

// StartDrain starts Drain in the background (the admin API's POST
// /api/v1/drain) and returns at once; false when a drain had begun already.
// Stop waits for it.
func (b *Broker) StartDrain() bool {
	b.drainMu.Lock() // no Add once Stop waits
	defer b.drainMu.Unlock()
	if b.halt.Err() != nil || !b.draining.CompareAndSwap(false, true) {
		return false
	}
	b.drainWG.Add(1)
	go func() {
		defer b.drainWG.Done()
		_ = b.Drain()
	}()
	return true
}

// Drain drains the broker, then stops it (SIGTERM, or StartDrain):
//
//  1. /readyz answers 503 "draining", and presence/nodes/{node} says
//     draining;
//  2. new CONNECTs are refused, and the connected clients are asked to
//     move, drain.rate a second (see Plugin.Drain);
//  3. when no client is left, or after drain.timeout, the broker stops:
//     what is left ends as shutdown, presence/nodes/{node} says down.
//
// Later calls wait for the first and return its result. Stop during a
// drain ends it at once.
func (b *Broker) Drain() error {
	b.drainOnce.Do(func() {
		defer close(b.drained)
		b.draining.Store(true)
		ctx, cancel := context.WithTimeout(b.halt, b.cfg.Drain.Timeout.D())
		if b.presence != nil {
			b.presence.Drain(ctx, DrainOptions{Rate: b.cfg.Drain.Rate, ServerReference: b.cfg.Drain.ServerReference})
		}
		cancel()
		sctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		b.drainErr = b.stop(sctx)
	})
	<-b.drained
	return b.drainErr
}
