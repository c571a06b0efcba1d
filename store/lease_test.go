package store

import (
	"context"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// A memory store's one node holds every lease.
func TestMemoryLease(t *testing.T) {
	m := NewMemory(presence.NewRules(nil), time.Now, func(Event) {})
	if ok, err := m.Lease(context.Background(), "webhooks", time.Second); !ok || err != nil {
		t.Fatalf("lease: %v %v", ok, err)
	}
	if err := m.ReleaseLease(context.Background(), "webhooks"); err != nil {
		t.Fatal(err)
	}
}

// With Redis, one node holds a named lease at a time, apart from the group
// leader's; the other takes it when it runs out, or at once when the
// holder gives it up.
func TestRedisLease(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := newRedisStore(t, srv.Client(t), "n1")
	b, _ := newRedisStore(t, srv.Client(t), "n2")
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	if ok, err := a.Lease(ctx, "webhooks", ttl); !ok || err != nil {
		t.Fatalf("n1 lease: %v %v", ok, err)
	}
	if ok, _ := b.Lease(ctx, "webhooks", ttl); ok {
		t.Fatal("n2 holds the lease while n1's lives")
	}
	if ok, _ := b.Lead(ctx, ttl); !ok {
		t.Fatal("the group leader's lease is another key: n2 may lead")
	}
	if ok, _ := b.Lease(ctx, "other", ttl); !ok {
		t.Fatal("another lease is another key")
	}
	if ok, _ := a.Lease(ctx, "webhooks", ttl); !ok {
		t.Fatal("n1 could not renew its lease")
	}
	testkit.Wait(t, 5*time.Second, "n2 holds once n1's lease ran out", func() error {
		ok, err := b.Lease(ctx, "webhooks", ttl)
		return testkit.Why(ok && err == nil, "not yet")
	})
	if err := a.ReleaseLease(ctx, "webhooks"); err != nil { // not n1's: nothing happens
		t.Fatal(err)
	}
	if ok, _ := a.Lease(ctx, "webhooks", ttl); ok {
		t.Fatal("n1 released n2's lease")
	}
	if err := b.ReleaseLease(ctx, "webhooks"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := a.Lease(ctx, "webhooks", time.Minute); !ok {
		t.Fatal("n2 gave the lease up, yet n1 cannot take it")
	}
}
