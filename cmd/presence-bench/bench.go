package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presenced/presenced/bench/result"
)

const (
	naError     = "no presence in the bare broker"
	naTeamRedis = "the team scenario compares the group topic with user topics on the memory store"
)

// isNA tells a run that does not apply to its system.
func isNA(r result.Run) bool {
	return r.Error == naError || r.Error == naTeamRedis || r.Error == naNeedsRedis || r.Error == naNoCluster || r.Error == naScale || r.Error == naJoin || r.Error == naInterest
}

// applies tells whether scenario is run on sys at all: presenced-group is
// presenced-memory with a groups file, and runs the team scenario only.
func applies(sys, scenario string) bool {
	return sys != systemGroup || scenario == scenarioTeam
}

// bareScenarios are the scenarios mochi-bare runs: those that need no
// presence, and those where its devices follow the classic last-will
// pattern (classicScenarios: bare mochi's cycle).
var bareScenarios = map[string]bool{result.ScenarioSteady: true, result.ScenarioStorm: true, scenarioMemory: true,
	result.ScenarioChurn: true, scenarioCeiling: true}

// runBench runs every (system, scenario) of cfg, one after the other.
func runBench(cfg config) (result.File, error) {
	limit := raiseFileLimit()
	for _, s := range cfg.Systems {
		var p, what string
		switch s {
		case result.SystemMosquitto:
			p, what = cfg.Paths.Mosquitto, "--mosquitto"
		case result.SystemRedis:
			if _, err := os.Stat(cfg.Paths.Redis); err != nil {
				return result.File{}, fmt.Errorf("--redis-server %s: %w", cfg.Paths.Redis, err)
			}
			p, what = cfg.Paths.Presenced, "--presenced"
		default:
			p, what = cfg.Paths.Presenced, "--presenced"
		}
		if _, err := os.Stat(p); err != nil {
			return result.File{}, fmt.Errorf("%s %s: %w", what, p, err)
		}
	}
	start := time.Now()
	f := result.File{Started: start.UTC().Truncate(time.Millisecond), Command: cfg.Command, Machine: machineInfo(cfg.Paths),
		Presenced: firstLine(cfg.Paths.Presenced, "presenced", "--version")}
	rounds := max(cfg.Repeat, 1)
	if rounds > 1 {
		f.Repeat = rounds
	}
	total := 0
	for _, sys := range cfg.Systems {
		for _, sc := range cfg.Scenarios {
			if applies(sys, sc) {
				total++
			}
		}
	}
	total *= rounds
	i := 0
	// Round after round of every system and scenario: each round has the
	// systems side by side, and a noisy minute spoils one round, not one
	// system.
	for round := 1; round <= rounds; round++ {
		first := len(f.Runs)
		for _, sys := range cfg.Systems {
			for _, sc := range cfg.Scenarios {
				if !applies(sys, sc) {
					continue
				}
				i++
				logf(cfg, "[%d/%d] %s %s ...", i, total, sys, sc)
				t0 := time.Now()
				r := runOne(cfg, sys, sc, limit)
				if rounds > 1 {
					r.Round = round
				}
				logf(cfg, "[%d/%d] %s", i, total, summaryLine(r, time.Since(t0)))
				f.Runs = append(f.Runs, r)
			}
		}
		teamCompare(f.Runs[first:], cfg.Team.Batch) // within the round
		if cfg.Ceiling.Common {
			ceilingCommonSteps(cfg, f.Runs[first:], limit)
		}
	}
	f.Duration = math.Round(time.Since(start).Seconds()*10) / 10
	return f, nil
}

func logf(cfg config, format string, a ...any) {
	if cfg.Log != nil {
		fmt.Fprintf(cfg.Log, format+"\n", a...)
	}
}

// runEnv is one run: the system, the ground truth, every client to close.
type runEnv struct {
	cfg     config
	sys     *system
	run     *result.Run
	tr      truth
	fdLimit uint64

	mu      sync.Mutex
	clients []*client
	obs     []*observer

	nodes []*system // further presenced nodes of the run (crash, rolling), stopped with it

	drops      *dropWatch
	cancel     chan struct{} // closed when the run is stopped
	cancelOnce sync.Once
}

