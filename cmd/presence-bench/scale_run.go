package main

// The scale scenario's run, phase by phase (see scale.go for what it
// measures): the cluster, the nodes, the observers and workers, the
// connects until all-online, the steady state, the propagation of status
// changes, the kill of a node and its reap, and the survivors' final view.

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/presenced/presenced/bench/result"
)

// scaleRun is what one run of the scale scenario carries from phase to
// phase.
type scaleRun struct {
	e     *runEnv
	cfg   scaleConfig
	procs *scaleProcs // collects what the run starts
	dir   string
	n     int // sessions per node

	masters    []*redisServer
	extra      string        // the nodes' merged config extra
	ttl, sweep time.Duration // redis.node_ttl and redis.sweep_interval in effect

	ns    []*system // the nodes with sessions
	bare  *system   // the node without sessions
	obs   []*observer
	ws    []*scaleWorker
	users [][]string // per node
	all   []string

	// Readings before the connects.
	rss0       []int64
	bare0      int64
	cPre       map[string]int64
	memPre     int64
	t0         time.Duration // the connects began
	ok, failed int           // sessions connected, failed
	victim     int           // the node killed
	gone       []string      // its users
	want       int           // its sessions that connected
	survivors  []int         // the other nodes
	killAt     time.Duration
}

// scale is the scenario; procs collects what it starts.
func (e *runEnv) scale(procs *scaleProcs, dir string) error {
	s := &scaleRun{e: e, cfg: e.cfg.Scale, procs: procs, dir: dir}
	s.params()
	if err := runPhases(s.startCluster, s.startNodes, s.startClients, s.baseline, s.connect, s.allOnline, s.steadyMemory); err != nil {
		return err
	}
	s.sweepBare()
	if err := runPhases(s.steadyCommands, s.propagation); err != nil {
		return err
	}
	s.killNode()
	s.reap()
	s.finalViews()
	return nil
}

// params caps the sessions per node to what a worker process can hold and
// records the run's parameters.
func (s *scaleRun) params() {
	e, r, cfg := s.e, s.e.run, s.cfg
	s.n = cfg.Sessions
	if c := e.socketCap(); s.n > c {
		e.note("sessions per node: %d wanted, but a worker process can hold only %d client sockets (RLIMIT_NOFILE %d): ran %d", s.n, c, e.fdLimit, c)
		s.n = c
	}
	nodes := cfg.Nodes
	r.Params["nodes"] = nodes
	r.Params["redis_masters"] = scaleMasters
	r.Params["sessions_per_node"] = s.n
	r.Params["keepalive_s"] = cfg.Keepalive
	r.Params["change_rate"] = cfg.Rate
	r.Params["changes"] = cfg.Changes
	r.Params["window_s"] = cfg.Window.Seconds()
	r.Params["observers"] = nodes
	r.Params["worker_processes"] = nodes
	r.Params["nodes_without_sessions"] = 1
}

// startCluster starts the Redis Cluster and makes the nodes' config extra
// (the cluster's addresses, node_ttl and sweep_interval, merged with
// --presenced-config-extra), reading back the node_ttl and sweep_interval
// in effect.
func (s *scaleRun) startCluster() error {
	r, cfg := s.e.run, s.cfg
	t := mono()
	masters, err := startRedisCluster(s.e.cfg.Paths.Redis, s.dir, scaleMasters, s.procs)
	if err != nil {
		return err
	}
	s.masters = masters
	r.Extra["cluster_start_s"] = round3((mono() - t).Seconds())
	addrs := make([]string, len(masters))
	for i, m := range masters {
		addrs[i] = strconv.Quote(m.addr())
	}
	base := fmt.Sprintf("redis: {cluster: true, addrs: [%s], node_ttl: %s, sweep_interval: %s}\n", strings.Join(addrs, ", "), cfg.NodeTTL, cfg.Sweep)
	s.extra = base
	if s.e.cfg.PresencedExtra != "" {
		if s.extra, err = mergeYAML(base, s.e.cfg.PresencedExtra); err != nil {
			return fmt.Errorf("--presenced-config-extra: %w", err)
		}
	}
	s.ttl, s.sweep = scaleRedisDurations(s.extra, cfg.NodeTTL, cfg.Sweep)
	r.Params["node_ttl_s"] = s.ttl.Seconds()
	r.Params["sweep_interval_s"] = s.sweep.Seconds()
	return nil
}

