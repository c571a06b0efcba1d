package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// TestMemoryDormant: a clean end of a session that declared its check-in
// shows dormant; a check-in shows online; a missed one is reaped as missed,
// at its due time and not before.
func TestMemoryDormant(t *testing.T) {
	ctx := context.Background()
	clk := testkit.NewClock(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC))
	var got []Event
	m := NewMemory(presence.NewRules(nil), clk.Now, func(e Event) { got = append(got, e) })
	a := presence.OpenArgs{User: "sensor1", ID: "s", Node: "n1", TTL: time.Minute, Expect: time.Hour, Margin: 6 * time.Minute}
	s, err := m.Open(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	end := clk.Now()
	if err := m.End(ctx, presence.EndArgs{User: "sensor1", ID: "s", Epoch: s.Epoch, Reason: presence.EndClean}); err != nil {
		t.Fatal(err)
	}
	p, _, _ := m.Get(ctx, "sensor1")
	if p.Status != presence.Dormant || !p.NextExpected.Equal(end.Add(time.Hour)) || len(p.Sessions) != 0 {
		t.Fatalf("after the clean end: %+v", p)
	}
	// A renewal and a node sweep leave it alone.
	if stale, _ := m.Renew(ctx, []presence.SessionRef{{User: "sensor1", ID: "s", Epoch: s.Epoch}}, time.Hour); len(stale) != 1 {
		t.Fatalf("renewed a dormant session: stale %v", stale)
	}
	clk.Advance(time.Hour + 6*time.Minute - time.Millisecond)
	if n, _ := m.Reap(ctx); n != 0 || m.Stats().Missed != 0 {
		t.Fatalf("reaped before due: %d, missed %d", n, m.Stats().Missed)
	}
	clk.Advance(time.Millisecond)
	if _, err := m.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	p, _, _ = m.Get(ctx, "sensor1")
	if p.Status != presence.Offline || m.Stats().Missed != 1 || !p.LastSeen.Equal(end) {
		t.Fatalf("at due: %+v, missed %d", p, m.Stats().Missed)
	}
	last := got[len(got)-1]
	if last.Cause.Ended != presence.EndMissed || len(last.Aggregate.Ended) != 1 || last.Aggregate.Ended[0].Reason != presence.EndMissed {
		t.Fatalf("the missed change: %+v", last)
	}
}

