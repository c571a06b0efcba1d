package main

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/bench/result"
)

// buildPresenced builds bin/presenced into a temp dir, once per test binary.
var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	buildOut  []byte
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildPath != "" {
		_ = os.RemoveAll(filepath.Dir(buildPath))
	}
	os.Exit(code)
}

func presencedBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "presence-bench-test-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "presenced")
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		cmd := exec.Command(goBin, "build", "-o", buildPath, "./cmd/presenced")
		cmd.Dir = filepath.Join("..", "..")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/presenced: %v\n%s", buildErr, buildOut)
	}
	return buildPath
}

// mustFind fails (never skips) when a program the smoke needs is missing:
// make test installs them.
func mustFind(t *testing.T, name, fallback string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if _, err := os.Stat(fallback); err == nil {
		return fallback
	}
	t.Fatalf("%s is not installed (make deps installs it)", name)
	return ""
}

// smokeConfig runs every scenario at tiny sizes.
func smokeConfig(t *testing.T) config {
	c := defaultConfig()
	c.Paths = paths{
		Presenced: presencedBinary(t),
		Mosquitto: mustFind(t, "mosquitto", "/usr/sbin/mosquitto"),
		Redis:     mustFind(t, "redis-server", "/usr/bin/redis-server"),
	}
	c.Command = "go test ./cmd/presence-bench"
	c.Steady.Devices, c.Steady.RedisDevices, c.Steady.PingDevices = 20, 20, 10
	c.Steady.PingWindow, c.Steady.RedisWindow, c.Steady.Settle = time.Second, time.Second, 200*time.Millisecond
	c.Churn.Users, c.Churn.Rate, c.Churn.Duration = 20, 60, 1500*time.Millisecond
	c.Storm.Devices = 20
	c.Silent.Devices, c.Silent.Keepalive = 10, 1
	c.Fanout.Users, c.Fanout.Observers, c.Fanout.Changes, c.Fanout.Interval = 3, 4, 3, 300*time.Millisecond
	c.Flap.Devices, c.Flap.Interval, c.Flap.Duration = 3, 400*time.Millisecond, 1600*time.Millisecond
	c.Team.Members, c.Team.Burst, c.Team.Batch = 6, 400*time.Millisecond, 50*time.Millisecond
	c.Team.BigMembers, c.Team.BigWatch, c.Team.BigChanges, c.Team.BigRate = 60, 2, 20, 200
	c.ConnectWorkers = 8
	c.RunTimeout = 40 * time.Second
	c.Log = io.Discard
	return c
}

