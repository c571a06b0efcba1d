package hooks

import (
	"testing"
	"time"
)

// ReadDeadline is mochi v2.7.9's: keepalive + keepalive/2 whole seconds
// (clients.go refreshDeadline), and LastSign is the detection less it.
func TestReadDeadlineAndLastSign(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		k    uint16
		want time.Duration
	}{
		{0, 0}, {1, time.Second}, {2, 3 * time.Second}, {3, 4 * time.Second}, {5, 7 * time.Second},
		{10, 15 * time.Second}, {60, 90 * time.Second},
	} {
		if got := ReadDeadline(c.k); got != c.want {
			t.Errorf("keep-alive %d: deadline %v, want %v", c.k, got, c.want)
		}
		want := time.Time{}
		if c.want > 0 {
			want = now.Add(-c.want)
		}
		if got := LastSign(now, c.k); !got.Equal(want) {
			t.Errorf("keep-alive %d: last sign %v, want %v", c.k, got, want)
		}
	}
}
