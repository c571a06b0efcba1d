package presence

import (
	"testing"
	"time"
)

func TestNextStamp(t *testing.T) {
	w := baseStamp
	for _, tc := range []struct {
		name string
		last uint64
		now  time.Time
		want uint64
	}{
		{"fresh takes wall ms×1000", 0, base, w},
		{"same ms counts up", w, base, w + 1},
		{"same ms counts up again", w + 1, base, w + 2},
		{"sub-ms is truncated", w, at(999 * time.Microsecond), w + 1},
		{"next ms jumps to wall", w + 5, at(time.Millisecond), w + 1000},
		{"next ms with 999 used", w + 999, at(time.Millisecond), w + 1000},
		{"next ms after 1000 used counts up", w + 1000, at(time.Millisecond), w + 1001},
		{"counter ahead of wall", w + 1500, at(time.Millisecond), w + 1501},
		{"clock went back an hour", w, at(-time.Hour), w + 1},
		{"clock went back a year", w + 7, base.AddDate(-1, 0, 0), w + 8},
		{"one second later", w + 3, at(time.Second), w + 1_000_000},
		{"before the wall", w - 2, base, w},
		{"just below the wall", w - 1, base, w},
	} {
		if got := NextStamp(tc.last, tc.now); got != tc.want {
			t.Errorf("%s: NextStamp(%d, %v) = %d, want %d", tc.name, tc.last, tc.now, got, tc.want)
		}
	}
	if w >= 1<<53 {
		t.Fatalf("stamp %d at %v is not below 2^53", w, base)
	}
}

func TestNextStampSequences(t *testing.T) {
	for _, tc := range []struct {
		name string
		step time.Duration // how the clock moves between stamps
	}{
		{"frozen clock", 0},
		{"clock forward 1µs", time.Microsecond},
		{"clock forward 1ms", time.Millisecond},
		{"clock backwards 1ms", -time.Millisecond},
		{"clock backwards 1s", -time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var last uint64
			now := base
			for i := range 3000 {
				next := NextStamp(last, now)
				if next <= last {
					t.Fatalf("stamp %d: NextStamp(%d, %v) = %d, not above last", i, last, now, next)
				}
				if i == 0 && next != baseStamp {
					t.Fatalf("first stamp = %d, want %d", next, baseStamp)
				}
				last = next
				now = now.Add(tc.step)
			}
		})
	}
}

// A store that forgot its last stamp (restart, empty Redis) hands out values
// above every value issued before, as long as its clock has moved on by a
// millisecond and fewer than 1000 stamps were taken per millisecond.
func TestNextStampSurvivesReset(t *testing.T) {
	var last uint64
	for range 999 {
		last = NextStamp(last, base)
	}
	if want := baseStamp + 998; last != want {
		t.Fatalf("999th stamp at a frozen clock = %d, want %d", last, want)
	}
	after := NextStamp(0, at(time.Millisecond))
	if after <= last {
		t.Fatalf("stamp after reset %d is not above %d issued earlier", after, last)
	}
	if after != baseStamp+1000 {
		t.Fatalf("stamp after reset = %d, want %d", after, baseStamp+1000)
	}
}
