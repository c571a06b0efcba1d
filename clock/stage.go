package clock

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presenced/presenced/presence"
)

// Outlet is how the clock reaches this node's subscribers: one message,
// not retained, QoS 0 (delivery.Outlet.Beat).
type Outlet interface {
	Beat(topic string, payload []byte) error
}

// Ticker is a source of ticks and its stop (time.Ticker's, or a test's).
type Ticker struct {
	C    <-chan time.Time
	Stop func()
}

// Options configure the stage.
type Options struct {
	Node   string        // this node's id
	Prefix string        // the topic prefix, e.g. "presence": the topic is prefix/clock
	Every  time.Duration // the interval S (> 0)
	// Incarnation names this run of the node (the store's: it may change
	// while the node runs).
	Incarnation func() string
	// HideVersion leaves the version out (0): presence.visibility other
	// than open, where the time of the node's last change is not for
	// every reader.
	HideVersion bool
	Now         func() time.Time
	// NewTicker makes the ticker (default time.NewTicker's).
	NewTicker func(d time.Duration) Ticker
	Outlet    Outlet
	Log       *slog.Logger
}

// Stats are the stage's figures.
type Stats struct {
	Sent   atomic.Int64 // clock messages published
	Failed atomic.Int64 // clock messages the broker refused
}

// Stage is the presence clock of one node.
type Stage struct {
	o       Options
	topic   string
	version atomic.Uint64 // the highest version published
	seq     atomic.Uint64 // the last sequence number sent

	stop     chan struct{}
	wg       sync.WaitGroup
	stopOnce sync.Once

	Stats Stats
}

// New returns the stage; Start starts its goroutine.
func New(o Options) *Stage {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewTicker == nil {
		o.NewTicker = func(d time.Duration) Ticker {
			t := time.NewTicker(d)
			return Ticker{C: t.C, Stop: t.Stop}
		}
	}
	if o.Incarnation == nil {
		o.Incarnation = func() string { return "" }
	}
	return &Stage{o: o, topic: Topic(o.Prefix), stop: make(chan struct{})}
}

// Topic is the clock's topic under prefix: prefix/clock.
func Topic(prefix string) string { return prefix + "/clock" }

// Topic returns the stage's topic.
func (s *Stage) Topic() string { return s.topic }

// Published notes that version of some user's presence was published
// here (the publisher's callback, on the pump's goroutine): the clock
// carries the highest.
func (s *Stage) Published(version uint64) {
	for {
		held := s.version.Load()
		if version <= held || s.version.CompareAndSwap(held, version) {
			return
		}
	}
}

// Version returns the highest version published here so far.
func (s *Stage) Version() uint64 { return s.version.Load() }

// Message returns the next clock message, and counts it: a new sequence
// number, this node's time.
func (s *Stage) Message() presence.Clock {
	c := presence.Clock{Node: s.o.Node, Incarnation: s.o.Incarnation(), Seq: s.seq.Add(1),
		Time: s.o.Now(), Interval: s.o.Every}
	if !s.o.HideVersion {
		c.Version = s.version.Load()
	}
	return c
}

// Beat publishes one clock message now.
func (s *Stage) Beat() {
	c := s.Message()
	if err := s.o.Outlet.Beat(s.topic, c.AppendJSON(nil)); err != nil {
		s.Stats.Failed.Add(1)
		s.o.Log.Debug("clock message not published", "seq", c.Seq, "err", err)
		return
	}
	s.Stats.Sent.Add(1)
}

// Start starts the goroutine that beats every Options.Every, until Stop.
func (s *Stage) Start() {
	t := s.o.NewTicker(s.o.Every)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.Beat()
			}
		}
	}()
}

// Stop stops the goroutine and waits for it (a stage never started stops
// at once).
func (s *Stage) Stop() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.wg.Wait()
}