// stop cancels the run: every wait returns at once.
func (e *runEnv) stop() { e.cancelOnce.Do(func() { close(e.cancel) }) }

func (e *runEnv) cancelled() bool {
	select {
	case <-e.cancel:
		return true
	default:
		return false
	}
}

// waitUntil polls cond every 10 ms until it holds, the deadline passes or
// the run is stopped.
func (e *runEnv) waitUntil(deadline time.Duration, cond func() bool) bool {
	for {
		if cond() {
			return true
		}
		if mono() >= deadline || e.cancelled() {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitProgress is waitUntil for a count that should reach want: it also
// gives up when the count has not grown for stall.
func (e *runEnv) waitProgress(deadline, stall time.Duration, want int, count func() int) (int, bool) {
	return e.waitProgressEvery(10*time.Millisecond, deadline, stall, want, count)
}

// waitProgressEvery is waitProgress counting every poll (a count over tens
// of thousands of users is not free).
func (e *runEnv) waitProgressEvery(poll, deadline, stall time.Duration, want int, count func() int) (int, bool) {
	best, since := -1, mono()
	for {
		n := count()
		if n >= want {
			return n, true
		}
		if n > best {
			best, since = n, mono()
		}
		now := mono()
		if now >= deadline || now-since >= stall || e.cancelled() {
			return n, false
		}
		e.sleepUntil(now + poll)
	}
}

// runPhases runs the phases of a scenario in order, and stops at the first
// that fails.
func runPhases(phases ...func() error) error {
	for _, p := range phases {
		if err := p(); err != nil {
			return err
		}
	}
	return nil
}

// sleepUntil sleeps until t or until the run is stopped.
func (e *runEnv) sleepUntil(t time.Duration) {
	if d := t - mono(); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-e.cancel:
		}
	}
}

var scenarioFuncs = map[string]func(*runEnv) error{
	result.ScenarioSteady: (*runEnv).steady,
	result.ScenarioChurn:  (*runEnv).churn,
	result.ScenarioStorm:  (*runEnv).storm,
	result.ScenarioSilent: (*runEnv).silent,
	result.ScenarioFanout: (*runEnv).fanout,
	result.ScenarioFlap:   (*runEnv).flap,
	scenarioTeam:          (*runEnv).team,
	scenarioCrash:         (*runEnv).crash,
	scenarioRolling:       (*runEnv).rolling,
	scenarioFlapDrop:      (*runEnv).flapDrop,
	scenarioBattle:        (*runEnv).battle,
	scenarioCeiling:       (*runEnv).ceiling,
	scenarioMemory:        (*runEnv).memory,
}

// runOne starts the system fresh, runs the scenario and stops the system.
func runOne(cfg config, sysName, scenario string, fdLimit uint64) (r result.Run) {
	r = result.Run{System: sysName, Scenario: scenario, Params: map[string]any{}, Extra: map[string]float64{}}
	defer func() {
		if len(r.Extra) == 0 {
			r.Extra = nil
		}
	}()
	if why := notApplicable(sysName, scenario); why != "" {
		r.Error = why
		return r
	}
	if scenario == scenarioScale {
		return runScale(cfg, r, fdLimit)
	}
	if scenario == scenarioJoin {
		return runJoin(cfg, r, fdLimit)
	}
	if scenario == scenarioInterest {
		return runInterest(cfg, r, fdLimit)
	}
	if scenario == scenarioPwStorm {
		return runPwStorm(cfg, r, fdLimit)
	}
	dir, err := os.MkdirTemp("", "presence-bench-")
	if err != nil {
		r.Error = err.Error()
		return r
	}
	tempDirs.add(dir)
	defer tempDirs.remove(dir)
	pc := presencedConfigFor(cfg, sysName, scenario, fdLimit)
	pc.Extra = cfg.PresencedExtra
	sys, err := startSystem(sysName, cfg.Paths, dir, pc)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	sys.classic = classicCycle(sysName, scenario)
	return runOn(cfg, sys, scenario, fdLimit, r)
}

// notApplicable is why the scenario does not apply to the system ("" when
// it does).
func notApplicable(sysName, scenario string) string {
	if sysName == result.SystemMochi && !bareScenarios[scenario] {
		return naError
	}
	if sysName == result.SystemRedis && scenario == scenarioTeam {
		return naTeamRedis
	}
	if why := resilienceNA(sysName, scenario); why != "" {
		return why
	}
	if why := joinNA(sysName, scenario); why != "" {
		return why
	}
	if why := interestNA(sysName, scenario); why != "" {
		return why
	}
	if why := pwStormNA(sysName, scenario); why != "" {
		return why
	}
	return scaleNA(sysName, scenario)
}

// runOn runs the scenario on sys, just started, within the scenario's
// time: on a timeout it stops the system and every socket, so that
// whatever waits fails fast. It stops everything the run started, and
// adds presenced's stats to a run that failed.
func runOn(cfg config, sys *system, scenario string, fdLimit uint64, in result.Run) (r result.Run) {
	r = in
	// The scenario fills its own copy of the run, taken back only once the
	// scenario has returned.
	sr := r
	sr.Params, sr.Extra = map[string]any{}, map[string]float64{}
	e := &runEnv{cfg: cfg, sys: sys, run: &sr, fdLimit: fdLimit, cancel: make(chan struct{})}
	done := make(chan error, 1)
	go e.runScenario(scenario, done)
	timeout := scenarioTimeout(cfg, scenario)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var stats []byte
	if sys.isPresenced() {
		defer func() {
			if stats != nil {
				r.Notes = append(r.Notes, "presenced stats at the failure: "+string(stats))
			}
		}()
	}
	getStats := func() {
		if sys.isPresenced() && sys.proc != nil {
			if st, serr := sys.adminStats(); serr == nil {
				stats, _ = json.Marshal(st)
			}
		}
	}
	var err error
	select {
	case err = <-done:
		if err != nil {
			getStats()
		}
	case <-timer.C:
		// Stop the system and every socket: whatever waits fails fast.
		getStats()
		e.stop()
		e.stopNodes()
		sys.stop()
		e.closeAll()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			e.stopNodes()
			sys.stop()
			e.closeAll()
			r.Error = fmt.Sprintf("timed out after %v (the scenario did not stop)", timeout)
			return r
		}
		err = fmt.Errorf("timed out after %v", timeout)
	}
	e.stopNodes()
	sys.stop()
	e.closeAll()
	r = sr
	if err != nil {
		r.Error = err.Error()
	}
	return r
}

