package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presenced/presenced/bench/result"
)

// scenarioCeiling searches for the highest rate of presence changes a
// system sustains (make bench-ceiling; not in the standard set).
const scenarioCeiling = "ceiling"

// ceilingConfig sizes the ceiling search.
type ceilingConfig struct {
	Start    float64       // first rate offered, changes/s
	Max      float64       // no rate above it is offered
	Step     time.Duration // how long each rate is offered
	P99      time.Duration // the propagation p99 a sustained rate keeps within
	Bisect   int           // bisection steps after the doubling
	Budget   time.Duration // no new step starts after this much of the search
	Converge time.Duration // how long a step waits for every observer to show the truth
	// Tap: filters a second subscriber (user TapUser) subscribes to, whose
	// messages are counted: what another output (the lifecycle topics)
	// sends at each rate. Empty: no tap.
	Tap     string
	TapUser string
	// Common: after every round, each system whose search did not sustain
	// the round's common rate (the lowest ceiling of the round) offers it
	// once more on a fresh broker, so that CPU per change is compared at
	// one rate every system sustained (--ceiling-common).
	Common bool
	// Fixed: offer Start only (one step, tried twice at most): the step at
	// the common rate.
	Fixed bool
}

func ceilingDefaults(c *config) {
	c.Ceiling = ceilingConfig{Start: 2000, Max: 64000, Step: 3 * time.Second, P99: 50 * time.Millisecond,
		Bisect: 2, Budget: 60 * time.Second, Converge: 20 * time.Second, Common: true}
}

func ceilingFlags(fs *flag.FlagSet, c *config) {
	fs.Float64Var(&c.Ceiling.Start, "ceiling-start", c.Ceiling.Start, "ceiling: first rate of presence changes offered, per second; doubled while sustained")
	fs.Float64Var(&c.Ceiling.Max, "ceiling-max", c.Ceiling.Max, "ceiling: highest rate offered, per second")
	fs.DurationVar(&c.Ceiling.Step, "ceiling-step", c.Ceiling.Step, "ceiling: how long each rate is offered")
	fs.DurationVar(&c.Ceiling.P99, "ceiling-p99", c.Ceiling.P99, "ceiling: a rate is sustained when propagation p99 stays within this and the rate is achieved")
	fs.IntVar(&c.Ceiling.Bisect, "ceiling-bisect", c.Ceiling.Bisect, "ceiling: bisection steps between the last sustained rate and the first that was not")
	fs.DurationVar(&c.Ceiling.Budget, "ceiling-budget", c.Ceiling.Budget, "ceiling: no new step starts after this much of one system's search")
	fs.StringVar(&c.Ceiling.Tap, "ceiling-tap", "", "ceiling: comma-separated topic filters a second subscriber counts the messages of (e.g. the lifecycle outputs' topics); empty: none")
	fs.StringVar(&c.Ceiling.TapUser, "ceiling-tap-user", "", "ceiling: the user name the tap connects with (a service account)")
	fs.BoolVar(&c.Ceiling.Common, "ceiling-common", c.Ceiling.Common, "ceiling: after each round, a system that did not sustain the round's lowest ceiling offers that rate once more on a fresh broker, so that CPU per change is compared at one rate every system sustained")
	fs.DurationVar(&c.Ceiling.Converge, "ceiling-converge", c.Ceiling.Converge, "ceiling: after a step's load stops, how long to wait for the observer to show every user's truth")
}

func (c ceilingConfig) validate() error {
	if c.Start <= 0 || c.Max < c.Start {
		return errors.New("--ceiling-start must be positive and at most --ceiling-max")
	}
	if c.Step < 500*time.Millisecond || c.P99 <= 0 || c.Bisect < 0 || c.Budget <= 0 || c.Converge <= 0 {
		return errors.New("--ceiling-step must be at least 500ms; --ceiling-p99, --ceiling-budget and --ceiling-converge positive; --ceiling-bisect not negative")
	}
	return nil
}

// ceilingExtraTime is how much longer than --run-timeout a ceiling run may
// take: the budget, plus the last step and its convergence.
func ceilingExtraTime(cfg config, scenario string) time.Duration {
	if scenario != scenarioCeiling {
		return 0
	}
	return cfg.Ceiling.Budget + 2*(cfg.Ceiling.Step+2*cfg.Ceiling.Converge)
}

