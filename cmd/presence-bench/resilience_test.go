package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestShowInStrobes: an offline shown and then an online again, both in
// the window, is one strobe; messages are counted in the window only.
func TestShowInStrobes(t *testing.T) {
	obs := []Obs{
		on(msec(100)),  // before the window: the starting point
		off(2 * sec),   // turns offline
		on(msec(2300)), // online again: a strobe
		on(msec(2400)), // a repeat: counted as a message, no change
		off(3 * sec),   // offline again
		on(4 * sec),    // a second strobe
		off(6 * sec),   // after the window
	}
	got := showIn(obs, sec, 5*sec)
	if got != (shown{Msgs: 5, Offline: 2, Strobes: 2}) {
		t.Fatalf("showIn = %+v, want 5 messages, 2 offline, 2 strobes", got)
	}
	// A window that ends while the user is shown offline: no strobe yet.
	if got := showIn(obs, sec, msec(2200)); got != (shown{Msgs: 1, Offline: 1}) {
		t.Fatalf("cut window: %+v", got)
	}
	// An offline shown before the window is not one of its strobes.
	if got := showIn([]Obs{off(msec(500)), on(2 * sec)}, sec, 5*sec); got != (shown{Msgs: 1}) {
		t.Fatalf("offline before the window: %+v", got)
	}
	// Never offline: no strobe, whatever the number of messages.
	if got := showIn([]Obs{on(2 * sec), on(3 * sec), on(4 * sec)}, sec, 5*sec); got != (shown{Msgs: 3}) {
		t.Fatalf("online only: %+v", got)
	}
}

// TestShowInVersions: an observer following the contract ignores a message
// whose version is not above the highest seen, so an old offline arriving
// late is no strobe (but is still a message received).
func TestShowInVersions(t *testing.T) {
	obs := []Obs{
		versioned(on(msec(100)), 1),
		versioned(on(2*sec), 3),
		versioned(off(msec(2100)), 2), // late, older: ignored
		versioned(on(msec(2200)), 3),  // duplicate: ignored
	}
	if got := showIn(obs, sec, 5*sec); got != (shown{Msgs: 3}) {
		t.Fatalf("showIn = %+v, want 3 messages and nothing shown offline", got)
	}
	obs[2] = versioned(off(msec(2100)), 4)
	obs[3] = versioned(on(msec(2200)), 5)
	if got := showIn(obs, sec, 5*sec); got != (shown{Msgs: 3, Offline: 1, Strobes: 1}) {
		t.Fatalf("showIn = %+v, want one strobe", got)
	}
}

func TestSpread(t *testing.T) {
	mean, most, over := spread([]int{1, 2, 3, 6}, 2)
	if mean != 3 || most != 6 || over != 2 {
		t.Fatalf("spread = %v %d %d", mean, most, over)
	}
	if mean, most, over := spread(nil, 2); mean != 0 || most != 0 || over != 0 {
		t.Fatal("empty spread")
	}
}

func TestPending(t *testing.T) {
	st := map[string]any{
		"tracker_queue_depth": 2.0, "tracker_retrying": 1.0, "feed_queue_depth": 3.0,
		"ends_pending": 4.0, "published": 100.0, "node": "a", "listeners": map[string]any{"tcp": 1.0},
	}
	if got := pending(st); got != 10 {
		t.Fatalf("pending = %v, want 10", got)
	}
	if got := pending(map[string]any{"published": 5.0}); got != 0 {
		t.Fatalf("pending = %v, want 0", got)
	}
}

