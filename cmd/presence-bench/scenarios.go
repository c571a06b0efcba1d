package main

import (
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presenced/presenced/bench/result"
)

const (
	pingWarmUp     = time.Second
	connectTimeout = 30 * time.Second
	observerBuf    = 64 << 10
)

func online(_ string, ob Obs) bool  { return ob.Online }
func offline(_ string, ob Obs) bool { return !ob.Online }

// loadDevices connects n devices user<prefix><i> / client id
// <prefix><i>-d and returns them (nil where a connect failed).
func (e *runEnv) loadDevices(prefix string, n, keepalive int) ([]*device, []string, int, error) {
	devs := make([]*device, n)
	users := make([]string, n)
	for i := range users {
		users[i] = prefix + strconv.Itoa(i)
	}
	failed, err := connectMany(n, e.cfg.ConnectWorkers, func(i int) error {
		d, err := e.connectDevice(users[i], users[i]+"-d", keepalive, connectTimeout)
		if err != nil {
			return err
		}
		devs[i] = d
		return nil
	})
	if failed > 0 {
		e.note("%d of %d devices failed to connect: %v", failed, n, err)
	}
	if failed == n {
		return nil, nil, 0, fmt.Errorf("no device connected: %w", err)
	}
	return devs, users, n - failed, nil
}

// usersOf lists the users of the devices that connected.
func usersOf(devs []*device) []string {
	var us []string
	for _, d := range devs {
		if d != nil {
			us = append(us, d.user)
		}
	}
	return us
}

// steady: N idle devices; memory per session; PINGREQ throughput and CPU
// per PINGREQ; on presenced-redis, Redis commands per PINGREQ.
func (e *runEnv) steady() error {
	cfg := e.cfg.Steady
	n := cfg.Devices
	if e.sys.name == result.SystemRedis {
		n = cfg.RedisDevices
	}
	n = e.capDevices(n, 2, "steady devices")
	r := e.run
	r.Params["devices"] = n
	r.Params["keepalive_s"] = cfg.Keepalive
	r.Params["ping_devices"] = min(cfg.PingDevices, n)
	r.Params["ping_window_s"] = cfg.PingWindow.Seconds()

	time.Sleep(300 * time.Millisecond)
	rss0, err := e.sys.rssKiB()
	if err != nil {
		return err
	}
	var obs *observer
	if e.sys.hasPresence() {
		if obs, err = e.newObserver("obs-steady", topicPrefix+"+", observerBuf); err != nil {
			return err
		}
		r.Params["observers"] = 1
	}
	t0 := mono()
	devs, _, ok, err := e.loadDevices("s", n, cfg.Keepalive)
	if err != nil {
		return err
	}
	loaded := mono() - t0
	r.Extra["connect_s"] = round3(loaded.Seconds())
	users := usersOf(devs)
	if obs != nil {
		if n, done := e.waitProgress(mono()+30*time.Second, 5*time.Second, ok, func() int { return obs.count(users, online) }); !done {
			r.Extra["not_converged"] = float64(ok - n)
			e.note("the observer never showed all devices online: %d of %d after the count stopped growing (observer: %s)", n, ok, obs.state())
		} else {
			r.Extra["all_online_s"] = round3((mono() - t0).Seconds())
		}
	}
	time.Sleep(cfg.Settle)
	rss1, err := e.sys.rssKiB()
	if err != nil {
		return err
	}
	r.Metrics.Sessions = ok
	r.Metrics.RSSMiB = round1(float64(rss1) / 1024)
	r.Metrics.RSSPerSessionKiB = round3(float64(rss1-rss0) / float64(ok))
	r.Extra["rss_empty_mib"] = round1(float64(rss0) / 1024)

	// PINGREQ throughput: ping–pong loops on a subset of the devices.
	var pingers []*device
	for _, d := range devs {
		if d != nil && len(pingers) < cfg.PingDevices {
			pingers = append(pingers, d)
		}
	}
	// The loops run for a warm-up second before the measured window.
	var count atomic.Int64
	warm := mono() + pingWarmUp
	loop := &pingLoop{from: warm, until: warm + cfg.PingWindow, count: &count}
	for _, d := range pingers {
		if err := d.c.StartPingLoop(loop); err != nil {
			return fmt.Errorf("ping: %w", err)
		}
	}
	e.sleepUntil(loop.from)
	cpu0, err := e.sys.cpu()
	if err != nil {
		return err
	}
	start := mono()
	e.sleepUntil(loop.until)
	cpu1, err := e.sys.cpu()
	if err != nil {
		return err
	}
	window := mono() - start
	pings := count.Load()
	if pings == 0 {
		return fmt.Errorf("no PINGRESP in %v", cfg.PingWindow)
	}
	r.Metrics.PingsPerSec = round1(float64(pings) / window.Seconds())
	r.Metrics.CPUPerPingUs = round3(float64(cpu1-cpu0) / float64(time.Microsecond) / float64(pings))
	r.Extra["pings"] = float64(pings)
	time.Sleep(200 * time.Millisecond) // the loops stop at their next PINGRESP

	if e.sys.name == result.SystemRedis {
		if err := e.redisPerPing(devs, cfg.Keepalive, cfg.RedisWindow); err != nil {
			return err
		}
	}
	if obs != nil {
		e.evaluateObservers(mono(), obs)
	}
	return nil
}

