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
