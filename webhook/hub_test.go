package webhook

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// fakeLease is a lease the test hands to one node or another.
type fakeLease struct {
	holds    atomic.Bool
	calls    atomic.Int64
	mu       sync.Mutex
	released []string
}

func (l *fakeLease) Lease(context.Context, string, time.Duration) (bool, error) {
	l.calls.Add(1)
	return l.holds.Load(), nil
}

func (l *fakeLease) ReleaseLease(_ context.Context, name string) error {
	l.mu.Lock()
	l.released = append(l.released, name)
	l.mu.Unlock()
	return nil
}

// A node that does not hold the lease sends nothing of Send, keeps the
// recent events, and sends them first when it takes the lease; SendHere
// goes whoever holds it; the lease is given up at Stop.
func TestHubLease(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r := newReceiver(t, secret)
	lease := &fakeLease{}
	clock := testkit.NewClock(t0)
	h := New(Options{Lease: lease, LeaseTTL: 30 * time.Millisecond, ReplayAge: time.Minute, Now: clock.Now,
		Endpoints: []EndpointOptions{{URL: r.url(), Secret: secret, MaxBatch: 100, MaxWait: time.Millisecond, Now: time.Now,
			Events: []string{UserOnline, UserOffline, UserStatus, "notify.push"}}}})
	h.Start()
	testkit.Wait(t, 5*time.Second, "the lease asked", func() error { return testkit.Why(lease.calls.Load() > 0, "not yet") })
	if h.Held() {
		t.Fatal("held without the lease")
	}
	h.Send(ev("alice", 1))
	h.Send(ev("alice", 2))
	h.Send(Event{ID: "x", Type: SessionOpened, User: "alice"}) // no endpoint wants it: not kept
	h.SendHere(Event{ID: "n1", Type: "notify.push", User: "bob", At: t0})
	testkit.Wait(t, 5*time.Second, "the notify sent", func() error { return testkit.Why(len(r.unique()) == 1, "not yet") })
	if h.Buffered() != 2 {
		t.Fatalf("buffered %d, want 2", h.Buffered())
	}
	clock.Advance(2 * time.Minute) // too old to replay: dropped at the next Send
	h.Send(ev("alice", 3))
	if h.Buffered() != 1 || h.Stats.Expired.Load() != 2 {
		t.Fatalf("buffered %d expired %d, want 1 and 2", h.Buffered(), h.Stats.Expired.Load())
	}
	lease.holds.Store(true)
	testkit.Wait(t, 5*time.Second, "the buffer replayed", func() error { return testkit.Why(len(r.unique()) == 2, "not yet") })
	h.Send(ev("alice", 4))
	testkit.Wait(t, 5*time.Second, "sent as the holder", func() error { return testkit.Why(len(r.unique()) == 3, "not yet") })
	var ids []string
	for _, e := range r.unique() {
		ids = append(ids, e.ID)
	}
	if fmt.Sprint(ids) != "[n1 alice@3 alice@4]" {
		t.Fatalf("received %v", ids)
	}
	if h.Stats.Replayed.Load() != 1 || h.Stats.Takeovers.Load() != 1 {
		t.Fatalf("replayed %d takeovers %d", h.Stats.Replayed.Load(), h.Stats.Takeovers.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	lease.mu.Lock()
	defer lease.mu.Unlock()
	if fmt.Sprint(lease.released) != "[webhooks]" {
		t.Fatalf("released %v", lease.released)
	}
	r.check()
	r.down()
}

// Shown and Session turn what the publisher published and the lifecycle
// events into events, for the endpoints that want them.
func TestHubShownAndSession(t *testing.T) {
	r := newReceiver(t, secret)
	h := New(Options{Endpoints: []EndpointOptions{
		{URL: r.url(), Secret: secret, MaxWait: time.Millisecond, Events: []string{UserOnline, SessionOpened}},
	}})
	h.Start()
	defer func() { _ = h.Stop(context.Background()) }()
	a := presence.Aggregate{User: "alice", Status: presence.Online, Version: 3, Since: t0, Sessions: []presence.SessionView{{ID: "alice/phone", Epoch: 1}}}
	h.Shown(a, presence.Shown{})
	h.Session(presence.LifecycleEvent{Kind: presence.LifecycleConnected, User: "alice", Session: a.Sessions[0], Version: 3})
	h.Session(presence.LifecycleEvent{Kind: presence.LifecycleDisconnected, User: "alice", Session: a.Sessions[0], Version: 4})
	testkit.Wait(t, 5*time.Second, "two events", func() error { return testkit.Why(len(r.unique()) == 2, "not yet") })
	got := r.unique()
	if got[0].Type != UserOnline || got[1].Type != SessionOpened {
		t.Fatalf("got %+v", got)
	}
}
