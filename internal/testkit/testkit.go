package testkit

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// Tick is the pause between two polls of Wait and During: short, so that a
// wait returns within a few milliseconds of the change.
const Tick = 5 * time.Millisecond

// Wait polls cond until it returns nil and returns how long that took. Once
// within has passed it fails the test with what and cond's last error, so
// the failure says what was last seen (nats-server's checkFor). It never
// sleeps longer than Tick at a time.
func Wait(t testing.TB, within time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	d, err := Poll(within, Tick, cond)
	if err != nil {
		t.Fatalf("%s: not within %v; last seen: %v", what, within, err)
	}
	return d
}

// During checks that cond holds for the whole window: it polls cond every
// Tick from now until window has passed, once more at its end, and fails the
// test with what and cond's error at the first poll that returns one. It is
// for what must not happen (a session that must stay online, a message that
// must not come), where a single look after a sleep would miss a change that
// came and went.
func During(t testing.TB, window time.Duration, what string, cond func() error) {
	t.Helper()
	if at, err := Hold(window, Tick, cond); err != nil {
		t.Fatalf("%s: broken after %v of %v: %v", what, at.Round(time.Millisecond), window, err)
	}
}

// Poll is Wait's loop, for a caller that reports a late condition itself
// (t.Errorf, to go on with the test's other checks) or polls something
// costly less often than Tick: it calls cond every every until cond returns
// nil, and returns how long that took. Once within has passed it returns
// cond's last error instead. cond runs at least once.
func Poll(within, every time.Duration, cond func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Since(start) > within {
			return time.Since(start), err
		}
		time.Sleep(every)
	}
}

// Hold is During's loop, for a caller that reports a broken condition
// itself or polls less often than Tick: it calls cond every every from now
// until window has passed, and once more at its end, and returns at the
// first error, with how long after the start it came. It returns nil after
// the window when cond never failed. cond runs at least once, even for a
// window already over.
func Hold(window, every time.Duration, cond func() error) (time.Duration, error) {
	start := time.Now()
	for {
		if err := cond(); err != nil {
			return time.Since(start), err
		}
		left := window - time.Since(start)
		if left <= 0 {
			return time.Since(start), nil
		}
		time.Sleep(min(every, left))
	}
}

// Changes collects aggregates in the order they arrive, from any goroutine.
// It notes every aggregate whose version is not above the previous one of
// its user (Check reports them): observers must never see that.
type Changes struct {
	mu     sync.Mutex
	all    []presence.Aggregate
	byUser map[string][]presence.Aggregate
	errs   []string
}

// Add records p.
func (c *Changes) Add(p presence.Aggregate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byUser == nil {
		c.byUser = make(map[string][]presence.Aggregate)
	}
	h := c.byUser[p.User]
	if len(h) > 0 && p.Version <= h[len(h)-1].Version {
		c.errs = append(c.errs, fmt.Sprintf("%s: version %d after %d", p.User, p.Version, h[len(h)-1].Version))
	}
	c.byUser[p.User] = append(h, p)
	c.all = append(c.all, p)
}

// All returns every aggregate received, in order.
func (c *Changes) All() []presence.Aggregate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.all)
}

// Len returns how many aggregates were received.
func (c *Changes) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.all)
}

// History returns the aggregates of user, in order.
func (c *Changes) History(user string) []presence.Aggregate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.byUser[user])
}

// Last returns the newest aggregate of user.
func (c *Changes) Last(user string) (presence.Aggregate, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.byUser[user]
	if len(h) == 0 {
		return presence.Aggregate{}, false
	}
	return h[len(h)-1], true
}

// WaitFor waits until the newest aggregate of user satisfies cond, and
// returns it.
func (c *Changes) WaitFor(t testing.TB, within time.Duration, user, what string, cond func(presence.Aggregate) bool) presence.Aggregate {
	t.Helper()
	var p presence.Aggregate
	Wait(t, within, user+": "+what, func() error {
		var ok bool
		p, ok = c.Last(user)
		switch {
		case !ok:
			return fmt.Errorf("nothing received for %s", user)
		case !cond(p):
			return fmt.Errorf("%s %q v%d with %d sessions", p.Status, p.Text, p.Version, len(p.Sessions))
		}
		return nil
	})
	return p
}

// Errors returns the versions that did not increase.
func (c *Changes) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.errs)
}

// Check fails the test (without stopping it) for every version that did not
// increase.
func (c *Changes) Check(t testing.TB) {
	t.Helper()
	for _, e := range c.Errors() {
		t.Error(e)
	}
}

// Why is the error a Wait condition returns: nil when ok, else why.
func Why(ok bool, why string) error {
	if ok {
		return nil
	}
	return errors.New(why)
}

// NopTracker takes every event of presence's hook (hooks.Tracker) and does
// nothing: for the tests of a hook, not of the store.
type NopTracker struct{}

func (NopTracker) Connect(presence.ConnID, string, string, string, *presence.Activity, presence.Conn) {
}
func (NopTracker) Active(presence.ConnID, string)                   {}
func (NopTracker) WillDelay(presence.ConnID, string, time.Duration) {}
func (NopTracker) LastSign(presence.ConnID, string, time.Time)      {}
func (NopTracker) Expect(presence.ConnID, string, time.Duration, time.Duration) {
}
func (NopTracker) Established(presence.ConnID, string)                      {}
func (NopTracker) Set(presence.ConnID, string, string, presence.SetRequest) {}
func (NopTracker) LastWords(presence.ConnID, string, string)                {}
func (NopTracker) Disconnect(presence.ConnID, string, presence.EndReason)   {}
