package lifecycle

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presenced/presenced/presence"
)

// Mode says which events an output publishes.
type Mode uint8

// The modes.
const (
	// Raw: every open and end committed to the store (and every CONNECT
	// this node refused), as soon as this node hears of it.
	Raw Mode = iota + 1
	// Shown: the opens and ends observers were shown, after grace and
	// pacing (a blink observers never saw is not sent).
	Shown
)

// Output is one lifecycle output: a dialect and a mode.
type Output struct {
	Name    string // "aws", "emqx": for the log and the figures
	Dialect Dialect
	Mode    Mode
}

// Broker publishes one message, not retained, QoS 1 (delivery.Outlet.Send).
type Broker interface {
	Send(topic string, payload []byte) error
}

// DefaultDepth is how many events the queue holds by default.
const DefaultDepth = 8192

// recentEnds is how many ends the stage remembers the reason of, for the
// shown mode's ends that arrive without one.
const recentEnds = 4096

// Options configure a Stage.
type Options struct {
	Outputs []Output
	Broker  Broker
	// NewSequencer returns a sequencer whose sessions opened before start
	// are base state (nil: presence.NewSequencer).
	NewSequencer func(start time.Time) Sequencer
	Depth        int // the queue's bound (0: DefaultDepth)
	Now          func() time.Time
	Log          *slog.Logger
}

// Stats are the stage's figures.
type Stats struct {
	Events    atomic.Int64 // lifecycle events derived (raw and shown)
	Published atomic.Int64 // messages published
	Failed    atomic.Int64 // messages the broker refused
	Queued    atomic.Int64 // events waiting in the queue now
	Overflow  atomic.Int64 // events dropped: the queue was full
	Refusals  atomic.Int64 // CONNECTs refused on this node, told to the stage
}

// item is one event for the outputs of one mode.
type item struct {
	ev   presence.LifecycleEvent
	mode Mode
}

// Stage derives the lifecycle events and publishes them. Committed and
// Shown are called from one goroutine (the pump); Refused from any (a
// client's: it never blocks); the stage's own goroutine publishes.
type Stage struct {
	o     Options
	Stats Stats

	raw, shown Sequencer // nil when no output has the mode

	// ends remembers the reasons of recent ends (client id, epoch), for
	// the shown mode; touched by the pump only.
	ends     map[endKey]presence.EndReason
	endOrder []endKey
	endNext  int

	mu       sync.Mutex // guards queue and overflowed
	queue    []item
	overflow bool          // logged the overflow once
	signal   chan struct{} // one token: the queue has items
	stop     chan struct{}
	done     chan struct{}
	startO   sync.Once
	stopO    sync.Once
}

type endKey struct {
	id    string
	epoch uint64
}

