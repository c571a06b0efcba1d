package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/presenced/presenced/bench/report"
	"github.com/presenced/presenced/bench/result"
)

var allSystems = []string{result.SystemMemory, result.SystemRedis, result.SystemMochi, result.SystemMosquitto, systemGroup}

// allScenarios are the standard set (make bench); knownScenarios adds the
// resilience scenarios (make bench-resilience), which run only when named.
var allScenarios = []string{result.ScenarioSteady, result.ScenarioChurn, result.ScenarioStorm, result.ScenarioSilent, result.ScenarioFanout, result.ScenarioFlap, scenarioTeam}

var knownScenarios = append(append(append([]string(nil), allScenarios...), resilienceScenarios...), scenarioScale, scenarioCeiling, scenarioMemory, scenarioJoin, scenarioInterest, scenarioPwStorm)

// config is everything a benchmark run needs; its defaults are the
// standard set.
type config struct {
	Systems   []string
	Scenarios []string
	OutDir    string
	OutName   string // latest: latest.json, latest.md, latency.svg and <start>.json; else <name>.json and <name>.md
	Paths     paths
	Command   string

	PresencedExtra string // YAML merged into every presenced config file

	Steady struct {
		Devices, RedisDevices, PingDevices int
		Keepalive                          int
		PingWindow, RedisWindow            time.Duration
		Settle                             time.Duration
	}
	Churn struct {
		Users     int
		Rate      float64
		Duration  time.Duration
		Keepalive int
	}
	Storm struct {
		Devices   int
		Keepalive int
	}
	Silent struct {
		Devices   int
		Keepalive int
	}
	Fanout struct {
		Users, Observers, Changes int
		Interval                  time.Duration
	}
	Flap struct {
		Devices            int
		Interval, Duration time.Duration
	}
	Team struct {
		Members    int           // in the group; each also has a watcher
		Burst      time.Duration // every member connects once within it
		Batch      time.Duration // presenced-group's presence.group_batch
		BigMembers int           // the large group of the sub-measurement
		BigWatch   int           // new watchers timed to their first snapshot
		BigChanges int           // status changes for CPU per member change
		BigRate    float64       // their rate, per second
	}
	Crash    crashConfig
	Rolling  rollingConfig
	FlapDrop flapDropConfig
	Battle   battleConfig
	Scale    scaleConfig
	Ceiling  ceilingConfig
	Memory   memoryConfig
	Join     joinConfig
	Interest interestConfig
	PwStorm  pwStormConfig

	ConnectWorkers int
	RunTimeout     time.Duration
	Repeat         int      // rounds of every scenario against every system
	Parallel       bool     // every system and round in a child process of its own, at the same time
	Include        []string // result files whose runs join this one's

	Log io.Writer // progress
}

func main() {
	// Children are killed with the bench: by Pdeathsig when it dies, and
	// here when it is interrupted (mosquitto changes user at start, which
	// clears its Pdeathsig).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		children.killAll()
		tempDirs.removeAll()
		fmt.Fprintf(os.Stderr, "presence-bench: %v: stopped\n", s)
		os.Exit(130)
	}()
	os.Exit(cli(os.Args[1:], os.Stderr))
}

