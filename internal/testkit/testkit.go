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

// Wait polls cond until it returns nil and returns how long that took. Once
// within has passed it fails the test with what and cond's last error, so
// the failure says what was last seen (nats-server's checkFor). It never
// sleeps longer than a few milliseconds at a time.
func Wait(t testing.TB, within time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v; last seen: %v", what, within, err)
		}
		time.Sleep(5 * time.Millisecond)
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