// New returns a stage (Start it).
func New(o Options) *Stage {
	if o.Depth <= 0 {
		o.Depth = DefaultDepth
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.NewSequencer == nil {
		o.NewSequencer = func(start time.Time) Sequencer { return presence.NewSequencer(start) }
	}
	s := &Stage{o: o, ends: map[endKey]presence.EndReason{}, signal: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	start := o.Now()
	for _, out := range o.Outputs {
		switch {
		case out.Mode == Raw && s.raw == nil:
			s.raw = o.NewSequencer(start)
		case out.Mode == Shown && s.shown == nil:
			s.shown = o.NewSequencer(start)
		}
	}
	return s
}

// Enabled reports whether the stage has any output.
func (s *Stage) Enabled() bool { return len(s.o.Outputs) > 0 }

// Committed takes a committed change (every user's: the node holds the
// firehose): the raw outputs' events, and the reasons of its ends.
func (s *Stage) Committed(a presence.Aggregate) {
	for _, e := range a.Ended {
		s.remember(endKey{e.ID, e.Epoch}, e.Reason)
	}
	if s.raw != nil {
		s.enqueue(Raw, s.raw.Apply(a))
	}
}

// Shown takes an aggregate the publisher published: the shown outputs'
// events. An end that comes without its reason (the change that carried it
// was coalesced away) takes the one the committed changes told.
func (s *Stage) Shown(a presence.Aggregate) {
	if s.shown == nil {
		return
	}
	evs := s.shown.Apply(a)
	for i, ev := range evs {
		if ev.Kind == presence.LifecycleDisconnected && (ev.Reason == "" || ev.Reason == presence.EndTakeover) {
			if r, ok := s.ends[endKey{ev.Session.ID, ev.Session.Epoch}]; ok && r != "" {
				evs[i].Reason = r
			}
		}
	}
	s.enqueue(Shown, evs)
}

// Refused takes a CONNECT refused on this node (raw outputs only); it
// never blocks.
func (s *Stage) Refused(ev presence.LifecycleEvent) {
	s.Stats.Refusals.Add(1)
	if s.raw != nil {
		s.enqueue(Raw, []presence.LifecycleEvent{ev})
	}
}

// Forget drops what the sequencers hold of users offline since before.
func (s *Stage) Forget(before time.Time) int {
	n := 0
	for _, q := range []Sequencer{s.raw, s.shown} {
		if q != nil {
			n += q.Forget(before)
		}
	}
	return n
}

// remember keeps the reason of an end, the oldest forgotten first.
func (s *Stage) remember(k endKey, r presence.EndReason) {
	if _, ok := s.ends[k]; ok {
		s.ends[k] = r
		return
	}
	if len(s.endOrder) < recentEnds {
		s.endOrder = append(s.endOrder, k)
	} else {
		delete(s.ends, s.endOrder[s.endNext])
		s.endOrder[s.endNext] = k
		s.endNext = (s.endNext + 1) % recentEnds
	}
	s.ends[k] = r
}

// enqueue queues evs for the outputs of mode; a full queue drops the
// newest (counted; logged once until the queue has room again).
func (s *Stage) enqueue(mode Mode, evs []presence.LifecycleEvent) {
	if len(evs) == 0 {
		return
	}
	s.Stats.Events.Add(int64(len(evs)))
	s.mu.Lock()
	dropped := 0
	for _, ev := range evs {
		if len(s.queue) >= s.o.Depth {
			dropped++
			continue
		}
		s.queue = append(s.queue, item{ev: ev, mode: mode})
	}
	logIt := dropped > 0 && !s.overflow
	if dropped > 0 {
		s.overflow = true
	}
	s.Stats.Queued.Store(int64(len(s.queue)))
	s.mu.Unlock()
	if dropped > 0 {
		s.Stats.Overflow.Add(int64(dropped))
		if logIt {
			s.o.Log.Warn("lifecycle: queue full: events dropped (logged once until it drains)", "depth", s.o.Depth, "dropped", dropped)
		}
	}
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// Start starts the goroutine that publishes.
func (s *Stage) Start() { s.startO.Do(func() { go s.run() }) }

// Stop publishes what is queued and stops the goroutine.
func (s *Stage) Stop() {
	s.startO.Do(func() { close(s.done) }) // never started: nothing runs
	s.stopO.Do(func() { close(s.stop) })
	<-s.done
}

// run publishes the queue's events, in order, until Stop.
func (s *Stage) run() {
	defer close(s.done)
	for {
		select {
		case <-s.signal:
			s.drain()
		case <-s.stop:
			s.drain()
			return
		}
	}
}

// drain publishes everything queued.
func (s *Stage) drain() {
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		s.overflow = false
		s.Stats.Queued.Store(0)
		s.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, it := range batch {
			s.publish(it)
		}
	}
}

// publish sends one event to every output of its mode.
func (s *Stage) publish(it item) {
	for _, out := range s.o.Outputs {
		if out.Mode != it.mode {
			continue
		}
		topic, payload, ok := out.Dialect.Encode(it.ev)
		if !ok {
			continue
		}
		if err := s.o.Broker.Send(topic, payload); err != nil {
			s.Stats.Failed.Add(1)
			s.o.Log.Debug("lifecycle: not published", "output", out.Name, "topic", topic, "err", err)
			continue
		}
		s.Stats.Published.Add(1)
	}
}