// ceilingSearch is what the ceiling search carries from step to step.
type ceilingSearch struct {
	e         *runEnv
	obs       *observer
	t0        time.Duration // the search's start
	good, bad float64       // the highest rate sustained, the lowest not
	goodPoint *result.Point
	goodLat   *result.Summary
	step      int          // steps offered
	retried   int          // steps tried once more
	tap       *tap         // nil: no tap
	ticks0    machineTicks // the machine's at the search's start
}

// ceiling: the churn mix (connect, status with a unique tag, clean
// disconnect) offered at a rate doubled from --ceiling-start while it is
// sustained (propagation p99 within --ceiling-p99 and at least 95 % of the
// rate achieved), then bisected between the last rate sustained and the
// first that was not (a step that fails is tried once more: the machine
// is shared). Each step has users of its own; in its last cycle
// each user stays connected with a final status, so the truth at the end is
// known: every user online with its final tag. After the load stops, the
// step waits until the observer shows that for every user (convergence),
// then disconnects them all and waits until it shows every one offline.
// Users still shown wrongly at either deadline are counted: overload may
// cost latency, never the truth once the load stops.
func (e *runEnv) ceiling() error {
	cfg := e.cfg.Ceiling
	r := e.run
	r.Params["start_per_s"] = cfg.Start
	r.Params["max_per_s"] = cfg.Max
	r.Params["step_s"] = cfg.Step.Seconds()
	r.Params["p99_bound_ms"] = ms(cfg.P99)
	r.Params["bisect"] = cfg.Bisect
	r.Params["observers"] = 1
	e.patternParam()
	obs, err := e.newObserver("obs-ceiling", topicPrefix+"+", observerBuf)
	if err != nil {
		return err
	}
	c := &ceilingSearch{e: e, obs: obs, t0: mono()}
	c.ticks0, _ = readMachineTicks()
	if cfg.Tap != "" {
		tap, err := e.newTap(cfg.Tap, cfg.TapUser)
		if err != nil {
			return err
		}
		defer tap.c.Close()
		c.tap = tap
		r.Params["tap"] = cfg.Tap
	}
	if err := runPhases(c.double, c.bisect); err != nil {
		return err
	}
	c.report()
	return nil
}

// inBudget tells whether a new step may start.
func (c *ceilingSearch) inBudget() bool {
	return mono()-c.t0 < c.e.cfg.Ceiling.Budget && !c.e.cancelled()
}

// try offers rate for one step (a step that fails is tried once more, and
// the better of the two counts), adds its point to the curve, and tells
// whether the rate was sustained.
func (c *ceilingSearch) try(rate float64) (bool, error) {
	e, r := c.e, c.e.run
	c.step++
	p, lat, err := e.ceilingStep(c.obs, c.tap, c.step, rate)
	if err != nil {
		return false, err
	}
	if !p.Sustained && p.Wrong == 0 && c.inBudget() {
		// The machine is shared: a step that fails is tried once
		// more, and the better of the two counts.
		c.step++
		c.retried++
		q, qlat, err := e.ceilingStep(c.obs, c.tap, c.step, rate)
		if err != nil {
			return false, err
		}
		if q.Wrong > 0 || q.Sustained || (!p.Sustained && q.P99Ms < p.P99Ms) {
			p, lat = q, qlat
		}
	}
	r.Curve = append(r.Curve, p)
	logf(e.cfg, "  ceiling %s: offered %.0f/s achieved %.0f/s p50 %.1f ms p99 %.1f ms converge %.0f ms wrong %d cpu %.1f µs/change load %.1f µs/change (%.0f %% of the machine, busy %.0f %%, stolen %.0f %%) tap %.0f/s (%.2f/change)%s",
		e.sys.name, p.OfferedPerSec, p.AchievedPerSec, p.P50Ms, p.P99Ms, p.ConvergeMs, p.Wrong, p.CPUUsPerChange, p.LoadCPUUs, 100*p.LoadShare, 100*p.MachineBusy, 100*p.MachineStolen,
		p.TapPerSec, p.TapPerChange, map[bool]string{true: " (sustained)", false: ""}[p.Sustained])
	if p.Sustained && rate > c.good {
		c.good, c.goodPoint, c.goodLat = rate, &r.Curve[len(r.Curve)-1], lat
	}
	return p.Sustained, nil
}

