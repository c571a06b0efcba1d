package tracker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// observed counts Options.Observe's calls by op.
type observed struct {
	mu sync.Mutex
	n  [NumOps]int
}

func (o *observed) observe(op Op, _ time.Duration) {
	o.mu.Lock()
	o.n[op]++
	o.mu.Unlock()
}

func (o *observed) count(op Op) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[op]
}

// refusing is the memory store whose End refuses user "x" as stale.
type refusing struct{ *countingStore }

func (s refusing) End(ctx context.Context, a presence.EndArgs) error {
	if a.User == "x" {
		return presence.ErrStaleEpoch
	}
	return s.countingStore.End(ctx, a)
}

// Every store call is timed under its op; an end is counted by reason once
// the store took it, and a refused end is no end. (Moved from the root
// package's TestTimedStore, whose timing decorator the tracker replaced:
// the same calls, observations and counts.)
func TestTrackerObservesStoreCalls(t *testing.T) {
	tr, cs, _, _ := newTestTracker(t)
	var o observed
	tr.observer = o.observe
	tr.store = refusing{cs}
	tr.Start()
	defer tr.Stop()
	away := presence.Away
	for i, u := range []string{"a", "x", "b"} {
		conn := presence.ConnID(i + 1)
		tr.Connect(conn, u+"-1", u, "", nil, presence.Conn{})
		tr.Established(conn, u+"-1")
	}
	waitIdle(t, tr)
	tr.Set(1, "a-1", "a", presence.SetRequest{Scope: presence.ScopeSession, Status: &away})
	tr.Set(1, "a-1", "a", presence.SetRequest{Scope: presence.ScopeAccount, Status: &away})
	waitIdle(t, tr)
	tr.Disconnect(1, "a-1", presence.EndClean)
	tr.Disconnect(2, "x-1", presence.EndClean) // refused: the store has it at another epoch
	tr.Disconnect(3, "b-1", presence.EndNetwork)
	waitIdle(t, tr)
	if err := tr.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	for op, want := range map[Op]int{OpOpen: 3, OpUpdate: 1, OpAccount: 1, OpRenew: 1} {
		if n := o.count(op); n != want {
			t.Errorf("%s: %d observations, want %d", OpNames[op], n, want)
		}
	}
	if n := o.count(OpEnd); n < 3 {
		t.Errorf("end: %d observations, want at least 3 (a refused end is timed too)", n)
	}
	clean, network := tr.Stats.EndedBy[presence.EndClean.Index()].Load(), tr.Stats.EndedBy[presence.EndNetwork.Index()].Load()
	if clean != 1 || network != 1 {
		t.Errorf("ends: clean %d, network %d; want 1, 1 (a refused end is no end)", clean, network)
	}
	if got := tr.Stats.Ended.Load(); got != clean+network {
		t.Errorf("ended %d, want the sum by reason %d", got, clean+network)
	}
	start := time.Now()
	if allocs := testing.AllocsPerRun(100, func() { tr.observe(OpEnd, start) }); allocs != 0 {
		t.Errorf("timing a call allocates %v times", allocs)
	}
}

// A batch is timed as one call (op batch: one round trip), and its ends
// that committed are counted by reason. (Moved from the root package's
// TestTimedStoreKeepsBatching: the tracker times its own batches now, so
// no wrapper can hide the store's Batch.)
func TestTrackerObservesBatches(t *testing.T) {
	tr, bs, _ := newBatchTracker(t)
	var o observed
	tr.observer = o.observe
	const n = 8
	// Queued before the worker starts (as TestTrackerBatchOrder does), so
	// that it takes them in one batch: started first, a worker on a busy
	// machine could take the first open alone.
	for i := range n {
		tr.Connect(1, sid(i), user(i), "", nil, presence.Conn{})
		tr.Established(1, sid(i))
	}
	tr.Start()
	defer tr.Stop()
	waitIdle(t, tr)
	if o.count(OpBatch) == 0 || o.count(OpOpen) != 0 {
		t.Fatalf("opens of %d sessions: %d batches and %d single opens observed, want batches only", n, o.count(OpBatch), o.count(OpOpen))
	}
	for i := range n {
		reason := presence.EndClean
		if i%2 == 1 {
			reason = presence.EndTimeout
		}
		tr.Disconnect(1, sid(i), reason)
	}
	waitIdle(t, tr)
	if c, to := tr.Stats.EndedBy[presence.EndClean.Index()].Load(), tr.Stats.EndedBy[presence.EndTimeout.Index()].Load(); c != n/2 || to != n/2 {
		t.Errorf("ends: clean %d, timeout %d; want %d, %d", c, to, n/2, n/2)
	}
	if bs.maxBatch() < 2 {
		t.Errorf("largest batch %d: the ends were not batched", bs.maxBatch())
	}
}
