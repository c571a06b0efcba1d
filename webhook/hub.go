package webhook

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presenced/presenced/presence"
)

// Leaser takes or keeps a named lease in the store for ttl (true while
// this node holds it): store.Leases.
type Leaser interface {
	Lease(ctx context.Context, name string, ttl time.Duration) (bool, error)
}

// releaser gives a lease up (a clean stop), when the Leaser can.
type releaser interface {
	ReleaseLease(ctx context.Context, name string) error
}

// Options configure a Hub.
type Options struct {
	Endpoints []EndpointOptions
	// Lease is the cluster's one-sender lease; nil: this node always sends
	// (one node).
	Lease     Leaser
	LeaseName string        // default "webhooks"
	LeaseTTL  time.Duration // default 10 s; renewed every third of it
	// Replay bounds the events a node that does not hold the lease keeps,
	// to send if it takes the lease over: at most Replay events (default
	// 10,000), none older than ReplayAge (default two LeaseTTLs).
	Replay    int
	ReplayAge time.Duration
	Now       func() time.Time
	Log       *slog.Logger
}

// HubStats are the hub's counters.
type HubStats struct {
	Held        atomic.Bool  // this node holds the lease
	Replayed    atomic.Int64 // events sent from the replay buffer on taking the lease
	Expired     atomic.Int64 // events that left the replay buffer unsent (too old, or it was full)
	Takeovers   atomic.Int64 // times this node took the lease
	LeaseErrors atomic.Int64 // lease calls that failed (the node stops sending until one succeeds)
}

// Hub sends events to every endpoint that wants them.
type Hub struct {
	o         Options
	endpoints []*Endpoint
	Stats     HubStats

	mu     sync.Mutex
	held   bool
	replay []queued // events seen while not holding the lease, oldest first

	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	stopOnce sync.Once
}

// New returns a hub, not started.
func New(o Options) *Hub {
	if o.LeaseName == "" {
		o.LeaseName = "webhooks"
	}
	setDefault(&o.LeaseTTL, 10*time.Second)
	setDefault(&o.Replay, DefaultQueue)
	setDefault(&o.ReplayAge, 2*o.LeaseTTL)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{o: o, stop: make(chan struct{}), done: make(chan struct{})}
	for _, eo := range o.Endpoints {
		if eo.Now == nil {
			eo.Now = o.Now
		}
		if eo.Log == nil {
			eo.Log = o.Log
		}
		h.endpoints = append(h.endpoints, NewEndpoint(eo))
	}
	if o.Lease == nil {
		h.held = true
		h.Stats.Held.Store(true)
	}
	return h
}

// Endpoints are the hub's endpoints, in the order configured.
func (h *Hub) Endpoints() []*Endpoint { return h.endpoints }

// Wants reports whether any endpoint receives events of type typ.
func (h *Hub) Wants(typ string) bool {
	for _, e := range h.endpoints {
		if e.Wants(typ) {
			return true
		}
	}
	return false
}

// Held reports whether this node sends the shown transitions now.
func (h *Hub) Held() bool { return h.Stats.Held.Load() }

// Buffered is how many events the replay buffer holds.
func (h *Hub) Buffered() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.replay)
}

// Start starts the endpoints' senders and, with a Leaser, the lease's
// goroutine (it takes the lease at once).
func (h *Hub) Start() {
	h.once.Do(func() {
		for _, e := range h.endpoints {
			e.Start()
		}
		if h.o.Lease == nil {
			close(h.done)
			return
		}
		go h.leaseLoop()
	})
}

// Send sends a shown transition: from this node if it holds the lease,
// else it is kept in the replay buffer. It never waits.
func (h *Hub) Send(ev Event) {
	if !h.Wants(ev.Type) {
		return
	}
	h.mu.Lock() // in order with a replay (setHeld)
	defer h.mu.Unlock()
	if !h.held {
		h.keep(ev)
		return
	}
	h.enqueue(ev)
}

// SendHere sends an event this node alone originates (a notify), whoever
// holds the lease. It never waits.
func (h *Hub) SendHere(ev Event) { h.enqueue(ev) }