// redisPerPing counts Redis commands over a window in which every device
// pings at its keep-alive rate (each at a random phase).
func (e *runEnv) redisPerPing(devs []*device, keepalive int, window time.Duration) error {
	type ping struct {
		at time.Duration
		d  *device
	}
	rng := rand.New(rand.NewSource(1))
	ka := time.Duration(keepalive) * time.Second
	var plan []ping
	for _, d := range devs {
		if d == nil {
			continue
		}
		if at := time.Duration(rng.Int63n(int64(ka))); at < window {
			plan = append(plan, ping{at, d})
		}
	}
	sort.Slice(plan, func(i, j int) bool { return plan[i].at < plan[j].at })
	c0, err := e.sys.redis.commands()
	if err != nil {
		return fmt.Errorf("redis INFO: %w", err)
	}
	start := mono()
	sent := 0
	for _, p := range plan {
		e.sleepUntil(start + p.at)
		if p.d.c.Ping() == nil {
			sent++
		}
	}
	e.sleepUntil(start + window)
	c1, err := e.sys.redis.commands()
	if err != nil {
		return fmt.Errorf("redis INFO: %w", err)
	}
	cmds := c1 - c0 - 1 // minus the first INFO itself
	r := e.run
	r.Params["redis_window_s"] = window.Seconds()
	r.Extra["redis_window_pings"] = float64(sent)
	r.Extra["redis_window_cmds"] = float64(cmds)
	if sent > 0 {
		r.Metrics.RedisCmdsPerPing = round3(float64(cmds) / float64(sent))
		if r.Metrics.RedisCmdsPerPing == 0 {
			r.Metrics.RedisCmdsPerPing = float64(cmds) / float64(sent)
		}
	}
	e.note("Redis commands per PINGREQ: %d commands over %v while %d devices pinged at the keep-alive-%d s rate (%d PINGREQs); the hourly bulk renewal is not in the window", cmds, window, len(devs), keepalive, sent)
	return nil
}

// action is one thing a device did, for latency matching.
type action struct {
	kind   byte // 'c' connect, 's' status, 'd' disconnect
	at     time.Duration
	tag    string
	id     string
	serial uint64
}

// matches tells whether ob reflects a.
func (e *runEnv) matches(a action, ob Obs) bool {
	gen := func() bool {
		if !e.sys.lastWill() {
			return true
		}
		for _, g := range ob.Gens {
			if g.ID == a.id && g.Gen == a.serial {
				return true
			}
		}
		return false
	}
	switch a.kind {
	case 'c':
		return ob.Online && gen()
	case 's':
		return ob.Text == a.tag
	default:
		return !ob.Online && gen()
	}
}

// latencies matches a user's actions, in order, to the first later state
// that reflects each (a state may reflect several: presenced coalesces).
func (e *runEnv) latencies(acts []action, obs []Obs) (lat []float64, missed int) {
	j := 0
	for _, a := range acts {
		found := false
		for k := j; k < len(obs); k++ {
			if obs[k].At >= a.at && e.matches(a, obs[k]) {
				lat = append(lat, ms(obs[k].At-a.at))
				j = k
				found = true
				break
			}
		}
		if !found {
			missed++
		}
	}
	return lat, missed
}

// churnConverge bounds the wait, after a churn run, for a backlog to drain.
const churnConverge = 30 * time.Second

// churnRun is what one run of the churn scenario carries from phase to
// phase.
type churnRun struct {
	e            *runEnv
	users        int
	period, step time.Duration // a user's cycle, and the time between its changes
	obs          *observer
	names        []string
	acts         [][]action // per user
	cpu0         cpuSplit
	start        time.Duration // the first cycle's
	n            int           // changes made
	first, last  time.Duration // the first and the last change
	tl           Timeline      // the observer's, once the backlog has drained
}