// startNodes starts the nodes one after the other, then a further node
// with no session whose one observer watches presence/users/+ (startClients):
// what a firehose node pays for the users of the whole cluster (it keeps
// every user's retained presence; a node without a firehose observer holds
// only its interest, see the interest scenario). That one is stopped
// cleanly after the steady-state reading.
func (s *scaleRun) startNodes() error {
	for i := 0; i < s.cfg.Nodes; i++ {
		nd, err := s.startNode("scale-" + strconv.Itoa(i+1))
		if err != nil {
			return err
		}
		s.ns = append(s.ns, nd)
	}
	s.e.sys = s.ns[0]
	var err error
	s.bare, err = s.startNode("scale-nosessions")
	return err
}

// startNode starts one presenced node on the cluster, on free ports, added
// to the run's processes.
func (s *scaleRun) startNode(id string) (*system, error) {
	nd := &system{name: result.SystemRedis, paths: s.e.cfg.Paths, dir: s.dir, redis: s.masters[0], pacingOff: true,
		extra: s.extra, nodeID: id}
	var err error
	if nd.mqttPort, err = freePort(); err != nil {
		return nil, err
	}
	if nd.adminPort, err = freePort(); err != nil {
		return nil, err
	}
	s.procs.mu.Lock()
	s.procs.nodes = append(s.procs.nodes, nd)
	s.procs.mu.Unlock()
	if err := nd.start(); err != nil {
		return nil, fmt.Errorf("node %s: %w", nd.node(), err)
	}
	return nd, nil
}

// startClients connects one observer per node, on presence/users/+, and
// starts one worker per node, its sessions not yet connected; the users
// of node i are n<i>u0, n<i>u1, …
func (s *scaleRun) startClients() error {
	e, cfg, nodes := s.e, s.cfg, s.cfg.Nodes
	var err error
	s.obs = make([]*observer, nodes)
	for i, nd := range s.ns {
		if s.obs[i], err = e.newObserverAt(nd.addr(), "obs-scale-"+strconv.Itoa(i+1), []string{topicPrefix + "+"}, observerBuf, nil); err != nil {
			return err
		}
	}
	if _, err = e.newObserverAt(s.bare.addr(), "obs-scale-nosessions", []string{topicPrefix + "+"}, observerBuf, nil); err != nil {
		return err
	}
	bin := cfg.Worker
	if bin == "" {
		if bin, err = scaleSelfBinary(); err != nil {
			return err
		}
	}
	s.ws = make([]*scaleWorker, nodes)
	s.users = make([][]string, nodes)
	for i, nd := range s.ns {
		prefix := "n" + strconv.Itoa(i+1) + "u"
		w, err := startScaleWorker(bin, "worker "+strconv.Itoa(i+1), nd.addr(), prefix, s.n, cfg.Keepalive, e.cfg.ConnectWorkers, int64(i+1))
		if err != nil {
			return err
		}
		s.procs.mu.Lock()
		s.procs.workers = append(s.procs.workers, w)
		s.procs.mu.Unlock()
		s.ws[i] = w
		for j := 0; j < s.n; j++ {
			s.users[i] = append(s.users[i], prefix+strconv.Itoa(j))
		}
		s.all = append(s.all, s.users[i]...)
	}
	return nil
}

// baseline reads, before any session (the observers connected), the RSS
// of every node and the cluster's command counts and used memory.
func (s *scaleRun) baseline() error {
	time.Sleep(300 * time.Millisecond)
	var err error
	s.rss0 = make([]int64, len(s.ns))
	for i, nd := range s.ns {
		if s.rss0[i], err = nd.rssKiB(); err != nil {
			return err
		}
	}
	if s.bare0, err = s.bare.rssKiB(); err != nil {
		return err
	}
	if s.cPre, err = clusterCommandStats(s.masters); err != nil {
		return err
	}
	s.memPre, err = clusterUsedMemory(s.masters)
	return err
}

// connect has every worker connect all its sessions at once, and records
// how many connected and how fast.
func (s *scaleRun) connect() error {
	e, r := s.e, s.e.run
	s.t0 = mono()
	for _, w := range s.ws {
		if err := w.send("connect"); err != nil {
			return err
		}
	}
	var connected time.Duration
	for _, w := range s.ws {
		f, err := w.await("connected", 5*time.Minute)
		if err != nil {
			return err
		}
		connected = mono()
		s.ok += int(w.ok.Load())
		s.failed += int(w.failed.Load())
		if w.failed.Load() > 0 && len(f) > 3 {
			e.note("%s: %d of %d sessions failed to connect: %s", w.name, w.failed.Load(), s.n, f[3])
		}
	}
	if s.ok == 0 {
		return errors.New("no session connected")
	}
	connectS := (connected - s.t0).Seconds()
	r.Metrics.Sessions = s.ok
	r.Extra["connect_s"] = round3(connectS)
	r.Metrics.ConnectsPerSec = round1(float64(s.ok) / connectS)
	return nil
}