// patternParam records, for mochi-bare running bare mochi's cycle, that
// its devices follow the classic last-will pattern.
func (e *runEnv) patternParam() {
	if e.sys.classic {
		e.run.Params["pattern"] = "last-will"
	}
}

// runScenario runs the scenario (a panic is its error) and records the
// messages the broker dropped; done gets its error.
func (e *runEnv) runScenario(scenario string, done chan<- error) {
	defer func() {
		if p := recover(); p != nil {
			done <- fmt.Errorf("panic: %v", p)
		}
	}()
	e.watchDrops()
	err := scenarioFuncs[scenario](e)
	if n := e.dropped(); n > 0 {
		e.run.Extra["broker_messages_dropped"] = float64(n)
		e.note("the broker dropped %d messages to clients whose outbound queue was full ($SYS/broker/messages/dropped)", n)
	}
	done <- err
}

// scenarioTimeout is how long a scenario may run: --run-timeout, plus what
// the scenario's own configured durations add.
func scenarioTimeout(cfg config, scenario string) time.Duration {
	timeout := cfg.RunTimeout
	if scenario == scenarioTeam {
		timeout += cfg.Team.Burst
	}
	return timeout + resilienceExtraTime(cfg, scenario) + ceilingExtraTime(cfg, scenario) + memoryExtraTime(cfg, scenario)
}

func (e *runEnv) track(c *client) {
	e.mu.Lock()
	e.clients = append(e.clients, c)
	e.mu.Unlock()
}

func (e *runEnv) closeAll() {
	e.mu.Lock()
	cs, obs := e.clients, e.obs
	e.clients, e.obs = nil, nil
	e.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	for _, o := range obs {
		o.close()
	}
}

func (e *runEnv) note(format string, a ...any) {
	e.run.Notes = append(e.run.Notes, fmt.Sprintf(format, a...))
}