// double doubles the rate from --ceiling-start while it is sustained, up to
// --ceiling-max (halving while even the start is not sustained).
func (c *ceilingSearch) double() error {
	cfg := c.e.cfg.Ceiling
	for rate := cfg.Start; c.inBudget(); {
		ok, err := c.try(rate)
		if err != nil {
			return err
		}
		if !ok {
			c.bad = rate
			if c.good == 0 && rate/2 >= 250 && !cfg.Fixed {
				rate /= 2
				continue
			}
			break
		}
		if cfg.Fixed || rate >= cfg.Max || (c.bad > 0 && rate*2 >= c.bad) {
			break
		}
		rate = math.Min(rate*2, cfg.Max)
	}
	return nil
}

// bisect bisects, --ceiling-bisect times, between the highest rate
// sustained and the lowest not, in steps of 250/s.
func (c *ceilingSearch) bisect() error {
	for i := 0; i < c.e.cfg.Ceiling.Bisect && c.good > 0 && c.bad > c.good && c.inBudget(); i++ {
		mid := math.Round((c.good+c.bad)/2/250) * 250
		if mid <= c.good || mid >= c.bad {
			break
		}
		ok, err := c.try(mid)
		if err != nil {
			return err
		}
		if !ok {
			c.bad = mid
		}
	}
	return nil
}

// report records the ceiling (the rate achieved at the highest rate
// sustained, with its latency and CPU), the slowest convergence beyond it
// and the users shown wrongly after converging.
func (c *ceilingSearch) report() {
	e, r, cfg := c.e, c.e.run, c.e.cfg.Ceiling
	var worst float64
	wrong := 0
	for _, p := range r.Curve {
		wrong += p.Wrong
		if p.OfferedPerSec > c.good {
			worst = math.Max(worst, p.ConvergeMs)
		}
	}
	r.Metrics.ChangesPerSec = c.good
	if t1, err := readMachineTicks(); err == nil && c.ticks0.total > 0 {
		// The whole search's: a round's ratio with what the hypervisor
		// took from each system's search beside it (report_ceiling.go).
		r.Extra["machine_stolen"] = c.ticks0.stolenShare(t1)
	}
	if c.goodPoint != nil {
		r.Metrics.ChangesPerSec = c.goodPoint.AchievedPerSec
		r.Metrics.Latency = c.goodLat
		r.Extra["ceiling_offered_per_s"] = c.good
		r.Extra["cpu_us_per_change_at_ceiling"] = c.goodPoint.CPUUsPerChange
		r.Extra["load_cpu_us_per_change_at_ceiling"] = c.goodPoint.LoadCPUUs
		r.Extra["load_share_at_ceiling"] = c.goodPoint.LoadShare
		r.Extra["machine_busy_at_ceiling"] = c.goodPoint.MachineBusy
		r.Extra["machine_stolen_at_ceiling"] = c.goodPoint.MachineStolen
		if c.goodPoint.RedisCPUUs > 0 {
			r.Extra["redis_cpu_us_per_change_at_ceiling"] = c.goodPoint.RedisCPUUs
		}
		if c.tap != nil {
			r.Extra["tap_per_s_at_ceiling"] = c.goodPoint.TapPerSec
			r.Extra["tap_per_change_at_ceiling"] = c.goodPoint.TapPerChange
		}
	} else {
		e.note("no rate offered was sustained (p99 within %v and the rate achieved)", cfg.P99)
	}
	r.Metrics.ConvergeMs = worst // the slowest convergence beyond the ceiling
	r.Extra["max_converge_ms_beyond_ceiling"] = worst
	r.Extra["wrong_after_converge"] = float64(wrong)
	r.Extra["steps"] = float64(len(r.Curve))
	r.Extra["steps_retried"] = float64(c.retried)
	r.Metrics.ObserverMsgs = c.obs.msgs.Load()
	if wrong > 0 {
		e.note("%d users were still shown wrongly once the load had stopped and the observer had %v to converge", wrong, cfg.Converge)
	}
}

// ceilingWant is what a user's truth is at the end of a step.
type ceilingWant struct {
	online bool
	tag    string // "": any text
}