// churn: users cycle connect → status with a unique tag → clean disconnect
// at a fixed total rate of presence changes.
func (e *runEnv) churn() error {
	s := &churnRun{e: e}
	if err := s.setup(); err != nil {
		return err
	}
	s.cycleAll()
	if err := s.count(); err != nil {
		return err
	}
	end := s.drain()
	s.report(end)
	return nil
}

// setup records the parameters and connects the observer.
func (s *churnRun) setup() error {
	e, r, cfg := s.e, s.e.run, s.e.cfg.Churn
	s.users = cfg.Users
	s.period = time.Duration(float64(s.users*3) / cfg.Rate * float64(time.Second))
	s.step = s.period / 3
	r.Params["users"] = s.users
	r.Params["rate_per_s"] = cfg.Rate
	r.Params["duration_s"] = cfg.Duration.Seconds()
	r.Params["cycle_s"] = s.period.Seconds()
	r.Params["observers"] = 1
	e.patternParam()
	var err error
	s.obs, err = e.newObserver("obs-churn", topicPrefix+"+", observerBuf)
	return err
}

// cycleAll reads the broker's CPU time, then has every user cycle, their
// cycles spread evenly over the period, until the duration is over.
func (s *churnRun) cycleAll() {
	e := s.e
	s.acts = make([][]action, s.users)
	s.names = make([]string, s.users)
	s.cpu0, _ = e.sys.cpuSplit()
	var failed atomic.Int64
	var firstErr atomic.Value
	s.start = mono() + 100*time.Millisecond
	var wg sync.WaitGroup
	for i := range s.users {
		s.names[i] = "c" + strconv.Itoa(i)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s.cycle(i, &failed, &firstErr)
		}(i)
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		e.note("%d connects failed: %v", f, firstErr.Load())
	}
}

// cycle is user i's cycles: connect, a status with a unique tag a step
// later, a clean disconnect a step after that, once per period; a failed
// connect is counted in failed (the first error in firstErr) and skips its
// cycle.
func (s *churnRun) cycle(i int, failed *atomic.Int64, firstErr *atomic.Value) {
	e, cfg := s.e, s.e.cfg.Churn
	user := s.names[i]
	id := user + "-d"
	for t0 := s.start + time.Duration(i)*s.period/time.Duration(s.users); t0 < s.start+cfg.Duration; t0 += s.period {
		e.sleepUntil(t0)
		d, err := e.connectDevice(user, id, cfg.Keepalive, 10*time.Second)
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
			continue
		}
		s.acts[i] = append(s.acts[i], action{kind: 'c', at: d.c.ConnectAt, id: id, serial: d.serial})
		e.sleepUntil(t0 + s.step)
		tag := nextTag()
		at, err := d.setStatus("away", tag)
		if err == nil {
			s.acts[i] = append(s.acts[i], action{kind: 's', at: at, tag: tag, id: id, serial: d.serial})
		}
		e.sleepUntil(t0 + 2*s.step)
		at, err = d.disconnect()
		if err == nil {
			s.acts[i] = append(s.acts[i], action{kind: 'd', at: at, id: id, serial: d.serial})
		}
	}
}

// count counts the changes made and finds the first and the last.
func (s *churnRun) count() error {
	s.first, s.last = -1, 0
	for _, l := range s.acts {
		for _, a := range l {
			s.n++
			if s.first < 0 || a.at < s.first {
				s.first = a.at
			}
			s.last = max(s.last, a.at)
		}
	}
	if s.n == 0 {
		return fmt.Errorf("no presence change made")
	}
	return nil
}

// drain waits until the observer shows every user offline and returns
// that moment, the end of the judged time; it records the CPU per change
// and, waiting further for a backlog to drain, how long after the last
// change the observer showed every user offline.
func (s *churnRun) drain() time.Duration {
	e, r, obs, names, users, last := s.e, s.e.run, s.obs, s.names, s.users, s.last
	// Every user ends offline: wait for the observer to show it, past the
	// clean-disconnect window so that ghosts can be judged.
	e.waitUntil(last+cleanWindow+2*time.Second, func() bool { return obs.count(names, offline) == users })
	e.sleepUntil(last + cleanWindow + 100*time.Millisecond)
	end := mono()
	if cpu1, err := e.sys.cpuSplit(); err == nil {
		perOp(r, "change", s.cpu0, cpu1, s.n) // every change made, until the observer shows the last
	}
	// Overload may cost latency, never the truth once the load stops: a
	// backlog still draining now is waited for, and how long after the last
	// change the observer showed every user offline is reported. (The
	// correctness counts stay judged up to end, where a backlog still
	// draining shows as ghosts or wrong_offline.)
	if !e.waitUntil(end+churnConverge, func() bool { return obs.count(names, offline) == users }) {
		left := users - obs.count(names, offline)
		r.Extra["not_converged"] = float64(left)
		e.note("%d users were still not shown offline %v after the load stopped", left, churnConverge+cleanWindow)
	}
	s.tl = obs.timeline()
	if at, ok := convergeAt(s.tl, names, s.first, offline); ok {
		r.Metrics.ConvergeMs = round1(ms(max(at-last, 0)))
	}
	return end
}

