package auth

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The log limiter lets one line a second through and counts the rest in
// the next line.
func TestLogLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := logLimiter{every: time.Second}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	lines := func() int { return strings.Count(buf.String(), "\n") }
	l.log(log, t0, "refused")
	if lines() != 1 {
		t.Fatal("first line suppressed")
	}
	for i := range 99 {
		l.log(log, t0.Add(time.Duration(i)*time.Millisecond), "refused")
		if lines() != 1 {
			t.Fatal("line let through within the second")
		}
	}
	if got := l.suppressed.Load(); got != 99 {
		t.Fatalf("suppressed %d, want 99", got)
	}
	l.log(log, t0.Add(time.Second), "refused")
	if lines() != 2 || l.suppressed.Load() != 0 || !strings.Contains(buf.String(), `"suppressed_since_last":99`) {
		t.Fatalf("next second: suppressed %d, log %s", l.suppressed.Load(), buf.String())
	}
}
