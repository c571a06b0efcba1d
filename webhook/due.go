package webhook

import "time"

// Due decides whether an endpoint cuts a batch now: when maxBatch events
// wait, when the oldest of n waiting events was queued at least maxWait
// before now, or when flushing (a stop) with any event waiting. Otherwise
// it says how long until the oldest's wait ends (0 with no event waiting:
// nothing to wait for).
func Due(n int, oldest, now time.Time, maxBatch int, maxWait time.Duration, flushing bool) (bool, time.Duration) {
	if n == 0 {
		return false, 0
	}
	if n >= maxBatch || flushing {
		return true, 0
	}
	waited := now.Sub(oldest)
	if waited >= maxWait {
		return true, 0
	}
	return false, maxWait - waited
}

// Backoff is the wait before a batch's next attempt: exponential from Base,
// at most Max, with jitter.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
}

// Delay is the wait after the failed attempt number attempt (1: the first
// one failed): Base·2^(attempt-1), at most Max, of which the upper half is
// jittered by rnd in [0, 1) ("equal jitter": the wait is never below half
// the step, so retries of a failing endpoint spread out without ever
// hammering it).
func (b Backoff) Delay(attempt int, rnd float64) time.Duration {
	d := b.Base
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	half := d / 2
	return half + time.Duration(rnd*float64(d-half))
}

// BreakerState is a circuit breaker's state.
type BreakerState int

// The states.
const (
	Closed   BreakerState = iota // attempts go through
	Open                         // attempts wait for the cooldown to end
	HalfOpen                     // one attempt goes through: its outcome closes or opens again
)

// String names the state.
func (s BreakerState) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "closed"
}

// Breaker is a circuit breaker, pure: after Threshold failed attempts in a
// row it opens for Cooldown, then lets one attempt through. The times are
// arguments. Not safe for concurrent use (an endpoint's one goroutine owns
// it).
type Breaker struct {
	Threshold int
	Cooldown  time.Duration

	state  BreakerState
	fails  int
	opened time.Time
}

// State is the breaker's state at now (an open breaker whose cooldown has
// ended is half-open).
func (b *Breaker) State(now time.Time) BreakerState {
	if b.state == Open && !now.Before(b.opened.Add(b.Cooldown)) {
		return HalfOpen
	}
	return b.state
}

// Allow reports whether an attempt may go at now, else how long until it
// may. An open breaker whose cooldown ended turns half-open.
func (b *Breaker) Allow(now time.Time) (bool, time.Duration) {
	if b.state != Open {
		return true, 0
	}
	end := b.opened.Add(b.Cooldown)
	if now.Before(end) {
		return false, end.Sub(now)
	}
	b.state = HalfOpen
	return true, 0
}

// Success records an attempt that reached the endpoint: closed again.
func (b *Breaker) Success() { b.state, b.fails = Closed, 0 }

// Failure records a failed attempt at now; it reports whether the breaker
// opened.
func (b *Breaker) Failure(now time.Time) bool {
	b.fails++
	if b.state == HalfOpen || b.fails >= b.Threshold {
		b.state, b.opened = Open, now
		return true
	}
	return false
}