// socketCap is how many client sockets this process can hold with room to
// spare for everything else.
func (e *runEnv) socketCap() int {
	return int(e.fdLimit) - 300
}

// capDevices lowers n to what one process can hold, with a note.
func (e *runEnv) capDevices(n, others int, what string) int {
	if c := e.socketCap() - others; n > c {
		e.note("%s: %d wanted, but this process can hold only %d client sockets (RLIMIT_NOFILE %d): ran %d", what, n, e.socketCap(), e.fdLimit, c)
		return c
	}
	return n
}

// newObserverFilters connects an observer subscribed to every filter (in
// one SUBSCRIBE), covering the users cover accepts (nil: from the first
// filter).
func (e *runEnv) newObserverFilters(id string, filters []string, readBuf int, cover func(string) bool) (*observer, error) {
	return e.newObserverAt(e.sys.addr(), id, filters, readBuf, cover)
}

// newObserverAt is newObserverFilters on the broker at addr (one node of
// several).
func (e *runEnv) newObserverAt(addr, id string, filters []string, readBuf int, cover func(string) bool) (*observer, error) {
	o := newObserver(e.sys.parser())
	o.cover = cover
	e.mu.Lock()
	e.obs = append(e.obs, o)
	e.mu.Unlock()
	if _, err := o.connectFilters(addr, id, filters, 10*time.Second, readBuf); err != nil {
		return nil, fmt.Errorf("observer %s: %w", id, err)
	}
	return o, nil
}

// newObserver connects an observer subscribed to filter.
func (e *runEnv) newObserver(id, filter string, readBuf int) (*observer, error) {
	o := newObserver(e.sys.parser())
	e.mu.Lock()
	e.obs = append(e.obs, o)
	e.mu.Unlock()
	if err := o.connect(e.sys.addr(), id, filter, 10*time.Second, readBuf); err != nil {
		return nil, fmt.Errorf("observer %s: %w", id, err)
	}
	return o, nil
}

var serials atomic.Uint64
var tags atomic.Uint64

func nextTag() string { return "t" + strconv.FormatUint(tags.Add(1), 10) }

// device is one device connection, following its system's presence pattern.
type device struct {
	e      *runEnv
	user   string
	id     string
	c      *client
	iv     *Interval
	serial uint64
	ka     time.Duration
}

// connectDevice connects a device of user with client id id. On mosquitto
// it sets the will "offline" and publishes "online" after CONNACK, both
// retained QoS 1 on presence/users/{user}.
func (e *runEnv) connectDevice(user, id string, keepalive int, timeout time.Duration) (*device, error) {
	return e.connectDeviceAt(e.sys.addr(), user, id, keepalive, timeout)
}

// connectDeviceAt is connectDevice to the broker at addr (one node of
// several).
func (e *runEnv) connectDeviceAt(addr, user, id string, keepalive int, timeout time.Duration) (*device, error) {
	serial := serials.Add(1)
	o := connectOpts{ClientID: id, Username: user, Keepalive: uint16(keepalive)}
	if e.sys.lastWill() {
		o.WillTopic = topicPrefix + user
		o.WillPayload = lwPayload("offline", id, serial, "")
		o.WillQos, o.WillRetain = 1, true
	}
	c, err := connect(addr, o, timeout)
	if err != nil {
		return nil, err
	}
	e.track(c)
	d := &device{e: e, user: user, id: id, c: c, serial: serial, ka: time.Duration(keepalive) * time.Second}
	d.iv = e.tr.up(user, c.ConnackAt)
	if e.sys.lastWill() {
		if err := c.Publish(topicPrefix+user, lwPayload("online", id, serial, ""), 1, true); err != nil {
			return d, err
		}
	}
	return d, nil
}

// setStatus changes the device's status with a unique tag; it returns when
// the action began.
func (d *device) setStatus(status, tag string) (time.Duration, error) {
	at := mono()
	if d.e.sys.lastWill() {
		return at, d.c.Publish(topicPrefix+d.user, lwPayload(status, d.id, d.serial, tag), 1, true)
	}
	return at, d.c.Publish("presence/set", []byte(`{"status":"`+status+`","text":"`+tag+`"}`), 1, false)
}