// report records the latency of every change the observer was shown, the
// rate achieved and the changes never shown, and judges the observer up
// to end.
func (s *churnRun) report(end time.Duration) {
	e, r, cfg, obs := s.e, s.e.run, s.e.cfg.Churn, s.obs
	var lat []float64
	missed := 0
	for i, u := range s.names {
		shown := obs.shownFor(s.tl[u])
		l, m := e.latencies(s.acts[i], shown)
		lat = append(lat, l...)
		missed += m
	}
	// The achieved rate, once every user is cycling (after the first
	// cycle) and before cycles stop being started.
	from, to := s.start+s.period, s.start+cfg.Duration
	if to-from < time.Second {
		from, to = s.first, s.last+s.period/time.Duration(3*s.users)
	}
	inWindow := 0
	for _, l := range s.acts {
		for _, a := range l {
			if a.at >= from && a.at < to {
				inWindow++
			}
		}
	}
	r.Metrics.ChangesPerSec = round1(float64(inWindow) / (to - from).Seconds())
	r.Metrics.Latency = summarize(lat)
	r.Samples = thin(lat, 2000)
	r.Extra["changes"] = float64(s.n)
	if missed > 0 {
		r.Extra["changes_not_seen"] = float64(missed)
		e.note("%d of %d changes never reached the observer", missed, s.n)
	}
	e.evaluateObservers(end, obs)
}

// shownFor is what a contract-following observer keeps of obs.
func (o *observer) shownFor(obs []Obs) []Obs { return accepted(obs) }

// stormRun is what one run of the storm scenario carries from phase to
// phase.
type stormRun struct {
	e         *runEnv
	obs       *observer // nil without presence
	devs      []*device
	up        []string // the users whose device connected
	stopPings func()
	before    map[string]uint64 // the highest generation per client id shown before the kill
}

// storm: M devices connect at once; then the broker is killed, restarted on
// the same port, and every device reconnects at once.
func (e *runEnv) storm() error {
	s := &stormRun{e: e, stopPings: func() {}}
	defer func() { s.stopPings() }()
	cpu0, release, connected, err := s.connect()
	if err != nil || s.obs == nil {
		return err
	}
	s.converge(cpu0, release, connected)
	if err := s.restart(); err != nil {
		return err
	}
	return s.reconnect()
}

// connect records the parameters, connects the observer (with presence)
// and then every device at once, and records the connect rate and the
// CONNACK times and the CPU per connect until the last CONNACK; it returns
// the CPU times before, the release and how many connected.
func (s *stormRun) connect() (cpuSplit, time.Duration, int, error) {
	e, r, cfg := s.e, s.e.run, s.e.cfg.Storm
	m := e.capDevices(cfg.Devices, 2, "storm devices")
	r.Params["devices"] = m
	r.Params["keepalive_s"] = cfg.Keepalive
	var err error
	if e.sys.hasPresence() {
		if s.obs, err = e.newObserver("obs-storm", topicPrefix+"+", observerBuf); err != nil {
			return cpuSplit{}, 0, 0, err
		}
		r.Params["observers"] = 1
	}
	users := make([]string, m)
	for i := range users {
		users[i] = "m" + strconv.Itoa(i)
	}
	cpu0, _ := e.sys.cpuSplit()
	devs, release, connected, err := e.stormConnect(users)
	if err != nil {
		return cpuSplit{}, 0, 0, err
	}
	s.devs = devs
	cpuAcked, _ := e.sys.cpuSplit()
	perOp(r, "connect_acked", cpu0, cpuAcked, connected) // until the last CONNACK
	var lat []float64
	var lastAck time.Duration
	for _, d := range devs {
		if d != nil {
			lat = append(lat, ms(d.c.ConnackAt-d.c.DialStart))
			lastAck = max(lastAck, d.c.ConnackAt)
		}
	}
	sort.Float64s(lat)
	r.Metrics.Sessions = connected
	r.Metrics.ConnectsPerSec = round1(float64(connected) / (lastAck - release).Seconds())
	r.Metrics.ConnackP99Ms = round3(quantile(lat, 0.99))
	r.Extra["connack_p50_ms"] = round3(quantile(lat, 0.5))
	r.Extra["connack_max_ms"] = round3(lat[len(lat)-1])
	return cpu0, release, connected, nil
}