// ceilingStepRun is one step of the ceiling search: its users and what
// they did.
type ceilingStepRun struct {
	e           *runEnv
	obs         *observer
	step        int
	rate        float64
	users       int
	period, gap time.Duration // a user's cycle, and the time between its changes
	names       []string
	acts        [][]action
	want        []ceilingWant // per user: the truth at the end
	devs        []*device     // per user: the device left connected in its last cycle
	start, end  time.Duration // the load's
}

// ceilingStep offers rate for the step duration with users of its own, and
// measures the point: achieved rate, latency, convergence and CPU.
func (e *runEnv) ceilingStep(obs *observer, tp *tap, step int, rate float64) (result.Point, *result.Summary, error) {
	cfg := e.cfg.Ceiling
	p := result.Point{OfferedPerSec: rate}
	// Each user cycles every 150 ms (as churn at 10,000/s), and at least
	// every step/4 at low rates, so that every user makes a few cycles.
	users := max(1, min(int(rate*0.05), int(rate*cfg.Step.Seconds()/12)))
	period := time.Duration(float64(users*3) / rate * float64(time.Second))
	s := &ceilingStepRun{e: e, obs: obs, step: step, rate: rate, users: users, period: period, gap: period / 3,
		names: make([]string, users), acts: make([][]action, users), want: make([]ceilingWant, users), devs: make([]*device, users)}
	cpu0, _ := e.sys.cpu()
	rcpu0 := e.redisCPU()
	lcpu0, _ := procCPU(os.Getpid())
	m0, _ := readMachineTicks()
	tap0, t0 := tp.count(), mono()
	stopped := s.load()
	n, err := s.achieved(&p)
	if err != nil {
		return p, nil, err
	}
	s.converge(&p, stopped)
	cpu1, _ := e.sys.cpu()
	rcpu1 := e.redisCPU()
	lcpu1, _ := procCPU(os.Getpid())
	m1, _ := readMachineTicks()
	if wall := mono() - t0; wall > 0 {
		p.LoadShare = round3(float64(lcpu1-lcpu0) / float64(wall) / float64(runtime.NumCPU()))
	}
	if m1.total > m0.total {
		p.MachineBusy = round3(float64(m1.busy-m0.busy) / float64(m1.total-m0.total))
	}
	p.MachineStolen = m0.stolenShare(m1)
	p.CPUUsPerChange = round3(float64((cpu1 - cpu0).Microseconds()) / float64(n))
	if rcpu0 >= 0 && rcpu1 >= 0 {
		p.RedisCPUUs = round3(float64((rcpu1 - rcpu0).Microseconds()) / float64(n))
	}
	p.LoadCPUUs = round3(float64((lcpu1 - lcpu0).Microseconds()) / float64(n))
	if tp != nil {
		got := tp.count() - tap0
		p.TapPerSec = round3(float64(got) / (mono() - t0).Seconds())
		p.TapPerChange = round3(float64(got) / float64(n))
	}
	sum := s.latency(&p)
	s.leave(&p)
	return p, sum, nil
}

// load has every user of the step cycle, spread evenly over the period,
// until the step duration is over; in its last cycle a user stays
// connected. It returns when the load stopped.
func (s *ceilingStepRun) load() time.Duration {
	e := s.e
	s.start = mono() + 100*time.Millisecond
	s.end = s.start + e.cfg.Ceiling.Step
	var failed atomic.Int64
	var wg sync.WaitGroup
	for i := range s.users {
		s.names[i] = "k" + strconv.Itoa(s.step) + "-" + strconv.Itoa(i)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s.cycle(i, &failed)
		}(i)
	}
	wg.Wait()
	stopped := mono()
	if f := failed.Load(); f > 0 {
		e.note("step %d (%.0f/s): %d connects failed", s.step, s.rate, f)
	}
	return stopped
}

