package tracker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/store"
)

// logged is one write a session saw, with the store's answer.
type logged struct {
	kind  presence.WriteKind
	epoch uint64 // of the open answered, or the one written to
	err   error
}

// batchStore is the counting memory store as a Batcher: it makes each batch
// one write at a time, in order, logs every write per session, and can hold
// the next write until the test lets it through, or fail whole batches.
type batchStore struct {
	*countingStore
	mu      sync.Mutex
	log     map[string][]logged
	batches [][]string // session ids of each batch
	dup     []string   // a session seen twice in one batch
	mixed   int        // batches with both a done and a stale write
	fail    int        // batches still to fail whole
	hold    bool       // hold the next write (batch or single)
	entered chan struct{}
	gate    chan struct{}
}

func newBatchStore(cs *countingStore) *batchStore {
	return &batchStore{countingStore: cs, log: make(map[string][]logged), entered: make(chan struct{}, 1), gate: make(chan struct{})}
}

// wait holds a write when the test asked for it.
func (s *batchStore) wait() {
	s.mu.Lock()
	h := s.hold
	s.hold = false
	s.mu.Unlock()
	if h {
		s.entered <- struct{}{}
		<-s.gate
	}
}

func (s *batchStore) note(id string, l logged) {
	s.mu.Lock()
	s.log[id] = append(s.log[id], l)
	s.mu.Unlock()
}

func writeID(w presence.Write) string {
	switch w.Kind {
	case presence.WriteOpen:
		return w.Open.ID
	case presence.WriteEnd:
		return w.End.ID
	}
	return w.Ref.ID
}

func (s *batchStore) apply(ctx context.Context, w presence.Write) (uint64, error) {
	switch w.Kind {
	case presence.WriteOpen:
		sess, err := s.countingStore.Open(ctx, w.Open)
		s.note(w.Open.ID, logged{presence.WriteOpen, sess.Epoch, err})
		return sess.Epoch, err
	case presence.WriteEnd:
		err := s.countingStore.End(ctx, w.End)
		s.note(w.End.ID, logged{presence.WriteEnd, w.End.Epoch, err})
		return 0, err
	}
	err := s.countingStore.Update(ctx, w.Ref, w.Update)
	s.note(w.Ref.ID, logged{presence.WriteUpdate, w.Ref.Epoch, err})
	return 0, err
}

func (s *batchStore) Open(ctx context.Context, a presence.OpenArgs) (presence.Session, error) {
	s.wait()
	e, err := s.apply(ctx, presence.Write{Kind: presence.WriteOpen, Open: a})
	return presence.Session{Epoch: e}, err
}

func (s *batchStore) End(ctx context.Context, a presence.EndArgs) error {
	s.wait()
	_, err := s.apply(ctx, presence.Write{Kind: presence.WriteEnd, End: a})
	return err
}

func (s *batchStore) Update(ctx context.Context, r presence.SessionRef, u presence.Update) error {
	s.wait()
	_, err := s.apply(ctx, presence.Write{Kind: presence.WriteUpdate, Ref: r, Update: u})
	return err
}

func (s *batchStore) Batch(ctx context.Context, ws []presence.Write) ([]uint64, []error) {
	s.wait()
	epochs, errs := make([]uint64, len(ws)), make([]error, len(ws))
	ids := make([]string, len(ws))
	seen := make(map[string]bool)
	s.mu.Lock()
	for i, w := range ws {
		ids[i] = writeID(w)
		if seen[ids[i]] {
			s.dup = append(s.dup, ids[i])
		}
		seen[ids[i]] = true
	}
	s.batches = append(s.batches, ids)
	failing := s.fail > 0
	if failing {
		s.fail--
	}
	s.mu.Unlock()
	if failing {
		for i := range errs {
			errs[i] = fmt.Errorf("batch: %w", store.ErrUnavailable)
		}
		return epochs, errs
	}
	done, stale := false, false
	for i, w := range ws {
		epochs[i], errs[i] = s.apply(ctx, w)
		done = done || errs[i] == nil
		stale = stale || errors.Is(errs[i], presence.ErrStaleEpoch)
	}
	if done && stale {
		s.mu.Lock()
		s.mixed++
		s.mu.Unlock()
	}
	return epochs, errs
}

