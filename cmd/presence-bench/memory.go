package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// scenarioMemory measures what an idle session costs at steady state: not
// right after the connect burst, but once the broker has sat idle.
const scenarioMemory = "memory"

// memoryConfig is the memory scenario's sizes.
type memoryConfig struct {
	Devices   int           // idle sessions
	Keepalive int           // seconds; each device sends only its PINGREQs
	Idle      time.Duration // how long the loaded broker sits idle before the steady-state reading
	// Watch is who watches the devices' users on the broker: "all", one
	// presence/users/+ observer (on presenced a firehose: it shows every
	// user); "none", nobody (presenced holds its sessions' users only).
	Watch   string
	HeapDir string // where presenced's heap profile is written at the end; "" none
}

const (
	memoryWatchAll  = "all"
	memoryWatchNone = "none"
)

func memoryDefaults(c *config) {
	c.Memory.Devices = 15000
	c.Memory.Keepalive = 60
	c.Memory.Idle = 60 * time.Second
	c.Memory.Watch = memoryWatchAll
}

func memoryFlags(fs *flag.FlagSet, c *config) {
	fs.IntVar(&c.Memory.Devices, "memory-devices", c.Memory.Devices, "memory: idle sessions")
	fs.IntVar(&c.Memory.Keepalive, "memory-keepalive", c.Memory.Keepalive, "memory: keep-alive in seconds; each device sends nothing but a PINGREQ per keep-alive, at its own phase")
	fs.DurationVar(&c.Memory.Idle, "memory-idle", c.Memory.Idle, "memory: how long the loaded broker sits idle before RSS is read at steady state (a memory run takes this much longer than --run-timeout)")
	fs.StringVar(&c.Memory.Watch, "memory-watch", c.Memory.Watch, "memory: who watches the devices' users: all (one presence/users/+ observer: on presenced a firehose) or none (no watcher on the broker)")
	fs.StringVar(&c.Memory.HeapDir, "memory-heap-dir", c.Memory.HeapDir, "memory: write presenced's heap profile (/debug/pprof/heap) at the steady-state reading into this directory, as <system>-<pid>.pb.gz")
}

func (c *config) validateMemory() error {
	if c.Memory.Devices <= 0 || c.Memory.Keepalive <= 0 || c.Memory.Keepalive > 65535 {
		return fmt.Errorf("--memory-devices must be positive and --memory-keepalive in 1..65535")
	}
	if c.Memory.Idle < 0 {
		return fmt.Errorf("--memory-idle must not be negative")
	}
	if c.Memory.Watch != memoryWatchAll && c.Memory.Watch != memoryWatchNone {
		return fmt.Errorf("--memory-watch must be %s or %s", memoryWatchAll, memoryWatchNone)
	}
	return nil
}

// memoryExtraTime is how much longer than --run-timeout a run may take.
func memoryExtraTime(cfg config, scenario string) time.Duration {
	if scenario != scenarioMemory {
		return 0
	}
	return cfg.Memory.Idle
}

// memoryBrokerFigures are the presenced figures (/api/v1/stats "runtime")
// reported per session, by name in the run's extra figures.
var memoryBrokerFigures = []struct{ key, name string }{
	{"stack_inuse", "stack_kib"},
	{"heap_inuse", "heap_inuse_kib"},
	{"heap_alloc", "heap_alloc_kib"},
	{"heap_idle", "heap_idle_kib"},
	{"heap_released", "heap_released_kib"},
	{"sys", "go_sys_kib"},
}