// converge has the devices ping at their keep-alive rate from now on, and
// waits until the observer shows every device online: the time from the
// release, and the CPU per connect until then, wherever the work fell.
func (s *stormRun) converge(cpu0 cpuSplit, release time.Duration, connected int) {
	e, r, obs := s.e, s.e.run, s.obs
	s.stopPings = e.keepAlive(s.devs, time.Duration(e.cfg.Storm.Keepalive)*time.Second/2)
	s.up = usersOf(s.devs)
	up := s.up
	if n, ok := e.waitProgress(mono()+60*time.Second, 5*time.Second, len(up), func() int { return obs.count(up, online) }); !ok {
		r.Extra["not_converged"] = float64(len(up) - n)
		e.note("the observer never showed all devices online: %d of %d after the count stopped growing (observer: %s)", n, len(up), obs.state())
	} else if at, ok := convergeAt(obs.timeline(), up, release, online); ok {
		r.Metrics.ConvergeMs = round1(ms(at - release))
		// Until every device is shown online: what the connects cost
		// with their presence, wherever the work fell.
		if c, err := e.sys.cpuSplit(); err == nil {
			perOp(r, "connect_shown", cpu0, c, connected)
		}
	}
}

// restart records the generation each device showed, then kills the
// broker (every device's connection drops with it), starts it again on the
// same port and reconnects the observer.
func (s *stormRun) restart() error {
	e, r, obs := s.e, s.e.run, s.obs
	// The generation each device showed before the kill: after the restart a
	// device counts only when a newer connection of it is shown.
	s.before = highestGens(obs.timeline())
	s.stopPings()
	kill := mono()
	e.sys.kill()
	for _, d := range s.devs {
		if d != nil {
			d.drop(kill)
		}
	}
	obs.close()
	if err := e.sys.start(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	r.Extra["restart_ms"] = round1(ms(mono() - kill))
	e.watchDrops()
	if err := obs.connect(e.sys.addr(), "obs-storm", topicPrefix+"+", 10*time.Second, observerBuf); err != nil {
		return fmt.Errorf("observer after restart: %w", err)
	}
	return nil
}

// reconnect has every device reconnect at once and waits until the
// observer shows each online again with a newer connection than before
// the kill, then judges the observer.
func (s *stormRun) reconnect() error {
	e, r, obs, up := s.e, s.e.run, s.obs, s.up
	fresh := func(user string, ob Obs) bool {
		if !ob.Online {
			return false
		}
		for _, g := range ob.Gens {
			if g.ID == user+"-d" && g.Gen > s.before[g.ID] {
				return true
			}
		}
		return false
	}
	devs2, release2, connected2, err := e.stormConnect(up)
	if err != nil {
		return fmt.Errorf("reconnect: %w", err)
	}
	s.stopPings = e.keepAlive(devs2, time.Duration(e.cfg.Storm.Keepalive)*time.Second/2)
	up2 := usersOf(devs2)
	if connected2 < len(up) {
		e.note("%d of %d devices reconnected", connected2, len(up))
	}
	if n, ok := e.waitProgress(mono()+60*time.Second, 5*time.Second, len(up2), func() int { return obs.count(up2, fresh) }); !ok {
		r.Extra["reconnect_not_converged"] = float64(len(up2) - n)
		e.note("after the restart the observer never showed all devices online again: %d of %d after the count stopped growing (observer: %s)", n, len(up2), obs.state())
	} else if at, ok := convergeAt(obs.timeline(), up2, release2, fresh); ok {
		r.Extra["reconnect_converge_ms"] = round1(ms(at - release2))
	}
	// Hold a little longer so that late wrong states are seen.
	time.Sleep(500 * time.Millisecond)
	e.evaluateObservers(mono(), obs)
	return nil
}

// stormConnect connects a device for each user, all released at once.
func (e *runEnv) stormConnect(users []string) ([]*device, time.Duration, int, error) {
	cfg := e.cfg.Storm
	devs := make([]*device, len(users))
	gate := make(chan struct{})
	var ready, wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	for i, u := range users {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-gate
			d, err := e.connectDevice(u, u+"-d", cfg.Keepalive, connectTimeout)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				return
			}
			devs[i] = d
		}()
	}
	ready.Wait()
	release := mono()
	close(gate)
	wg.Wait()
	f := int(failed.Load())
	if f > 0 {
		e.note("%d of %d connects failed: %v", f, len(users), firstErr.Load())
	}
	if f == len(users) {
		return nil, 0, 0, fmt.Errorf("no device connected: %v", firstErr.Load())
	}
	return devs, release, len(users) - f, nil
}