// checkOrder checks every session's writes: each update and end names the
// epoch of the session's latest open that succeeded, and no batch held two
// writes of one session.
func (s *batchStore) checkOrder(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.dup) > 0 {
		t.Fatalf("sessions written twice in one batch: %v", s.dup)
	}
	for id, l := range s.log {
		var epoch uint64
		for i, w := range l {
			switch {
			case w.kind == presence.WriteOpen && w.err == nil:
				epoch = w.epoch
			case w.kind != presence.WriteOpen && w.epoch != epoch:
				t.Fatalf("%s: write %d (%v) at epoch %d, the latest open gave %d: %+v", id, i, w.kind, w.epoch, epoch, l)
			}
		}
	}
}

func (s *batchStore) maxBatch() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := 0
	for _, b := range s.batches {
		m = max(m, len(b))
	}
	return m
}

func newBatchTracker(t *testing.T) (*Tracker, *batchStore, *testkit.Changes) {
	t.Helper()
	tr, cs, f, _ := newTestTracker(t)
	bs := newBatchStore(cs)
	tr.store, tr.batch = bs, bs
	tr.shards = tr.shards[:1] // one worker: every dirty slot in one take
	return tr, bs, f
}

func sid(i int) string  { return fmt.Sprintf("s%d", i) }
func user(i int) string { return fmt.Sprintf("u%d", i) }

// The writes of many sessions go in batches, one write of a session per
// batch, each session's writes in order: while a batch of opens is in
// flight, half the sessions are taken over (with a new status) and the
// other half disconnect; the next batch carries the takeovers' opens and the
// ends, each naming the epoch its session's open was given.
func TestTrackerBatchOrder(t *testing.T) {
	tr, bs, f := newBatchTracker(t)
	const n = 40
	for i := range n {
		tr.Connect(1, sid(i), user(i), "phone", nil, presence.Conn{})
		tr.Established(1, sid(i))
	}
	bs.hold = true
	tr.Start()
	defer tr.Stop()
	<-bs.entered // the batch of opens is in flight
	busy := presence.Busy
	for i := range n {
		if i < n/2 {
			tr.Connect(2, sid(i), user(i), "phone", nil, presence.Conn{})
			tr.Established(2, sid(i))
			tr.Set(2, sid(i), user(i), presence.SetRequest{Scope: presence.ScopeSession, Status: &busy})
			tr.Disconnect(1, sid(i), presence.EndTakeover) // of the old connection: ignored
		} else {
			tr.Set(1, sid(i), user(i), presence.SetRequest{Scope: presence.ScopeSession, Status: &busy})
			tr.Disconnect(1, sid(i), presence.EndClean)
		}
	}
	close(bs.gate)
	waitIdle(t, tr)
	bs.checkOrder(t)
	if m := bs.maxBatch(); m != n {
		t.Fatalf("largest batch %d, want %d", m, n)
	}
	if b := tr.Stats.Batches.Load(); b < 2 {
		t.Fatalf("%d batches, want at least 2", b)
	}
	for i := range n {
		u, _, _ := bs.User(context.Background(), user(i))
		p, _, _ := bs.Get(context.Background(), user(i))
		if i < n/2 && (p.Status != presence.Busy || len(u.Sessions) != 1 || len(u.Ended) != 1 || u.Ended[0].EndReason != presence.EndTakeover) {
			t.Fatalf("%s taken over: %+v %+v", user(i), p, u)
		}
		if i >= n/2 && (p.Status != presence.Offline || len(u.Sessions) != 0) {
			t.Fatalf("%s disconnected: %+v", user(i), p)
		}
	}
	over := make(map[string]bool)
	for i := range n / 2 {
		over[user(i)] = true
	}
	for _, p := range f.All() {
		if p.Status == presence.Offline && over[p.User] {
			t.Fatalf("a taken-over user was shown offline: %+v", p)
		}
	}
}

