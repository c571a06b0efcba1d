package auth

import (
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// The log limiter lets one line a second through and counts the rest in
// the next line.
func TestLogLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := logLimiter{every: time.Second}
	log := zerolog.New(io.Discard)
	if l.event(log, t0) == nil {
		t.Fatal("first line suppressed")
	}
	for i := range 99 {
		if l.event(log, t0.Add(time.Duration(i)*time.Millisecond)) != nil {
			t.Fatal("line let through within the second")
		}
	}
	if got := l.suppressed.Load(); got != 99 {
		t.Fatalf("suppressed %d, want 99", got)
	}
	if l.event(log, t0.Add(time.Second)) == nil || l.suppressed.Load() != 0 {
		t.Fatalf("next second: suppressed %d", l.suppressed.Load())
	}
}
