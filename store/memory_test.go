package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

func newTestStore() (*Memory, *testkit.Clock, *[]presence.Aggregate) {
	clk := testkit.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	var feed []presence.Aggregate
	m := NewMemory(presence.NewRules([]string{"desktop"}), clk.Now, changesTo(&feed))
	return m, clk, &feed
}

func open(t *testing.T, m *Memory, user, id string) presence.Session {
	t.Helper()
	s, err := m.Open(context.Background(), presence.OpenArgs{User: user, ID: id, Node: "n1", TTL: time.Minute})
	if err != nil {
		t.Fatalf("open %s/%s: %v", user, id, err)
	}
	return s
}

func TestMemoryFeedCarriesEveryChangeInOrder(t *testing.T) {
	m, clk, feed := newTestStore()
	ctx := context.Background()
	a := open(t, m, "alice", "phone")
	clk.Advance(time.Millisecond)
	b := open(t, m, "alice", "laptop")
	if b.Epoch <= a.Epoch {
		t.Fatalf("epochs %d then %d", a.Epoch, b.Epoch)
	}
	away := presence.Away
	if err := m.Update(ctx, presence.SessionRef{User: "alice", ID: "phone", Epoch: a.Epoch}, presence.Update{Status: &away}); err != nil {
		t.Fatal(err)
	}
	if err := m.End(ctx, presence.EndArgs{User: "alice", ID: "laptop", Epoch: b.Epoch, Reason: presence.EndClean}); err != nil {
		t.Fatal(err)
	}
	if err := m.End(ctx, presence.EndArgs{User: "alice", ID: "phone", Epoch: a.Epoch, Reason: presence.EndNetwork}); err != nil {
		t.Fatal(err)
	}
	want := []presence.Status{presence.Online, presence.Online, presence.Online, presence.Away, presence.Offline}
	if len(*feed) != len(want) {
		t.Fatalf("feed has %d changes, want %d: %+v", len(*feed), len(want), *feed)
	}
	for i, p := range *feed {
		if p.Status != want[i] {
			t.Errorf("change %d: status %s, want %s", i, p.Status, want[i])
		}
		if i > 0 && p.Version <= (*feed)[i-1].Version {
			t.Errorf("change %d: version %d after %d", i, p.Version, (*feed)[i-1].Version)
		}
	}
	got, ok, _ := m.Get(ctx, "alice")
	if !ok || got.Version != (*feed)[4].Version {
		t.Fatalf("Get: %+v %v", got, ok)
	}
}

func TestMemoryStaleWritesChangeNothing(t *testing.T) {
	m, _, feed := newTestStore()
	ctx := context.Background()
	old := open(t, m, "bob", "phone")
	cur := open(t, m, "bob", "phone") // takeover
	before := len(*feed)
	beforeUser, _, _ := m.User(ctx, "bob")
	idle := presence.Idle
	errs := []error{
		m.End(ctx, presence.EndArgs{User: "bob", ID: "phone", Epoch: old.Epoch, Reason: presence.EndNetwork}),
		m.Update(ctx, presence.SessionRef{User: "bob", ID: "phone", Epoch: old.Epoch}, presence.Update{Status: &idle}),
		m.End(ctx, presence.EndArgs{User: "bob", ID: "nope", Epoch: cur.Epoch, Reason: presence.EndClean}),
	}
	for i, err := range errs {
		if !errors.Is(err, presence.ErrStaleEpoch) {
			t.Errorf("write %d: %v, want stale", i, err)
		}
	}
	stale, err := m.Renew(ctx, []presence.SessionRef{{User: "bob", ID: "phone", Epoch: old.Epoch}}, time.Minute)
	if err != nil || len(stale) != 1 {
		t.Fatalf("renew of the old epoch: %v %v", stale, err)
	}
	if len(*feed) != before {
		t.Fatalf("stale writes fed %d changes", len(*feed)-before)
	}
	afterUser, _, _ := m.User(ctx, "bob")
	if afterUser.Sessions[0].Epoch != cur.Epoch || len(afterUser.Sessions) != 1 || afterUser.Current.Version != beforeUser.Current.Version {
		t.Fatalf("record changed: %+v", afterUser)
	}
}