// A batch in which the store refuses some writes as stale (their sessions
// were ended behind the tracker's back) makes the others, and the refused
// sessions are opened again with a new epoch.
func TestTrackerBatchStaleInside(t *testing.T) {
	tr, bs, _ := newBatchTracker(t)
	const n = 20
	tr.Start()
	defer tr.Stop()
	for i := range n {
		tr.Connect(1, sid(i), user(i), "phone", nil, presence.Conn{})
		tr.Established(1, sid(i))
	}
	waitIdle(t, tr)
	ctx := context.Background()
	first := make([]uint64, n)
	for i := range n {
		u, _, _ := bs.User(ctx, user(i))
		first[i] = u.Sessions[0].Epoch
	}
	// Hold the worker on a write of another session, then queue an update
	// of every session, half of them ended in the store meanwhile.
	bs.mu.Lock()
	bs.hold = true
	bs.mu.Unlock()
	tr.Connect(1, "x", "xavier", "", nil, presence.Conn{})
	tr.Established(1, "x")
	<-bs.entered
	away := presence.Away
	for i := range n {
		if i%2 == 0 {
			if err := bs.Memory.End(ctx, presence.EndArgs{User: user(i), ID: sid(i), Epoch: first[i], Reason: presence.EndTimeout}); err != nil {
				t.Fatal(err)
			}
		}
		tr.Set(1, sid(i), user(i), presence.SetRequest{Scope: presence.ScopeSession, Status: &away})
	}
	close(bs.gate)
	waitIdle(t, tr)
	bs.checkOrder(t)
	if s := tr.Stats.Stale.Load(); s != n/2 {
		t.Fatalf("stale %d, want %d", s, n/2)
	}
	bs.mu.Lock()
	mixed := bs.mixed
	bs.mu.Unlock()
	if mixed == 0 {
		t.Fatal("no batch held both a refused and a made write")
	}
	for i := range n {
		u, _, _ := bs.User(ctx, user(i))
		if len(u.Sessions) != 1 || u.Sessions[0].Status != presence.Away {
			t.Fatalf("%s: %+v", user(i), u)
		}
		if reopened := u.Sessions[0].Epoch != first[i]; reopened != (i%2 == 0) {
			t.Fatalf("%s: epoch %d, first %d", user(i), u.Sessions[0].Epoch, first[i])
		}
	}
}

// A batch that fails whole (Redis unreachable) is tried again, each write
// with the latest wanted state, and no write is made twice.
func TestTrackerBatchFailedRetried(t *testing.T) {
	tr, bs, _ := newBatchTracker(t)
	tr.retryIn = 10 * time.Millisecond
	const n = 30
	bs.fail = 1
	bs.hold = true
	for i := range n {
		tr.Connect(1, sid(i), user(i), "phone", nil, presence.Conn{})
		tr.Established(1, sid(i))
	}
	tr.Start()
	defer tr.Stop()
	<-bs.entered // the batch that will fail is in flight
	dnd := presence.DND
	for i := range n / 2 {
		tr.Set(1, sid(i), user(i), presence.SetRequest{Scope: presence.ScopeSession, Status: &dnd})
	}
	close(bs.gate)
	testkit.Wait(t, 5*time.Second, "every session opened", func() error {
		opens, _, _ := bs.counts()
		return testkit.Why(opens == n && tr.Stats.Retrying.Load() == 0 && tr.Stats.Depth.Load() == 0, fmt.Sprintf("%d opens", opens))
	})
	bs.checkOrder(t)
	if e := tr.Stats.Errors.Load(); e != n {
		t.Fatalf("errors %d, want %d (one failed batch)", e, n)
	}
	opens, ends, _ := bs.counts()
	if opens != n || ends != 0 {
		t.Fatalf("opens %d ends %d, want %d and 0", opens, ends, n)
	}
	for i := range n {
		p, _, _ := bs.Get(context.Background(), user(i))
		want := presence.Online
		if i < n/2 {
			want = presence.DND
		}
		if p.Status != want {
			t.Fatalf("%s: %s, want %s", user(i), p.Status, want)
		}
	}
}

// A store that batches gets one worker by default, whose rounds carry the
// writes that gathered while the last was out; a store that does not, four.
func TestTrackerWorkersByStore(t *testing.T) {
	cs := &countingStore{}
	for _, c := range []struct {
		store Store
		want  int
	}{{cs, 4}, {newBatchStore(cs), 1}} {
		if got := len(New(c.store, Options{Node: "n1", TTL: time.Minute}).shards); got != c.want {
			t.Errorf("%T: %d workers, want %d", c.store, got, c.want)
		}
	}
	if got := len(New(newBatchStore(cs), Options{Node: "n1", TTL: time.Minute, Shards: 3}).shards); got != 3 {
		t.Errorf("Shards 3 gave %d workers", got)
	}
}
