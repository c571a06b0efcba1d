package tracker

import (
	"runtime"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/store"
)

// benchRig is a tracker over the memory store, with the feed a node gives
// it, on a fake clock, whose queues the benchmark drains itself: no
// worker runs, so each change's hand-off, sync and committed write happen
// on the benchmark's goroutine, one change at a time, deterministically.
type benchRig struct {
	tr   *Tracker
	feed *store.Feed
	sc   scratch
}

func newBenchRig() *benchRig {
	clock := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	feed := store.NewFeed()
	m := store.NewMemory(presence.NewRules(nil), now, feed.Push)
	return &benchRig{tr: New(m, Options{Node: "bench", TTL: time.Hour, Log: nil}), feed: feed}
}

// commit syncs what a change queued, as the shards' workers do, and takes
// the change off the feed.
func (r *benchRig) commit() {
	for _, q := range r.tr.shards {
		if its := q.take(); len(its) > 0 {
			r.tr.syncItems(its, &r.sc)
		}
	}
	r.feed.Recycle(r.feed.Take())
}

// perChange reports the loop's time and allocations per change, for a loop
// of b.N iterations of changes changes each, from the allocation count
// before the loop.
func perChange(b *testing.B, changes int, mallocs uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	n := float64(b.N * changes)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/change")
	b.ReportMetric(float64(ms.Mallocs-mallocs)/n, "allocs/change")
}

func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// BenchmarkTrackerCycle measures the tracker's share of the churn
// scenario's cycle, through to the memory store's committed write: a
// connection of a user connects and is established (one open), sets its
// status (one update) and disconnects cleanly (one end). An op is the
// cycle of three changes; ns/change and allocs/change divide it by three.
func BenchmarkTrackerCycle(b *testing.B) {
	r := newBenchRig()
	t := r.tr
	const id = "alice\x00alice-phone"
	away, text := presence.Away, "x"
	set := presence.SetRequest{Scope: presence.ScopeSession, Status: &away, Text: &text}
	conn := presence.ConnID(0)
	cycle := func() {
		conn++
		t.Connect(conn, id, "alice", "phone", nil, presence.Conn{})
		t.Established(conn, id)
		r.commit()
		t.Set(conn, id, "alice", set)
		r.commit()
		t.Disconnect(conn, id, presence.EndClean)
		r.commit()
	}
	for range presence.MaxEnded { // the user's record holds its ended sessions, as after a few cycles
		cycle()
	}
	opened, updated, ended := t.Stats.Opened.Load(), t.Stats.Updated.Load(), t.Stats.Ended.Load()
	b.ReportAllocs()
	m := mallocs()
	for b.Loop() {
		cycle()
	}
	perChange(b, 3, m)
	n := int64(b.N)
	if o, u, e := t.Stats.Opened.Load()-opened, t.Stats.Updated.Load()-updated, t.Stats.Ended.Load()-ended; o != n || u != n || e != n {
		b.Fatalf("%d opens, %d updates, %d ends written; want %d of each", o, u, e, n)
	}
	if t.Len() != 0 || t.Stats.Depth.Load() != 0 {
		b.Fatalf("%d slots, depth %d left", t.Len(), t.Stats.Depth.Load())
	}
}

// BenchmarkTrackerSet measures one presence/set of a live session handed
// to the tracker and written to the memory store (one update): the status
// goes back and forth between away and busy.
func BenchmarkTrackerSet(b *testing.B) {
	r := newBenchRig()
	t := r.tr
	const id = "alice\x00alice-phone"
	t.Connect(1, id, "alice", "phone", nil, presence.Conn{})
	t.Established(1, id)
	r.commit()
	away, busy, text := presence.Away, presence.Busy, "x"
	sets := [2]presence.SetRequest{
		{Scope: presence.ScopeSession, Status: &away, Text: &text},
		{Scope: presence.ScopeSession, Status: &busy, Text: &text},
	}
	updated := t.Stats.Updated.Load()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		t.Set(1, id, "alice", sets[i&1])
		r.commit()
		i++
	}
	if u := t.Stats.Updated.Load() - updated; u != int64(b.N) {
		b.Fatalf("%d updates written, want %d", u, b.N)
	}
}
