package presenced

import (
	"testing"
	"time"
)

// /readyz answers not ready only once the store has been unreachable for
// admin.unready_after; 0 at once; ready again as soon as it answers.
func TestReadinessAfterOutage(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	now := t0
	var since time.Time
	clock := func() time.Time { return now }
	down := func() time.Time { return since }
	for _, c := range []struct {
		after time.Duration
		steps []struct {
			at    time.Duration // since the outage began; <0: Redis answers
			ready bool
		}
	}{
		{30 * time.Second, []struct {
			at    time.Duration
			ready bool
		}{{-1, true}, {0, true}, {29 * time.Second, true}, {30 * time.Second, false}, {time.Hour, false}, {-1, true}}},
		{0, []struct {
			at    time.Duration
			ready bool
		}{{-1, true}, {0, false}, {time.Millisecond, false}, {-1, true}}},
	} {
		ready := readiness(down, c.after, clock)
		for _, s := range c.steps {
			if s.at < 0 {
				since, now = time.Time{}, t0
			} else {
				since, now = t0, t0.Add(s.at)
			}
			if got := ready(); got != s.ready {
				t.Errorf("unready_after %v, outage of %v: ready %v, want %v", c.after, s.at, got, s.ready)
			}
		}
	}
}
