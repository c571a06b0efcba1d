package main

import (
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/bench/result"
)

// TestJoinSmoke runs the join scenario at a tiny size (300 and 1,500 users
// seeded on a real 3-master Redis Cluster), with the same build standing in
// for the old one, and checks every figure it reports: each node got ready,
// its RSS was read, every snapshot came and was the seeded offline user;
// on presenced-memory it does not apply.
func TestJoinSmoke(t *testing.T) {
	cfg := smokeConfig(t)
	cfg.Systems = []string{result.SystemRedis, result.SystemMemory}
	cfg.Scenarios = []string{scenarioJoin}
	cfg.Join.Users, cfg.Join.Snapshots, cfg.Join.After = []int{300, 1500}, 120, 300*time.Millisecond
	cfg.Join.Old, cfg.Join.OldMax, cfg.Join.OldSnapshots = cfg.Paths.Presenced, 300, 10
	cfg.Join.ReadyWait = 20 * time.Second
	f, err := runBench(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(f.Runs))
	}
	if r := f.Runs[1]; r.Error != naJoin || !isNA(r) {
		t.Errorf("presenced-memory: error %q, want n/a %q", r.Error, naJoin)
	}
	r := f.Runs[0]
	if r.Error != "" {
		t.Fatalf("join: %s (notes %v)", r.Error, r.Notes)
	}
	x := r.Extra
	for _, k := range []string{"ready_s_empty", "ready_s_300", "ready_s_1500", "old_ready_s_empty", "old_ready_s_300",
		"rss_ready_mib_empty", "rss_after_mib_1500", "rss_after_over_empty_mib_1500", "old_rss_after_over_empty_mib_300",
		"seed_s_300", "seed_s_1500", "redis_used_memory_mib_1500", "snapshot_p99_ms_1500", "old_snapshot_p99_ms_300"} {
		if _, ok := x[k]; !ok {
			t.Errorf("no %s in %v (notes %v)", k, x, r.Notes)
		}
	}
	if _, ok := x["old_ready_s_1500"]; ok {
		t.Errorf("the old build joined 1,500 users, past --join-old-max 300")
	}
	for _, k := range []string{"ready_s_empty", "ready_s_1500", "old_ready_s_300"} {
		// A sanity bound, not the target: the machine is shared.
		if v := x[k]; v <= 0 || v > 20 {
			t.Errorf("%s %v s", k, v)
		}
	}
	// 120 subscriptions: more than one client may hold (mqtt.max_subscriptions 100).
	if x["snapshots_300"] != 120 || x["snapshots_1500"] != 120 || x["old_snapshots_300"] != 10 {
		t.Errorf("snapshots %v, %v, old %v; want 120, 120, 10 (notes %v)", x["snapshots_300"], x["snapshots_1500"], x["old_snapshots_300"], r.Notes)
	}
	for k, v := range x {
		if (strings.HasPrefix(k, "snapshots_missing_") || strings.HasPrefix(k, "snapshots_not_offline_") || strings.HasPrefix(k, "old_snapshots_")) && v != 0 && !strings.HasPrefix(k, "old_snapshots_300") {
			t.Errorf("%s %v (notes %v)", k, v, r.Notes)
		}
	}
	if v := x["snapshot_p99_ms_1500"]; v <= 0 || v > 2000 {
		t.Errorf("snapshot p99 %v ms", v)
	}
	if x["rss_ready_mib_empty"] <= 0 || x["rss_after_mib_1500"] <= 0 {
		t.Errorf("RSS not read: %v", x)
	}
}

// TestJoinFlags: the join flags parse and are checked.
func TestJoinFlags(t *testing.T) {
	c, err := parseFlags([]string{"--scenarios", "join", "--join-users", "10,20", "--join-old", "/x"}, scaleNopWriter{})
	if err != nil || len(c.Join.Users) != 2 || c.Join.Users[1] != 20 || c.Join.Old != "/x" {
		t.Fatalf("parsed %+v: %v", c.Join, err)
	}
	for _, args := range [][]string{
		{"--join-users", "20,10"},
		{"--join-users", "0"},
		{"--join-snapshots", "0"},
	} {
		if _, err := parseFlags(args, scaleNopWriter{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if joinSize(100000) != "100k" || joinSize(1000000) != "1m" || joinSize(1500) != "1500" {
		t.Errorf("joinSize: %s %s %s", joinSize(100000), joinSize(1000000), joinSize(1500))
	}
}