// TestRedisDormantMatchesMemory walks a sleeping device through its cycle
// on both stores (the memory store on a fake clock, Redis on its own) and
// compares what each shows after every step, the missed check-in included.
func TestRedisDormantMatchesMemory(t *testing.T) {
	srv := redistest.Start(t)
	r, _ := newRedisStore(t, srv.Client(t), "n1")
	clk := testkit.NewClock(time.Now())
	m := NewMemory(presence.NewRules([]string{"desktop"}), clk.Now, func(Event) {})
	ctx := context.Background()
	const period, margin = 300 * time.Millisecond, 200 * time.Millisecond
	a := presence.OpenArgs{User: "sensor1", ID: "s", Node: "n1", Device: "sensor", TTL: time.Minute, Expect: period, Margin: margin}
	var mEpoch, rEpoch uint64
	open := func(id string) {
		a.ID = id
		ms, err1 := m.Open(ctx, a)
		rs, err2 := r.Open(ctx, a)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		mEpoch, rEpoch = ms.Epoch, rs.Epoch
	}
	end := func(id string, reason presence.EndReason) {
		e1 := m.End(ctx, presence.EndArgs{User: "sensor1", ID: id, Epoch: mEpoch, Reason: reason})
		e2 := r.End(ctx, presence.EndArgs{User: "sensor1", ID: id, Epoch: rEpoch, Reason: reason})
		if e1 != nil || e2 != nil {
			t.Fatal(e1, e2)
		}
	}
	same := func(step string, want presence.Status) {
		t.Helper()
		mp, _, _ := m.Get(ctx, "sensor1")
		rp, _, _ := r.Get(ctx, "sensor1")
		if mp.Status != want || rp.Status != want || len(mp.Sessions) != len(rp.Sessions) ||
			mp.NextExpected.IsZero() != rp.NextExpected.IsZero() || mp.LastSeen.IsZero() != rp.LastSeen.IsZero() {
			t.Fatalf("%s: want %s\nmemory %+v\nredis  %+v", step, want, mp, rp)
		}
		if want == presence.Dormant {
			if d := rp.NextExpected.Sub(rp.LastSeen); d != period {
				t.Fatalf("%s: redis next_expected %v after last seen, want %v", step, d, period)
			}
			if d := mp.NextExpected.Sub(mp.LastSeen); d != period {
				t.Fatalf("%s: memory next_expected %v after last seen, want %v", step, d, period)
			}
		}
		if len(mp.Ended) != len(rp.Ended) || (len(mp.Ended) > 0 && mp.Ended[len(mp.Ended)-1].Reason != rp.Ended[len(rp.Ended)-1].Reason) {
			t.Fatalf("%s: ended differ\nmemory %+v\nredis  %+v", step, mp.Ended, rp.Ended)
		}
	}
	open("s")
	same("open", presence.Online)
	end("s", presence.EndClean)
	same("clean end", presence.Dormant)
	// A node sweep of n1 leaves the dormant session alone.
	if n, err := r.sweep(ctx, "n1", r.Incarnation()); err != nil || n != 0 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	same("sweep", presence.Dormant)
	open("s2") // checks in with another client id
	same("check-in", presence.Online)
	end("s2", presence.EndClean)
	same("clean end again", presence.Dormant)
	// Nothing is missed before the due time; the check-in does not come.
	if n, err := r.ReapDormant(ctx); err != nil || n != 0 {
		t.Fatalf("reaped before due: %d, %v", n, err)
	}
	clk.Advance(period + margin)
	if _, err := m.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, 5*time.Second, "redis reaps the missed check-in", func() error {
		n, err := r.ReapDormant(ctx)
		if err != nil {
			return err
		}
		return testkit.Why(n == 1, "not missed yet")
	})
	same("missed", presence.Offline)
	mp, _, _ := m.Get(ctx, "sensor1")
	if last := mp.Ended[len(mp.Ended)-1]; last.Reason != presence.EndMissed {
		t.Fatalf("last ended %+v", last)
	}
	if n, _ := r.c.ZCard(ctx, r.k.dormantIndex("sensor1")).Result(); n != 0 {
		t.Fatalf("dormant index holds %d", n)
	}
	open("s")
	end("s", presence.EndNetwork)
	same("an unclean end", presence.Offline)
}

// On a Redis Cluster the dormant sessions of users of many slots are kept
// in their slots' indexes, and one node (the lease's holder) reaps them
// all.
func TestRedisClusterDormant(t *testing.T) {
	cl := redistest.StartCluster(t, 3).Client(t)
	r1, _ := newRedisStore(t, cl, "n1")
	r1.dormantEvery = 100 * time.Millisecond
	r2 := NewRedis(RedisOptions{Client: cl, Prefix: r1.k.prefix, Node: "n2", NodeTTL: 3 * time.Second, Retention: time.Hour})
	r2.dormantEvery = 100 * time.Millisecond
	ctx := context.Background()
	users := []string{"s-a", "s-b", "s-c", "s-d", "s-e", "s-f"}
	for _, u := range users {
		s, err := r1.Open(ctx, presence.OpenArgs{User: u, ID: "c", Node: "n1", TTL: time.Minute, Expect: 300 * time.Millisecond, Margin: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := r1.End(ctx, presence.EndArgs{User: u, ID: "c", Epoch: s.Epoch, Reason: presence.EndClean}); err != nil {
			t.Fatal(err)
		}
		if p, _, _ := r1.Get(ctx, u); p.Status != presence.Dormant {
			t.Fatalf("%s: %+v", u, p)
		}
	}
	if n, err := r2.ReapDormant(ctx); err != nil || n != 0 {
		t.Fatalf("n2 reaped %d, %v before due", n, err)
	}
	var by [2]int // missed, by node: only the lease's holder reaps
	testkit.Wait(t, 10*time.Second, "every user missed", func() error {
		for i, r := range []*Redis{r1, r2} {
			n, err := r.ReapDormant(ctx)
			if err != nil {
				return err
			}
			by[i] += n
		}
		return testkit.Why(by[0]+by[1] == len(users), fmt.Sprintf("%v missed", by))
	})
	if by[0] != 0 && by[1] != 0 {
		t.Errorf("both nodes reaped: %v", by)
	}
	for _, u := range users {
		if p, _, _ := r1.Get(ctx, u); p.Status != presence.Offline {
			t.Fatalf("%s: %+v", u, p)
		}
	}
}
