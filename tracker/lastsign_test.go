package tracker

import (
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// A keep-alive timeout's last sign of life reaches the store with its end:
// the user's last_seen is that time, the end's ended_at the detection.
func TestTrackerLastSign(t *testing.T) {
	tr, _, f, clk := newTestTracker(t)
	const cl = 1
	tr.Start()
	defer tr.Stop()
	tr.Connect(cl, "alice-sensor", "alice", "", nil, presence.Conn{})
	tr.Established(cl, "alice-sensor")
	waitIdle(t, tr)
	clk.Advance(time.Minute)
	sign := clk.Now().Add(-3 * time.Second)
	tr.LastSign(cl, "alice-sensor", sign)
	tr.Disconnect(cl, "alice-sensor", presence.EndTimeout)
	waitIdle(t, tr)
	all := f.All()
	off := all[len(all)-1]
	if off.Status != presence.Offline || !off.LastSeen.Equal(sign) || off.Reason != presence.EndTimeout {
		t.Fatalf("offline %+v, want last seen %v, reason timeout", off, sign)
	}
	if len(off.Ended) != 1 || !off.Ended[0].EndedAt.Equal(clk.Now()) {
		t.Fatalf("ended %+v, want ended at the detection %v", off.Ended, clk.Now())
	}
	// A stale connection's sign is ignored.
	tr.LastSign(cl+1, "alice-sensor", sign)
}
