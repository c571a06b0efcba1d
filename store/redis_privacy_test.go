package store

import (
	"context"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/presence"
)

// A privacy change is a new version on the feed, carried (pv) with what
// others are shown while invisible; a read says the same; turning visible
// clears it, and the version moves again.
func TestRedisPrivacy(t *testing.T) {
	srv := redistest.Start(t)
	r, col := newRedisStore(t, srv.Client(t), "n1")
	ctx := context.Background()
	if _, err := r.Open(ctx, presence.OpenArgs{User: "alice", ID: "phone", Node: "n1", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	first := waitUser(t, col, "alice", func(p presence.Aggregate) bool { return p.Status == presence.Online })
	on, off, q := true, false, presence.LastSeenQuarter
	if err := r.SetAccount(ctx, "alice", presence.AccountUpdate{Invisible: &on, LastSeen: &q}); err != nil {
		t.Fatal(err)
	}
	inv := waitUser(t, col, "alice", func(p presence.Aggregate) bool { return p.Privacy.Invisible })
	if inv.Version <= first.Version || inv.Privacy.LastSeen != presence.LastSeenQuarter || inv.Privacy.Since.IsZero() ||
		!inv.Privacy.Since.Equal(inv.Privacy.Seen) || inv.Status != presence.Online {
		t.Fatalf("invisible: %+v", inv)
	}
	got, ok, err := r.Get(ctx, "alice")
	if err != nil || !ok || !got.Privacy.Equal(inv.Privacy) {
		t.Fatalf("read: %+v %v %v, want %+v", got.Privacy, ok, err, inv.Privacy)
	}
	u, _, _ := r.User(ctx, "alice")
	if !u.Account.Privacy.Equal(inv.Privacy) {
		t.Fatalf("record's account: %+v", u.Account.Privacy)
	}
	if pub := inv.Public(); pub.Status != presence.Offline || len(pub.Sessions) != 0 {
		t.Fatalf("public view: %+v", pub)
	}
	if err := r.SetAccount(ctx, "alice", presence.AccountUpdate{Invisible: &off}); err != nil {
		t.Fatal(err)
	}
	vis := waitUser(t, col, "alice", func(p presence.Aggregate) bool { return !p.Privacy.Invisible })
	if vis.Version <= inv.Version || vis.Privacy != (presence.Privacy{LastSeen: presence.LastSeenQuarter}) {
		t.Fatalf("visible: %+v", vis)
	}
	ex := presence.LastSeenExact
	if err := r.SetAccount(ctx, "alice", presence.AccountUpdate{LastSeen: &ex}); err != nil {
		t.Fatal(err)
	}
	zero := waitUser(t, col, "alice", func(p presence.Aggregate) bool { return p.Privacy.IsZero() })
	if zero.Version <= vis.Version || zero.Privacy != (presence.Privacy{}) {
		t.Fatalf("exact: %+v", zero)
	}
	bad := presence.LastSeenMode("fuzzy")
	if err := r.SetAccount(ctx, "alice", presence.AccountUpdate{LastSeen: &bad}); err == nil {
		t.Fatal("a bad mode was taken")
	}
}

// What Redis says of privacy is checked as any field of a record.
func TestRedisPrivacyUntrusted(t *testing.T) {
	rec := func(edit map[string]string) map[string]string {
		h := map[string]string{"name": "alice", "v": "5", "st": "offline", "tx": "", "since": "1", "ls": "1"}
		for k, v := range edit {
			h[k] = v
		}
		return h
	}
	if _, p, _, err := decodeUser("alice", rec(map[string]string{"pi": "1", "pm": "hidden", "pd": "1", "pe": ""})); err != nil ||
		!p.Privacy.Invisible || p.Privacy.LastSeen != presence.LastSeenHidden || !p.Privacy.Seen.IsZero() {
		t.Fatalf("a good record: %+v %v", p.Privacy, err)
	}
	for name, edit := range map[string]map[string]string{
		"invisible 2":     {"pi": "2"},
		"mode unknown":    {"pm": "fuzzy"},
		"since not ms":    {"pi": "1", "pd": "-5"},
		"last seen float": {"pi": "1", "pe": "1.5"},
	} {
		if _, _, _, err := decodeUser("alice", rec(edit)); err == nil {
			t.Errorf("record with %s: decoded", name)
		}
	}
	if _, _, err := decodeChange([]byte(`{"u":"alice","v":"5","st":"offline","tx":"","since":"1","ls":"1","ss":{},"pv":{"i":"1","m":"sometimes"}}`)); err == nil {
		t.Error("a change with a bad mode: decoded")
	}
}
