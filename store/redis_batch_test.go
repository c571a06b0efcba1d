package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/presence"
)

// A batch applies each write as alone: a stale epoch and a bad write inside
// a batch are refused and change nothing, while the writes around them are
// made, in order; after SCRIPT FLUSH (a Redis restart) the batch still runs.
func TestRedisBatch(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	r, col := newRedisStore(t, c, "n1")
	ctx := context.Background()
	open := func(user, id string) presence.Write {
		return presence.Write{Kind: presence.WriteOpen, Open: presence.OpenArgs{User: user, ID: id, Node: "n1", Device: "phone", TTL: time.Minute}}
	}
	epochs, errs := r.Batch(ctx, []presence.Write{open("alice", "a1"), open("bob", "b1"), open("carol", "c1")})
	for i, err := range errs {
		if err != nil || epochs[i] == 0 {
			t.Fatalf("open %d: epoch %d, %v", i, epochs[i], err)
		}
	}
	for _, u := range []string{"alice", "bob", "carol"} {
		waitUser(t, col, u, func(p presence.Aggregate) bool { return p.Status == presence.Online })
	}
	busy, away, bad := presence.Busy, presence.Away, presence.Status("nope")
	ref := func(user, id string, e uint64) presence.SessionRef {
		return presence.SessionRef{User: user, ID: id, Epoch: e}
	}
	_, errs = r.Batch(ctx, []presence.Write{
		{Kind: presence.WriteUpdate, Ref: ref("alice", "a1", epochs[0]+100), Update: presence.Update{Status: &busy}}, // stale
		{Kind: presence.WriteUpdate, Ref: ref("bob", "b1", epochs[1]), Update: presence.Update{Status: &busy}},
		{Kind: presence.WriteUpdate, Ref: ref("carol", "c1", epochs[2]), Update: presence.Update{Status: &bad}}, // refused
		{Kind: presence.WriteEnd, End: presence.EndArgs{User: "carol", ID: "c1", Epoch: epochs[2] + 1, Reason: presence.EndClean}},
	})
	if !errors.Is(errs[0], presence.ErrStaleEpoch) || errs[1] != nil || !errors.Is(errs[2], presence.ErrBadStatus) || !errors.Is(errs[3], presence.ErrStaleEpoch) {
		t.Fatalf("errors: %v", errs)
	}
	waitUser(t, col, "bob", func(p presence.Aggregate) bool { return p.Status == presence.Busy })
	for _, u := range []string{"alice", "carol"} {
		if p, _, err := r.Get(ctx, u); err != nil || p.Status != presence.Online || len(p.Sessions) != 1 {
			t.Fatalf("%s changed by a refused write: %+v %v", u, p, err)
		}
	}
	// The scripts are gone (as after a Redis restart): the batch falls back.
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	_, errs = r.Batch(ctx, []presence.Write{
		{Kind: presence.WriteUpdate, Ref: ref("alice", "a1", epochs[0]), Update: presence.Update{Status: &away}},
		{Kind: presence.WriteEnd, End: presence.EndArgs{User: "bob", ID: "b1", Epoch: epochs[1], Reason: presence.EndClean}},
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("after SCRIPT FLUSH: %v", errs)
	}
	waitUser(t, col, "alice", func(p presence.Aggregate) bool { return p.Status == presence.Away })
	waitUser(t, col, "bob", func(p presence.Aggregate) bool { return p.Status == presence.Offline })
}

// A batch that cannot reach Redis fails every write in it as unavailable
// (the tracker tries them again) and changes nothing.
func TestRedisBatchUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	r, col := newRedisStore(t, srv.Client(t), "n1")
	ctx := context.Background()
	epochs, errs := r.Batch(ctx, []presence.Write{{Kind: presence.WriteOpen, Open: presence.OpenArgs{User: "dave", ID: "d1", Node: "n1", TTL: time.Minute}}})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	waitUser(t, col, "dave", func(p presence.Aggregate) bool { return p.Status == presence.Online })
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	away := presence.Away
	_, errs = r.Batch(cctx, []presence.Write{
		{Kind: presence.WriteUpdate, Ref: presence.SessionRef{User: "dave", ID: "d1", Epoch: epochs[0]}, Update: presence.Update{Status: &away}},
		{Kind: presence.WriteOpen, Open: presence.OpenArgs{User: "erin", ID: "e1", Node: "n1", TTL: time.Minute}},
	})
	for i, err := range errs {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if p, _, err := r.Get(ctx, "dave"); err != nil || p.Status != presence.Online {
		t.Fatalf("dave: %+v %v", p, err)
	}
	if _, ok, err := r.Get(ctx, "erin"); err != nil || ok {
		t.Fatalf("erin opened by a failed batch: %v %v", ok, err)
	}
}
