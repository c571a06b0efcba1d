package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

func logSnapshot(version uint64, members ...roster.Member) roster.Snapshot {
	s := roster.Snapshot{Group: "team", Version: version, Members: members, Counts: roster.Counts{Total: len(members), ByStatus: map[presence.Status]int{}}}
	for _, m := range members {
		s.ByStatus[m.Status]++
		if m.Status != presence.Offline {
			s.Online++
		}
	}
	return s
}

// groupLogContract: the first snapshot wins, a batch commits only if it
// follows the held version, and what the log holds is the snapshot with
// every committed batch applied.
func groupLogContract(t *testing.T, l GroupLog) {
	t.Helper()
	ctx := context.Background()
	ann := roster.Member{User: "ann", Status: presence.Offline}
	bob := roster.Member{User: "bob", Status: presence.Online, Version: 5}
	first := logSnapshot(1, ann, bob)
	if got, err := l.OpenGroup(ctx, first); err != nil || fmt.Sprint(got) != fmt.Sprint(first) {
		t.Fatalf("open: %+v %v", got, err)
	}
	other := logSnapshot(1, bob)
	if got, err := l.OpenGroup(ctx, other); err != nil || fmt.Sprint(got) != fmt.Sprint(first) {
		t.Fatalf("a second open replaced the first: %+v %v", got, err)
	}
	annOn := roster.Member{User: "ann", Status: presence.Away, Version: 7}
	d := roster.Delta{Group: "team", Version: 2, Follows: 1, Changes: []roster.Member{annOn}, Removed: []string{"bob"},
		Counts: roster.Counts{Online: 1, Total: 1, ByStatus: map[presence.Status]int{presence.Away: 1}}}
	if ok, err := l.CommitBatch(ctx, d); !ok || err != nil {
		t.Fatalf("commit: %v %v", ok, err)
	}
	if ok, err := l.CommitBatch(ctx, d); ok || err != nil {
		t.Fatalf("the same batch committed twice: %v %v", ok, err)
	}
	fork := d
	fork.Version, fork.Follows = 3, 1
	if ok, _ := l.CommitBatch(ctx, fork); ok {
		t.Fatal("a batch following an old version committed")
	}
	got, ok, err := l.GroupSnapshot(ctx, "team")
	want := roster.Snapshot{Group: "team", Version: 2, Members: []roster.Member{annOn}, Counts: d.Counts}
	if err != nil || !ok || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("held %+v %v %v, want %+v", got, ok, err, want)
	}
	if err := l.DropGroup(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := l.GroupSnapshot(ctx, "team"); ok {
		t.Fatal("a dropped group's log remains")
	}
}

func TestMemoryGroupLog(t *testing.T) {
	feed := NewFeed()
	m := NewMemory(presence.NewRules(nil), time.Now, feed.Push)
	groupLogContract(t, m)
	batches := 0
	for _, e := range feed.Take() {
		if e.Kind == GroupBatch && e.Delta != nil && e.Delta.Version == 2 {
			batches++
		}
	}
	if batches != 1 {
		t.Fatalf("%d batches announced, want 1", batches)
	}
	if ok, _ := m.Lead(context.Background(), time.Second); !ok {
		t.Fatal("a memory store's node does not lead")
	}
}

// With Redis, another node hears each committed batch, and one node leads
// at a time: the other takes over when the lease runs out.
func TestRedisGroupLog(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := newRedisStore(t, srv.Client(t), "n1")
	b, colB := newRedisStore(t, srv.Client(t), "n2")
	if err := b.ListenGroups(context.Background(), []string{"team"}); err != nil { // n2 watches the group
		t.Fatal(err)
	}
	groupLogContract(t, a)
	testkit.Wait(t, 5*time.Second, "the batch announced to n2", func() error {
		colB.mu.Lock()
		defer colB.mu.Unlock()
		for _, e := range colB.others {
			if e.Kind == GroupBatch && e.Delta != nil && e.Delta.Version == 2 && len(e.Delta.Removed) == 1 {
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	if ok, err := a.Lead(ctx, ttl); !ok || err != nil {
		t.Fatalf("n1 lead: %v %v", ok, err)
	}
	if ok, _ := b.Lead(ctx, ttl); ok {
		t.Fatal("n2 leads while n1's lease lives")
	}
	if ok, _ := a.Lead(ctx, ttl); !ok {
		t.Fatal("n1 could not renew its lease")
	}
	testkit.Wait(t, 5*time.Second, "n2 leads once n1's lease ran out", func() error {
		ok, err := b.Lead(ctx, ttl)
		return testkit.Why(ok && err == nil, "not yet")
	})
	if ok, _ := a.Lead(ctx, ttl); ok {
		t.Fatal("n1 leads again while n2's lease lives")
	}
}

// groupLogKeeps: with KeepBatches(2) the log keeps the latest two batches
// of a group, with when each was committed, and GroupHistory reads them
// with the snapshot; a dropped group keeps none.
func groupLogKeeps(t *testing.T, l GroupLog) {
	t.Helper()
	ctx := context.Background()
	l.KeepBatches(2)
	defer l.KeepBatches(0)
	if _, err := l.OpenGroup(ctx, logSnapshot(10, roster.Member{User: "ann", Status: presence.Offline})); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	for v := uint64(11); v <= 13; v++ {
		d := roster.Delta{Group: "team", Version: v, Follows: v - 1, Changes: []roster.Member{{User: "ann", Status: presence.Online, Version: v}},
			Counts: roster.Counts{Online: 1, Total: 1, ByStatus: map[presence.Status]int{presence.Online: 1}}}
		if ok, err := l.CommitBatch(ctx, d); !ok || err != nil {
			t.Fatalf("commit %d: %v %v", v, ok, err)
		}
	}
	snap, batches, ok, err := l.GroupHistory(ctx, "team")
	if err != nil || !ok || snap.Version != 13 || len(batches) != 2 || batches[0].Delta.Version != 12 || batches[1].Delta.Version != 13 ||
		batches[1].Delta.Changes[0].Version != 13 || batches[0].At.Before(before) || batches[0].At.After(time.Now().Add(time.Second)) {
		t.Fatalf("history: %+v %+v %v %v", snap, batches, ok, err)
	}
	if err := l.DropGroup(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	if _, b, ok, _ := l.GroupHistory(ctx, "team"); ok || len(b) != 0 {
		t.Fatalf("a dropped group's batches remain: %v", b)
	}
}

func TestMemoryGroupLogKeeps(t *testing.T) {
	groupLogKeeps(t, NewMemory(presence.NewRules(nil), time.Now, func(Event) {}))
}

func TestRedisGroupLogKeeps(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := newRedisStore(t, srv.Client(t), "n1")
	groupLogKeeps(t, a)
}