// memory: N devices connect with a realistic keep-alive and then do nothing
// but their keep-alive PINGREQs (spread evenly over the keep-alive); RSS is
// read empty, right after the connect burst (once the observer shows every
// device online) and after --memory-idle of idleness. The headline
// RSS/session is the steady-state one. On presenced systems, the broker's
// goroutines and Go memory classes are read at the same points.
func (e *runEnv) memory() error {
	cfg := e.cfg.Memory
	n := e.capDevices(cfg.Devices, 2, "memory devices")
	r := e.run
	r.Params["devices"] = n
	r.Params["keepalive_s"] = cfg.Keepalive
	r.Params["idle_s"] = cfg.Idle.Seconds()
	r.Params["watch"] = cfg.Watch

	time.Sleep(300 * time.Millisecond)
	rss0, err := e.sys.rssKiB()
	if err != nil {
		return err
	}
	rt0 := e.runtimeStats()
	live0 := e.liveHeap()
	var obs *observer
	if e.sys.hasPresence() && cfg.Watch == memoryWatchAll {
		if obs, err = e.newObserver("obs-memory", topicPrefix+"+", observerBuf); err != nil {
			return err
		}
		r.Params["observers"] = 1
	}
	t0 := mono()
	// On a loaded machine the connects may take longer than the devices'
	// keep-alive, and spreadPings begins only once every device is
	// connected: until then every device connected so far pings every
	// third of its keep-alive.
	stopKeep := e.keepUp(time.Duration(cfg.Keepalive) * time.Second / 3)
	devs, _, ok, err := e.loadDevices("m", n, cfg.Keepalive)
	stopKeep()
	if err != nil {
		return err
	}
	r.Extra["connect_s"] = round3((mono() - t0).Seconds())
	if obs != nil {
		users := usersOf(devs)
		if got, done := e.waitProgress(mono()+30*time.Second, 5*time.Second, ok, func() int { return obs.count(users, online) }); !done {
			r.Extra["not_converged"] = float64(ok - got)
			e.note("the observer never showed all devices online: %d of %d (observer: %s)", got, ok, obs.state())
		}
	}
	if obs == nil && e.sys.isPresenced() && e.sys.hasPresence() {
		// Nobody watches: wait until presenced tracks every session and
		// has nothing pending.
		if got, done := e.waitProgressEvery(100*time.Millisecond, mono()+30*time.Second, 10*time.Second, ok, func() int {
			st, err := e.sys.adminStats()
			if err != nil || pending(st) > 0 {
				return 0
			}
			return int(num(st, "sessions"))
		}); !done {
			e.note("presenced tracked %d of %d sessions", got, ok)
		}
	}
	stopPings := e.spreadPings(devs, time.Duration(cfg.Keepalive)*time.Second)
	defer stopPings()
	rss1, err := e.sys.rssKiB()
	if err != nil {
		return err
	}
	rt1 := e.runtimeStats()
	cpu1, err := e.sys.cpu()
	if err != nil {
		return err
	}
	idleFrom := mono()

	e.sleepUntil(mono() + cfg.Idle)
	if e.cancelled() {
		return fmt.Errorf("stopped while idle")
	}
	live := 0
	for _, d := range devs {
		if d != nil && d.c.Err() == nil {
			live++
		}
	}
	rss2, err := e.sys.rssKiB()
	if err != nil {
		return err
	}
	rt2 := e.runtimeStats()
	cpu2, err := e.sys.cpu()
	if err != nil {
		return err
	}
	if idle := mono() - idleFrom; idle > 0 {
		// What staying idle costs: keep-alives, mochi's once-a-second
		// scans, and the GC cycles they cause.
		r.Extra["idle_cpu_ms_per_s"] = round3(ms(cpu2-cpu1) / idle.Seconds())
	}
	if live < ok {
		e.note("%d of %d sessions ended while idle", ok-live, ok)
	}

	if e.sys.isPresenced() {
		if st, err := e.sys.adminStats(); err == nil {
			for _, k := range []string{"interest_users_heard", "interest_users_watched", "interest_firehose", "redis_channels"} {
				if v := num(st, k); v >= 0 {
					r.Extra[k] = v
				}
			}
		}
		if cfg.HeapDir != "" {
			if path, err := e.sys.heapProfile(cfg.HeapDir); err != nil {
				e.note("heap profile: %v", err)
			} else {
				e.note("heap profile at the steady-state reading: %s", path)
			}
		}
		// After the RSS was read: the collection it forces changes what
		// the next readings would see, not this one.
		if live0 >= 0 {
			if live2 := e.liveHeap(); live2 >= 0 {
				r.Extra["heap_live_kib_per_session"] = round3((live2 - live0) / 1024 / float64(ok))
			}
		}
	}
	per := func(kib int64) float64 { return round3(float64(kib) / float64(ok)) }
	r.Metrics.Sessions = live
	r.Metrics.RSSMiB = round1(float64(rss2) / 1024)
	r.Metrics.RSSPerSessionKiB = per(rss2 - rss0)
	r.Extra["rss_kib_per_session"] = per(rss2 - rss0)
	r.Extra["rss_kib_per_session_after_connect"] = per(rss1 - rss0)
	r.Extra["rss_empty_mib"] = round1(float64(rss0) / 1024)
	r.Extra["rss_after_connect_mib"] = round1(float64(rss1) / 1024)
	if rt0 != nil && rt1 != nil && rt2 != nil {
		r.Extra["goroutines"] = rt2["goroutines"]
		r.Extra["goroutines_per_session"] = round3((rt2["goroutines"] - rt0["goroutines"]) / float64(ok))
		r.Extra["gc_cycles_while_idle"] = rt2["gc_count"] - rt1["gc_count"]
		for _, f := range memoryBrokerFigures {
			r.Extra[f.name+"_per_session"] = round3((rt2[f.key] - rt0[f.key]) / 1024 / float64(ok))
			r.Extra[f.name+"_per_session_after_connect"] = round3((rt1[f.key] - rt0[f.key]) / 1024 / float64(ok))
		}
	}
	if obs != nil {
		e.evaluateObservers(mono(), obs)
	}
	return nil
}

