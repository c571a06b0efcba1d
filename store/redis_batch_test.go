package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
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

// Writes of one slot share a batch.lua call of at most maxBatchWrites: 40
// opens on one server are 2 EVALSHAs, not 40, and each write still gets
// its own reply. A write whose script fails (its record is not a hash) fails
// alone, with the error its own script gives; the writes around it are made.
func TestRedisBatchScript(t *testing.T) {
	srv := redistest.Start(t)
	r, col := newRedisStore(t, srv.Client(t), "n1")
	ctx := context.Background()
	if err := srv.Client(t).Set(ctx, r.k.user("zed"), "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var ws []presence.Write
	for i := range maxBatchWrites + 8 {
		u := "u" + strconv.Itoa(i)
		if i == 5 {
			u = "zed"
		}
		ws = append(ws, presence.Write{Kind: presence.WriteOpen, Open: presence.OpenArgs{User: u, ID: u + "-1", Node: "n1", TTL: time.Minute}})
	}
	before := srv.Calls(t)["evalsha"]
	epochs, errs := r.Batch(ctx, ws)
	if n := srv.Calls(t)["evalsha"] - before; n != 2 {
		t.Errorf("%d writes made in %d EVALSHAs, want 2", len(ws), n)
	}
	for i, w := range ws {
		if w.Open.User == "zed" {
			if errs[i] == nil || !strings.Contains(errs[i].Error(), "WRONGTYPE") {
				t.Errorf("open of zed (not a hash): %v, want WRONGTYPE", errs[i])
			}
			continue
		}
		if errs[i] != nil || epochs[i] == 0 {
			t.Fatalf("open %s: epoch %d, %v", w.Open.User, epochs[i], errs[i])
		}
		waitUser(t, col, w.Open.User, func(p presence.Aggregate) bool { return p.Status == presence.Online })
	}
	// Each write's reply is its own: end every session but one with the
	// epoch its open was given, and that one with a stale epoch.
	var ends []presence.Write
	for i, w := range ws {
		if w.Open.User == "zed" {
			continue
		}
		e := epochs[i]
		if i == 7 {
			e++
		}
		ends = append(ends, presence.Write{Kind: presence.WriteEnd, End: presence.EndArgs{User: w.Open.User, ID: w.Open.ID, Epoch: e, Reason: presence.EndClean}})
	}
	_, errs = r.Batch(ctx, ends)
	for i, w := range ends {
		want := presence.Offline
		if w.End.User == "u7" {
			if !errors.Is(errs[i], presence.ErrStaleEpoch) {
				t.Errorf("stale end of u7: %v", errs[i])
			}
			want = presence.Online
		} else if errs[i] != nil {
			t.Errorf("end %s: %v", w.End.User, errs[i])
		}
		if p, _, err := r.Get(ctx, w.End.User); err != nil || p.Status != want {
			t.Errorf("%s after the ends: %s %v, want %s", w.End.User, p.Status, err, want)
		}
	}
}

// On a cluster a batch.lua call holds the writes of one slot only: writes
// of users all over the cluster, two of them in one slot, are all made.
func TestRedisBatchCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	r, col := newRedisStore(t, cl.Client(t), "n1")
	ctx := context.Background()
	users := []string{"ann", "ben", "cat", "dan", "eve", "fay"}
	slot := keySlot(r.k.user("ann"))
	for i := 0; ; i++ { // a user in ann's slot
		u := "x" + strconv.Itoa(i)
		if keySlot(r.k.user(u)) == slot {
			users = append(users, u)
			break
		}
	}
	var ws []presence.Write
	for _, u := range users {
		ws = append(ws, presence.Write{Kind: presence.WriteOpen, Open: presence.OpenArgs{User: u, ID: u + "-1", Node: "n1", TTL: time.Minute}})
	}
	epochs, errs := r.Batch(ctx, ws)
	for i, u := range users {
		if errs[i] != nil || epochs[i] == 0 {
			t.Fatalf("open %s: epoch %d, %v", u, epochs[i], errs[i])
		}
		waitUser(t, col, u, func(p presence.Aggregate) bool { return p.Status == presence.Online })
	}
	var ends []presence.Write
	for i, u := range users {
		ends = append(ends, presence.Write{Kind: presence.WriteEnd, End: presence.EndArgs{User: u, ID: u + "-1", Epoch: epochs[i], Reason: presence.EndClean}})
	}
	_, errs = r.Batch(ctx, ends)
	for i, u := range users {
		if errs[i] != nil {
			t.Fatalf("end %s: %v", u, errs[i])
		}
		waitUser(t, col, u, func(p presence.Aggregate) bool { return p.Status == presence.Offline })
	}
}