// disconnect ends the device cleanly: on mosquitto it publishes "offline"
// first, as the classic pattern does.
func (d *device) disconnect() (time.Duration, error) {
	at := mono()
	var err error
	if d.e.sys.lastWill() {
		err = d.c.Publish(topicPrefix+d.user, lwPayload("offline", d.id, d.serial, ""), 1, true)
	}
	if err2 := d.c.Disconnect(); err == nil {
		err = err2
	}
	d.e.tr.down(d.iv, at, cleanWindow)
	return at, err
}

// drop closes the device's socket without DISCONNECT at at.
func (d *device) drop(at time.Duration) {
	d.c.Close()
	d.e.tr.down(d.iv, at, detectWindow(d.ka))
}

// connectMany runs fn(0..n-1) on workers goroutines and returns how many
// failed and the first error.
func connectMany(n, workers int, fn func(i int) error) (int, error) {
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return int(failed.Load()), firstErr
}

// keepAlive pings every device every interval until the returned function
// is called, as devices do at their keep-alive rate.
func (e *runEnv) keepAlive(devs []*device, every time.Duration) func() {
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
				for _, d := range devs {
					if d != nil {
						_ = d.c.Ping()
					}
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(stop); <-done }) }
}

// evaluateObservers fills the run's correctness from the ground truth and
// every observer's timeline up to end.
func (e *runEnv) evaluateObservers(end time.Duration, obs ...*observer) {
	var views []ObserverView
	var msgs int64
	bad := int64(0)
	for _, o := range obs {
		views = append(views, o.view())
		msgs += o.msgs.Load()
		bad += o.bad.Load()
	}
	ev := evaluate(e.tr.intervals(), views, end)
	e.run.Correct = ev.Correctness
	if !e.sys.isPresenced() || e.sys.lastWill() {
		e.run.Correct.BackwardVersion = 0
	}
	if ev.Duplicates > 0 {
		e.run.Extra["duplicate_states"] = float64(ev.Duplicates)
	}
	if ev.NeverShown > 0 {
		e.run.Extra["never_shown"] = float64(ev.NeverShown)
		e.note("%d times an observer was never sent any state of a live user it subscribed to (counted in wrong_offline)", ev.NeverShown)
	}
	if bad > 0 {
		e.note("%d observer payloads did not parse", bad)
	}
	e.run.Metrics.ObserverMsgs = msgs
}

// summarize returns p50, p99 and max of values (nearest rank).
func summarize(values []float64) *result.Summary {
	if len(values) == 0 {
		return nil
	}
	s := append([]float64(nil), values...)
	sort.Float64s(s)
	return &result.Summary{N: len(s), P50: round3(quantile(s, 0.50)), P99: round3(quantile(s, 0.99)), Max: round3(s[len(s)-1])}
}

