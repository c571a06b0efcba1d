package main

import (
	"testing"
	"time"

	"github.com/presenced/presenced/bench/result"
)

// TestInterestSmoke runs the interest scenario at a tiny size (2 nodes × 100
// sessions on a real 3-master Redis Cluster, 10 % watched per node through
// observers of 8 filters each, and a firehose node) and checks every figure
// it reports; on presenced-memory it does not apply.
func TestInterestSmoke(t *testing.T) {
	cfg := smokeConfig(t)
	cfg.Scale.Worker = scaleBenchBinary(t)
	cfg.Systems = []string{result.SystemRedis, result.SystemMemory}
	cfg.Scenarios = []string{scenarioInterest}
	i := &cfg.Interest
	i.Nodes, i.Users, i.Watch, i.Filters, i.Rate, i.Changes, i.Settle = 2, 200, 10, 8, 100, 100, 200*time.Millisecond
	f, err := runBench(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(f.Runs))
	}
	if r := f.Runs[1]; r.Error != naInterest || !isNA(r) {
		t.Errorf("presenced-memory: error %q, want n/a %q", r.Error, naInterest)
	}
	r := f.Runs[0]
	if r.Error != "" {
		t.Fatalf("interest: %s (notes %v)", r.Error, r.Notes)
	}
	x := r.Extra
	for _, k := range []string{"all_online_s", "changes_made", "feed_pct_node1", "feed_pct_node2", "feed_watched_pct_node1", "feed_watched_pct_node2",
		"feed_other_pct_node1", "feed_pct_max", "firehose_feed_pct", "firehose_latency_p99_ms", "heard_node1", "watched_node2", "sessions_node1",
		"heard_pct_node1", "heard_pct_max", "rss_mib_node1", "node_rss_kib_per_own_session", "firehose_heard", "firehose_rss_mib",
		"redis_cmds_per_change", "redis_cmds_per_change_master1", "redis_in_bytes_per_change_master2", "redis_out_bytes_per_change_master3"} {
		if _, ok := x[k]; !ok {
			t.Errorf("no %s in %v (notes %v)", k, x, r.Notes)
		}
	}
	if r.Metrics.Sessions != 200 || x["changes_made"] != 100 {
		t.Errorf("sessions %d, changes %v; want 200, 100", r.Metrics.Sessions, x["changes_made"])
	}
	if _, ok := x["changes_not_seen"]; ok {
		t.Errorf("changes not seen by their watchers or the firehose: %v (notes %v)", x["changes_not_seen"], r.Notes)
	}
	// Each node watches 20 users and holds 100 sessions; the firehose
	// node shows every user.
	if x["watched_node1"] != 20 || x["watched_node2"] != 20 || x["sessions_node1"] != 100 || x["firehose_flag"] != 1 {
		t.Errorf("watched %v, %v; sessions %v; firehose %v", x["watched_node1"], x["watched_node2"], x["sessions_node1"], x["firehose_flag"])
	}
	// A node receives the changes of the users watched there and nothing
	// else (its sessions make no interest): 20 of 200 users, 10 %; every
	// change of the cluster reaches the firehose.
	for _, k := range []string{"1", "2"} {
		if x["feed_watched_pct_node"+k] <= 0 || x["feed_other_pct_node"+k] != 0 || x["feed_pct_node"+k] != x["feed_watched_pct_node"+k] {
			t.Errorf("node %s received %v %% of the changes: %v %% of users watched there, %v %% besides; want the watched only",
				k, x["feed_pct_node"+k], x["feed_watched_pct_node"+k], x["feed_other_pct_node"+k])
		}
		if h := x["heard_node"+k]; h != 20 {
			t.Errorf("node %s hears %v users, want its 20 watched", k, h)
		}
	}
	if x["firehose_feed_pct"] < 100 {
		t.Errorf("the firehose received %v %% of the changes", x["firehose_feed_pct"])
	}
	// Every change has a watcher or not; those that have are timed. A
	// sanity bound, not a target: the machine is shared.
	if l := r.Metrics.Latency; l != nil && (l.P99 <= 0 || l.P99 > 5000) {
		t.Errorf("cross-node latency %+v", l)
	}
	if x["redis_cmds_per_change"] < 1 || x["redis_out_bytes_per_change_master1"]+x["redis_out_bytes_per_change_master2"]+x["redis_out_bytes_per_change_master3"] <= 0 {
		t.Errorf("Redis per change: %v commands, out bytes %v %v %v", x["redis_cmds_per_change"],
			x["redis_out_bytes_per_change_master1"], x["redis_out_bytes_per_change_master2"], x["redis_out_bytes_per_change_master3"])
	}
}

// TestInterestFlags: the interest flags parse and are checked.
func TestInterestFlags(t *testing.T) {
	c, err := parseFlags([]string{"--scenarios", "interest", "--interest-users", "400", "--interest-watch-pct", "2.5"}, scaleNopWriter{})
	if err != nil || c.Interest.Users != 400 || c.Interest.Watch != 2.5 {
		t.Fatalf("parsed %+v: %v", c.Interest, err)
	}
	for _, args := range [][]string{
		{"--interest-nodes", "0"},
		{"--interest-watch-pct", "30"}, // 4 nodes × 30 % > 100 %
		{"--interest-users", "2"},
		{"--interest-filters", "0"},
	} {
		if _, err := parseFlags(args, scaleNopWriter{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
