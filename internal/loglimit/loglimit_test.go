package loglimit

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	var l Limiter
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at         time.Duration
		ok         bool
		suppressed int64
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{59 * time.Second, false, 0},
		{time.Minute, true, 2},
		{time.Minute + time.Millisecond, false, 0},
		{3 * time.Minute, true, 1},
	}
	for i, s := range steps {
		ok, n := l.Allow(t0.Add(s.at), time.Minute)
		if ok != s.ok || n != s.suppressed {
			t.Errorf("step %d (+%v): %v %d, want %v %d", i, s.at, ok, n, s.ok, s.suppressed)
		}
	}
}