// silentRun is what one run of the silent scenario carries from phase to
// phase.
type silentRun struct {
	e         *runEnv
	ka, limit time.Duration // the keep-alive, and the detection limit
	obs       *observer
	devs      []*device
	users     []string
	lastSent  []time.Duration // per device: its last packet
}

// silent: S devices at a short keep-alive send one last PINGREQ at once and
// then nothing, their sockets left open; the observer must show each
// offline within 1.5 × keep-alive + 1 s of its last packet.
func (e *runEnv) silent() error {
	s := &silentRun{e: e}
	if err := runPhases(s.setup, s.live); err != nil {
		return err
	}
	s.goSilent()
	s.detect()
	return nil
}

// setup records the parameters, connects the observer and the devices.
func (s *silentRun) setup() error {
	e, r, cfg := s.e, s.e.run, s.e.cfg.Silent
	s.ka = time.Duration(cfg.Keepalive) * time.Second
	s.limit = detectWindow(s.ka)
	r.Params["devices"] = cfg.Devices
	r.Params["keepalive_s"] = cfg.Keepalive
	r.Params["observers"] = 1
	r.Metrics.DetectionLimitS = s.limit.Seconds()
	var err error
	if s.obs, err = e.newObserver("obs-silent", topicPrefix+"+", observerBuf); err != nil {
		return err
	}
	if s.devs, _, _, err = e.loadDevices("q", cfg.Devices, cfg.Keepalive); err != nil {
		return err
	}
	s.users = usersOf(s.devs)
	return nil
}

// live keeps the devices alive (a PINGREQ every half keep-alive) for at
// least one keep-alive, so that the brokers' keep-alive tracking is in its
// steady state when the devices go silent, and until the observer shows
// them all online (or 30 s).
func (s *silentRun) live() error {
	e, obs, users := s.e, s.obs, s.users
	stopPings := make(chan struct{})
	pinged := make(chan struct{})
	go func() {
		defer close(pinged)
		t := time.NewTicker(s.ka / 2)
		defer t.Stop()
		for {
			select {
			case <-stopPings:
				return
			case <-t.C:
				for _, d := range s.devs {
					if d != nil {
						_ = d.c.Ping()
					}
				}
			}
		}
	}()
	liveFrom := mono()
	ok := e.waitUntil(mono()+30*time.Second, func() bool { return obs.count(users, online) == len(users) })
	e.sleepUntil(liveFrom + s.ka)
	close(stopPings)
	<-pinged
	if !ok {
		return fmt.Errorf("the observer showed %d of %d devices online after 30 s", obs.count(users, online), len(users))
	}
	return nil
}

// goSilent has every device send its last PINGREQ at once, and records
// when each was sent: from then on the device is down in the truth.
func (s *silentRun) goSilent() {
	gate := make(chan struct{})
	var wg sync.WaitGroup
	s.lastSent = make([]time.Duration, len(s.devs))
	for i, d := range s.devs {
		if d == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			_ = d.c.Ping()
			s.lastSent[i] = d.c.LastSent()
			s.e.tr.down(d.iv, s.lastSent[i], s.limit)
		}()
	}
	close(gate)
	wg.Wait()
}

// detect waits past the limit for late detections too (they are ghosts,
// but their delay still goes into the distribution), then records the
// time from each device's last packet until the observer showed it
// offline, and the devices never shown offline, and judges the observer.
func (s *silentRun) detect() {
	e, r, obs, users, limit := s.e, s.e.run, s.obs, s.users, s.limit
	var lastAll time.Duration
	for _, t := range s.lastSent {
		lastAll = max(lastAll, t)
	}
	e.waitUntil(lastAll+2*limit+time.Second, func() bool { return obs.count(users, offline) == len(users) })
	e.sleepUntil(lastAll + limit + 50*time.Millisecond) // so that every ghost can be judged
	end := mono()
	tl := obs.timeline()
	var det []float64
	undetected := 0
	for i, d := range s.devs {
		if d == nil {
			continue
		}
		found := false
		for _, ob := range accepted(tl[d.user]) {
			if !ob.Online && ob.At >= s.lastSent[i] {
				det = append(det, (ob.At - s.lastSent[i]).Seconds())
				found = true
				break
			}
		}
		if !found {
			undetected++
		}
	}
	r.Metrics.Detection = summarize(det)
	r.Metrics.Sessions = len(users)
	if undetected > 0 {
		r.Extra["undetected"] = float64(undetected)
		e.note("%d of %d silent devices never shown offline", undetected, len(users))
	}
	e.evaluateObservers(end, obs)
}