func TestCommandStats(t *testing.T) {
	body := "# Commandstats\r\ncmdstat_evalsha:calls=12,usec=30,usec_per_call=2.5,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=3,usec=1\r\ncmdstat_script|load:calls=2,usec=1\r\nnoise\r\n"
	c0 := parseCommandStats(body)
	if c0["evalsha"] != 12 || c0["info"] != 3 || c0["script|load"] != 2 || len(c0) != 3 {
		t.Fatalf("parsed %v", c0)
	}
	c1 := map[string]int64{"evalsha": 20, "info": 4, "script|load": 2, "hgetall": 8}
	d := commandDelta(c0, c1)
	if len(d) != 2 || d[0] != (cmdCalls{"evalsha", 8}) || d[1] != (cmdCalls{"hgetall", 8}) {
		t.Fatalf("delta %v (the bench's own INFO and unchanged commands left out, most first, then by name)", d)
	}
}

func TestMergeYAML(t *testing.T) {
	base := "mqtt:\n  max_subscriptions: 600\npresence:\n  groups_file: \"/tmp/g.yaml\"\n"
	got, err := mergeYAML(base, "presence:\n  offline_grace: 5s\n  takeover_battle: {window: 10s}\ndrain:\n  pace: 100\n")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]any
	if err := yaml.Unmarshal([]byte(got), &m); err != nil {
		t.Fatal(err)
	}
	if m["mqtt"]["max_subscriptions"] != 600 || m["presence"]["groups_file"] != "/tmp/g.yaml" ||
		m["presence"]["offline_grace"] != "5s" || m["drain"]["pace"] != 100 {
		t.Fatalf("merged:\n%s", got)
	}
	if tb, ok := m["presence"]["takeover_battle"].(map[string]any); !ok || tb["window"] != "10s" {
		t.Fatalf("nested: %v", m["presence"]["takeover_battle"])
	}
	for _, bad := range []string{"- a\n- b\n", "just text", ": :"} {
		if _, err := mergeYAML(base, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestNewerThan: back online means every session shown is newer than
// before and, when a node is asked for, on that node.
func TestNewerThan(t *testing.T) {
	before := map[string]uint64{"u-d": 5}
	onB := func(string) string { return "b" }
	fresh := newerThan(before, onB)
	ob := on(sec, Gen{"u-d", 6})
	ob.Nodes = []string{"b"}
	if !fresh("u", ob) {
		t.Fatal("a newer session on B not accepted")
	}
	ob.Nodes = []string{"a"}
	if fresh("u", ob) {
		t.Fatal("a session on A accepted")
	}
	old := on(sec, Gen{"u-d", 5})
	if newerThan(before, nil)("u", old) {
		t.Fatal("the old session accepted")
	}
	both := on(sec, Gen{"u-d", 6}, Gen{"u-x", 1})
	both.Nodes = []string{"b", "a"}
	if fresh("u", both) {
		t.Fatal("a session left on A accepted")
	}
	if fresh("u", off(sec, Gen{"u-d", 7})) {
		t.Fatal("offline accepted")
	}
}

func TestResilienceFlags(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range c.Scenarios {
		for _, r := range resilienceScenarios {
			if sc == r {
				t.Fatalf("%s is in the standard set", r)
			}
		}
	}
	if c.Crash.Sessions != 5000 || c.Crash.MaxDelay != 2*time.Second || c.Rolling.Devices != 3000 || c.Rolling.Nodes != 3 || c.OutName != "latest" {
		t.Fatalf("defaults: %+v %+v", c.Crash, c.Rolling)
	}
	c, err = parseFlags([]string{"--scenarios", "crash,rolling,flap-drop,battle", "--out-name", "resilience",
		"--presenced-config-extra", "presence: {offline_grace: 5s}", "--crash-sessions", "10"}, io.Discard)
	if err != nil || len(c.Scenarios) != 4 || c.OutName != "resilience" || !strings.Contains(c.PresencedExtra, "offline_grace") || c.Crash.Sessions != 10 {
		t.Fatalf("parsed %+v: %v", c, err)
	}
	for _, args := range [][]string{
		{"--presenced-config-extra", "- a"},
		{"--presenced-config-extra", "@/nonexistent/file"},
		{"--out-name", "a/b"},
		{"--rolling-nodes", "1"},
		{"--battle-window", "20s"},
		{"--flap-drop-up-max", "10ms"},
		{"--flap-drop-gap-max", "50ms"},
		{"--crash-sessions", "0"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestResilienceSmoke runs the four resilience scenarios end to end at tiny
// sizes against presenced-redis and mosquitto-lastwill (one parallel
// subtest each) and checks that each run measured what it reports.
func TestResilienceSmoke(t *testing.T) {
	cfg := smokeConfig(t)
	cfg.Scenarios = resilienceScenarios
	cfg.Crash = crashConfig{Sessions: 30, MaxDelay: 300 * time.Millisecond, Grace: 5 * time.Second, Keepalive: 30}
	cfg.Rolling = rollingConfig{Devices: 30, Nodes: 2, MaxDelay: 200 * time.Millisecond, DrainTimeout: 10 * time.Second, Keepalive: 30}
	cfg.FlapDrop = flapDropConfig{Devices: 3, Duration: 1500 * time.Millisecond, UpMin: 200 * time.Millisecond, UpMax: 400 * time.Millisecond, GapMax: 200 * time.Millisecond, Keepalive: 30}
	cfg.Battle = battleConfig{Pairs: 2, Duration: 1200 * time.Millisecond, Window: 500 * time.Millisecond, Delay: 100 * time.Millisecond}
	for _, sys := range []string{"presenced-redis", "mosquitto-lastwill"} {
		t.Run(sys, func(t *testing.T) {
			t.Parallel()
			c := cfg
			c.Systems = []string{sys}
			f, err := runBench(c)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Runs) != 4 {
				t.Fatalf("%d runs, want 4", len(f.Runs))
			}
			for _, r := range f.Runs {
				name := sys + "/" + r.Scenario
				if r.Scenario == scenarioRolling && sys == "mosquitto-lastwill" {
					if r.Error != naNoCluster {
						t.Errorf("%s: error %q, want %q", name, r.Error, naNoCluster)
					}
					continue
				}
				if r.Error != "" {
					t.Errorf("%s: %s (notes %v)", name, r.Error, r.Notes)
					continue
				}
				want := map[string][]string{
					scenarioCrash:    {"users_shown_offline", "publishes_per_user_max", "clients_back"},
					scenarioRolling:  {"users_shown_offline", "publishes_per_user_max", "total_s", "redis_cmds"},
					scenarioFlapDrop: {"same_id_strobes", "new_id_strobes", "same_id_publishes_per_user_min", "drops"},
					scenarioBattle:   {"first_window_publishes_per_user_min", "last_window_publishes_per_user_min", "takeovers"},
				}[r.Scenario]
				for _, k := range want {
					if _, ok := r.Extra[k]; !ok {
						t.Errorf("%s: no %s in %v (notes %v)", name, k, r.Extra, r.Notes)
					}
				}
				switch r.Scenario {
				case scenarioCrash:
					if r.Extra["clients_back"] != 30 || r.Metrics.ConvergeMs <= 0 {
						t.Errorf("%s: %v clients back, converged in %v ms (notes %v)", name, r.Extra["clients_back"], r.Metrics.ConvergeMs, r.Notes)
					}
					if sys == "presenced-redis" && r.Extra["to_converge_redis_cmds"] <= 0 {
						t.Errorf("%s: no Redis commands counted", name)
					}
				case scenarioFlapDrop:
					if r.Extra["drops"] == 0 {
						t.Errorf("%s: no drops", name)
					}
					// The will pattern shows every drop: strobes.
					if sys == "mosquitto-lastwill" && r.Extra["same_id_strobes"] == 0 {
						t.Errorf("%s: mosquitto showed no strobe (extra %v)", name, r.Extra)
					}
				case scenarioBattle:
					if r.Extra["takeovers"] < 4 || r.Extra["first_window_publishes_per_user_min"] == 0 {
						t.Errorf("%s: %v", name, r.Extra)
					}
				}
			}
		})
	}
}
