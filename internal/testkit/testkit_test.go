package testkit

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// fatalTB records Fatalf's message and unwinds with a panic (which fatally
// recovers) instead of failing the test it wraps.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

// fatally runs fn with a fatalTB over t and returns the message fn failed
// with, "" when it did not fail.
func fatally(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	f := &fatalTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != any(f) {
				panic(r)
			}
		}()
		fn(f)
	}()
	return f.msg
}

func TestWaitReturnsOnceTrueAndFailsWithTheLastError(t *testing.T) {
	n := 0
	Wait(t, time.Second, "third try", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("cond called %d times", n)
	}
	msg := fatally(t, func(tb testing.TB) {
		Wait(tb, 20*time.Millisecond, "never", func() error { return errors.New("last seen 42") })
	})
	if !strings.Contains(msg, "never: not within 20ms") || !strings.Contains(msg, "last seen 42") {
		t.Fatalf("Wait did not fail with what and the last error: %q", msg)
	}
}

// During polls for the whole window when the condition holds, and fails at
// the first poll that sees it broken, long before the window ends.
func TestDuringHoldsForTheWindowAndFailsAtTheFirstBreak(t *testing.T) {
	const window = 60 * time.Millisecond
	n := 0
	start := time.Now()
	if msg := fatally(t, func(tb testing.TB) {
		During(tb, window, "holds", func() error { n++; return nil })
	}); msg != "" {
		t.Fatalf("During failed while the condition held: %q", msg)
	}
	if took := time.Since(start); took < window || n < 3 {
		t.Fatalf("During returned after %v and %d polls, want the whole %v with polls all along", took, n, window)
	}

	// Broken at the third poll of a long window: During fails then.
	n = 0
	start = time.Now()
	msg := fatally(t, func(tb testing.TB) {
		During(tb, time.Minute, "breaks", func() error {
			if n++; n == 3 {
				return errors.New("seen 7")
			}
			return nil
		})
	})
	if !strings.Contains(msg, "breaks: broken after") || !strings.Contains(msg, "seen 7") {
		t.Fatalf("During did not fail with what and the error: %q", msg)
	}
	if n != 3 || time.Since(start) > 10*time.Second {
		t.Fatalf("During went on after the break: %d polls, %v", n, time.Since(start))
	}

	// A window already over still checks once.
	n = 0
	if msg := fatally(t, func(tb testing.TB) {
		During(tb, -time.Second, "over", func() error { n++; return errors.New("broken") })
	}); n != 1 || !strings.Contains(msg, "broken") {
		t.Fatalf("During over a past window: %d polls, %q", n, msg)
	}
}

// Poll and Hold report instead of failing the test.
func TestPollAndHoldReport(t *testing.T) {
	if _, err := Poll(20*time.Millisecond, time.Millisecond, func() error { return errors.New("no") }); err == nil || err.Error() != "no" {
		t.Fatalf("Poll = %v, want the last error", err)
	}
	n := 0
	if _, err := Poll(time.Minute, time.Millisecond, func() error { n++; return Why(n == 2, "once") }); err != nil || n != 2 {
		t.Fatalf("Poll = %v after %d calls", err, n)
	}
	if at, err := Hold(time.Minute, time.Millisecond, func() error { return errors.New("at once") }); err == nil || at > 10*time.Second {
		t.Fatalf("Hold = %v after %v", err, at)
	}
	if _, err := Hold(10*time.Millisecond, time.Millisecond, func() error { return nil }); err != nil {
		t.Fatalf("Hold = %v", err)
	}
}

func TestChangesNotesVersionsThatDoNotIncrease(t *testing.T) {
	var c Changes
	c.Add(presence.Aggregate{User: "a", Version: 2})
	c.Add(presence.Aggregate{User: "b", Version: 1})
	c.Add(presence.Aggregate{User: "a", Version: 2})
	c.Add(presence.Aggregate{User: "a", Version: 3})
	if got := c.Errors(); len(got) != 1 || !strings.Contains(got[0], "version 2 after 2") {
		t.Fatalf("errors %q", got)
	}
	if p, _ := c.Last("a"); p.Version != 3 || c.Len() != 4 || len(c.History("a")) != 3 {
		t.Fatalf("last %+v len %d", p, c.Len())
	}
}

// The clock reads what it was set to and moves only when advanced, from
// any goroutine (run with -race).
func TestClockMovesOnlyWhenAdvanced(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := NewClock(start)
	if !c.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", c.Now(), start)
	}
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		}()
	}
	for range 4 {
		<-done
	}
	if got, want := c.Now(), start.Add(400*time.Millisecond); !got.Equal(want) {
		t.Fatalf("Now = %v after 400 advances of 1ms, want %v", got, want)
	}
	c.Advance(-time.Hour)
	if got, want := c.Now(), start.Add(400*time.Millisecond-time.Hour); !got.Equal(want) {
		t.Fatalf("Now = %v after going back an hour, want %v", got, want)
	}
}
