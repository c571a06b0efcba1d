package tracker

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/store"
)

// countingStore counts the writes reaching the memory store.
type countingStore struct {
	*store.Memory
	mu                   sync.Mutex
	opens, ends, updates int
}

func (s *countingStore) counts() (opens, ends, updates int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens, s.ends, s.updates
}

func (s *countingStore) Open(ctx context.Context, a presence.OpenArgs) (presence.Session, error) {
	s.mu.Lock()
	s.opens++
	s.mu.Unlock()
	return s.Memory.Open(ctx, a)
}

func (s *countingStore) End(ctx context.Context, a presence.EndArgs) error {
	s.mu.Lock()
	s.ends++
	s.mu.Unlock()
	return s.Memory.End(ctx, a)
}

func (s *countingStore) Update(ctx context.Context, r presence.SessionRef, u presence.Update) error {
	s.mu.Lock()
	s.updates++
	s.mu.Unlock()
	return s.Memory.Update(ctx, r, u)
}

func newTestTracker(t *testing.T) (*Tracker, *countingStore, *testkit.Changes, *testkit.Clock) {
	t.Helper()
	clk := testkit.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	f := &testkit.Changes{}
	cs := &countingStore{Memory: store.NewMemory(presence.NewRules(nil), clk.Now, func(e store.Event) { f.Add(e.Aggregate) })}
	tr := New(cs, Options{Node: "n1", TTL: time.Minute, Shards: 2, Log: nil})
	return tr, cs, f, clk
}