// quantile of sorted values, nearest rank.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// thin returns at most n values evenly spaced over values, in order.
func thin(values []float64, n int) []float64 {
	if len(values) <= n {
		out := make([]float64, len(values))
		for i, v := range values {
			out[i] = round3(v)
		}
		return out
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = round3(values[i*len(values)/n])
	}
	return out
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
func round1(v float64) float64 { return math.Round(v*10) / 10 }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// summaryLine is the one-line summary of a run.
func summaryLine(r result.Run, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s (%.1fs):", r.System, r.Scenario, took.Seconds())
	if r.Error != "" {
		if isNA(r) {
			b.WriteString(" n/a (" + r.Error + ")")
		} else {
			b.WriteString(" ERROR " + r.Error)
		}
		return b.String()
	}
	m := r.Metrics
	add := func(name string, v float64, unit string) {
		if v != 0 {
			fmt.Fprintf(&b, " %s=%s%s", name, strconv.FormatFloat(v, 'f', -1, 64), unit)
		}
	}
	add("sessions", float64(m.Sessions), "")
	add("rss", m.RSSMiB, "MiB")
	add("rss/session", m.RSSPerSessionKiB, "KiB")
	add("pingreq", m.PingsPerSec, "/s")
	add("cpu/ping", m.CPUPerPingUs, "us")
	add("redis/ping", m.RedisCmdsPerPing, "")
	add("connects", m.ConnectsPerSec, "/s")
	add("connack_p99", m.ConnackP99Ms, "ms")
	add("converge", m.ConvergeMs, "ms")
	if v, ok := r.Extra["reconnect_converge_ms"]; ok {
		add("reconverge", v, "ms")
	}
	add("changes", m.ChangesPerSec, "/s")
	if s := m.Latency; s != nil {
		fmt.Fprintf(&b, " latency_ms(n=%d p50=%g p99=%g max=%g)", s.N, s.P50, s.P99, s.Max)
	}
	if s := m.Detection; s != nil {
		fmt.Fprintf(&b, " detection_s(n=%d p50=%g p99=%g max=%g limit=%g)", s.N, s.P50, s.P99, s.Max, m.DetectionLimitS)
	}
	add("msgs/change", m.MessagesPerChange, "")
	for _, k := range []string{"observer_states_seen", "offline_shown", "msgs_per_watcher", "wrong_final", "broker_cpu_ms",
		"big_snapshot_bytes", "big_first_snapshot_p50_ms", "big_cpu_us_per_change"} {
		if v, ok := r.Extra[k]; ok {
			fmt.Fprintf(&b, " %s=%g", k, v)
		}
	}
	if r.System != result.SystemMochi || classicScenarios[r.Scenario] {
		c := r.Correct
		fmt.Fprintf(&b, " | ghosts=%d wrong_offline=%d stale=%d backward=%d", c.Ghosts, c.WrongOffline, c.StaleOverwrites, c.BackwardVersion)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(&b, " [%d notes]", len(r.Notes))
	}
	return b.String()
}

// machineInfo describes this machine and the programs' versions.
func machineInfo(p paths) result.Machine {
	m := result.Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
						m.MemoryGiB = round1(kb / (1 << 20))
					}
				}
			}
		}
	}
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(out))
	} else if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.Mosquitto = firstLine(p.Mosquitto, "mosquitto version", "-h")
	m.Redis = firstLine(p.Redis, "", "--version")
	return m
}

// firstLine runs path args (ignoring its exit status) and returns the first
// output line containing want.
func firstLine(path, want string, args ...string) string {
	if path == "" {
		return ""
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if len(out) == 0 {
		if errors.Is(err, exec.ErrNotFound) || err != nil {
			return ""
		}
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, want) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// dropWatch follows mochi's $SYS/broker/messages/dropped: messages a
// presenced (mochi) broker dropped because a client's outbound queue was
// full. It is published every second, so the last value may lag.
type dropWatch struct {
	base atomic.Int64 // from earlier incarnations of the broker
	last atomic.Int64
	c    *client
}

func (e *runEnv) watchDrops() {
	if !e.sys.isPresenced() {
		return
	}
	if e.drops == nil {
		e.drops = &dropWatch{}
	} else {
		e.drops.base.Add(e.drops.last.Swap(0))
	}
	w := e.drops
	c, err := connect(e.sys.addr(), connectOpts{ClientID: "bench-sys", Keepalive: 60, OnPublish: func(_ string, p []byte, _ time.Duration) {
		if v, err := strconv.ParseInt(string(p), 10, 64); err == nil {
			w.last.Store(v)
		}
	}}, 10*time.Second)
	if err != nil {
		return
	}
	e.track(c)
	go keepAlive(c, 20*time.Second)
	_ = c.Subscribe(10*time.Second, "$SYS/broker/messages/dropped")
}

func (e *runEnv) dropped() int64 {
	if e.drops == nil {
		return 0
	}
	return e.drops.base.Load() + e.drops.last.Load()
}

// tempDirs are the runs' temp dirs, removed when the bench is interrupted.
var tempDirs = &dirSet{m: make(map[string]bool)}

type dirSet struct {
	mu sync.Mutex
	m  map[string]bool
}

func (d *dirSet) add(dir string) {
	d.mu.Lock()
	d.m[dir] = true
	d.mu.Unlock()
}

// remove deletes dir.
func (d *dirSet) remove(dir string) {
	d.mu.Lock()
	delete(d.m, dir)
	d.mu.Unlock()
	_ = os.RemoveAll(dir)
}

func (d *dirSet) removeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for dir := range d.m {
		_ = os.RemoveAll(dir)
	}
}
