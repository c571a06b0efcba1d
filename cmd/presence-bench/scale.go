package main

// The scale scenario: several presenced nodes on a three-master Redis
// Cluster that the bench starts, each node holding its own sessions, driven
// by one scale-worker child process per node (scale_worker.go), since one
// process may hold only RLIMIT_NOFILE sockets. One observer per node watches
// presence/users/+. It measures the time to all-online, Redis commands per
// second at steady state (in total and per master), propagation across nodes
// at a steady rate of status changes, and the time until a SIGKILLed node's
// users are all shown offline on the other nodes (the reap, driven by
// redis.node_ttl and redis.sweep_interval).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/presenced/presenced/bench/result"
)

const (
	scenarioScale = "scale"
	naScale       = "the scale scenario runs presenced nodes on a Redis Cluster (presenced-redis only)"
	scaleMasters  = 3
	scaleSlots    = 16384
)

// scaleConfig sizes the scale scenario.
type scaleConfig struct {
	Nodes     int     // presenced nodes, each with its own worker
	Sessions  int     // per node
	Keepalive int     // seconds
	Rate      float64 // status changes per second, all nodes together
	Changes   int     // status changes in all
	Settle    time.Duration
	Window    time.Duration // steady-state window for Redis commands
	NodeTTL   time.Duration // redis.node_ttl of the nodes
	Sweep     time.Duration // redis.sweep_interval of the nodes
	Worker    string        // the presence-bench binary the workers run; "" this one
}

func scaleDefaults(c *config) {
	c.Scale = scaleConfig{Nodes: 3, Sessions: 15000, Keepalive: 30, Rate: 1000, Changes: 5000,
		Settle: 2 * time.Second, Window: 10 * time.Second, NodeTTL: 10 * time.Second, Sweep: 2 * time.Second}
}

func scaleFlags(fs *flag.FlagSet, c *config) {
	s := &c.Scale
	fs.IntVar(&s.Nodes, "scale-nodes", s.Nodes, "scale: presenced nodes on the 3-master Redis Cluster, each with its own worker process")
	fs.IntVar(&s.Sessions, "scale-sessions", s.Sessions, "scale: sessions per node")
	fs.IntVar(&s.Keepalive, "scale-keepalive", s.Keepalive, "scale: keep-alive of the sessions, in seconds (each pings at it, at a random phase)")
	fs.Float64Var(&s.Rate, "scale-rate", s.Rate, "scale: status changes per second, all nodes together")
	fs.IntVar(&s.Changes, "scale-changes", s.Changes, "scale: status changes in all")
	fs.DurationVar(&s.Settle, "scale-settle", s.Settle, "scale: wait after all-online before the steady-state window")
	fs.DurationVar(&s.Window, "scale-window", s.Window, "scale: steady-state window for Redis commands per second")
	fs.DurationVar(&s.NodeTTL, "scale-node-ttl", s.NodeTTL, "scale: redis.node_ttl of the nodes (the reap of a killed node waits for it)")
	fs.DurationVar(&s.Sweep, "scale-sweep", s.Sweep, "scale: redis.sweep_interval of the nodes")
}

func (c *config) validateScale() error {
	s := c.Scale
	if s.Nodes < 2 {
		return errors.New("--scale-nodes must be at least 2 (one is killed)")
	}
	if s.Sessions <= 0 || s.Changes < 0 || s.Rate <= 0 || s.Keepalive <= 0 || s.Keepalive > 65535 {
		return errors.New("--scale-sessions, --scale-rate and --scale-keepalive (≤ 65535) must be positive, --scale-changes not negative")
	}
	if s.Window <= 0 || s.Settle < 0 || s.NodeTTL <= 0 || s.Sweep <= 0 || s.Sweep > s.NodeTTL {
		return errors.New("--scale-window and --scale-node-ttl must be positive, --scale-sweep positive and at most --scale-node-ttl")
	}
	return nil
}

