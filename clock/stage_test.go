package clock

import (
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// outlet records what the stage publishes.
type outlet struct {
	mu   sync.Mutex
	msgs []presence.Clock
	fail bool
	t    *testing.T
}

func (o *outlet) Beat(topic string, payload []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if topic != "tenant/presence/clock" {
		o.t.Errorf("published on %q", topic)
	}
	if o.fail {
		return errors.New("refused")
	}
	c, err := presence.ParseClock(payload)
	if err != nil {
		o.t.Errorf("payload %s: %v", payload, err)
	}
	o.msgs = append(o.msgs, c)
	return nil
}

func (o *outlet) got() []presence.Clock {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]presence.Clock(nil), o.msgs...)
}

// stage returns a stage on a fake clock and ticker, and the ticker's channel.
func stage(t *testing.T, hide bool) (*Stage, *outlet, chan time.Time, *testkit.Clock) {
	out := &outlet{t: t}
	tick := make(chan time.Time)
	clk := testkit.NewClock(time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC))
	var every time.Duration
	inc := "inc-1"
	s := New(Options{Node: "node-a", Prefix: "tenant/presence", Every: 5 * time.Second, Incarnation: func() string { return inc },
		HideVersion: hide, Now: clk.Now, Outlet: out,
		NewTicker: func(d time.Duration) Ticker { every = d; return Ticker{C: tick, Stop: func() {}} }})
	s.Start()
	t.Cleanup(s.Stop)
	if every != 5*time.Second {
		t.Fatalf("ticker every %v, want 5s", every)
	}
	return s, out, tick, clk
}

// Each tick publishes one message: the sequence counts from 1, the time is
// the node's, the interval is told, and the version is the highest
// published so far (never lowered by an older one).
func TestStageBeats(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s, out, tick, clk := stage(t, false)
	if s.Topic() != "tenant/presence/clock" {
		t.Fatalf("topic %q", s.Topic())
	}
	beat := func(n int) {
		tick <- time.Time{}
		testkit.Wait(t, time.Second, "a message", func() error { return testkit.Why(len(out.got()) == n, "not yet") })
	}
	beat(1)
	s.Published(100)
	s.Published(300)
	s.Published(200) // an older version, told late
	clk.Advance(5 * time.Second)
	beat(2)
	clk.Advance(5 * time.Second)
	beat(3)
	got := out.got()
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	for i, want := range []presence.Clock{
		{Node: "node-a", Incarnation: "inc-1", Seq: 1, Version: 0, Time: t0, Interval: 5 * time.Second},
		{Node: "node-a", Incarnation: "inc-1", Seq: 2, Version: 300, Time: t0.Add(5 * time.Second), Interval: 5 * time.Second},
		{Node: "node-a", Incarnation: "inc-1", Seq: 3, Version: 300, Time: t0.Add(10 * time.Second), Interval: 5 * time.Second},
	} {
		if got[i] != want {
			t.Errorf("message %d: %+v, want %+v", i, got[i], want)
		}
	}
	if s.Stats.Sent.Load() != 3 || s.Stats.Failed.Load() != 0 || s.Version() != 300 {
		t.Errorf("sent %d failed %d version %d", s.Stats.Sent.Load(), s.Stats.Failed.Load(), s.Version())
	}
	s.Stop()
	s.Stop() // twice is fine
}

// With the version hidden (visibility other than open) it is 0.
func TestStageHidesVersion(t *testing.T) {
	s, out, tick, _ := stage(t, true)
	s.Published(500)
	tick <- time.Time{}
	testkit.Wait(t, time.Second, "one message", func() error { return testkit.Why(len(out.got()) == 1, "not yet") })
	if v := out.got()[0].Version; v != 0 {
		t.Errorf("version %d, want 0 (hidden)", v)
	}
}

// A refused publish is counted, and the next tick tries again with the
// next sequence number (a gap tells the observer one was lost).
func TestStageCountsFailures(t *testing.T) {
	s, out, tick, _ := stage(t, false)
	out.mu.Lock()
	out.fail = true
	out.mu.Unlock()
	tick <- time.Time{}
	testkit.Wait(t, time.Second, "a failure", func() error { return testkit.Why(s.Stats.Failed.Load() == 1, "not yet") })
	out.mu.Lock()
	out.fail = false
	out.mu.Unlock()
	tick <- time.Time{}
	testkit.Wait(t, time.Second, "one message", func() error { return testkit.Why(len(out.got()) == 1, "not yet") })
	if c := out.got()[0]; c.Seq != 2 {
		t.Errorf("seq %d after a failure, want 2", c.Seq)
	}
}

// Stop of a stage never started returns at once; the real ticker ticks.
func TestStageRealTicker(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	New(Options{Every: time.Second, Outlet: &outlet{t: t}}).Stop()
	out := &outlet{t: t}
	s := New(Options{Node: "n", Prefix: "tenant/presence", Every: 10 * time.Millisecond, Incarnation: func() string { return "i" }, Outlet: out})
	s.Start()
	testkit.Wait(t, 5*time.Second, "two messages", func() error { return testkit.Why(len(out.got()) >= 2, "not yet") })
	s.Stop()
}
