package main

import (
	"testing"
	"time"
)

// A duration field is written in milliseconds, as a number, under a name
// that says so: "lasted" becomes lasted_ms; a name ending in _ms is kept.
func TestSlogDurationInMilliseconds(t *testing.T) {
	buf, _, sl := newJSON(t, "info")
	sl.Info("redis answers again", "lasted", 1500*time.Millisecond, "took_ms", 250*time.Microsecond)
	got := lines(t, buf)
	if len(got) != 1 {
		t.Fatalf("%d lines", len(got))
	}
	l := got[0]
	if l["lasted_ms"] != 1500.0 || l["took_ms"] != 0.25 {
		t.Errorf("lasted_ms %v, took_ms %v: want 1500 and 0.25", l["lasted_ms"], l["took_ms"])
	}
	if _, ok := l["lasted"]; ok {
		t.Errorf("a duration field without its unit: %v", l)
	}
}