// scaleNA is why the scale scenario does not apply to sys ("" when it does).
func scaleNA(sys, scenario string) string {
	if scenario == scenarioScale && sys != result.SystemRedis {
		return naScale
	}
	return ""
}

// scaleProcs are the processes of a scale run, stopped with it.
type scaleProcs struct {
	mu      sync.Mutex
	masters []*redisServer
	nodes   []*system
	workers []*scaleWorker
}

func (p *scaleProcs) stopAll() {
	p.mu.Lock()
	ws, ns, ms := p.workers, p.nodes, p.masters
	p.workers, p.nodes, p.masters = nil, nil, nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); w.quit(5 * time.Second) }()
	}
	wg.Wait()
	for _, s := range ns {
		s.kill()
	}
	for _, m := range ms {
		m.stop()
	}
}

// runScale runs the scale scenario on its own processes (it starts no
// system of runOne's kind), stopping it after its time.
func runScale(cfg config, r result.Run, fdLimit uint64) result.Run {
	dir, err := os.MkdirTemp("", "presence-bench-")
	if err != nil {
		r.Error = err.Error()
		return r
	}
	tempDirs.add(dir)
	defer tempDirs.remove(dir)
	sr := r
	sr.Params, sr.Extra = map[string]any{}, map[string]float64{}
	e := &runEnv{cfg: cfg, run: &sr, fdLimit: fdLimit, cancel: make(chan struct{})}
	procs := &scaleProcs{}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("panic: %v", p)
			}
		}()
		done <- e.scale(procs, dir)
	}()
	s := cfg.Scale
	timeout := cfg.RunTimeout + s.NodeTTL + s.Settle + s.Window + time.Duration(float64(s.Changes)/s.Rate*float64(time.Second))
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err = <-done:
	case <-timer.C:
		e.stop()
		procs.stopAll()
		e.closeAll()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			r.Error = fmt.Sprintf("timed out after %v (the scenario did not stop)", timeout)
			return r
		}
		err = fmt.Errorf("timed out after %v", timeout)
	}
	procs.stopAll()
	e.closeAll()
	r = sr
	if err != nil {
		r.Error = err.Error()
	}
	return r
}