func cli(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == scaleWorkerCmd {
		return scaleWorkerMain(args[1:], os.Stdin, os.Stdout, stderr)
	}
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "presence-bench: %v\n", err)
		return 2
	}
	cfg.Command = commandLine(args)
	run := runBench
	if cfg.Parallel {
		run = func(cfg config) (result.File, error) { return runParallel(cfg, args) }
	}
	f, err := run(cfg)
	if err == nil {
		err = include(&f, cfg.Include)
	}
	if err != nil {
		fmt.Fprintf(stderr, "presence-bench: %v\n", err)
		return 1
	}
	f.Ceiling = report.CeilingCompare(f)
	paths, err := writeOutputsNamed(cfg.OutDir, cfg.OutName, f)
	if err != nil {
		fmt.Fprintf(stderr, "presence-bench: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "presence-bench: %d runs in %.1fs; wrote %s\n", len(f.Runs), f.Duration, strings.Join(paths, ", "))
	for _, r := range f.Runs {
		if r.Error != "" && !isNA(r) {
			return 1
		}
	}
	return 0
}

// defaultConfig is the standard set.
func defaultConfig() config {
	var c config
	c.Systems = allSystems
	c.Scenarios = allScenarios
	c.OutDir = "bench/results"
	c.Paths = paths{Presenced: "bin/presenced", Mosquitto: lookPath("mosquitto", "/usr/sbin/mosquitto"), Redis: lookPath("redis-server", "/usr/bin/redis-server")}
	c.Steady.Devices = 15000
	c.Steady.RedisDevices = 15000
	c.Steady.PingDevices = 2000
	c.Steady.Keepalive = 30
	c.Steady.PingWindow = 5 * time.Second
	c.Steady.RedisWindow = 5 * time.Second
	c.Steady.Settle = time.Second
	c.Churn.Users = 500
	c.Churn.Rate = 1000
	c.Churn.Duration = 5 * time.Second
	c.Churn.Keepalive = 30
	c.Storm.Devices = 5000
	c.Storm.Keepalive = 30
	c.Silent.Devices = 200
	c.Silent.Keepalive = 2
	c.Fanout.Users = 20
	c.Fanout.Observers = 50
	c.Fanout.Changes = 10
	c.Fanout.Interval = time.Second
	c.Flap.Devices = 10
	c.Flap.Interval = time.Second
	c.Flap.Duration = 10 * time.Second
	c.Team.Members = 500
	c.Team.Burst = 10 * time.Second
	c.Team.Batch = 250 * time.Millisecond
	c.Team.BigMembers = 10000
	c.Team.BigWatch = 5
	c.Team.BigChanges = 2000
	c.Team.BigRate = 1000
	c.OutName = "latest"
	resilienceDefaults(&c)
	scaleDefaults(&c)
	ceilingDefaults(&c)
	memoryDefaults(&c)
	joinDefaults(&c)
	interestDefaults(&c)
	pwStormDefaults(&c)
	c.ConnectWorkers = 64
	c.RunTimeout = 120 * time.Second
	c.Log = os.Stderr
	return c
}

func lookPath(name, fallback string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return fallback
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := defaultConfig()
	fs := flag.NewFlagSet("presence-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	systems := fs.String("systems", strings.Join(allSystems, ","), "comma-separated systems: "+strings.Join(allSystems, ", "))
	scenarios := fs.String("scenarios", strings.Join(allScenarios, ","), "comma-separated scenarios: "+strings.Join(knownScenarios, ", ")+" (the default is the standard set; "+strings.Join(resilienceScenarios, ", ")+" run only when named)")
	fs.StringVar(&c.OutDir, "out-dir", c.OutDir, "where to write latest.json, latest.md, latency.svg and <start time>.json")
	fs.StringVar(&c.OutName, "out-name", c.OutName, "name of the output files: latest writes latest.json, latest.md, latency.svg and <start time>.json; any other name writes only <name>.json and <name>.md (a separate file set, e.g. resilience)")
	extra := fs.String("presenced-config-extra", "", "YAML mapping merged into every presenced config file the bench writes (e.g. 'presence: {offline_grace: 5s}'); @file reads it from a file. presenced decodes its config strictly: only keys it knows")
	fs.StringVar(&c.Paths.Presenced, "presenced", c.Paths.Presenced, "presenced binary (go build -o bin/presenced ./cmd/presenced)")
	fs.StringVar(&c.Paths.Mosquitto, "mosquitto", c.Paths.Mosquitto, "mosquitto binary")
	fs.StringVar(&c.Paths.Redis, "redis-server", c.Paths.Redis, "redis-server binary")

	fs.IntVar(&c.Steady.Devices, "steady-devices", c.Steady.Devices, "steady: idle devices (presenced-memory, mochi-bare, mosquitto-lastwill)")
	fs.IntVar(&c.Steady.RedisDevices, "steady-redis-devices", c.Steady.RedisDevices, "steady: idle devices on presenced-redis")
	fs.IntVar(&c.Steady.PingDevices, "steady-ping-devices", c.Steady.PingDevices, "steady: devices running the PINGREQ ping-pong loop")
	fs.IntVar(&c.Steady.Keepalive, "steady-keepalive", c.Steady.Keepalive, "steady: keep-alive in seconds")
	fs.DurationVar(&c.Steady.PingWindow, "steady-ping-window", c.Steady.PingWindow, "steady: PINGREQ throughput window")
	fs.DurationVar(&c.Steady.RedisWindow, "steady-redis-window", c.Steady.RedisWindow, "steady: window of keep-alive-rate pings for Redis commands per PINGREQ")
	fs.DurationVar(&c.Steady.Settle, "steady-settle", c.Steady.Settle, "steady: wait before reading RSS with the sessions loaded")

	fs.IntVar(&c.Churn.Users, "churn-users", c.Churn.Users, "churn: users (one device each) cycling connect, status, disconnect")
	fs.Float64Var(&c.Churn.Rate, "churn-rate", c.Churn.Rate, "churn: presence changes per second in total")
	fs.DurationVar(&c.Churn.Duration, "churn-duration", c.Churn.Duration, "churn: how long cycles are started")

	fs.IntVar(&c.Storm.Devices, "storm-devices", c.Storm.Devices, "storm: devices connecting at once")
	fs.IntVar(&c.Storm.Keepalive, "storm-keepalive", c.Storm.Keepalive, "storm: keep-alive in seconds")

	fs.IntVar(&c.Silent.Devices, "silent-devices", c.Silent.Devices, "silent: devices going silent at once")
	fs.IntVar(&c.Silent.Keepalive, "silent-keepalive", c.Silent.Keepalive, "silent: keep-alive in seconds")

	fs.IntVar(&c.Fanout.Users, "fanout-users", c.Fanout.Users, "fanout: users changing status")
	fs.IntVar(&c.Fanout.Observers, "fanout-observers", c.Fanout.Observers, "fanout: observers per user")
	fs.IntVar(&c.Fanout.Changes, "fanout-changes", c.Fanout.Changes, "fanout: status changes per user")
	fs.DurationVar(&c.Fanout.Interval, "fanout-interval", c.Fanout.Interval, "fanout: time between a user's changes")

	fs.IntVar(&c.Flap.Devices, "flap-devices", c.Flap.Devices, "flap: devices reconnecting with the same client id")
	fs.DurationVar(&c.Flap.Interval, "flap-interval", c.Flap.Interval, "flap: time between a device's reconnects")
	fs.DurationVar(&c.Flap.Duration, "flap-duration", c.Flap.Duration, "flap: how long devices flap")

	fs.IntVar(&c.Team.Members, "team-members", c.Team.Members, "team: members of the group; each member also has a watcher of the group (the group topic, or the other members' user topics)")
	fs.DurationVar(&c.Team.Burst, "team-burst", c.Team.Burst, "team: every member connects once, at a random time within this burst (the issue's morning burst is 60s); a team run may take this much longer than --run-timeout")
	fs.DurationVar(&c.Team.Batch, "team-batch", c.Team.Batch, "team: presence.group_batch of presenced-group (10ms..10s)")
	fs.IntVar(&c.Team.BigMembers, "team-big-members", c.Team.BigMembers, "team (presenced-group): members of the large group, all online, for snapshot size, time to the first snapshot and CPU per member change")
	fs.IntVar(&c.Team.BigWatch, "team-big-watchers", c.Team.BigWatch, "team (presenced-group): new watchers of the large group timed to their first snapshot, one after the other")
	fs.IntVar(&c.Team.BigChanges, "team-big-changes", c.Team.BigChanges, "team (presenced-group): status changes of large-group members for CPU per member change")
	fs.Float64Var(&c.Team.BigRate, "team-big-rate", c.Team.BigRate, "team (presenced-group): rate of those changes, per second")

	resilienceFlags(fs, &c)
	scaleFlags(fs, &c)
	ceilingFlags(fs, &c)
	memoryFlags(fs, &c)
	joinFlags(fs, &c)
	interestFlags(fs, &c)
	pwStormFlags(fs, &c)

	fs.IntVar(&c.ConnectWorkers, "connect-workers", c.ConnectWorkers, "concurrent connects when loading devices")
	fs.DurationVar(&c.RunTimeout, "run-timeout", c.RunTimeout, "a run that takes longer is stopped and reported as failed")
	fs.IntVar(&c.Repeat, "repeat", c.Repeat, "rounds: every scenario runs this many times against every system, one round of all of them after the other; the report gives the median of the rounds with min and max")
	fs.BoolVar(&c.Parallel, "parallel", false, "run every system and round in a presence-bench child process of its own, all at the same time (for the memory scenario: brokers at rest; never for figures of speed)")
	includes := fs.String("include", "", "comma-separated result files (JSON) whose runs join this run's output")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if c.Systems, err = pickList(*systems, allSystems, "system"); err != nil {
		return c, err
	}
	if c.Scenarios, err = pickList(*scenarios, knownScenarios, "scenario"); err != nil {
		return c, err
	}
	if c.PresencedExtra, err = readExtra(*extra); err != nil {
		return c, err
	}
	for _, p := range strings.Split(*includes, ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.Include = append(c.Include, p)
		}
	}
	if c.OutName == "" || strings.ContainsAny(c.OutName, "/\\") {
		return c, errors.New("--out-name must be a plain file name")
	}
	return c, c.validate()
}

func pickList(s string, known []string, what string) ([]string, error) {
	var out []string
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		ok := false
		for _, k := range known {
			ok = ok || k == v
		}
		if !ok {
			return nil, fmt.Errorf("unknown %s %q (known: %s)", what, v, strings.Join(known, ", "))
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s given", what)
	}
	return out, nil
}

func (c *config) validate() error {
	pos := map[string]int{
		"steady-devices": c.Steady.Devices, "steady-redis-devices": c.Steady.RedisDevices,
		"steady-ping-devices": c.Steady.PingDevices, "steady-keepalive": c.Steady.Keepalive,
		"churn-users": c.Churn.Users, "storm-devices": c.Storm.Devices, "storm-keepalive": c.Storm.Keepalive,
		"silent-devices": c.Silent.Devices, "silent-keepalive": c.Silent.Keepalive,
		"fanout-users": c.Fanout.Users, "fanout-observers": c.Fanout.Observers, "fanout-changes": c.Fanout.Changes,
		"flap-devices": c.Flap.Devices, "connect-workers": c.ConnectWorkers,
		"team-members": c.Team.Members, "team-big-members": c.Team.BigMembers,
		"team-big-watchers": c.Team.BigWatch, "team-big-changes": c.Team.BigChanges,
	}
	for name, v := range pos {
		if v <= 0 {
			return fmt.Errorf("--%s must be positive", name)
		}
	}
	durs := map[string]time.Duration{
		"steady-ping-window": c.Steady.PingWindow, "steady-redis-window": c.Steady.RedisWindow,
		"churn-duration": c.Churn.Duration, "fanout-interval": c.Fanout.Interval,
		"flap-interval": c.Flap.Interval, "flap-duration": c.Flap.Duration, "run-timeout": c.RunTimeout,
		"team-burst": c.Team.Burst,
	}
	for name, v := range durs {
		if v <= 0 {
			return fmt.Errorf("--%s must be positive", name)
		}
	}
	if c.Churn.Rate <= 0 {
		return errors.New("--churn-rate must be positive")
	}
	if c.Team.BigRate <= 0 {
		return errors.New("--team-big-rate must be positive")
	}
	if c.Team.Batch < 10*time.Millisecond || c.Team.Batch > 10*time.Second {
		return errors.New("--team-batch must be between 10ms and 10s")
	}
	if c.Team.Members < 2 {
		return errors.New("--team-members must be at least 2")
	}
	if err := c.validateResilience(); err != nil {
		return err
	}
	if err := c.validateScale(); err != nil {
		return err
	}
	if err := c.validateMemory(); err != nil {
		return err
	}
	if err := c.validateJoin(); err != nil {
		return err
	}
	if err := c.validatePwStorm(); err != nil {
		return err
	}
	if err := c.validateInterest(); err != nil {
		return err
	}
	if err := c.Ceiling.validate(); err != nil {
		return err
	}
	if c.Steady.Keepalive > 65535 || c.Storm.Keepalive > 65535 || c.Silent.Keepalive > 65535 {
		return errors.New("keep-alive must be at most 65535")
	}
	return nil
}

// commandLine is how this run can be reproduced.
func commandLine(args []string) string {
	prog := os.Args[0]
	if strings.Contains(prog, "go-build") {
		prog = "go run ./cmd/presence-bench"
	}
	parts := []string{prog}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'$\\*?") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// raiseFileLimit raises RLIMIT_NOFILE to its hard limit and returns the
// soft limit in force.
func raiseFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	return rl.Cur
}

// writeOutputs writes latest.json, the same JSON named by the start time,
// latest.md and latency.svg.
func writeOutputs(dir string, f result.File) ([]string, error) {
	return writeOutputsNamed(dir, "latest", f)
}

// readExtra reads --presenced-config-extra: YAML text, or @file; it must be
// a YAML mapping.
func readExtra(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if p, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("--presenced-config-extra: %w", err)
		}
		v = string(b)
	}
	if _, err := mergeYAML("", v); err != nil {
		return "", fmt.Errorf("--presenced-config-extra: %w", err)
	}
	return v, nil
}

