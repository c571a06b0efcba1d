package auth

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// logLimiter lets through one log line per interval and counts the rest,
// so that a flood of refusals cannot flood the log.
type logLimiter struct {
	every      time.Duration
	mu         sync.Mutex
	last       time.Time
	suppressed atomic.Int64
}

// event returns the event to log to, with the number of lines suppressed
// since the last one, or nil when this one is suppressed.
func (l *logLimiter) event(log zerolog.Logger, now time.Time) *zerolog.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed.Add(1)
		return nil
	}
	l.last = now
	return log.Info().Int64("suppressed_since_last", l.suppressed.Swap(0))
}
