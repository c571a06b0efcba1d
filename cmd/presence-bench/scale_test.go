package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/bench/result"
	"github.com/presenced/presenced/internal/testkit"
)

// scaleBenchBinary builds presence-bench itself (the workers' program) into a
// temp dir, once per test binary.
var (
	benchOnce sync.Once
	benchPath string
	benchErr  error
	benchOut  []byte
)

func scaleBenchBinary(t *testing.T) string {
	t.Helper()
	// Next to presenced, whose dir TestMain removes.
	dir := filepath.Dir(presencedBinary(t))
	benchOnce.Do(func() {
		benchPath = filepath.Join(dir, "presence-bench")
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		cmd := exec.Command(goBin, "build", "-o", benchPath, ".")
		benchOut, benchErr = cmd.CombinedOutput()
	})
	if benchErr != nil {
		t.Fatalf("go build ./cmd/presence-bench: %v\n%s", benchErr, benchOut)
	}
	return benchPath
}

// TestScaleWorkerProtocol drives a real scale-worker process against a
// real presenced (memory store): connect, stats, status changes seen by an
// observer, disconnect, an unknown command, quit; and a worker whose stdin
// closes exits.
func TestScaleWorkerProtocol(t *testing.T) {
	bin := scaleBenchBinary(t)
	dir := t.TempDir()
	p := paths{Presenced: presencedBinary(t)}
	sys, err := startSystem(result.SystemMemory, p, dir, presencedConfig{PacingOff: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.stop()
	o := newObserver(parsePresenced)
	if err := o.connect(sys.addr(), "obs-proto", topicPrefix+"+", 5*time.Second, observerBuf); err != nil {
		t.Fatal(err)
	}
	defer o.close()

	const n = 20
	w, err := startScaleWorker(bin, "worker A", sys.addr(), "pa", n, 30, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.kill()
	f, err := w.request("connect", "connected", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(f) < 3 || f[1] != strconv.Itoa(n) || f[2] != "0" || w.ok.Load() != n || w.failed.Load() != 0 {
		t.Fatalf("connected reply %q, ok %d failed %d; want %d 0", f, w.ok.Load(), w.failed.Load(), n)
	}
	if _, err := w.request("connect", "connected", 2*time.Second); err == nil || !strings.Contains(err.Error(), "already") {
		t.Fatalf("a second connect: %v, want an error reply", err)
	}
	st, err := w.stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.live != n || st.closed != 0 {
		t.Fatalf("stats %+v, want %d live", st, n)
	}
	users := make([]string, n)
	for i := range users {
		users[i] = "pa" + strconv.Itoa(i)
	}
	testkit.Wait(t, 10*time.Second, "the observer shows every worker user online", func() error {
		got := o.count(users, online)
		return testkit.Why(got == n, fmt.Sprintf("%d of %d online", got, n))
	})

	// 10 changes at 100/s: each reported with a unique tag, each seen.
	f, err = w.request("status 100 10", "status-done", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != 3 || f[1] != "10" || f[2] != "0" {
		t.Fatalf("status-done %q, want 10 made, 0 errors", f)
	}
	cs := w.changesMade()
	if len(cs) != 10 {
		t.Fatalf("%d changes reported, want 10", len(cs))
	}
	tags := map[string]bool{}
	for _, c := range cs {
		if tags[c.tag] || !strings.HasPrefix(c.user, "pa") {
			t.Fatalf("change %+v: repeated tag or bad user", c)
		}
		tags[c.tag] = true
		if d := mono() - c.at; d < 0 || d > 30*time.Second {
			t.Fatalf("change %+v: time %v from now, not on this clock", c, d)
		}
	}
	if span := cs[9].at - cs[0].at; span < 60*time.Millisecond {
		t.Fatalf("10 changes at 100/s took %v, want about 90 ms", span)
	}
	testkit.Wait(t, 10*time.Second, "the observer sees every change's tag", func() error {
		_, _, missing := scalePropagation([][]scaleChange{cs}, []*observer{o}, -1)
		return testkit.Why(missing == 0, fmt.Sprintf("%d missing", missing))
	})
	if cross, same, _ := scalePropagation([][]scaleChange{cs}, []*observer{o}, -1); len(cross) != 0 || len(same) != 10 {
		t.Fatalf("changes of worker 0 seen by observer 0: %d cross-node, %d same-node; want 0 and 10", len(cross), len(same))
	}

	if f, err = w.request("disconnect 5", "disconnected", 10*time.Second); err != nil || f[1] != "5" {
		t.Fatalf("disconnect: %q %v", f, err)
	}
	testkit.Wait(t, 10*time.Second, "5 sessions closed", func() error {
		s, err := w.stats()
		return testkit.Why(err == nil && s.live == n-5 && s.closed == 5, fmt.Sprintf("stats %+v, %v", s, err))
	})
	testkit.Wait(t, 10*time.Second, "the observer shows the 5 offline", func() error {
		got := o.count(users, offline)
		return testkit.Why(got == 5, fmt.Sprintf("%d offline", got))
	})
	if _, err := w.request("bogus", "never", 5*time.Second); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("unknown command: %v", err)
	}
	w.quit(10 * time.Second)
	select {
	case <-w.exited:
	default:
		t.Fatal("the worker did not exit on quit")
	}

	// A worker whose parent goes away (stdin closed) exits by itself and
	// closes its sessions.
	w2, err := startScaleWorker(bin, "worker B", sys.addr(), "pb", 3, 30, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.kill()
	if _, err := w2.request("connect", "connected", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	_ = w2.in.Close()
	select {
	case <-w2.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not exit when its stdin closed")
	}
	testkit.Wait(t, 10*time.Second, "the exited worker's sessions shown offline", func() error {
		got := o.count([]string{"pb0", "pb1", "pb2"}, offline)
		return testkit.Why(got == 3, fmt.Sprintf("%d of 3 offline", got))
	})
}

// TestScaleSmoke runs the scale scenario at a tiny size (3 nodes × 50
// sessions on a real 3-master Redis Cluster) and checks every figure it
// reports; on presenced-memory it does not apply.
func TestScaleSmoke(t *testing.T) {
	cfg := smokeConfig(t)
	cfg.Scale.Worker = scaleBenchBinary(t)
	cfg.Systems = []string{result.SystemRedis, result.SystemMemory}
	cfg.Scenarios = []string{scenarioScale}
	cfg.Scale.Sessions, cfg.Scale.Changes, cfg.Scale.Rate = 50, 60, 60
	cfg.Scale.Window, cfg.Scale.Settle = time.Second, 200*time.Millisecond
	cfg.Scale.NodeTTL, cfg.Scale.Sweep = 3*time.Second, 500*time.Millisecond
	var log strings.Builder
	var mu sync.Mutex
	cfg.Log = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return log.Write(p) })
	f, err := runBench(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + log.String())
	if len(f.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(f.Runs))
	}
	if r := f.Runs[1]; r.Error != naScale || !isNA(r) {
		t.Errorf("presenced-memory: error %q, want n/a %q", r.Error, naScale)
	}
	r := f.Runs[0]
	if r.Error != "" {
		t.Fatalf("scale: %s (notes %v)", r.Error, r.Notes)
	}
	x := r.Extra
	for _, k := range []string{"all_online_s", "all_online_s_obs1", "all_online_s_obs2", "all_online_s_obs3", "connect_s",
		"steady_redis_cmds_per_s", "steady_redis_cmds_per_s_master1", "steady_redis_cmds_per_s_master2", "steady_redis_cmds_per_s_master3",
		"steady_pingreq_per_s", "reap_s", "reap_s_obs1", "reap_s_obs2", "node_ttl_s", "final_wrong", "changes_made",
		"connect_redis_cmds_per_session", "redis_used_memory_bytes_per_user", "change_redis_cmds_per_change",
		"nosessions_node_rss_mib", "node_rss_kib_per_cluster_user", "node_rss_kib_per_local_session",
		"node_sessions", "node_heard_users", "nosessions_node_heard_users", "nosessions_node_firehose"} {
		if _, ok := x[k]; !ok {
			t.Errorf("no %s in %v (notes %v)", k, x, r.Notes)
		}
	}
	// Every node has a presence/users/+ observer: a firehose, it hears
	// every user of the cluster (interest_firehose, one channel per slot),
	// and names no user as heard: its sessions make no interest.
	if x["node_sessions"] != 50 || x["node_heard_users"] != 0 || x["node_firehose"] != 1 || x["nosessions_node_heard_users"] != 0 || x["nosessions_node_firehose"] != 1 {
		t.Errorf("per node: %v sessions, %v users heard, firehose %v; the node without sessions: %v heard, firehose %v",
			x["node_sessions"], x["node_heard_users"], x["node_firehose"], x["nosessions_node_heard_users"], x["nosessions_node_firehose"])
	}
	if r.Metrics.Sessions != 150 || x["killed_sessions"] != 50 {
		t.Errorf("sessions %d, killed %v; want 150, 50", r.Metrics.Sessions, x["killed_sessions"])
	}
	if x["all_online_s"] <= 0 || x["all_online_s"] > 30 {
		t.Errorf("all_online_s %v", x["all_online_s"])
	}
	// A connect and a change each take at least one script; a user takes
	// some memory in Redis.
	if x["connect_redis_cmds_per_session"] < 1 || x["change_redis_cmds_per_change"] < 1 || x["redis_used_memory_bytes_per_user"] <= 0 {
		t.Errorf("per session %v, per change %v commands; %v bytes per user", x["connect_redis_cmds_per_session"], x["change_redis_cmds_per_change"], x["redis_used_memory_bytes_per_user"])
	}
	if x["steady_redis_cmds_per_s"] <= 0 {
		t.Errorf("no Redis commands at steady state: %v", x)
	}
	perMaster := x["steady_redis_cmds_per_s_master1"] + x["steady_redis_cmds_per_s_master2"] + x["steady_redis_cmds_per_s_master3"]
	if d := perMaster - x["steady_redis_cmds_per_s"]; d > 0.01 || d < -0.01 {
		t.Errorf("per-master commands add up to %v, the total is %v", perMaster, x["steady_redis_cmds_per_s"])
	}
	// Every change is seen by the two observers on the other nodes.
	// A sanity bound, not a performance target: the machine is shared.
	if l := r.Metrics.Latency; l == nil || l.N != 2*60 || l.P99 <= 0 || l.P99 > 5000 {
		t.Errorf("cross-node latency %+v, want 120 samples under 5 s (notes %v)", l, r.Notes)
	}
	if _, ok := x["changes_not_seen"]; ok {
		t.Errorf("changes not seen: %v", x["changes_not_seen"])
	}
	// The reap: the record expires within node_ttl; a survivor sweeps within
	// sweep_interval after; then the offline states reach the observers.
	if x["reap_s"] <= 0 || x["reap_s"] > 3+0.5+3 {
		t.Errorf("reap_s %v, want within node_ttl + sweep_interval + 3 s (extra %v, notes %v)", x["reap_s"], x, r.Notes)
	}
	if x["node_ttl_s"] != 3 || x["final_wrong"] != 0 {
		t.Errorf("node_ttl_s %v, final_wrong %v", x["node_ttl_s"], x["final_wrong"])
	}
}

// TestScaleFlags: the scale flags parse and are checked; scale is known
// but not in the standard set.
func TestScaleFlags(t *testing.T) {
	c, err := parseFlags([]string{"--scenarios", "scale", "--scale-sessions", "10", "--scale-node-ttl", "4s"}, scaleNopWriter{})
	if err != nil || c.Scale.Sessions != 10 || c.Scale.NodeTTL != 4*time.Second || len(c.Scenarios) != 1 {
		t.Fatalf("parsed %+v: %v", c.Scale, err)
	}
	for _, sc := range allScenarios {
		if sc == scenarioScale {
			t.Fatal("scale is in the standard set")
		}
	}
	for _, args := range [][]string{
		{"--scale-nodes", "1"},
		{"--scale-sessions", "0"},
		{"--scale-sweep", "20s"},
		{"--scale-rate", "0"},
	} {
		if _, err := parseFlags(args, scaleNopWriter{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if code := scaleWorkerMain([]string{"--n", "0"}, strings.NewReader(""), scaleNopWriter{}, scaleNopWriter{}); code != 2 {
		t.Errorf("a worker without --addr exited %d, want 2", code)
	}
}

type scaleNopWriter struct{}

func (scaleNopWriter) Write(p []byte) (int, error) { return len(p), nil }
