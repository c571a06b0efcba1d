package hooks

import (
	"sync"
	"time"
)

// bucket is a token bucket: rate tokens a second, at most burst at once.
type bucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// take takes one token at now, and reports whether there was one.
func (b *bucket) take(now time.Time, rate, burst float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() || now.After(b.last) {
		if !b.last.IsZero() {
			b.tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
		}
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
