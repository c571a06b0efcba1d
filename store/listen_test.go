package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// The memory store is one node: it reports every change whatever it
// listens to; Listen reports the current aggregates of the users named
// (those it has), ListenAll every user's, the rest do nothing.
func TestMemoryListen(t *testing.T) {
	col := &events{}
	m := NewMemory(presence.NewRules(nil), time.Now, col.report)
	ctx := context.Background()
	for _, u := range []string{"ann", "ben", "cat"} {
		if _, err := m.Open(ctx, presence.OpenArgs{User: u, ID: u, Node: "n1", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	n := col.Len()
	if err := m.Listen(ctx, []string{"cat", "ann", "nobody"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range col.All()[n:] {
		got = append(got, p.User)
	}
	if !slices.Equal(got, []string{"ann", "cat"}) {
		t.Fatalf("Listen reported %v, want ann and cat", got)
	}
	n = col.Len()
	if err := m.ListenAll(ctx); err != nil {
		t.Fatal(err)
	}
	if k := col.Len() - n; k != 3 {
		t.Fatalf("ListenAll reported %d users, want 3", k)
	}
	for _, err := range []error{m.Unlisten(ctx, []string{"ann"}), m.UnlistenAll(ctx), m.ListenGroups(ctx, []string{"g"}), m.UnlistenGroups(ctx, []string{"g"}), m.Listen(ctx, nil)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	n = col.Len()
	if _, err := m.Open(ctx, presence.OpenArgs{User: "ann", ID: "ann2", Node: "n1", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if col.Len() != n+1 {
		t.Fatal("after Unlisten the memory store stopped reporting a change")
	}
}