// TestSmoke runs every scenario against every system at tiny sizes, one
// system per parallel subtest, and checks each run measured something
// plausible and that presenced showed nothing wrong.
func TestSmoke(t *testing.T) {
	cfg := smokeConfig(t)
	var mu sync.Mutex
	var all []result.Run
	t.Run("systems", func(t *testing.T) {
		for _, sys := range allSystems {
			t.Run(sys, func(t *testing.T) {
				t.Parallel()
				c := cfg
				c.Systems = []string{sys}
				var log strings.Builder
				var logMu sync.Mutex
				c.Log = writerFunc(func(p []byte) (int, error) {
					logMu.Lock()
					defer logMu.Unlock()
					return log.Write(p)
				})
				f, err := runBench(c)
				logMu.Lock()
				t.Log("\n" + log.String())
				logMu.Unlock()
				if err != nil {
					t.Fatal(err)
				}
				want := 0
				for _, sc := range allScenarios {
					if applies(sys, sc) {
						want++
					}
				}
				if len(f.Runs) != want {
					t.Fatalf("%d runs, want %d", len(f.Runs), want)
				}
				for _, r := range f.Runs {
					checkRun(t, c, r)
				}
				mu.Lock()
				all = append(all, f.Runs...)
				mu.Unlock()
			})
		}
	})
	// The output files.
	dir := t.TempDir()
	f := result.File{Started: time.Now().UTC(), Command: cfg.Command, Machine: machineInfo(cfg.Paths), Runs: all}
	written, err := writeOutputs(dir, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 7 { // the JSON twice, latest.md and four plots
		t.Fatalf("wrote %v", written)
	}
	b, err := os.ReadFile(filepath.Join(dir, "latest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back result.File
	if err := json.Unmarshal(b, &back); err != nil || len(back.Runs) != len(all) {
		t.Fatalf("latest.json: %v, %d runs", err, len(back.Runs))
	}
	m := f.Machine
	if m.CPUs == 0 || m.CPUModel == "" || m.MemoryGiB == 0 || m.Kernel == "" || m.Go == "" ||
		!strings.Contains(m.Mosquitto, "mosquitto version") || !strings.Contains(m.Redis, "Redis server") {
		t.Errorf("machine: %+v", m)
	}
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

func checkRun(t *testing.T, c config, r result.Run) {
	t.Helper()
	name := r.System + "/" + r.Scenario
	presenced := r.System == result.SystemMemory || r.System == result.SystemRedis || r.System == systemGroup
	if r.System == result.SystemMochi && !bareScenarios[r.Scenario] {
		if r.Error != naError {
			t.Errorf("%s: error %q, want %q", name, r.Error, naError)
		}
		return
	}
	if r.System == result.SystemRedis && r.Scenario == scenarioTeam {
		if r.Error != naTeamRedis {
			t.Errorf("%s: error %q, want %q", name, r.Error, naTeamRedis)
		}
		return
	}
	if r.Error != "" {
		t.Errorf("%s: %s (notes: %v)", name, r.Error, r.Notes)
		return
	}
	m := r.Metrics
	bad := func(what string, v any) { t.Errorf("%s: implausible %s: %v (run %+v)", name, what, v, r) }
	switch r.Scenario {
	case result.ScenarioSteady:
		if m.Sessions != c.Steady.Devices {
			bad("sessions", m.Sessions)
		}
		if m.RSSMiB <= 0 || math.IsNaN(m.RSSPerSessionKiB) {
			bad("RSS", m.RSSMiB)
		}
		if m.PingsPerSec <= 0 || m.CPUPerPingUs <= 0 {
			bad("pings", []float64{m.PingsPerSec, m.CPUPerPingUs})
		}
		if r.System == result.SystemRedis && (r.Extra["redis_window_pings"] <= 0 || m.RedisCmdsPerPing < 0) {
			bad("Redis commands per ping", r.Extra)
		}
	case result.ScenarioChurn:
		if m.Latency == nil || m.Latency.N == 0 || m.ChangesPerSec <= 0 || len(r.Samples) == 0 {
			bad("latency", m.Latency)
		}
		if presenced && r.Extra["changes_not_seen"] != 0 {
			bad("changes not seen", r.Extra)
		}
	case result.ScenarioStorm:
		if m.ConnectsPerSec <= 0 || m.ConnackP99Ms <= 0 || m.Sessions != c.Storm.Devices {
			bad("connects", m)
		}
		if r.System != result.SystemMochi && (m.ConvergeMs <= 0 || r.Extra["reconnect_converge_ms"] <= 0) {
			bad("convergence", []any{m.ConvergeMs, r.Extra})
		}
	case result.ScenarioSilent:
		if m.Detection == nil || m.Detection.N != c.Silent.Devices || m.DetectionLimitS != 2.5 {
			bad("detection", m.Detection)
		} else if presenced && m.Detection.Max > m.DetectionLimitS {
			bad("detection max", m.Detection)
		}
	case result.ScenarioFanout:
		if m.Latency == nil || m.Latency.N == 0 || m.MessagesPerChange <= 0 {
			bad("fanout", m)
		}
		if presenced && m.MessagesPerChange != float64(c.Fanout.Observers+1) {
			bad("messages per change", m.MessagesPerChange)
		}
	case result.ScenarioFlap:
		if r.Extra["observer_states_seen"] <= 0 || r.Extra["reconnects"] <= 0 {
			bad("flap", r.Extra)
		}
	case scenarioTeam:
		n := c.Team.Members
		if m.Sessions != n || m.Latency == nil || m.Latency.N != n || r.Extra["wrong_final"] != 0 || r.Extra["members_not_seen_by_all"] != 0 || r.Extra["watchers_without_snapshot"] != 0 {
			bad("team", m)
		}
		perWatcher := r.Extra["msgs_per_watcher"]
		if r.System == systemGroup {
			// One delta per batch window at most, and at least one.
			if perWatcher < 1 || perWatcher > float64(n) || r.Extra["group_gaps"] != 0 || r.Extra["group_backward"] != 0 {
				bad("group messages", r.Extra)
			}
			if r.Extra["big_snapshot_bytes"] < float64(c.Team.BigMembers)*40 || r.Extra["big_first_snapshot_p50_ms"] <= 0 || r.Extra["big_change_deltas"] < 1 {
				bad("large group", r.Extra)
			}
		} else if perWatcher != float64(n-1) {
			// One message per other member connecting.
			bad("messages per watcher", perWatcher)
		}
	}
	if presenced && r.Correct != (result.Correctness{}) {
		t.Errorf("%s: presenced showed something wrong: %+v (notes %v)", name, r.Correct, r.Notes)
	}
}

func TestFlags(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Systems) != 5 || len(c.Scenarios) != 7 || c.Steady.Devices != 15000 || c.Storm.Devices != 5000 ||
		c.Churn.Rate != 1000 || c.Silent.Keepalive != 2 || c.Fanout.Observers != 50 || c.Flap.Duration != 10*time.Second ||
		c.Team.Members != 500 || c.Team.Batch != 250*time.Millisecond || c.Team.BigMembers != 10000 {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = parseFlags([]string{"--systems", "mochi-bare", "--scenarios", "storm,steady", "--storm-devices", "7"}, io.Discard)
	if err != nil || len(c.Systems) != 1 || len(c.Scenarios) != 2 || c.Storm.Devices != 7 {
		t.Fatalf("parsed %+v: %v", c, err)
	}
	for _, args := range [][]string{
		{"--systems", "nats"},
		{"--scenarios", "steady,nope"},
		{"--storm-devices", "0"},
		{"--churn-rate", "-1"},
		{"--team-batch", "5ms"},
		{"--team-members", "1"},
		{"--team-burst", "0s"},
		{"extra"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine([]string{"--out-dir", "/tmp/a b", "--systems", "mochi-bare"})
	if !strings.HasSuffix(got, ` --out-dir '/tmp/a b' --systems mochi-bare`) {
		t.Fatalf("command %q", got)
	}
}

// A redis-server started on a port another server took first is refused,
// not mistaken for ours (INFO server's process_id), and startRedis tries
// another port.
func TestLaunchRedisChecksWhoAnswers(t *testing.T) {
	bin := mustFind(t, "redis-server", "/usr/bin/redis-server")
	theirs, err := startRedis(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.stop()
	if pid, err := theirs.pid(); err != nil || pid != theirs.cmd.Process.Pid {
		t.Fatalf("startRedis's server reports process %d (%v), started %d", pid, err, theirs.cmd.Process.Pid)
	}
	r, out, err := launchRedis(bin, t.TempDir(), theirs.port)
	if err == nil {
		r.stop()
		t.Fatalf("a redis-server on a taken port (%d) was taken for started", theirs.port)
	}
	t.Logf("refused as it should be: %v (%s)", err, strings.TrimSpace(out))
}
