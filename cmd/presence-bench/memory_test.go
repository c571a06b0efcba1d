package main

import (
	"os"
	"testing"
	"time"

	"github.com/presenced/presenced/bench/result"
)

// TestMemorySmoke runs the memory scenario at a tiny size against the four
// systems it is meant for: every device stays connected through the idle
// time (their keep-alive PINGREQs keep them), RSS is read, and presenced
// (mochi-bare too, the same binary) reports its goroutines and stacks.
func TestMemorySmoke(t *testing.T) {
	cfg := smokeConfig(t)
	cfg.Memory.Devices, cfg.Memory.Keepalive, cfg.Memory.Idle = 20, 2, 4*time.Second // idle past 1.5 × keep-alive: only the PINGREQs keep them
	for _, sys := range []string{result.SystemMemory, result.SystemRedis, result.SystemMochi, result.SystemMosquitto} {
		t.Run(sys, func(t *testing.T) {
			t.Parallel()
			c := cfg
			c.Systems, c.Scenarios = []string{sys}, []string{scenarioMemory}
			f, err := runBench(c)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Runs) != 1 {
				t.Fatalf("%d runs", len(f.Runs))
			}
			r := f.Runs[0]
			if r.Error != "" {
				t.Fatalf("error %q (notes %v)", r.Error, r.Notes)
			}
			if r.Metrics.Sessions != c.Memory.Devices {
				t.Errorf("sessions %d after the idle time, want %d (notes %v)", r.Metrics.Sessions, c.Memory.Devices, r.Notes)
			}
			if r.Metrics.RSSMiB <= 0 || r.Extra["rss_empty_mib"] <= 0 || r.Extra["rss_after_connect_mib"] <= 0 {
				t.Errorf("RSS not read: %+v %v", r.Metrics, r.Extra)
			}
			if _, ok := r.Extra["rss_kib_per_session_after_connect"]; !ok {
				t.Errorf("no rss_kib_per_session_after_connect: %v", r.Extra)
			}
			_, hasRuntime := r.Extra["goroutines_per_session"]
			if sys == result.SystemMosquitto {
				if hasRuntime {
					t.Errorf("mosquitto has runtime figures: %v", r.Extra)
				}
			} else {
				// Two goroutines per connection in mochi; a few of the
				// broker's own may come and go.
				if g := r.Extra["goroutines_per_session"]; g < 1.5 || g > 2.5 {
					t.Errorf("goroutines per session %v, want about 2 (%v)", g, r.Extra)
				}
				if r.Extra["stack_kib_per_session"] <= 0 {
					t.Errorf("no stacks: %v", r.Extra)
				}
				for _, f := range memoryBrokerFigures {
					for _, k := range []string{f.name + "_per_session", f.name + "_per_session_after_connect"} {
						if _, ok := r.Extra[k]; !ok {
							t.Errorf("no %s: %v", k, r.Extra)
						}
					}
				}
			}
			if _, ok := r.Extra["idle_cpu_ms_per_s"]; !ok && sys != result.SystemMosquitto {
				t.Errorf("no idle_cpu_ms_per_s: %v", r.Extra)
			}
			if sys != result.SystemMochi && r.Correct != (result.Correctness{}) {
				t.Errorf("wrong presence: %+v (notes %v)", r.Correct, r.Notes)
			}
		})
	}
}

// TestMemoryNoWatchSmoke runs the memory scenario with nobody watching the
// devices' users (--memory-watch none) on presenced with either store, with
// its heap profile written: presenced tracks every session and hears its
// sessions' users but shows (watches) none, and is no firehose.
func TestMemoryNoWatchSmoke(t *testing.T) {
	cfg := smokeConfig(t)
	cfg.Memory.Devices, cfg.Memory.Keepalive, cfg.Memory.Idle = 20, 2, 3*time.Second
	cfg.Memory.Watch = memoryWatchNone
	for _, sys := range []string{result.SystemMemory, result.SystemRedis} {
		t.Run(sys, func(t *testing.T) {
			t.Parallel()
			c := cfg
			c.Memory.HeapDir = t.TempDir()
			c.Systems, c.Scenarios = []string{sys}, []string{scenarioMemory}
			f, err := runBench(c)
			if err != nil {
				t.Fatal(err)
			}
			r := f.Runs[0]
			if r.Error != "" {
				t.Fatalf("error %q (notes %v)", r.Error, r.Notes)
			}
			x := r.Extra
			if r.Metrics.Sessions != 20 || x["interest_users_watched"] != 0 || x["interest_firehose"] != 0 || x["interest_users_heard"] != 0 {
				t.Errorf("sessions %d; watched %v, firehose %v, heard %v; want 20, 0, 0, 0 (notes %v)",
					r.Metrics.Sessions, x["interest_users_watched"], x["interest_firehose"], x["interest_users_heard"], r.Notes)
			}
			if r.Params["watch"] != memoryWatchNone || r.Params["observers"] != nil {
				t.Errorf("params %v: want watch none and no observer", r.Params)
			}
			files, err := os.ReadDir(c.Memory.HeapDir)
			if err != nil || len(files) != 1 {
				t.Fatalf("heap profiles %v (%v), want one (notes %v)", files, err, r.Notes)
			}
			if fi, err := files[0].Info(); err != nil || fi.Size() == 0 {
				t.Errorf("heap profile %v: %v", fi, err)
			}
		})
	}
}
