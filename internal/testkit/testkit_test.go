package testkit

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// fatalTB records Fatalf instead of stopping the goroutine it runs on.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = format
	panic(f)
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
	f := &fatalTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		Wait(f, 20*time.Millisecond, "never", func() error { return errors.New("last seen 42") })
	}()
	if !strings.Contains(f.msg, "not within") {
		t.Fatalf("Wait did not fail: %q", f.msg)
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