// cycle is user i's cycles: connect, a status with a unique tag, a clean
// disconnect, keeping its truth up to date; a failed connect is counted in
// failed and skips its cycle.
func (s *ceilingStepRun) cycle(i int, failed *atomic.Int64) {
	e := s.e
	user := s.names[i]
	id := user + "-d"
	for t0 := s.start + time.Duration(i)*s.period/time.Duration(s.users); t0 < s.end && !e.cancelled(); t0 += s.period {
		last := t0+s.period >= s.end
		e.sleepUntil(t0)
		d, err := e.connectDevice(user, id, 60, 10*time.Second)
		if err != nil {
			failed.Add(1)
			s.want[i] = ceilingWant{}
			continue
		}
		s.acts[i] = append(s.acts[i], action{kind: 'c', at: d.c.ConnectAt, id: id, serial: d.serial})
		s.want[i] = ceilingWant{online: true}
		e.sleepUntil(t0 + s.gap)
		tag := nextTag()
		if at, err := d.setStatus("away", tag); err == nil {
			s.acts[i] = append(s.acts[i], action{kind: 's', at: at, tag: tag, id: id, serial: d.serial})
			s.want[i].tag = tag
		}
		if last {
			s.devs[i] = d
			break
		}
		e.sleepUntil(t0 + 2*s.gap)
		if at, err := d.disconnect(); err == nil {
			s.acts[i] = append(s.acts[i], action{kind: 'd', at: at, id: id, serial: d.serial})
			s.want[i] = ceilingWant{}
		}
	}
}