// scale is the scenario; procs collects what it starts.
func (e *runEnv) scale(procs *scaleProcs, dir string) error {
	cfg := e.cfg.Scale
	r := e.run
	n := cfg.Sessions
	if c := e.socketCap(); n > c {
		e.note("sessions per node: %d wanted, but a worker process can hold only %d client sockets (RLIMIT_NOFILE %d): ran %d", n, c, e.fdLimit, c)
		n = c
	}
	nodes := cfg.Nodes
	r.Params["nodes"] = nodes
	r.Params["redis_masters"] = scaleMasters
	r.Params["sessions_per_node"] = n
	r.Params["keepalive_s"] = cfg.Keepalive
	r.Params["change_rate"] = cfg.Rate
	r.Params["changes"] = cfg.Changes
	r.Params["window_s"] = cfg.Window.Seconds()
	r.Params["observers"] = nodes
	r.Params["worker_processes"] = nodes
	r.Params["nodes_without_sessions"] = 1

	// The cluster.
	t := mono()
	masters, err := startRedisCluster(e.cfg.Paths.Redis, dir, scaleMasters, procs)
	if err != nil {
		return err
	}
	r.Extra["cluster_start_s"] = round3((mono() - t).Seconds())
	addrs := make([]string, len(masters))
	for i, m := range masters {
		addrs[i] = strconv.Quote(m.addr())
	}
	base := fmt.Sprintf("redis: {cluster: true, addrs: [%s], node_ttl: %s, sweep_interval: %s}\n", strings.Join(addrs, ", "), cfg.NodeTTL, cfg.Sweep)
	extra := base
	if e.cfg.PresencedExtra != "" {
		if extra, err = mergeYAML(base, e.cfg.PresencedExtra); err != nil {
			return fmt.Errorf("--presenced-config-extra: %w", err)
		}
	}
	ttl, sweep := scaleRedisDurations(extra, cfg.NodeTTL, cfg.Sweep)
	r.Params["node_ttl_s"] = ttl.Seconds()
	r.Params["sweep_interval_s"] = sweep.Seconds()

	// The nodes, one after the other.
	var ns []*system
	for i := 0; i < nodes; i++ {
		s := &system{name: result.SystemRedis, paths: e.cfg.Paths, dir: dir, redis: masters[0], pacingOff: true,
			extra: extra, nodeID: "scale-" + strconv.Itoa(i+1)}
		if s.mqttPort, err = freePort(); err != nil {
			return err
		}
		if s.adminPort, err = freePort(); err != nil {
			return err
		}
		procs.mu.Lock()
		procs.nodes = append(procs.nodes, s)
		procs.mu.Unlock()
		if err := s.start(); err != nil {
			return fmt.Errorf("node %s: %w", s.node(), err)
		}
		ns = append(ns, s)
	}
	e.sys = ns[0]
	// A further node with no session and no observer: what a node pays
	// for the users of the whole cluster (each node keeps every user's
	// retained presence). Stopped cleanly after the steady-state reading.
	bare := &system{name: result.SystemRedis, paths: e.cfg.Paths, dir: dir, redis: masters[0], pacingOff: true,
		extra: extra, nodeID: "scale-nosessions"}
	if bare.mqttPort, err = freePort(); err != nil {
		return err
	}
	if bare.adminPort, err = freePort(); err != nil {
		return err
	}
	procs.mu.Lock()
	procs.nodes = append(procs.nodes, bare)
	procs.mu.Unlock()
	if err := bare.start(); err != nil {
		return fmt.Errorf("node %s: %w", bare.node(), err)
	}

	// One observer per node.
	obs := make([]*observer, nodes)
	for i, s := range ns {
		if obs[i], err = e.newObserverAt(s.addr(), "obs-scale-"+strconv.Itoa(i+1), []string{topicPrefix + "+"}, observerBuf, nil); err != nil {
			return err
		}
	}

	// The workers.
	bin := cfg.Worker
	if bin == "" {
		if bin, err = scaleSelfBinary(); err != nil {
			return err
		}
	}
	ws := make([]*scaleWorker, nodes)
	users := make([][]string, nodes)
	var all []string
	for i, s := range ns {
		prefix := "n" + strconv.Itoa(i+1) + "u"
		w, err := startScaleWorker(bin, "worker "+strconv.Itoa(i+1), s.addr(), prefix, n, cfg.Keepalive, e.cfg.ConnectWorkers, int64(i+1))
		if err != nil {
			return err
		}
		procs.mu.Lock()
		procs.workers = append(procs.workers, w)
		procs.mu.Unlock()
		ws[i] = w
		for j := 0; j < n; j++ {
			users[i] = append(users[i], prefix+strconv.Itoa(j))
		}
		all = append(all, users[i]...)
	}

	// Connect everything at once; time until every observer shows every
	// user online.
	// RSS of every node before any session (the observers connected).
	time.Sleep(300 * time.Millisecond)
	rss0 := make([]int64, len(ns))
	for i, s := range ns {
		if rss0[i], err = s.rssKiB(); err != nil {
			return err
		}
	}
	bare0, err := bare.rssKiB()
	if err != nil {
		return err
	}
	cPre, err := clusterCommandStats(masters)
	if err != nil {
		return err
	}
	memPre, err := clusterUsedMemory(masters)
	if err != nil {
		return err
	}
	t0 := mono()
	for _, w := range ws {
		if err := w.send("connect"); err != nil {
			return err
		}
	}
	ok, failed := 0, 0
	var connected time.Duration
	for _, w := range ws {
		f, err := w.await("connected", 5*time.Minute)
		if err != nil {
			return err
		}
		connected = mono()
		ok += int(w.ok.Load())
		failed += int(w.failed.Load())
		if w.failed.Load() > 0 && len(f) > 3 {
			e.note("%s: %d of %d sessions failed to connect: %s", w.name, w.failed.Load(), n, f[3])
		}
	}
	if ok == 0 {
		return errors.New("no session connected")
	}
	connectS := (connected - t0).Seconds()
	r.Metrics.Sessions = ok
	r.Extra["connect_s"] = round3(connectS)
	r.Metrics.ConnectsPerSec = round1(float64(ok) / connectS)
	for i, o := range obs {
		if got, done := e.waitProgressEvery(250*time.Millisecond, mono()+2*time.Minute, 20*time.Second, ok, func() int { return o.count(all, online) }); !done {
			return fmt.Errorf("observer on node %d showed %d of %d users online (%s)", i+1, got, ok, o.state())
		}
	}
	var allOnline time.Duration
	for i, o := range obs {
		at := mono()
		if failed == 0 {
			if a, found := convergeAt(o.timeline(), all, t0, online); found {
				at = a
			}
		}
		r.Extra["all_online_s_obs"+strconv.Itoa(i+1)] = round3((at - t0).Seconds())
		allOnline = max(allOnline, at-t0)
	}
	r.Extra["all_online_s"] = round3(allOnline.Seconds())
	r.Metrics.ConvergeMs = round1(ms(allOnline))
	if failed > 0 {
		e.note("%d sessions failed to connect: all-online is timed by polling (250 ms) for the %d that did", failed, ok)
	}

	if cConn, err := clusterCommandStats(masters); err == nil {
		e.phaseCommands("connect_redis_cmds_per_session", "from the connects until all-online", cPre, cConn, ok)
	}
	if mem, err := clusterUsedMemory(masters); err == nil {
		r.Extra["redis_used_memory_bytes_per_user"] = round1(float64(mem-memPre) / float64(ok))
	}

	// Steady state: every session idle, pinging at its keep-alive.
	if !e.waitUntil(mono()+30*time.Second, func() bool { return quiet(ns...) }) {
		e.note("a node still had presence work pending 30 s after all-online")
	}
	e.sleepUntil(mono() + cfg.Settle)
	var rssMax, grown float64
	for i, s := range ns {
		kib, err := s.rssKiB()
		if err != nil {
			return err
		}
		rssMax = max(rssMax, float64(kib)/1024)
		grown += float64(kib - rss0[i])
	}
	r.Extra["node_rss_mib_max"] = round1(rssMax)
	r.Metrics.RSSMiB = round1(rssMax)
	if bare1, err := bare.rssKiB(); err == nil {
		perUser := float64(bare1-bare0) / float64(ok)
		r.Extra["nosessions_node_rss_mib"] = round1(float64(bare1) / 1024)
		r.Extra["node_rss_kib_per_cluster_user"] = round3(perUser)
		// What a node's own sessions add beyond what every node pays for
		// the cluster's users.
		r.Extra["node_rss_kib_per_local_session"] = round3((grown/float64(len(ns)) - float64(bare1-bare0)) / (float64(ok) / float64(len(ns))))
	}
	// The bare node stops cleanly; the others sweep its incarnation (with
	// no session: its per-slot user sets), which must not fall in the
	// window.
	lost0 := 0.0
	for _, s := range ns {
		lost0 += max(0, statNumber(s, "redis_nodes_lost"))
	}
	bare.term(10 * time.Second)
	tb := mono()
	if e.waitUntil(mono()+ttl+sweep+10*time.Second, func() bool {
		lost := 0.0
		for _, s := range ns {
			lost += max(0, statNumber(s, "redis_nodes_lost"))
		}
		return lost > lost0
	}) {
		r.Extra["nosessions_node_swept_s"] = round3((mono() - tb).Seconds())
	} else {
		e.note("the node without sessions, stopped cleanly, was not swept within node_ttl + sweep_interval + 10 s")
	}
	e.waitUntil(mono()+30*time.Second, func() bool { return quiet(ns...) })
	e.sleepUntil(mono() + time.Second)
	c0 := make([]map[string]int64, len(masters))
	for i, m := range masters {
		if c0[i], err = m.commandStats(); err != nil {
			return fmt.Errorf("redis INFO: %w", err)
		}
	}
	p0, err := scalePongs(ws)
	if err != nil {
		return err
	}
	w0 := mono()
	e.sleepUntil(w0 + cfg.Window)
	c1 := make([]map[string]int64, len(masters))
	for i, m := range masters {
		if c1[i], err = m.commandStats(); err != nil {
			return fmt.Errorf("redis INFO: %w", err)
		}
	}
	p1, err := scalePongs(ws)
	if err != nil {
		return err
	}
	win := (mono() - w0).Seconds()
	var total int64
	for i := range masters {
		d := commandDelta(c0[i], c1[i])
		var sum int64
		parts := make([]string, 0, len(d))
		for _, c := range d {
			sum += c.calls
			parts = append(parts, c.name+" "+strconv.FormatInt(c.calls, 10))
		}
		total += sum
		r.Extra["steady_redis_cmds_per_s_master"+strconv.Itoa(i+1)] = round3(float64(sum) / win)
		e.note("steady state, master %d (%s): %d Redis commands in %.1f s (INFO commandstats): %s", i+1, masters[i].addr(), sum, win, strings.Join(parts, ", "))
	}
	r.Extra["steady_redis_cmds_per_s"] = round3(float64(total) / win)
	pings := p1 - p0
	r.Extra["steady_pingreq_per_s"] = round1(float64(pings) / win)
	if pings > 0 {
		r.Metrics.RedisCmdsPerPing = round3(float64(total) / float64(pings))
		r.Extra["steady_redis_cmds_per_pingreq"] = round3(float64(total) / float64(pings))
	}
	e.note("the steady-state window holds no bulk renewal of sessions (every presence.renew_interval, 1 h by default): Redis commands per PINGREQ leave it out")

	// Propagation at a steady rate of status changes, spread evenly over
	// the nodes.
	if cfg.Changes > 0 {
		cCh0, err := clusterCommandStats(masters)
		if err != nil {
			return err
		}
		rate := cfg.Rate / float64(nodes)
		for i, w := range ws {
			count := cfg.Changes / nodes
			if i < cfg.Changes%nodes {
				count++
			}
			if err := w.send(fmt.Sprintf("status %g %d", rate, count)); err != nil {
				return err
			}
		}
		for _, w := range ws {
			if _, err := w.await("status-done", time.Duration(float64(cfg.Changes)/rate*float64(time.Second))+30*time.Second); err != nil {
				return err
			}
		}
		changes := make([][]scaleChange, nodes)
		var first, last time.Duration
		made := 0
		for i, w := range ws {
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
		// Wait until every observer has seen every change, or 10 s.
		var cross, same []float64
		var missing int
		deadline := mono() + 10*time.Second
		for {
			cross, same, missing = scalePropagation(changes, obs, -1)
			if missing == 0 || mono() >= deadline || e.cancelled() {
				break
			}
			e.sleepUntil(mono() + 500*time.Millisecond)
		}
		r.Metrics.Latency = summarize(cross)
		if cCh1, err := clusterCommandStats(masters); err == nil {
			e.phaseCommands("change_redis_cmds_per_change", "during the status changes (until every observer saw them; steady-state commands included)", cCh0, cCh1, made)
		}
		if s := summarize(same); s != nil {
			r.Extra["same_node_latency_p50_ms"] = s.P50
			r.Extra["same_node_latency_p99_ms"] = s.P99
			r.Extra["same_node_latency_max_ms"] = s.Max
		}
		if missing > 0 {
			r.Extra["changes_not_seen"] = float64(missing)
			e.note("%d (change, observer) pairs never seen within 10 s of the last change", missing)
		}
	}

	// SIGKILL the last node; time until the observers on the others show
	// every one of its users offline.
	// Messages a node dropped to a full client queue, or subscribers it
	// expelled as too slow, before the kill (the killed node's are lost
	// with it).
	for _, key := range []string{"dropped_full_queue", "slow_subscribers_disconnected"} {
		sum := 0.0
		for _, s := range ns {
			sum += max(0, statNumber(s, key))
		}
		if sum > 0 {
			r.Extra["nodes_"+key] = sum
			e.note("the nodes counted %s %v before the kill", key, sum)
		}
	}
	victim := nodes - 1
	if !e.waitUntil(mono()+30*time.Second, func() bool { return quiet(ns...) }) {
		e.note("a node still had presence work pending 30 s after the changes")
	}
	gone := users[victim]
	if int(ws[victim].ok.Load()) < n {
		e.note("the killed node held %d sessions, not %d", ws[victim].ok.Load(), n)
	}
	kill := mono()
	ns[victim].kill()
	r.Extra["killed_sessions"] = float64(ws[victim].ok.Load())
	want := int(ws[victim].ok.Load())
	var survivors []int
	for i := range obs {
		if i != victim {
			survivors = append(survivors, i)
		}
	}
	// One wait for every surviving observer together.
	e.waitProgressEvery(250*time.Millisecond, kill+ttl+sweep+60*time.Second, ttl+sweep+20*time.Second, want*len(survivors), func() int {
		sum := 0
		for _, i := range survivors {
			sum += obs[i].count(gone, offline)
		}
		return sum
	})
	var reap time.Duration
	notReaped := 0
	for _, i := range survivors {
		o := obs[i]
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
	slow := notReaped > 0 || reap > ttl+sweep+time.Second
	if notReaped > 0 {
		r.Extra["not_reaped"] = float64(notReaped)
	} else {
		r.Extra["reap_s"] = round3(reap.Seconds())
		if slow {
			e.note("the reap took %.1f s, more than node_ttl + sweep_interval + 1 s (%.1f s)", reap.Seconds(), (ttl + sweep + time.Second).Seconds())
		}
	}
	if slow {
		for _, i := range survivors {
			if st, err := ns[i].adminStats(); err == nil {
				e.note("node %d then: redis_outages %v, redis_nodes_lost %v, redis_swept %v", i+1, st["redis_outages"], st["redis_nodes_lost"], st["redis_swept"])
			}
			e.note("node %d log, last lines: %s", i+1, scaleLastLines(ns[i].stderr.String(), 2))
		}
	}
	r.Extra["node_ttl_s"] = ttl.Seconds()
	r.Extra["sweep_interval_s"] = sweep.Seconds()
	var swept float64
	for i, s := range ns {
		if i != victim {
			swept += max(0, statNumber(s, "redis_swept"))
		}
	}
	r.Extra["swept_sessions"] = swept

	// Every survivor's final view: the other nodes' users online, the
	// killed node's offline.
	time.Sleep(500 * time.Millisecond)
	wrong := 0
	for i, o := range obs {
		if i == victim {
			continue
		}
		for j := range ns {
			if j == victim {
				wrong += len(gone) - o.count(gone, offline)
			} else {
				wrong += int(ws[j].ok.Load()) - o.count(users[j], online)
			}
		}
	}
	r.Extra["final_wrong"] = float64(wrong)
	var msgs int64
	for _, o := range obs {
		msgs += o.msgs.Load()
	}
	r.Metrics.ObserverMsgs = msgs
	e.note("the correctness counts are not judged in scale (the sessions live in worker processes); final_wrong counts the users a surviving observer shows wrongly at the end: %d", wrong)
	return nil
}

// scalePongs sums the PINGRESPs the workers' sessions received.
func scalePongs(ws []*scaleWorker) (int64, error) {
	var sum int64
	for _, w := range ws {
		s, err := w.stats()
		if err != nil {
			return 0, err
		}
		sum += s.pongs
	}
	return sum, nil
}

// scalePropagation is, for every change of worker i and every observer j, the
// time from the change to j's first message carrying its tag, in ms: cross
// (j ≠ i) and same (j = i); observers at skip are left out. missing counts
// the pairs not seen.
func scalePropagation(changes [][]scaleChange, obs []*observer, skip int) (cross, same []float64, missing int) {
	for j, o := range obs {
		if j == skip {
			continue
		}
		tl := o.timeline()
		for i, cs := range changes {
			for _, c := range cs {
				found := false
				for _, ob := range tl[c.user] {
					if ob.Text == c.tag {
						d := ms(ob.At - c.at)
						if i == j {
							same = append(same, d)
						} else {
							cross = append(cross, d)
						}
						found = true
						break
					}
				}
				if !found {
					missing++
				}
			}
		}
	}
	return cross, same, missing
}

// scaleFirstShown is the first time at or after from that an observer showed
// one of users in a state ok accepts.
func scaleFirstShown(tl Timeline, users []string, from time.Duration, ok func(string, Obs) bool) (time.Duration, bool) {
	var first time.Duration
	found := false
	for _, u := range users {
		for _, ob := range accepted(tl[u]) {
			if ob.At >= from && ok(u, ob) {
				if !found || ob.At < first {
					first, found = ob.At, true
				}
				break
			}
		}
	}
	return first, found
}

// scaleRedisDurations reads redis.node_ttl and redis.sweep_interval back from
// the nodes' merged config (--presenced-config-extra may change them).
func scaleRedisDurations(text string, ttl, sweep time.Duration) (time.Duration, time.Duration) {
	var v struct {
		Redis struct {
			NodeTTL string `yaml:"node_ttl"`
			Sweep   string `yaml:"sweep_interval"`
		} `yaml:"redis"`
	}
	if yaml.Unmarshal([]byte(text), &v) == nil {
		if d, err := time.ParseDuration(v.Redis.NodeTTL); err == nil {
			ttl = d
		}
		if d, err := time.ParseDuration(v.Redis.Sweep); err == nil {
			sweep = d
		}
	}
	return ttl, sweep
}

// ---------------------------------------------------------------------------
// The Redis Cluster

// startRedisCluster starts masters redis-server processes in cluster mode
// on free loopback ports (each with its bus port, port+10000, free too),
// assigns each an even share of the 16384 slots, joins them with CLUSTER
// MEET and waits until every node reports the cluster ok. The servers are
// added to procs as they start.
func startRedisCluster(bin, dir string, masters int, procs *scaleProcs) ([]*redisServer, error) {
	var ms []*redisServer
	for i := 0; i < masters; i++ {
		m, err := startClusterRedis(bin, dir)
		if err != nil {
			return nil, err
		}
		procs.mu.Lock()
		procs.masters = append(procs.masters, m)
		procs.mu.Unlock()
		ms = append(ms, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := make([]*redis.Client, len(ms))
	for i, m := range ms {
		clients[i] = redis.NewClient(&redis.Options{Addr: m.addr()})
		defer clients[i].Close()
		lo, hi := i*scaleSlots/masters, (i+1)*scaleSlots/masters-1
		if err := clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return nil, fmt.Errorf("redis %s: CLUSTER ADDSLOTSRANGE %d %d: %w", m.addr(), lo, hi, err)
		}
	}
	for _, m := range ms[1:] {
		if err := clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", m.port).Err(); err != nil {
			return nil, fmt.Errorf("redis %s: CLUSTER MEET %s: %w", ms[0].addr(), m.addr(), err)
		}
	}
	want := map[string]string{
		"cluster_state": "ok", "cluster_slots_assigned": strconv.Itoa(scaleSlots), "cluster_slots_ok": strconv.Itoa(scaleSlots),
		"cluster_known_nodes": strconv.Itoa(masters), "cluster_size": strconv.Itoa(masters),
	}
	for {
		var bad error
		for i, c := range clients {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				bad = fmt.Errorf("redis %s: CLUSTER INFO: %w", ms[i].addr(), err)
				break
			}
			kv := map[string]string{}
			for _, l := range strings.Split(info, "\n") {
				if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
					kv[k] = v
				}
			}
			for k, v := range want {
				if kv[k] != v {
					bad = fmt.Errorf("redis %s: %s is %q, want %q", ms[i].addr(), k, kv[k], v)
				}
			}
			if bad != nil {
				break
			}
		}
		if bad == nil {
			return ms, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the Redis Cluster did not come up: %w", bad)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startClusterRedis starts one redis-server in cluster mode, without
// persistence, trying other ports when one is taken.
func startClusterRedis(bin, dir string) (*redisServer, error) {
	var errs []string
	for try := 0; try < 5; try++ {
		port, err := scaleFreeBusPort()
		if err != nil {
			return nil, err
		}
		r, out, err := launchRedis(bin, dir, port, "--cluster-enabled", "yes", "--cluster-config-file", "nodes-"+strconv.Itoa(port)+".conf",
			"--cluster-node-timeout", "5000", "--dir", dir)
		if err != nil {
			errs = append(errs, fmt.Sprintf("port %d: %v: %s", port, err, out))
			continue
		}
		return r, nil
	}
	return nil, fmt.Errorf("redis-server (cluster mode) did not start: %s", strings.Join(errs, "; "))
}

// scaleFreeBusPort is a free loopback port whose cluster bus port (+10000) is
// free too.
func scaleFreeBusPort() (int, error) {
	for i := 0; i < 100; i++ {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		if port+10000 > 65535 {
			continue
		}
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
			_ = l.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free port with a free bus port in 100 tries")
}

// scaleLastLines is the last n lines of s.
func scaleLastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}

// clusterCommandStats is INFO commandstats summed over the masters: calls per
// command (a Lua script's own calls included, as Redis counts them).
func clusterCommandStats(masters []*redisServer) (map[string]int64, error) {
	sum := map[string]int64{}
	for _, m := range masters {
		cs, err := m.commandStats()
		if err != nil {
			return nil, fmt.Errorf("redis INFO: %w", err)
		}
		for name, v := range cs {
			sum[name] += v
		}
	}
	return sum, nil
}

// phaseCommands records the commands between two clusterCommandStats readings
// per unit (per session, per change) in Extra under key, and each
// command's calls in a note.
func (e *runEnv) phaseCommands(key, what string, c0, c1 map[string]int64, units int) {
	d := commandDelta(c0, c1)
	var total int64
	parts := make([]string, 0, len(d))
	for _, c := range d {
		calls := c.calls
		if c.name == "info" {
			continue // the bench's own readings
		}
		total += calls
		parts = append(parts, c.name+" "+strconv.FormatInt(calls, 10))
	}
	if units > 0 {
		e.run.Extra[key] = round3(float64(total) / float64(units))
	}
	e.note("Redis commands %s (INFO commandstats on every master, a script's own calls included): %d: %s", what, total, strings.Join(parts, ", "))
}

// clusterUsedMemory is the sum of INFO memory's used_memory over the masters.
func clusterUsedMemory(masters []*redisServer) (int64, error) {
	var sum int64
	for _, m := range masters {
		body, err := m.info("memory")
		if err != nil {
			return 0, fmt.Errorf("redis INFO: %w", err)
		}
		found := false
		for _, l := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("redis INFO used_memory %q: %w", v, err)
				}
				sum += n
				found = true
			}
		}
		if !found {
			return 0, errors.New("redis INFO memory: no used_memory")
		}
	}
	return sum, nil
}