// heapProfile writes presenced's heap profile (/debug/pprof/heap, after a
// GC) into dir as <system>-<pid>.pb.gz and returns its path.
func (s *system) heapProfile(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	resp, err := adminGet(s.adminPort, "/debug/pprof/heap?gc=1", 30*time.Second)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/debug/pprof/heap: %s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, s.name+"-"+strconv.Itoa(s.pid())+".pb.gz")
	return path, os.WriteFile(path, b, 0o644)
}

// liveHeap is presenced's live heap in bytes: a collection is forced (a
// heap profile fetched with gc=1, and thrown away) and the heap in use by
// objects read right after it. -1 for other systems or when it cannot be
// read. Unlike RSS, which holds whatever garbage the last cycle left (at
// Go's default GC it swung by 12 KiB a session between rounds of one
// build), it moves only with what the broker keeps.
func (e *runEnv) liveHeap() float64 {
	if !e.sys.isPresenced() {
		return -1
	}
	resp, err := adminGet(e.sys.adminPort, "/debug/pprof/heap?gc=1", 30*time.Second)
	if err != nil {
		e.note("live heap: %v", err)
		return -1
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.note("live heap: /debug/pprof/heap: %s", resp.Status)
		return -1
	}
	rt := e.runtimeStats()
	if rt == nil {
		return -1
	}
	return rt["heap_alloc"]
}

// runtimeStats reads presenced's Go runtime figures (/api/v1/stats
// "runtime"); nil for other systems or when they cannot be read.
func (e *runEnv) runtimeStats() map[string]float64 {
	if !e.sys.isPresenced() {
		return nil
	}
	st, err := e.sys.adminStats()
	if err != nil {
		e.note("runtime figures: %v", err)
		return nil
	}
	rt, ok := st["runtime"].(map[string]any)
	if !ok {
		e.note("runtime figures: /api/v1/stats has no \"runtime\" (an older presenced)")
		return nil
	}
	out := make(map[string]float64, len(rt))
	for k, v := range rt {
		if f, ok := v.(float64); ok {
			out[k] = f
		}
	}
	return out
}

// keepUp pings every client the run has connected so far (e.clients) once
// per every, until the returned function is called.
func (e *runEnv) keepUp(every time.Duration) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-e.cancel:
				return
			case <-t.C:
			}
			e.mu.Lock()
			cs := append([]*client(nil), e.clients...)
			e.mu.Unlock()
			for _, c := range cs {
				_ = c.Ping()
			}
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

// spreadPings sends each device's PINGREQ once per every, the devices'
// phases spread evenly over it, as devices with independent keep-alive
// timers do, until the returned function is called.
func (e *runEnv) spreadPings(devs []*device, every time.Duration) func() {
	var live []*device
	for _, d := range devs {
		if d != nil {
			live = append(live, d)
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if len(live) == 0 {
			return
		}
		// A batch of devices every tick, so that the loop wakes at most
		// 100 times a second.
		const tick = 10 * time.Millisecond
		slots := max(1, int(every/tick))
		per := (len(live) + slots - 1) / slots
		t := time.NewTicker(every / time.Duration(slots))
		defer t.Stop()
		i := 0
		for {
			select {
			case <-stop:
				return
			case <-e.cancel:
				return
			case <-t.C:
				for k := 0; k < per; k++ {
					_ = live[i].c.Ping()
					i = (i + 1) % len(live)
				}
			}
		}
	}()
	var stopped bool
	return func() {
		if !stopped {
			stopped = true
			close(stop)
			<-done
		}
	}
}
