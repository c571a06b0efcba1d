package auth

import (
	"sync"
	"sync/atomic"
	"time"

	"log/slog"
)

// logLimiter lets through one log line per interval and counts the rest,
// so that a flood of refusals cannot flood the log.
type logLimiter struct {
	every      time.Duration
	mu         sync.Mutex
	last       time.Time
	suppressed atomic.Int64
}

// log logs msg with args at info, with the number of lines suppressed since
// the last one, unless this one is suppressed.
func (l *logLimiter) log(log *slog.Logger, now time.Time, msg string, args ...any) {
	l.mu.Lock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.mu.Unlock()
		l.suppressed.Add(1)
		return
	}
	l.last = now
	l.mu.Unlock()
	log.Info(msg, append(args, "suppressed_since_last", l.suppressed.Swap(0))...)
}
