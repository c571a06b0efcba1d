package hooks

import (
	"testing"
	"time"
)

// The bucket lets burst through at once, then rate a second, on an
// injected clock.
func TestBucket(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := bucket{tokens: 10}
	took := 0
	for range 30 {
		if b.take(t0, 5, 10) {
			took++
		}
	}
	if took != 10 {
		t.Fatalf("burst: took %d, want 10", took)
	}
	// 1 s later: 5 more, not 10.
	took = 0
	for range 30 {
		if b.take(t0.Add(time.Second), 5, 10) {
			took++
		}
	}
	if took != 5 {
		t.Fatalf("after 1 s: took %d, want 5", took)
	}
	// A long pause refills to the burst, never beyond.
	took = 0
	for range 30 {
		if b.take(t0.Add(time.Hour), 5, 10) {
			took++
		}
	}
	if took != 10 {
		t.Fatalf("after an hour: took %d, want 10", took)
	}
	// A clock that steps back takes nothing away and adds nothing.
	if b.take(t0, 5, 10) {
		t.Fatal("took a token from a clock stepping back")
	}
}

// A link has no presence/set limiter until its first presence/set, which
// makes it full (burst tokens); every later call returns the same one.
func TestLinkSetBucketLazy(t *testing.T) {
	var l link
	if l.set.Load() != nil {
		t.Fatal("a new link has a limiter")
	}
	now := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	b := l.setBucket(2)
	if !b.take(now, 1, 2) || !b.take(now, 1, 2) || b.take(now, 1, 2) {
		t.Fatal("a new limiter does not hold exactly its burst")
	}
	if l.setBucket(2) != b {
		t.Fatal("a second call made another limiter")
	}
}
