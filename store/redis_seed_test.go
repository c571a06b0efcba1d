package store

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/presence"
)

// TestSeedOffline: the benchmark's seeding writes, on a Redis Cluster, every
// user as the store reads an offline user made by its own scripts (the same
// version, offline, the ended session), with the retention as its TTL, and
// leaves no incarnation behind for a sweep; a node that starts after it
// loads them like any other user.
func TestSeedOffline(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	ctx := context.Background()
	prefix := "t:seed:"
	users := make([]string, 5000)
	for i := range users {
		users[i] = "s" + strconv.Itoa(i)
	}
	rec, err := SeedOffline(ctx, c, prefix, users, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRedis(RedisOptions{Client: c, Prefix: prefix, Node: "n1", NodeTTL: 3 * time.Second, Retention: time.Hour})
	want, ok, err := r.User(ctx, users[0])
	if err != nil || !ok || want.Current.Status != presence.Offline || want.Current.Version == 0 || len(want.Ended) != 1 {
		t.Fatalf("the first user: %+v %v %v", want, ok, err)
	}
	for _, u := range []string{users[1], users[2500], users[len(users)-1]} {
		got, ok, err := r.User(ctx, u)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", u, ok, err)
		}
		if got.Current.User != u || got.Current.Version != want.Current.Version || got.Current.Status != presence.Offline ||
			len(got.Ended) != 1 || got.Ended[0].ID != want.Ended[0].ID {
			t.Fatalf("%s: %+v, want the first user's record %+v under its own name", u, got, want)
		}
		h, err := c.HGetAll(ctx, r.k.user(u)).Result()
		if err != nil || len(h) != len(rec) || h["name"] != u {
			t.Fatalf("%s: hash %v (%v), want the fields of %v", u, h, err, rec)
		}
		if ttl, err := c.PTTL(ctx, r.k.user(u)).Result(); err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
			t.Fatalf("%s: TTL %v (%v), want the retention", u, ttl, err)
		}
	}
	if n, err := c.ZCard(ctx, r.k.registry()).Result(); err != nil || n != 0 {
		t.Fatalf("registry holds %d incarnations (%v), want none", n, err)
	}
	var keys int64
	for _, s := range cl.Nodes() {
		n, err := s.Client(t).DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		keys += n
	}
	if keys != int64(len(users)) {
		t.Fatalf("%d keys on the masters, want one per user (%d)", keys, len(users))
	}
	if _, err := SeedOffline(ctx, c, prefix, nil, time.Hour); err == nil {
		t.Fatal("seeding no users: no error")
	}
}