// writeOutputsNamed writes the outputs: for the name latest, latest.json,
// the same JSON named by the start time, latest.md and latency.svg; for
// any other name, <name>.json and <name>.md only (a separate file set that
// leaves the standard outputs alone).
func writeOutputsNamed(dir, name string, f result.File) ([]string, error) {
	if name != "latest" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		js, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			return nil, err
		}
		var written []string
		for _, x := range []struct {
			name string
			data []byte
		}{{name + ".json", append(js, '\n')}, {name + ".md", report.Markdown(f)}} {
			p := filepath.Join(dir, x.name)
			if err := os.WriteFile(p, x.data, 0o644); err != nil {
				return written, err
			}
			written = append(written, p)
		}
		return written, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	js = append(js, '\n')
	stamp := f.Started.UTC().Format("2006-01-02T15-04-05Z")
	files := []struct {
		name string
		data []byte
	}{
		{"latest.json", js},
		{stamp + ".json", js},
		{"latest.md", report.Markdown(f)},
		{"latency.svg", report.LatencySVG(f)},
		{"memory.svg", report.MemorySVG(f)},
		{"detection.svg", report.DetectionSVG(f)},
		{"ceiling.svg", report.CeilingSVG(f)},
	}
	var written []string
	for _, x := range files {
		p := filepath.Join(dir, x.name)
		if err := os.WriteFile(p, x.data, 0o644); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}