// allOnline waits until every observer shows every user online, and records
// the time from the connects until then (per observer, and the slowest),
// and Redis's commands and memory for the connects.
func (s *scaleRun) allOnline() error {
	e, r, ok, t0 := s.e, s.e.run, s.ok, s.t0
	for i, o := range s.obs {
		if got, done := e.waitProgressEvery(250*time.Millisecond, mono()+2*time.Minute, 20*time.Second, ok, func() int { return o.count(s.all, online) }); !done {
			s.noteNodeStats()
			var missing []string
			for _, u := range s.all {
				if o.count([]string{u}, online) == 0 && len(missing) < 5 {
					missing = append(missing, u)
				}
			}
			return fmt.Errorf("observer on node %d showed %d of %d users online (%s; not online: %s)", i+1, got, ok, o.state(), strings.Join(missing, " "))
		}
	}
	var allOnline time.Duration
	for i, o := range s.obs {
		at := mono()
		if s.failed == 0 {
			if a, found := convergeAt(o.timeline(), s.all, t0, online); found {
				at = a
			}
		}
		r.Extra["all_online_s_obs"+strconv.Itoa(i+1)] = round3((at - t0).Seconds())
		allOnline = max(allOnline, at-t0)
	}
	r.Extra["all_online_s"] = round3(allOnline.Seconds())
	r.Metrics.ConvergeMs = round1(ms(allOnline))
	if s.failed > 0 {
		e.note("%d sessions failed to connect: all-online is timed by polling (250 ms) for the %d that did", s.failed, ok)
	}
	if cConn, err := clusterCommandStats(s.masters); err == nil {
		e.phaseCommands("connect_redis_cmds_per_session", "from the connects until all-online", s.cPre, cConn, ok)
	}
	if mem, err := clusterUsedMemory(s.masters); err == nil {
		r.Extra["redis_used_memory_bytes_per_user"] = round1(float64(mem-s.memPre) / float64(ok))
	}
	return nil
}

// noteNodeStats notes every node's non-zero counters (a scenario that
// failed: what the nodes did).
func (s *scaleRun) noteNodeStats() {
	for i, nd := range append(append([]*system(nil), s.ns...), s.bare) {
		st, err := nd.adminStats()
		if err != nil {
			s.e.note("node %d: stats: %v", i+1, err)
			continue
		}
		s.e.note("node %d (%s) stats: %s", i+1, nd.node(), nonZero(st))
	}
}

