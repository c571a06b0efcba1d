package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// causes records the cause of every change the store reports, per version.
type causes struct {
	mu sync.Mutex
	by map[uint64]presence.Cause
}

func (c *causes) report(e Event) {
	if e.Kind != Changed {
		return
	}
	c.mu.Lock()
	if c.by == nil {
		c.by = make(map[uint64]presence.Cause)
	}
	c.by[e.Aggregate.Version] = e.Cause
	c.mu.Unlock()
}

// The feed says what made each change, the same way in both stores: the
// reason of an end (and the will delay the session asked for), timeout for
// a reap, nothing for an open or an update. Every node paces what observers
// see from it.
func TestFeedCarriesTheCause(t *testing.T) {
	type store interface {
		Open(context.Context, presence.OpenArgs) (presence.Session, error)
		End(context.Context, presence.EndArgs) error
		Reap(context.Context) (int, error)
		Get(context.Context, string) (presence.Aggregate, bool, error)
	}
	run := func(t *testing.T, s store, col *causes, ttl time.Duration, expire func()) {
		ctx := context.Background()
		want := func(user string, c presence.Cause) {
			t.Helper()
			testkit.Wait(t, 10*time.Second, "the change reported", func() error {
				a, _, err := s.Get(ctx, user)
				if err != nil {
					return err
				}
				col.mu.Lock()
				got, ok := col.by[a.Version]
				col.mu.Unlock()
				if !ok {
					return testkit.Why(false, "version not reported yet")
				}
				if got != c {
					t.Fatalf("%s: cause %+v, want %+v", user, got, c)
				}
				return nil
			})
		}
		a, err := s.Open(ctx, presence.OpenArgs{User: "alice", ID: "phone", Node: "n1", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		want("alice", presence.Cause{})
		if err := s.End(ctx, presence.EndArgs{User: "alice", ID: "phone", Epoch: a.Epoch, Reason: presence.EndNetwork, WillDelay: 3 * time.Second}); err != nil {
			t.Fatal(err)
		}
		want("alice", presence.Cause{Ended: presence.EndNetwork, WillDelay: 3 * time.Second})
		b, err := s.Open(ctx, presence.OpenArgs{User: "bob", ID: "phone", Node: "n1", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.End(ctx, presence.EndArgs{User: "bob", ID: "phone", Epoch: b.Epoch, Reason: presence.EndClean}); err != nil {
			t.Fatal(err)
		}
		want("bob", presence.Cause{Ended: presence.EndClean})
		if _, err := s.Open(ctx, presence.OpenArgs{User: "carol", ID: "phone", Node: "n1", TTL: ttl}); err != nil {
			t.Fatal(err)
		}
		expire()
		testkit.Wait(t, 10*time.Second, "carol reaped", func() error {
			n, err := s.Reap(ctx)
			return testkit.Why(err == nil && n == 1, "not reaped")
		})
		want("carol", presence.Cause{Ended: presence.EndTimeout})
	}
	t.Run("memory", func(t *testing.T) {
		clk := testkit.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
		col := &causes{}
		m := NewMemory(presence.NewRules(nil), clk.Now, col.report)
		run(t, m, col, 10*time.Second, func() { clk.Advance(11 * time.Second) })
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		col := &causes{}
		r := NewRedis(RedisOptions{
			Client: srv.Client(t), Prefix: "t:" + t.Name() + ":", Node: "n1",
			NodeTTL: 3 * time.Second, Retention: time.Hour, Log: nil, Report: col.report,
		})
		if err := r.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Stop)
		if err := r.Listen(context.Background(), []string{"alice", "bob", "carol"}); err != nil {
			t.Fatal(err)
		}
		run(t, r, col, 200*time.Millisecond, func() {}) // Redis's own clock: the reap is polled for
	})
}

// A change coalesced in the feed keeps the cause of the end that made its
// status: an offline whose text then changed is still a network drop.
func TestFeedCoalescingKeepsTheCause(t *testing.T) {
	f := NewFeed()
	f.Push(Event{Kind: Changed, Aggregate: presence.Aggregate{User: "a", Status: presence.Offline, Version: 2}, Cause: presence.Cause{Ended: presence.EndNetwork}})
	f.Push(Event{Kind: Changed, Aggregate: presence.Aggregate{User: "a", Status: presence.Offline, Version: 3, Text: "x"}})
	evs := f.Take()
	if len(evs) != 1 || evs[0].Aggregate.Version != 3 || evs[0].Cause.Ended != presence.EndNetwork {
		t.Fatalf("coalesced: %+v", evs)
	}
	f.Push(Event{Kind: Changed, Aggregate: presence.Aggregate{User: "a", Status: presence.Offline, Version: 4}, Cause: presence.Cause{Ended: presence.EndNetwork}})
	f.Push(Event{Kind: Changed, Aggregate: presence.Aggregate{User: "a", Status: presence.Online, Version: 5}})
	if evs := f.Take(); len(evs) != 1 || evs[0].Cause.Ended != "" {
		t.Fatalf("a return took the end's cause: %+v", evs)
	}
}