func TestMemoryRenewAndReap(t *testing.T) {
	m, clk, feed := newTestStore()
	ctx := context.Background()
	a := open(t, m, "carol", "phone")
	b := open(t, m, "dave", "phone")
	clk.Advance(50 * time.Second)
	if stale, err := m.Renew(ctx, []presence.SessionRef{{User: "carol", ID: "phone", Epoch: a.Epoch}}, time.Minute); err != nil || len(stale) != 0 {
		t.Fatalf("renew: %v %v", stale, err)
	}
	n := len(*feed)
	clk.Advance(10 * time.Second) // dave's expiry (60 s) is reached, carol's is at 110 s
	reaped, err := m.Reap(ctx)
	if err != nil || reaped != 1 {
		t.Fatalf("reaped %d, %v", reaped, err)
	}
	if len(*feed) != n+1 || (*feed)[n].User != "dave" || (*feed)[n].Status != presence.Offline {
		t.Fatalf("feed after reap: %+v", (*feed)[n:])
	}
	u, _, _ := m.User(ctx, "dave")
	if u.Ended[0].EndReason != presence.EndTimeout || u.Ended[0].Epoch != b.Epoch {
		t.Fatalf("dave's ended session: %+v", u.Ended)
	}
	if reaped, _ := m.Reap(ctx); reaped != 0 {
		t.Fatalf("second reap ended %d", reaped)
	}
	clk.Advance(50 * time.Second)
	if reaped, _ := m.Reap(ctx); reaped != 1 {
		t.Fatalf("carol not reaped after her renewed expiry")
	}
}

// A node restart loses the memory store; epochs and versions handed out
// afterwards are still above the ones observers hold.
func TestMemoryStampsSurviveRestart(t *testing.T) {
	m1, clk, feed1 := newTestStore()
	for i := range 50 { // many stamps within one millisecond
		open(t, m1, "erin", "phone")
		_ = i
	}
	last := (*feed1)[len(*feed1)-1]
	clk.Advance(time.Second)
	var feed2 []presence.Aggregate
	m2 := NewMemory(presence.NewRules(nil), clk.Now, changesTo(&feed2))
	s := open(t, m2, "erin", "phone")
	if s.Epoch <= last.Sessions[0].Epoch || feed2[0].Version <= last.Version {
		t.Fatalf("after restart: epoch %d (was %d), version %d (was %d)", s.Epoch, last.Sessions[0].Epoch, feed2[0].Version, last.Version)
	}
}

func TestMemoryRejectsBadInput(t *testing.T) {
	m, _, feed := newTestStore()
	ctx := context.Background()
	if _, err := m.Open(ctx, presence.OpenArgs{User: "a/b", ID: "x", TTL: time.Minute}); !errors.Is(err, presence.ErrBadName) {
		t.Errorf("open with a bad user: %v", err)
	}
	idle := presence.Idle
	if err := m.SetAccount(ctx, "alice", presence.AccountUpdate{Status: &idle}); !errors.Is(err, presence.ErrBadStatus) {
		t.Errorf("account idle: %v", err)
	}
	if len(*feed) != 0 {
		t.Fatalf("bad input fed %d changes", len(*feed))
	}
	if _, ok, _ := m.Get(ctx, "alice"); ok {
		t.Fatalf("a refused account write created a user")
	}
}

func TestMemoryLoadGivesEveryUser(t *testing.T) {
	m, _, feed := newTestStore()
	open(t, m, "zed", "a")
	open(t, m, "amy", "b")
	before := len(*feed)
	if err := m.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range (*feed)[before:] { // the load reports like the commits
		got = append(got, p.User)
	}
	if len(got) != 2 || got[0] != "amy" || got[1] != "zed" {
		t.Fatalf("load: %v", got)
	}
}

// changesTo is a store's report function that appends every change to feed.
func changesTo(feed *[]presence.Aggregate) func(Event) {
	return func(e Event) {
		if e.Kind == Changed {
			*feed = append(*feed, e.Aggregate)
		}
	}
}

// An offline user is forgotten once last seen before the cut; an online
// one, or one seen since, is kept.
func TestMemoryForget(t *testing.T) {
	m, clk, _ := newTestStore()
	ctx := context.Background()
	old := open(t, m, "old", "a")
	if err := m.End(ctx, presence.EndArgs{User: "old", ID: "a", Epoch: old.Epoch, Reason: presence.EndClean}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	recent := open(t, m, "recent", "b")
	if err := m.End(ctx, presence.EndArgs{User: "recent", ID: "b", Epoch: recent.Epoch, Reason: presence.EndClean}); err != nil {
		t.Fatal(err)
	}
	open(t, m, "online", "c")
	if n := m.Forget(clk.Now().Add(-30 * time.Minute)); n != 1 {
		t.Fatalf("forgot %d, want 1", n)
	}
	for user, want := range map[string]bool{"old": false, "recent": true, "online": true} {
		if _, ok, _ := m.User(ctx, user); ok != want {
			t.Errorf("%s kept: %v, want %v", user, ok, want)
		}
	}
}