// achieved counts the changes made and sets the rate achieved once every
// user was cycling; it returns the count.
func (s *ceilingStepRun) achieved(p *result.Point) (int, error) {
	n, inWindow := 0, 0
	from := s.start + s.period // every user cycling
	for _, l := range s.acts {
		for _, a := range l {
			n++
			if a.at >= from && a.at < s.end {
				inWindow++
			}
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("step %d: no presence change made", s.step)
	}
	if s.end-from > 0 {
		p.AchievedPerSec = round1(float64(inWindow) / (s.end - from).Seconds())
	}
	return n, nil
}

// truth tells whether ob shows user u's truth at the end of the step.
func (s *ceilingStepRun) truth(u string, ob Obs) bool {
	i, _ := strconv.Atoi(u[len("k"+strconv.Itoa(s.step)+"-"):])
	w := s.want[i]
	return ob.Online == w.online && (w.tag == "" || ob.Text == w.tag)
}

// converge waits (up to --ceiling-converge) until the observer shows every
// user's truth, and sets the time from when the load stopped, and the
// users still shown wrongly.
func (s *ceilingStepRun) converge(p *result.Point, stopped time.Duration) {
	e, cfg := s.e, s.e.cfg.Ceiling
	converged := e.waitUntil(stopped+cfg.Converge, func() bool { return s.obs.count(s.names, s.truth) == s.users })
	p.ConvergeMs = round1(ms(mono() - stopped))
	if !converged {
		p.Wrong = s.users - s.obs.count(s.names, s.truth)
		e.note("step %d (%.0f/s): %d users not shown their final state %v after the load stopped", s.step, s.rate, p.Wrong, cfg.Converge)
	}
}

// latency sets the p50 and p99 of every change the observer was shown
// (presenced coalesces changes of a backlog: those are not shown, and not
// counted), and whether the step was sustained; it returns their summary.
func (s *ceilingStepRun) latency(p *result.Point) *result.Summary {
	tl := s.obs.timeline()
	var lat []float64
	for i, u := range s.names {
		l, _ := s.e.latencies(s.acts[i], s.obs.shownFor(tl[u]))
		lat = append(lat, l...)
	}
	sum := summarize(lat)
	if sum != nil {
		p.P50Ms, p.P99Ms = sum.P50, sum.P99
	}
	p.Sustained = sum != nil && p.P99Ms <= ms(s.e.cfg.Ceiling.P99) && p.AchievedPerSec >= 0.95*s.rate && p.Wrong == 0
	return sum
}

// leave has every user leave, and waits until the observer shows each
// offline; those it does not show offline are wrong, and the step not
// sustained.
func (s *ceilingStepRun) leave(p *result.Point) {
	e, cfg := s.e, s.e.cfg.Ceiling
	left := mono()
	for _, d := range s.devs {
		if d != nil {
			_, _ = d.disconnect()
		}
	}
	if !e.waitUntil(left+cfg.Converge, func() bool { return s.obs.count(s.names, offline) == s.users }) {
		off := s.users - s.obs.count(s.names, offline)
		p.Wrong += off
		p.Sustained = false
		e.note("step %d (%.0f/s): %d users not shown offline %v after they left", s.step, s.rate, off, cfg.Converge)
	}
}

// redisCPU is the CPU time of presenced-redis's redis-server; -1 without one.
func (e *runEnv) redisCPU() time.Duration {
	if e.sys.redis == nil || e.sys.redis.cmd == nil || e.sys.redis.cmd.Process == nil {
		return -1
	}
	d, err := procCPU(e.sys.redis.cmd.Process.Pid)
	if err != nil {
		return -1
	}
	return d
}

// machineTicks are the machine's CPU clock ticks from /proc/stat: busy
// (everything but idle and iowait) and total as parseMachineCPU counts
// them, and stolen, the time the
// hypervisor ran something else while this machine's CPUs had work
// (part of busy).
type machineTicks struct{ busy, stolen, total int64 }

// stolenShare is the share of the machine's time between t and u the
// hypervisor took (0–1); 0 when no time passed.
func (t machineTicks) stolenShare(u machineTicks) float64 {
	if u.total <= t.total {
		return 0
	}
	return round3(float64(u.stolen-t.stolen) / float64(u.total-t.total))
}

// readMachineTicks reads the machine's ticks from /proc/stat's first line.
func readMachineTicks() (machineTicks, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTicks{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseMachineTicks(line)
}

// parseMachineTicks reads /proc/stat's first line: parseMachineCPU's busy
// and total, and steal (the 8th figure; 0 on a kernel too old to give it).
func parseMachineTicks(line string) (machineTicks, error) {
	busy, total, err := parseMachineCPU(line)
	if err != nil {
		return machineTicks{}, err
	}
	t := machineTicks{busy: busy, total: total}
	if f := strings.Fields(line); len(f) > 8 {
		if t.stolen, err = strconv.ParseInt(f[8], 10, 64); err != nil {
			return machineTicks{}, fmt.Errorf("/proc/stat: %q", line)
		}
	}
	return t, nil
}

// parseMachineCPU reads /proc/stat's "cpu  user nice system idle iowait
// irq softirq steal …" line.
func parseMachineCPU(line string) (busy, total int64, err error) {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: %q", line)
	}
	// guest and guest_nice (fields 9 and 10) are already in user and nice.
	for i, v := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %q", line)
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, nil
}

// ceilingCompared are the systems the ceiling puts side by side.
var ceilingCompared = map[string]bool{result.SystemMemory: true, result.SystemRedis: true, result.SystemMochi: true, result.SystemMosquitto: true}

// ceilingCommonSteps gives the ceiling runs of a round one rate every
// system sustained: the lowest ceiling of the round (each system sustained
// its own). A system whose search did not offer it, or did not sustain it
// there, offers it once more on a fresh broker (a step tried twice at
// most); the point joins its curve marked common. A system with no
// ceiling is left out.
func ceilingCommonSteps(cfg config, runs []result.Run, fdLimit uint64) {
	var idx []int
	rate := 0.0
	for i, r := range runs {
		c := r.Extra["ceiling_offered_per_s"]
		if r.Scenario != scenarioCeiling || r.Error != "" || !ceilingCompared[r.System] || c <= 0 {
			continue
		}
		idx = append(idx, i)
		if rate == 0 || c < rate {
			rate = c
		}
	}
	if len(idx) < 2 {
		return
	}
	for _, i := range idx {
		r := &runs[i]
		if sustainedAt(r.Curve, rate) {
			continue
		}
		c := cfg
		c.Ceiling.Start, c.Ceiling.Max, c.Ceiling.Bisect, c.Ceiling.Fixed = rate, rate, 0, true
		logf(cfg, "  ceiling %s: the round's common rate, %.0f/s, on a fresh broker ...", r.System, rate)
		x := runOne(c, r.System, scenarioCeiling, fdLimit)
		if r.Extra == nil {
			r.Extra = map[string]float64{}
		}
		r.Extra["common_rate_per_s"] = rate
		for _, n := range x.Notes {
			r.Notes = append(r.Notes, fmt.Sprintf("the step at the common rate %.0f/s: %s", rate, n))
		}
		if x.Error != "" || len(x.Curve) == 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("the step at the common rate %.0f/s failed: %s", rate, x.Error))
			continue
		}
		for _, p := range x.Curve {
			p.Common = true
			r.Curve = append(r.Curve, p)
		}
	}
}

// sustainedAt tells whether curve has a sustained point at rate.
func sustainedAt(curve []result.Point, rate float64) bool {
	for _, p := range curve {
		if p.Sustained && p.OfferedPerSec == rate {
			return true
		}
	}
	return false
}