// nonZero lists the non-zero numbers of a stats object, sorted by name.
func nonZero(st map[string]any) string {
	var parts []string
	for k, v := range st {
		if f, ok := v.(float64); ok && f != 0 {
			parts = append(parts, k+" "+strconv.FormatFloat(f, 'f', -1, 64))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// steadyMemory reads the nodes' RSS at steady state (every session idle,
// pinging at its keep-alive): the largest, and what a node pays per user of
// the cluster and per session of its own.
func (s *scaleRun) steadyMemory() error {
	e, r, ok := s.e, s.e.run, s.ok
	if !e.waitUntil(mono()+30*time.Second, func() bool { return quiet(s.ns...) }) {
		e.note("a node still had presence work pending 30 s after all-online")
	}
	e.sleepUntil(mono() + s.cfg.Settle)
	var rssMax, grown float64
	for i, nd := range s.ns {
		kib, err := nd.rssKiB()
		if err != nil {
			return err
		}
		rssMax = max(rssMax, float64(kib)/1024)
		grown += float64(kib - s.rss0[i])
	}
	r.Extra["node_rss_mib_max"] = round1(rssMax)
	r.Metrics.RSSMiB = round1(rssMax)
	// What each node holds: its sessions and its interest (the users it
	// names as heard: its sessions' users and those watched by name; a
	// firehose, interest_firehose 1, hears every user of the cluster
	// besides).
	var sessions, heard, fire float64
	for _, nd := range s.ns {
		if st, err := nd.adminStats(); err == nil {
			sessions += num(st, "sessions")
			heard += num(st, "interest_users_heard")
			fire += num(st, "interest_firehose")
		}
	}
	r.Extra["node_sessions"] = round1(sessions / float64(len(s.ns)))
	r.Extra["node_heard_users"] = round1(heard / float64(len(s.ns)))
	r.Extra["node_firehose"] = round3(fire / float64(len(s.ns)))
	if st, err := s.bare.adminStats(); err == nil {
		r.Extra["nosessions_node_heard_users"] = num(st, "interest_users_heard")
		r.Extra["nosessions_node_firehose"] = num(st, "interest_firehose")
	}
	if bare1, err := s.bare.rssKiB(); err == nil {
		perUser := float64(bare1-s.bare0) / float64(ok)
		r.Extra["nosessions_node_rss_mib"] = round1(float64(bare1) / 1024)
		r.Extra["node_rss_kib_per_cluster_user"] = round3(perUser)
		// What a node's own sessions add beyond what every node pays for
		// the cluster's users.
		r.Extra["node_rss_kib_per_local_session"] = round3((grown/float64(len(s.ns)) - float64(bare1-s.bare0)) / (float64(ok) / float64(len(s.ns))))
	}
	return nil
}

// sweepBare stops the node without sessions cleanly and times until the
// others have swept its incarnation (with no session: its per-slot user
// sets), which must not fall in the steady-state window.
func (s *scaleRun) sweepBare() {
	e, r := s.e, s.e.run
	lost0 := 0.0
	for _, nd := range s.ns {
		lost0 += max(0, statNumber(nd, "redis_nodes_lost"))
	}
	s.bare.term(10 * time.Second)
	tb := mono()
	if e.waitUntil(mono()+s.ttl+s.sweep+10*time.Second, func() bool {
		lost := 0.0
		for _, nd := range s.ns {
			lost += max(0, statNumber(nd, "redis_nodes_lost"))
		}
		return lost > lost0
	}) {
		r.Extra["nosessions_node_swept_s"] = round3((mono() - tb).Seconds())
	} else {
		e.note("the node without sessions, stopped cleanly, was not swept within node_ttl + sweep_interval + 10 s")
	}
}

// steadyCommands counts, once the nodes are quiet, the Redis commands of
// every master and the workers' PINGREQs over the steady-state window:
// commands per second (in total and per master) and per PINGREQ.
func (s *scaleRun) steadyCommands() error {
	e, r := s.e, s.e.run
	e.waitUntil(mono()+30*time.Second, func() bool { return quiet(s.ns...) })
	e.sleepUntil(mono() + time.Second)
	c0, p0, err := s.windowReading()
	if err != nil {
		return err
	}
	w0 := mono()
	e.sleepUntil(w0 + s.cfg.Window)
	c1, p1, err := s.windowReading()
	if err != nil {
		return err
	}
	win := (mono() - w0).Seconds()
	var total int64
	for i := range s.masters {
		d := commandDelta(c0[i], c1[i])
		var sum int64
		parts := make([]string, 0, len(d))
		for _, c := range d {
			sum += c.calls
			parts = append(parts, c.name+" "+strconv.FormatInt(c.calls, 10))
		}
		total += sum
		r.Extra["steady_redis_cmds_per_s_master"+strconv.Itoa(i+1)] = round3(float64(sum) / win)
		e.note("steady state, master %d (%s): %d Redis commands in %.1f s (INFO commandstats): %s", i+1, s.masters[i].addr(), sum, win, strings.Join(parts, ", "))
	}
	r.Extra["steady_redis_cmds_per_s"] = round3(float64(total) / win)
	pings := p1 - p0
	r.Extra["steady_pingreq_per_s"] = round1(float64(pings) / win)
	if pings > 0 {
		r.Metrics.RedisCmdsPerPing = round3(float64(total) / float64(pings))
		r.Extra["steady_redis_cmds_per_pingreq"] = round3(float64(total) / float64(pings))
	}
	e.note("the steady-state window holds no bulk renewal of sessions (every presence.renew_interval, 1 h by default): Redis commands per PINGREQ leave it out")
	return nil
}

// windowReading is INFO commandstats of each master, then the PINGRESPs
// the workers' sessions have received.
func (s *scaleRun) windowReading() ([]map[string]int64, int64, error) {
	cs := make([]map[string]int64, len(s.masters))
	for i, m := range s.masters {
		var err error
		if cs[i], err = m.commandStats(); err != nil {
			return nil, 0, fmt.Errorf("redis INFO: %w", err)
		}
	}
	pongs, err := scalePongs(s.ws)
	return cs, pongs, err
}

// propagation has the workers make --scale-changes status changes at a
// steady rate, spread evenly over the nodes, and measures how long each
// took to reach every observer (none when there are no changes).
func (s *scaleRun) propagation() error {
	if s.cfg.Changes <= 0 {
		return nil
	}
	cCh0, err := clusterCommandStats(s.masters)
	if err != nil {
		return err
	}
	changes, made, err := s.makeChanges()
	if err != nil {
		return err
	}
	s.propagationLatency(changes, made, cCh0)
	return nil
}

// makeChanges has every worker make its share of the changes and waits
// until all are made; it records how many were made and the rate
// achieved.
func (s *scaleRun) makeChanges() ([][]scaleChange, int, error) {
	r, cfg, nodes := s.e.run, s.cfg, s.cfg.Nodes
	rate := cfg.Rate / float64(nodes)
	for i, w := range s.ws {
		count := cfg.Changes / nodes
		if i < cfg.Changes%nodes {
			count++
		}
		if err := w.send(fmt.Sprintf("status %g %d", rate, count)); err != nil {
			return nil, 0, err
		}
	}
	for _, w := range s.ws {
		if _, err := w.await("status-done", time.Duration(float64(cfg.Changes)/rate*float64(time.Second))+30*time.Second); err != nil {
			return nil, 0, err
		}
	}
	changes := make([][]scaleChange, nodes)
	var first, last time.Duration
	made := 0
	for i, w := range s.ws {
		changes[i] = w.changesMade()
		for _, c := range changes[i] {
			if made == 0 || c.at < first {
				first = c.at
			}
			last = max(last, c.at)
			made++
		}
	}
	r.Extra["changes_made"] = float64(made)
	if made > 1 && last > first {
		r.Metrics.ChangesPerSec = round1(float64(made-1) / (last - first).Seconds())
	}
	return changes, made, nil
}

// propagationLatency waits until every observer has seen every change, or
// 10 s, and records the latency across nodes and on the same node, the
// Redis commands per change (cCh0 read before the changes) and the
// changes never seen.
func (s *scaleRun) propagationLatency(changes [][]scaleChange, made int, cCh0 map[string]int64) {
	e, r := s.e, s.e.run
	var cross, same []float64
	var missing int
	deadline := mono() + 10*time.Second
	for {
		cross, same, missing = scalePropagation(changes, s.obs, -1)
		if missing == 0 || mono() >= deadline || e.cancelled() {
			break
		}
		e.sleepUntil(mono() + 500*time.Millisecond)
	}
	r.Metrics.Latency = summarize(cross)
	if cCh1, err := clusterCommandStats(s.masters); err == nil {
		e.phaseCommands("change_redis_cmds_per_change", "during the status changes (until every observer saw them; steady-state commands included)", cCh0, cCh1, made)
	}
	if sum := summarize(same); sum != nil {
		r.Extra["same_node_latency_p50_ms"] = sum.P50
		r.Extra["same_node_latency_p99_ms"] = sum.P99
		r.Extra["same_node_latency_max_ms"] = sum.Max
	}
	if missing > 0 {
		r.Extra["changes_not_seen"] = float64(missing)
		e.note("%d (change, observer) pairs never seen within 10 s of the last change", missing)
	}
}

// killNode records the messages the nodes dropped to a full client queue,
// and the subscribers they expelled as too slow, before the kill (the
// killed node's are lost with it); then SIGKILLs the last node once the
// nodes are quiet, and waits (once for every surviving observer together)
// until the others show every one of its users offline.
func (s *scaleRun) killNode() {
	e, r := s.e, s.e.run
	for _, key := range []string{"dropped_full_queue", "slow_subscribers_disconnected"} {
		sum := 0.0
		for _, nd := range s.ns {
			sum += max(0, statNumber(nd, key))
		}
		if sum > 0 {
			r.Extra["nodes_"+key] = sum
			e.note("the nodes counted %s %v before the kill", key, sum)
		}
	}
	s.victim = s.cfg.Nodes - 1
	if !e.waitUntil(mono()+30*time.Second, func() bool { return quiet(s.ns...) }) {
		e.note("a node still had presence work pending 30 s after the changes")
	}
	s.gone = s.users[s.victim]
	vw := s.ws[s.victim]
	if int(vw.ok.Load()) < s.n {
		e.note("the killed node held %d sessions, not %d", vw.ok.Load(), s.n)
	}
	s.killAt = mono()
	s.ns[s.victim].kill()
	r.Extra["killed_sessions"] = float64(vw.ok.Load())
	s.want = int(vw.ok.Load())
	for i := range s.obs {
		if i != s.victim {
			s.survivors = append(s.survivors, i)
		}
	}
	e.waitProgressEvery(250*time.Millisecond, s.killAt+s.ttl+s.sweep+60*time.Second, s.ttl+s.sweep+20*time.Second, s.want*len(s.survivors), func() int {
		sum := 0
		for _, i := range s.survivors {
			sum += s.obs[i].count(s.gone, offline)
		}
		return sum
	})
}

// reap records, per surviving observer and overall, the time from the
// kill until the killed node's users were all shown offline (the first
// shown too), the users never shown offline, and the sessions the
// survivors swept; a slow or incomplete reap notes the survivors' state.
func (s *scaleRun) reap() {
	e, r, kill, want, gone := s.e, s.e.run, s.killAt, s.want, s.gone
	var reap time.Duration
	notReaped := 0
	for _, i := range s.survivors {
		o := s.obs[i]
		tl := o.timeline()
		if a, found := scaleFirstShown(tl, gone, kill, offline); found {
			r.Extra["reap_first_offline_s_obs"+strconv.Itoa(i+1)] = round3((a - kill).Seconds())
		}
		if got := o.count(gone, offline); got < want {
			notReaped = max(notReaped, want-got)
			e.note("observer on node %d showed %d of the killed node's %d users offline %.1f s after the kill (%s)", i+1, got, want, (mono() - kill).Seconds(), o.state())
			continue
		}
		at := mono()
		if want == len(gone) {
			if a, found := convergeAt(tl, gone, kill, offline); found {
				at = a
			}
		}
		r.Extra["reap_s_obs"+strconv.Itoa(i+1)] = round3((at - kill).Seconds())
		reap = max(reap, at-kill)
	}
	slow := notReaped > 0 || reap > s.ttl+s.sweep+time.Second
	if notReaped > 0 {
		r.Extra["not_reaped"] = float64(notReaped)
	} else {
		r.Extra["reap_s"] = round3(reap.Seconds())
		if slow {
			e.note("the reap took %.1f s, more than node_ttl + sweep_interval + 1 s (%.1f s)", reap.Seconds(), (s.ttl + s.sweep + time.Second).Seconds())
		}
	}
	if slow {
		for _, i := range s.survivors {
			if st, err := s.ns[i].adminStats(); err == nil {
				e.note("node %d then: redis_outages %v, redis_nodes_lost %v, redis_swept %v", i+1, st["redis_outages"], st["redis_nodes_lost"], st["redis_swept"])
			}
			e.note("node %d log, last lines: %s", i+1, scaleLastLines(s.ns[i].stderr.String(), 2))
		}
	}
	r.Extra["node_ttl_s"] = s.ttl.Seconds()
	r.Extra["sweep_interval_s"] = s.sweep.Seconds()
	var swept float64
	for i, nd := range s.ns {
		if i != s.victim {
			swept += max(0, statNumber(nd, "redis_swept"))
		}
	}
	r.Extra["swept_sessions"] = swept
}

// finalViews counts the users a surviving observer shows wrongly at the
// end (the other nodes' users should be online, the killed node's
// offline), and the messages every observer received.
func (s *scaleRun) finalViews() {
	e, r := s.e, s.e.run
	time.Sleep(500 * time.Millisecond)
	wrong := 0
	for i, o := range s.obs {
		if i == s.victim {
			continue
		}
		for j := range s.ns {
			if j == s.victim {
				wrong += len(s.gone) - o.count(s.gone, offline)
			} else {
				wrong += int(s.ws[j].ok.Load()) - o.count(s.users[j], online)
			}
		}
	}
	r.Extra["final_wrong"] = float64(wrong)
	var msgs int64
	for _, o := range s.obs {
		msgs += o.msgs.Load()
	}
	r.Metrics.ObserverMsgs = msgs
	e.note("the correctness counts are not judged in scale (the sessions live in worker processes); final_wrong counts the users a surviving observer shows wrongly at the end: %d", wrong)
}
