package main

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// tap is a subscriber that only counts what it receives: the messages of
// another output of the broker (the lifecycle topics) while a scenario
// offers its load.
type tap struct {
	c *client
	n atomic.Int64
}

// newTap connects a tap as user (a service account) subscribed to the
// comma-separated filters.
func (e *runEnv) newTap(filters, user string) (*tap, error) {
	t := &tap{}
	c, err := connect(e.sys.addr(), connectOpts{ClientID: "bench-tap", Username: user, ReadBuffer: observerBuf,
		OnPublish: func(string, []byte, time.Duration) { t.n.Add(1) }}, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("tap: %w", err)
	}
	if err := c.Subscribe(10*time.Second, strings.Split(filters, ",")...); err != nil {
		c.Close()
		return nil, fmt.Errorf("tap: subscribe %s: %w", filters, err)
	}
	t.c = c
	return t, nil
}

// count returns the messages received so far; 0 without a tap.
func (t *tap) count() int64 {
	if t == nil {
		return 0
	}
	return t.n.Load()
}