// fanoutRun is what one run of the fanout scenario carries from phase to
// phase.
type fanoutRun struct {
	e     *runEnv
	nObs  int // observers per user
	devs  []*device
	users []string
	wild  *observer     // on presence/users/+
	per   [][]*observer // per user, on presence/users/{user}
	all   []*observer

	before      int64      // messages every observer had received before the changes
	acts        [][]action // per user
	changes     int
	first, last time.Duration // the first and the last change
}

// fanout: U users with F observers each (on presence/users/{user}) and one
// on presence/users/+; each user changes status C times at one change per
// interval.
func (e *runEnv) fanout() error {
	s := &fanoutRun{e: e}
	if err := runPhases(s.setup, s.change); err != nil {
		return err
	}
	s.report()
	return nil
}

// setup records the parameters, connects the users' devices and every
// observer, and waits until every observer shows its user online (the
// retained snapshot).
func (s *fanoutRun) setup() error {
	e, r, cfg := s.e, s.e.run, s.e.cfg.Fanout
	s.nObs = e.capDevices(cfg.Users*cfg.Observers, cfg.Users+1, "fanout observers") / cfg.Users
	nObs := s.nObs
	r.Params["users"] = cfg.Users
	r.Params["observers_per_user"] = nObs
	r.Params["observers"] = cfg.Users*nObs + 1
	r.Params["changes_per_user"] = cfg.Changes
	r.Params["interval_s"] = cfg.Interval.Seconds()
	var err error
	if s.devs, s.users, _, err = e.loadDevices("f", cfg.Users, 30); err != nil {
		return err
	}
	if s.wild, err = e.newObserver("obs-fanout-all", topicPrefix+"+", observerBuf); err != nil {
		return err
	}
	s.per = make([][]*observer, cfg.Users)
	for i := range s.per {
		s.per[i] = make([]*observer, nObs)
	}
	failed, err := connectMany(cfg.Users*nObs, e.cfg.ConnectWorkers, func(k int) error {
		u, j := k/nObs, k%nObs
		o, err := e.newObserver("obs-"+s.users[u]+"-"+strconv.Itoa(j), topicPrefix+s.users[u], 1024)
		if err != nil {
			return err
		}
		s.per[u][j] = o
		return nil
	})
	if failed > 0 {
		return fmt.Errorf("%d observers failed to connect: %w", failed, err)
	}
	s.all = []*observer{s.wild}
	for _, l := range s.per {
		s.all = append(s.all, l...)
	}
	if !e.waitUntil(mono()+30*time.Second, s.ready) {
		return fmt.Errorf("observers did not all show their user online within 30 s")
	}
	return nil
}

// ready tells whether every observer shows its user online.
func (s *fanoutRun) ready() bool {
	for u, l := range s.per {
		if s.devs[u] == nil {
			continue
		}
		for _, o := range l {
			if o.count(s.users[u:u+1], online) != 1 {
				return false
			}
		}
	}
	return s.wild.count(usersOf(s.devs), online) == len(usersOf(s.devs))
}

// change has each user change status C times, one change per interval,
// the users spread evenly over it, and records every change made.
func (s *fanoutRun) change() error {
	e, cfg := s.e, s.e.cfg.Fanout
	for _, o := range s.all {
		s.before += o.msgs.Load()
	}
	statuses := []string{"away", "busy", "dnd", "online"}
	s.acts = make([][]action, cfg.Users)
	start := mono() + 100*time.Millisecond
	var wg sync.WaitGroup
	for i, d := range s.devs {
		if d == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range cfg.Changes {
				e.sleepUntil(start + time.Duration(i)*cfg.Interval/time.Duration(cfg.Users) + time.Duration(j)*cfg.Interval)
				tag := nextTag()
				at, err := d.setStatus(statuses[j%len(statuses)], tag)
				if err == nil {
					s.acts[i] = append(s.acts[i], action{kind: 's', at: at, tag: tag})
				}
			}
		}()
	}
	wg.Wait()
	s.first, s.last = -1, 0
	for _, l := range s.acts {
		s.changes += len(l)
		for _, a := range l {
			if s.first < 0 || a.at < s.first {
				s.first = a.at
			}
			s.last = max(s.last, a.at)
		}
	}
	if s.changes == 0 {
		return fmt.Errorf("no status change made")
	}
	return nil
}

// delivered tells whether every observer has received its user's last
// change.
func (s *fanoutRun) delivered() bool {
	for u, l := range s.per {
		if len(s.acts[u]) == 0 {
			continue
		}
		tag := s.acts[u][len(s.acts[u])-1].tag
		if tag == "" {
			continue
		}
		has := func(_ string, ob Obs) bool { return ob.Text == tag }
		for _, o := range l {
			if o.count(s.users[u:u+1], has) != 1 {
				return false
			}
		}
		if s.wild.count(s.users[u:u+1], has) != 1 {
			return false
		}
	}
	return true
}

