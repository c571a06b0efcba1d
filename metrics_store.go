package presenced

import (
	"context"
	"time"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/tracker"
)

// timedStore is the store as the tracker sees it, each call timed into
// presenced_store_operation_duration_seconds and each end that committed
// counted by reason. It adds two clock reads and one histogram observation
// per call, and allocates nothing.
type timedStore struct {
	s tracker.Store
	m *meters
}

var _ tracker.Store = timedStore{}

func (t timedStore) Open(ctx context.Context, a presence.OpenArgs) (presence.Session, error) {
	start := time.Now()
	s, err := t.s.Open(ctx, a)
	t.m.storeOps[opOpen].Observe(time.Since(start).Seconds())
	return s, err
}

func (t timedStore) End(ctx context.Context, a presence.EndArgs) error {
	start := time.Now()
	err := t.s.End(ctx, a)
	t.m.storeOps[opEnd].Observe(time.Since(start).Seconds())
	if err == nil {
		t.m.ended(a.Reason, 1)
	}
	return err
}

func (t timedStore) Update(ctx context.Context, ref presence.SessionRef, upd presence.Update) error {
	start := time.Now()
	err := t.s.Update(ctx, ref, upd)
	t.m.storeOps[opUpdate].Observe(time.Since(start).Seconds())
	return err
}

func (t timedStore) SetAccount(ctx context.Context, user string, upd presence.AccountUpdate) error {
	start := time.Now()
	err := t.s.SetAccount(ctx, user, upd)
	t.m.storeOps[opAccount].Observe(time.Since(start).Seconds())
	return err
}

func (t timedStore) Renew(ctx context.Context, refs []presence.SessionRef, ttl time.Duration) ([]presence.SessionRef, error) {
	start := time.Now()
	lost, err := t.s.Renew(ctx, refs, ttl)
	t.m.storeOps[opRenew].Observe(time.Since(start).Seconds())
	return lost, err
}

// timedBatchStore is timedStore over a store that batches (Redis): the
// tracker finds Batch by a type assertion, which a plain timedStore would
// hide. A batch is timed as one call (op "batch": one pipelined round
// trip), and its ends that committed are counted by reason.
type timedBatchStore struct {
	timedStore
	b tracker.Batcher
}

var _ tracker.Batcher = timedBatchStore{}

func (t timedBatchStore) Batch(ctx context.Context, ws []presence.Write) ([]uint64, []error) {
	start := time.Now()
	epochs, errs := t.b.Batch(ctx, ws)
	t.m.storeOps[opBatch].Observe(time.Since(start).Seconds())
	for i, w := range ws {
		if w.Kind == presence.WriteEnd && i < len(errs) && errs[i] == nil {
			t.m.ended(w.End.Reason, 1)
		}
	}
	return epochs, errs
}

// timed wraps s for the tracker, keeping its batching when it has one.
func timed(s tracker.Store, m *meters) tracker.Store {
	t := timedStore{s, m}
	if b, ok := s.(tracker.Batcher); ok {
		return timedBatchStore{t, b}
	}
	return t
}