func waitIdle(t *testing.T, tr *Tracker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Flush(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

// Changes made before the worker runs coalesce into one write.
func TestTrackerCoalesces(t *testing.T) {
	tr, cs, f, _ := newTestTracker(t)
	const cl = 1
	tr.Connect(cl, "alice-phone", "alice", "phone", nil, presence.Conn{})
	tr.Established(cl, "alice-phone")
	for _, s := range []presence.Status{presence.Away, presence.Busy, presence.Idle} {
		st := s
		tr.Set(cl, "alice-phone", "alice", presence.SetRequest{Scope: presence.ScopeSession, Status: &st})
	}
	tr.Start()
	defer tr.Stop()
	waitIdle(t, tr)
	if opens, _, updates := cs.counts(); opens != 1 || updates != 0 {
		t.Fatalf("opens %d updates %d, want 1 and 0", opens, updates)
	}
	got := f.All()
	if len(got) != 1 || got[0].Status != presence.Idle {
		t.Fatalf("feed: %+v", got)
	}
}

// A takeover reaches the store as one open that ends the old session: the
// old connection's late disconnect is ignored, and the user never shows offline.
func TestTrackerTakeover(t *testing.T) {
	tr, cs, f, _ := newTestTracker(t)
	tr.Start()
	defer tr.Stop()
	const old, nu = 1, 2 // two connections with one client id
	tr.Connect(old, "bob-phone", "bob", "", nil, presence.Conn{})
	tr.Established(old, "bob-phone")
	waitIdle(t, tr)
	tr.Connect(nu, "bob-phone", "bob", "", nil, presence.Conn{})
	tr.Disconnect(old, "bob-phone", presence.EndTakeover) // mochi: before or after the new Established
	tr.Established(nu, "bob-phone")
	waitIdle(t, tr)
	if opens, ends, _ := cs.counts(); opens != 2 || ends != 0 {
		t.Fatalf("opens %d ends %d, want 2 and 0", opens, ends)
	}
	for _, p := range f.All() {
		if p.Status != presence.Online {
			t.Fatalf("feed showed %s during a takeover", p.Status)
		}
	}
	if tr.Stats.StaleEvents.Load() != 1 {
		t.Fatalf("stale events %d, want 1 (the old disconnect)", tr.Stats.StaleEvents.Load())
	}
	u, _, _ := cs.User(context.Background(), "bob")
	if len(u.Sessions) != 1 || len(u.Ended) != 1 || u.Ended[0].EndReason != presence.EndTakeover {
		t.Fatalf("record: %+v", u)
	}
	// The new connection ends: offline.
	tr.Disconnect(nu, "bob-phone", presence.EndNetwork)
	waitIdle(t, tr)
	if got := f.All(); got[len(got)-1].Status != presence.Offline {
		t.Fatalf("after the last disconnect: %+v", got[len(got)-1])
	}
	if tr.Len() != 0 {
		t.Fatalf("%d slots left", tr.Len())
	}
}

// A connection that ends before it was established never reaches the store.
func TestTrackerNeverEstablished(t *testing.T) {
	tr, cs, f, _ := newTestTracker(t)
	tr.Connect(1, "c", "carol", "", nil, presence.Conn{})
	tr.Disconnect(1, "c", presence.EndNetwork)
	tr.Start()
	defer tr.Stop()
	waitIdle(t, tr)
	if opens, _, _ := cs.counts(); opens != 0 || len(f.All()) != 0 || tr.Len() != 0 {
		t.Fatalf("opens %d feed %d slots %d", opens, len(f.All()), tr.Len())
	}
}

// Bulk renewal keeps a live session past its TTL; without it the reaper ends
// it; a session the store lost is opened again with a new epoch.
func TestTrackerRenewal(t *testing.T) {
	tr, cs, f, clk := newTestTracker(t)
	tr.Start()
	defer tr.Stop()
	tr.Connect(1, "d", "dave", "", nil, presence.Conn{})
	tr.Established(1, "d")
	waitIdle(t, tr)
	ctx := context.Background()
	for range 5 { // 5 × 30 s: far past the 1 min TTL, renewed every 30 s
		clk.Advance(30 * time.Second)
		if err := tr.Renew(ctx); err != nil {
			t.Fatal(err)
		}
		if n, _ := cs.Reap(ctx); n != 0 {
			t.Fatalf("reaped a renewed session")
		}
	}
	first := f.All()[0].Sessions[0].Epoch
	clk.Advance(61 * time.Second) // the node stalled past the TTL
	if n, _ := cs.Reap(ctx); n != 1 {
		t.Fatalf("unrenewed session not reaped")
	}
	if err := tr.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, tr)
	last := f.All()[len(f.All())-1]
	if last.Status != presence.Online || last.Sessions[0].Epoch <= first || tr.Stats.Lost.Load() != 1 {
		t.Fatalf("after the store lost the session: %+v (lost %d)", last, tr.Stats.Lost.Load())
	}
}

// gatedStore holds every Open until the test lets it through, and fails
// End while failEnd is set.
type gatedStore struct {
	*countingStore
	entered chan struct{}
	gate    chan struct{}
	failEnd chan struct{} // closed: End works again
	done    chan struct{} // closed: the test ended, nothing waits
}

func (s *gatedStore) Open(ctx context.Context, a presence.OpenArgs) (presence.Session, error) {
	select {
	case s.entered <- struct{}{}:
	case <-s.done:
	}
	select {
	case <-s.gate:
	case <-s.done:
	}
	return s.countingStore.Open(ctx, a)
}

func (s *gatedStore) End(ctx context.Context, a presence.EndArgs) error {
	select {
	case <-s.failEnd:
		return s.countingStore.End(ctx, a)
	default:
		return store.ErrUnavailable
	}
}

// Ghosts picks, among live sessions the store holds for this node, exactly
// those the node no longer holds and is not writing: never one of a live
// connection, nor one whose open or end is under way or waits to be tried
// again.
func TestTrackerGhosts(t *testing.T) {
	tr, cs, _, _ := newTestTracker(t)
	gs := &gatedStore{countingStore: cs, entered: make(chan struct{}), gate: make(chan struct{}), failEnd: make(chan struct{}), done: make(chan struct{})}
	tr.store = gs
	tr.retryIn = time.Hour // a failed write waits: the test looks at it meanwhile
	tr.Start()
	defer func() {
		close(gs.done)
		tr.Stop()
	}()
	ctx := context.Background()
	epoch := func(user string) uint64 {
		u, _, _ := cs.User(ctx, user)
		if len(u.Sessions) != 1 {
			t.Fatalf("%s: %+v", user, u)
		}
		return u.Sessions[0].Epoch
	}
	ghosts := func(refs ...presence.SessionRef) []presence.SessionRef { return tr.Ghosts(refs) }

	// An open under way: its epoch is not known yet, whatever the store holds.
	tr.Connect(1, "a", "ann", "", nil, presence.Conn{})
	tr.Established(1, "a")
	<-gs.entered
	if g := ghosts(presence.SessionRef{User: "ann", ID: "a", Epoch: 7}); len(g) != 0 {
		t.Fatalf("an open under way taken for a ghost: %+v", g)
	}
	gs.gate <- struct{}{}
	waitIdle(t, tr)
	ea := epoch("ann")
	// An open under way of a connection that has ended meanwhile: the
	// store may hold it already, and the end follows.
	tr.Connect(3, "c", "cat", "", nil, presence.Conn{})
	tr.Established(3, "c")
	<-gs.entered
	tr.Disconnect(3, "c", presence.EndClean)
	if g := ghosts(presence.SessionRef{User: "cat", ID: "c", Epoch: 9}); len(g) != 0 {
		t.Fatalf("an open under way of an ended connection taken for a ghost: %+v", g)
	}
	gs.gate <- struct{}{}
	// A live connection at its epoch, and at an older one (an open of it
	// takes that over).
	if g := ghosts(presence.SessionRef{User: "ann", ID: "a", Epoch: ea}, presence.SessionRef{User: "ann", ID: "a", Epoch: ea - 1}); len(g) != 0 {
		t.Fatalf("a live connection taken for a ghost: %+v", g)
	}
	// An end that failed and waits to be tried again: held at its epoch.
	tr.Disconnect(1, "a", presence.EndClean)
	testkit.Wait(t, 5*time.Second, "the ends failed", func() error {
		return testkit.Why(tr.Stats.Errors.Load() == 2 && tr.Stats.Retrying.Load() == 2, "no failed ends waiting")
	})
	if g := ghosts(presence.SessionRef{User: "ann", ID: "a", Epoch: ea}); len(g) != 0 {
		t.Fatalf("a session whose end waits for a retry taken for a ghost: %+v", g)
	}
	older := presence.SessionRef{User: "ann", ID: "a", Epoch: ea - 1}
	if g := ghosts(older); len(g) != 1 || g[0] != older {
		t.Fatalf("an older epoch of an ended connection: %+v, want it", g)
	}
	// Ended and written: the slot is gone, and the store's session is a
	// ghost; so is one of an id this node never had.
	close(gs.failEnd)
	tr.Connect(2, "b", "ben", "", nil, presence.Conn{})
	tr.Established(2, "b")
	<-gs.entered
	gs.gate <- struct{}{}
	waitIdle(t, tr)
	eb := epoch("ben")
	tr.Disconnect(2, "b", presence.EndClean)
	waitIdle(t, tr)
	gone := []presence.SessionRef{{User: "ben", ID: "b", Epoch: eb}, {User: "zed", ID: "z", Epoch: 3}}
	if g := ghosts(gone...); !slices.Equal(g, gone) {
		t.Fatalf("ghosts %+v, want %+v", g, gone)
	}
}

// Server-side idle with a fake clock: one store write to show a quiet
// session idle, none while it stays idle, one to bring it back; a label
// with 0 and a status the user set are left alone; a status set while
// auto-idle wins with one write.
func TestTrackerIdle(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	f := &testkit.Changes{}
	cs := &countingStore{Memory: store.NewMemory(presence.NewRules(nil), clk.Now, func(e store.Event) { f.Add(e.Aggregate) })}
	const after = time.Minute
	tr := New(cs, Options{Node: "n1", TTL: time.Hour, Shards: 2, Log: nil,
		Idle: presence.IdleRules{Default: after, Devices: map[string]time.Duration{"sensor": 0}}})
	tr.Start()
	defer tr.Stop()

	acts := map[string]*presence.Activity{}
	for i, c := range []struct{ id, user, device string }{{"a", "ann", "phone"}, {"s", "sam", "sensor"}, {"w", "wes", "phone"}} {
		acts[c.id] = presence.NewActivity(clk.Now())
		tr.Connect(presence.ConnID(i+1), c.id, c.user, c.device, acts[c.id], presence.Conn{})
		tr.Established(presence.ConnID(i+1), c.id)
	}
	away := presence.Away
	tr.Set(3, "w", "wes", presence.SetRequest{Scope: presence.ScopeSession, Status: &away})
	waitIdle(t, tr)
	status := func(user string) presence.Status {
		t.Helper()
		u, ok, err := cs.User(context.Background(), user)
		if err != nil || !ok || len(u.Sessions) != 1 {
			t.Fatalf("%s: %+v %v %v", user, u, ok, err)
		}
		return u.Sessions[0].Status
	}
	_, _, base := cs.counts()

	clk.Advance(after - time.Second)
	if e, l := tr.CheckIdle(clk.Now()); e != 0 || l != 0 {
		t.Fatalf("before idle_after: entered %d left %d", e, l)
	}
	clk.Advance(time.Second)
	if e, l := tr.CheckIdle(clk.Now()); e != 1 || l != 0 {
		t.Fatalf("at idle_after: entered %d left %d, want 1 (ann only: sam's label is 0, wes is away)", e, l)
	}
	waitIdle(t, tr)
	if _, _, u := cs.counts(); u-base != 1 {
		t.Fatalf("store writes to show idle: %d, want 1", u-base)
	}
	if status("ann") != presence.Idle || status("sam") != presence.Online || status("wes") != presence.Away {
		t.Fatalf("ann %s sam %s wes %s", status("ann"), status("sam"), status("wes"))
	}
	clk.Advance(10 * after)
	if e, l := tr.CheckIdle(clk.Now()); e != 0 || l != 0 {
		t.Fatalf("still quiet: entered %d left %d", e, l)
	}

	// Activity: the hook's path.
	if !acts["a"].Touch(clk.Now()) {
		t.Fatal("Touch did not report auto-idle")
	}
	tr.Active(1, "a")
	waitIdle(t, tr)
	if _, _, u := cs.counts(); u-base != 2 || status("ann") != presence.Online {
		t.Fatalf("back: %d writes, ann %s; want 2 and online", u-base, status("ann"))
	}

	// Idle again, then the user sets busy: busy wins, in one write, and
	// auto-idle is over.
	clk.Advance(after)
	tr.CheckIdle(clk.Now())
	waitIdle(t, tr)
	if status("ann") != presence.Idle {
		t.Fatalf("ann %s, want idle", status("ann"))
	}
	acts["a"].Touch(clk.Now())
	busy := presence.Busy
	tr.Set(1, "a", "ann", presence.SetRequest{Scope: presence.ScopeSession, Status: &busy})
	waitIdle(t, tr)
	if _, _, u := cs.counts(); u-base != 4 || status("ann") != presence.Busy {
		t.Fatalf("set while idle: %d writes, ann %s; want 4 and busy", u-base, status("ann"))
	}
	clk.Advance(10 * after)
	if e, l := tr.CheckIdle(clk.Now()); e != 0 || l != 0 {
		t.Fatalf("busy: entered %d left %d", e, l)
	}
	if got := tr.Stats.IdleEntered.Load(); got != 2 {
		t.Errorf("IdleEntered %d, want 2", got)
	}
	if got := tr.Stats.IdleLeft.Load(); got != 2 {
		t.Errorf("IdleLeft %d, want 2", got)
	}
}

// A worker keeps the arrays of a burst's large batch while work keeps
// coming, and gives them back once none came for its linger; stopped, it
// holds none.
func TestTrackerGivesBackBurstScratch(t *testing.T) {
	burst := func(tr *Tracker) {
		t.Helper()
		for i := range 200 { // before Start: each worker takes ~100 at once
			id := "dev-" + strconv.Itoa(i)
			tr.Connect(presence.ConnID(i+1), id, "u"+strconv.Itoa(i), "", nil, presence.Conn{})
			tr.Established(presence.ConnID(i+1), id)
		}
		tr.Start()
		waitIdle(t, tr)
	}

	tr, _, _, _ := newTestTracker(t)
	tr.linger = time.Hour
	burst(tr)
	if held := tr.scratchHeld.Load(); held <= keepScratch {
		t.Fatalf("after a burst of 200 with an hour's linger the workers hold %d writes' arrays, want more than %d", held, keepScratch)
	}
	tr.Stop()
	if held := tr.scratchHeld.Load(); held != 0 {
		t.Errorf("stopped, the workers hold %d writes' arrays", held)
	}

	tr, _, _, _ = newTestTracker(t)
	tr.linger = time.Millisecond
	burst(tr)
	defer tr.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for tr.scratchHeld.Load() > int64(keepScratch*len(tr.shards)) {
		if time.Now().After(deadline) {
			t.Fatalf("the workers still hold %d writes' arrays after the burst", tr.scratchHeld.Load())
		}
		time.Sleep(time.Millisecond)
	}
}
