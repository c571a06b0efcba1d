package testkit

import (
	"sync"
	"time"
)

// Clock is a fake clock that only the test moves: hand its Now to the code
// under test in place of time.Now, and Advance it. It is safe for use from
// any goroutine.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock that reads start until it is advanced.
func NewClock(start time.Time) *Clock { return &Clock{t: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d (back, for a negative d).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