// report waits (up to 5 s after the last change) until every observer has
// the last change, then records the latency of every delivery, the
// messages per change and the rate of changes, and judges the observers.
func (s *fanoutRun) report() {
	e, r, cfg := s.e, s.e.run, s.e.cfg.Fanout
	if !e.waitUntil(s.last+5*time.Second, s.delivered) {
		e.note("not every observer received the last change within 5 s")
	}
	time.Sleep(100 * time.Millisecond) // late duplicates would count
	var after int64
	for _, o := range s.all {
		after += o.msgs.Load()
	}
	var lat []float64
	missed := 0
	for _, o := range s.all {
		tl := o.timeline()
		for u := range s.users {
			if len(tl[s.users[u]]) == 0 {
				continue
			}
			l, m := e.latencies(s.acts[u], o.shownFor(tl[s.users[u]]))
			lat = append(lat, l...)
			missed += m
		}
	}
	r.Metrics.Sessions = len(usersOf(s.devs))
	r.Metrics.Latency = summarize(lat)
	r.Samples = thin(lat, 2000)
	r.Metrics.MessagesPerChange = round3(float64(after-s.before) / float64(s.changes))
	r.Metrics.ChangesPerSec = round1(float64(s.changes) / (s.last - s.first + cfg.Interval/time.Duration(cfg.Users)).Seconds())
	r.Extra["changes"] = float64(s.changes)
	if missed > 0 {
		r.Extra["deliveries_missed"] = float64(missed)
		e.note("%d deliveries (observer × change) never arrived", missed)
	}
	e.evaluateObservers(mono(), s.all...)
}

// flap: devices reconnect with the same client id every interval; the new
// connection opens before the old one is closed (a takeover), then the old
// socket is closed without DISCONNECT.
func (e *runEnv) flap() error {
	cfg := e.cfg.Flap
	r := e.run
	const ka = 30
	r.Params["devices"] = cfg.Devices
	r.Params["interval_s"] = cfg.Interval.Seconds()
	r.Params["duration_s"] = cfg.Duration.Seconds()
	r.Params["keepalive_s"] = ka
	r.Params["observers"] = 1
	obs, err := e.newObserver("obs-flap", topicPrefix+"+", observerBuf)
	if err != nil {
		return err
	}
	devs, _, _, err := e.loadDevices("flap", cfg.Devices, ka)
	if err != nil {
		return err
	}
	users := usersOf(devs)
	if !e.waitUntil(mono()+30*time.Second, func() bool { return obs.count(users, online) == len(users) }) {
		return fmt.Errorf("the observer showed %d of %d devices online after 30 s", obs.count(users, online), len(users))
	}
	// Every device has been up for the grace before the first takeover, so
	// that an offline shown at any takeover counts.
	var lastUp time.Duration
	for _, d := range devs {
		if d != nil {
			lastUp = max(lastUp, d.c.ConnackAt)
		}
	}
	start := max(mono()+100*time.Millisecond, lastUp+graceUp)
	var wg sync.WaitGroup
	var reconnects, failed atomic.Int64
	var firstErr atomic.Value
	var lastMu sync.Mutex
	var last time.Duration
	for i, d := range devs {
		if d == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			old := d
			for t := start + time.Duration(i)*cfg.Interval/time.Duration(cfg.Devices); t < start+cfg.Duration; t += cfg.Interval {
				e.sleepUntil(t)
				nd, err := e.connectDevice(d.user, d.id, ka, 10*time.Second)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				reconnects.Add(1)
				// The old connection ended when the new one was accepted.
				e.tr.down(old.iv, nd.c.ConnackAt, detectWindow(ka*time.Second))
				old.c.Close()
				old = nd
				lastMu.Lock()
				last = max(last, nd.c.ConnackAt)
				lastMu.Unlock()
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		e.note("%d reconnects failed: %v", f, firstErr.Load())
	}
	e.sleepUntil(last + 1500*time.Millisecond)
	end := mono()
	seen, off := 0, 0
	for _, l := range obs.timeline() {
		for _, ob := range l {
			if ob.At >= start {
				seen++
				if !ob.Online {
					off++
				}
			}
		}
	}
	r.Metrics.Sessions = len(users)
	r.Extra["reconnects"] = float64(reconnects.Load())
	r.Extra["observer_states_seen"] = float64(seen)
	r.Extra["offline_shown"] = float64(off)
	e.evaluateObservers(end, obs)
	return nil
}