// Shown sends the transition observers were shown when a was published
// over before, if it is one (FromShown): publisher.Options.Published.
func (h *Hub) Shown(a presence.Aggregate, before presence.Shown) {
	if ev, ok := FromShown(a, before); ok {
		h.Send(ev)
	}
}

// Session sends a session.opened or session.ended event of a shown
// lifecycle event, to the endpoints that want them.
func (h *Hub) Session(ev presence.LifecycleEvent) {
	if e, ok := FromLifecycle(ev); ok {
		h.Send(e)
	}
}

func (h *Hub) enqueue(ev Event) {
	for _, e := range h.endpoints {
		if e.Wants(ev.Type) {
			e.Enqueue(ev)
		}
	}
}

// keep adds ev to the replay buffer (h.mu held), bounded by count and age.
func (h *Hub) keep(ev Event) {
	now := h.o.Now()
	h.expire(now)
	if len(h.replay) >= h.o.Replay {
		h.replay[0] = queued{}
		h.replay = h.replay[1:]
		h.Stats.Expired.Add(1)
	}
	h.replay = append(h.replay, queued{ev: ev, at: now})
}

// expire drops the replay buffer's events older than ReplayAge (h.mu held).
func (h *Hub) expire(now time.Time) {
	i := 0
	for i < len(h.replay) && now.Sub(h.replay[i].at) > h.o.ReplayAge {
		i++
	}
	if i > 0 {
		h.Stats.Expired.Add(int64(i))
		n := copy(h.replay, h.replay[i:])
		clear(h.replay[n:])
		h.replay = h.replay[:n]
	}
}

// setHeld records the lease's outcome; on taking it, the replay buffer is
// sent first, in order, before any later Send (both under h.mu).
func (h *Hub) setHeld(held bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if held == h.held {
		if !held {
			h.expire(h.o.Now())
		}
		return
	}
	h.held = held
	h.Stats.Held.Store(held)
	if !held {
		h.o.Log.Info("webhook lease lost: another node sends the events; keeping the recent ones", "lease", h.o.LeaseName)
		return
	}
	h.Stats.Takeovers.Add(1)
	h.expire(h.o.Now())
	n := len(h.replay)
	for _, q := range h.replay {
		h.enqueue(q.ev)
	}
	clear(h.replay)
	h.replay = h.replay[:0]
	h.Stats.Replayed.Add(int64(n))
	h.o.Log.Info("webhook lease taken: this node sends the events", "lease", h.o.LeaseName, "replayed", n)
}

// leaseLoop takes or keeps the lease every third of its TTL. A failed call
// stops the sending until one succeeds (another node may take the lease
// meanwhile); what comes meanwhile is kept for the replay.
func (h *Hub) leaseLoop() {
	defer close(h.done)
	every := h.o.LeaseTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), every)
		ok, err := h.o.Lease.Lease(ctx, h.o.LeaseName, h.o.LeaseTTL)
		cancel()
		if err != nil {
			h.Stats.LeaseErrors.Add(1)
			if h.Held() {
				h.o.Log.Warn("webhook lease not renewed: not sending until it is", "err", err)
			}
			ok = false
		}
		h.setHeld(ok)
		select {
		case <-t.C:
		case <-h.stop:
			return
		}
	}
}

// Stop ends the lease's goroutine, then has every endpoint send what
// waits, until ctx ends (Endpoint.Stop), and gives the lease up. It
// returns once every goroutine has ended.
func (h *Hub) Stop(ctx context.Context) error {
	var err error
	h.stopOnce.Do(func() {
		h.Start() // nothing to stop otherwise; makes done closable
		close(h.stop)
		<-h.done
		var wg sync.WaitGroup
		errs := make([]error, len(h.endpoints))
		for i, e := range h.endpoints {
			wg.Go(func() { errs[i] = e.Stop(ctx) })
		}
		wg.Wait()
		err = errors.Join(errs...)
		h.mu.Lock()
		held := h.held
		h.held = false
		h.Stats.Held.Store(false)
		h.mu.Unlock()
		if r, ok := h.o.Lease.(releaser); ok && held {
			rctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if rerr := r.ReleaseLease(rctx, h.o.LeaseName); rerr != nil {
				h.o.Log.Warn("webhook lease not given up; another node takes it when it expires", "err", rerr)
			}
			cancel()
		}
	})
	return err
}
