package loglimit

import (
	"sync/atomic"
	"time"
)

// Limiter is one key's limit (one client's, say); its zero value lets the
// first line through. It is safe for concurrent use.
type Limiter struct {
	last       atomic.Int64 // unix nanoseconds of the last line let through; 0: none
	suppressed atomic.Int64
}

// Allow reports whether a line may be logged at now, at most one every
// interval, and, when it may, how many were held back since the last one.
func (l *Limiter) Allow(now time.Time, every time.Duration) (ok bool, suppressed int64) {
	t := now.UnixNano()
	last := l.last.Load()
	if last != 0 && t-last < int64(every) || !l.last.CompareAndSwap(last, t) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}
