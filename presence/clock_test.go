package presence

import (
	"errors"
	"testing"
	"time"
)

func TestClockJSONRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 2, 1, 0, 36, 122_000_000, time.UTC)
	c := Clock{Node: "node-a", Incarnation: "m1x2-ab12", Seq: 42, Version: 1796173236456001, Time: at, Interval: 5 * time.Second}
	got := string(c.AppendJSON(nil))
	want := `{"node":"node-a","incarnation":"m1x2-ab12","seq":42,"version":1796173236456001,"time":"2026-12-02T01:00:36.122Z","interval_ms":5000}`
	if got != want {
		t.Fatalf("AppendJSON:\n got %s\nwant %s", got, want)
	}
	back, err := ParseClock([]byte(got))
	if err != nil {
		t.Fatal(err)
	}
	if back != c {
		t.Fatalf("round trip: %+v, want %+v", back, c)
	}
}

func TestParseClockRefuses(t *testing.T) {
	for _, p := range []string{
		``, `null`, `[]`, `{}`,
		`{"node":"a","incarnation":"i","seq":1,"version":0,"time":"2026-12-02T01:00:36.122Z"}`, // no interval
		`{"node":"a","incarnation":"i","seq":1,"version":0,"time":"2026-12-02T01:00:36.122Z","interval_ms":5000,"x":1}`,
		`{"node":"a b","incarnation":"i","seq":1,"version":0,"time":"2026-12-02T01:00:36.122Z","interval_ms":5000}`,
		`{"node":"a","incarnation":"","seq":1,"version":0,"time":"2026-12-02T01:00:36.122Z","interval_ms":5000}`,
		`{"node":"a","incarnation":"i","seq":0,"version":0,"time":"2026-12-02T01:00:36.122Z","interval_ms":5000}`,
		`{"node":"a","incarnation":"i","seq":-1,"version":0,"time":"2026-12-02T01:00:36.122Z","interval_ms":5000}`,
		`{"node":"a","incarnation":"i","seq":1,"version":0,"time":"yesterday","interval_ms":5000}`,
		`{"node":"a","incarnation":"i","seq":1,"version":0,"time":"2026-12-02T01:00:36.122Z","interval_ms":0}`,
		`{"node":"a","incarnation":"i","seq":1,"version":0,"time":"2026-12-02T01:00:36.122Z","interval_ms":5000}{}`,
	} {
		if c, err := ParseClock([]byte(p)); !errors.Is(err, ErrBadClock) {
			t.Errorf("ParseClock(%s) = %+v, %v; want ErrBadClock", p, c, err)
		}
	}
}

// An observer is stale once two intervals have passed since its last
// clock message, never before, and never without a first one.
func TestClockStale(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	S := 5 * time.Second
	for _, tc := range []struct {
		last  time.Time
		now   time.Time
		stale bool
	}{
		{time.Time{}, t0.Add(time.Hour), false},
		{t0, t0, false},
		{t0, t0.Add(S), false},
		{t0, t0.Add(2 * S), false},
		{t0, t0.Add(2*S + time.Millisecond), true},
		{t0, t0.Add(time.Hour), true},
	} {
		if got := ClockStale(tc.last, S, tc.now); got != tc.stale {
			t.Errorf("ClockStale(%v, %v, +%v) = %v, want %v", tc.last, S, tc.now.Sub(tc.last), got, tc.stale)
		}
	}
}

func FuzzParseClock(f *testing.F) {
	f.Add([]byte(`{"node":"node-a","incarnation":"m1x2-ab12","seq":42,"version":1,"time":"2026-12-02T01:00:36.122Z","interval_ms":5000}`))
	f.Add([]byte(`{"node":"a"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseClock(b)
		if err != nil {
			if !errors.Is(err, ErrBadClock) {
				t.Fatalf("ParseClock(%q): error %v is not ErrBadClock", b, err)
			}
			return
		}
		again, err := ParseClock(c.AppendJSON(nil))
		if err != nil || again.Node != c.Node || again.Seq != c.Seq || again.Version != c.Version || again.Interval != c.Interval {
			t.Fatalf("ParseClock(%q) = %+v; its JSON reads back as %+v, %v", b, c, again, err)
		}
	})
}
