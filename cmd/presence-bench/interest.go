package main

// The interest scenario (issue 17): several presenced nodes on a
// three-master Redis Cluster, the users' sessions spread over them (one
// scale-worker process per node), and on each node observers that watch a
// disjoint share of all users with per-user filters (presence/users/{user},
// --interest-filters filters per observer connection). A further node has
// no session and one presence/users/+ observer: a firehose. At a steady rate
// of status changes it counts, on every node, the change messages the node
// received from Redis (redis_feed_messages_total) against the changes made,
// split by what the bench knows of each changed user: one of the node's own
// sessions' users, one its observers watch, or neither. It also measures the
// propagation to the watchers across nodes, the nodes' memory and what they
// hold (interest_users_heard, _watched), and each master's Redis commands
// and network bytes per change.

import (
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/presenced/presenced/bench/result"
)

const (
	scenarioInterest = "interest"
	naInterest       = "the interest scenario runs presenced nodes on a Redis Cluster (presenced-redis only)"
)

// interestConfig sizes the interest scenario.
type interestConfig struct {
	Nodes     int     // nodes with sessions and watchers
	Users     int     // users, each with one session, spread evenly over the nodes
	Watch     float64 // percent of all users the observers of one node watch (disjoint between nodes)
	Filters   int     // per-user filters per observer connection
	Firehose  bool    // a further node with a presence/users/+ observer and no session
	Rate      float64 // status changes per second, all nodes together
	Changes   int     // status changes in all
	Keepalive int     // seconds
	Settle    time.Duration
}

func interestDefaults(c *config) {
	c.Interest = interestConfig{Nodes: 4, Users: 40000, Watch: 5, Filters: 100, Firehose: true, Rate: 1000, Changes: 20000,
		Keepalive: 30, Settle: 2 * time.Second}
}

func interestFlags(fs *flag.FlagSet, c *config) {
	i := &c.Interest
	fs.IntVar(&i.Nodes, "interest-nodes", i.Nodes, "interest: nodes with sessions and watchers, each with its own worker process")
	fs.IntVar(&i.Users, "interest-users", i.Users, "interest: users (one session each), spread evenly over the nodes")
	fs.Float64Var(&i.Watch, "interest-watch-pct", i.Watch, "interest: percent of all users the observers of each node watch, with per-user filters (disjoint between nodes)")
	fs.IntVar(&i.Filters, "interest-filters", i.Filters, "interest: per-user filters per observer connection (mqtt.max_subscriptions is 100 by default)")
	fs.BoolVar(&i.Firehose, "interest-firehose", i.Firehose, "interest: a further node with no session and a presence/users/+ observer")
	fs.Float64Var(&i.Rate, "interest-rate", i.Rate, "interest: status changes per second, all nodes together")
	fs.IntVar(&i.Changes, "interest-changes", i.Changes, "interest: status changes in all")
	fs.IntVar(&i.Keepalive, "interest-keepalive", i.Keepalive, "interest: keep-alive of the sessions, in seconds")
	fs.DurationVar(&i.Settle, "interest-settle", i.Settle, "interest: wait after all-online before memory is read")
}

func (c *config) validateInterest() error {
	i := c.Interest
	if i.Nodes < 1 || i.Users < i.Nodes || i.Filters <= 0 || i.Rate <= 0 || i.Changes <= 0 || i.Keepalive <= 0 || i.Keepalive > 65535 || i.Settle < 0 {
		return errors.New("--interest-nodes, --interest-users (≥ nodes), --interest-filters, --interest-rate, --interest-changes and --interest-keepalive (≤ 65535) must be positive")
	}
	if i.Watch <= 0 || i.Watch*float64(i.Nodes) > 100 {
		return errors.New("--interest-watch-pct must be positive, and the nodes' shares at most 100 % together")
	}
	return nil
}

// interestNA is why the interest scenario does not apply to sys ("" when
// it does).
func interestNA(sys, scenario string) string {
	if scenario == scenarioInterest && sys != result.SystemRedis {
		return naInterest
	}
	return ""
}

// runInterest runs the interest scenario on its own processes, stopping it
// after its time.
func runInterest(cfg config, r result.Run, fdLimit uint64) result.Run {
	i := cfg.Interest
	timeout := cfg.RunTimeout + 2*time.Minute + i.Settle + time.Duration(float64(i.Changes)/i.Rate*float64(time.Second))
	return runOwnProcs(cfg, r, fdLimit, timeout, (*runEnv).interest)
}

// runOwnProcs runs a scenario that starts its own processes (a cluster,
// nodes, workers), stopping them with it or after timeout.
func runOwnProcs(cfg config, r result.Run, fdLimit uint64, timeout time.Duration, scenario func(*runEnv, *scaleProcs, string) error) result.Run {
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
		done <- scenario(e, procs, dir)
	}()
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

// interestRun is what one run of the interest scenario carries from phase
// to phase.
type interestRun struct {
	s   *scaleRun // the cluster, the nodes and the workers, as in scale
	cfg interestConfig

	fire    *system           // the firehose node (nil without)
	fireObs *observer         // its presence/users/+ observer
	watched []map[string]bool // per node: the users its observers watch
	watcher map[string]int    // user: the node whose observers watch it
	wobs    map[string]*observer
	ousers  map[*observer][]string // each watcher's users
	obs     [][]*observer          // per node: its observers
	owner   map[string]int         // user: the node holding its session
	rss0    []int64
	fire0   int64
}

// interest is the scenario; procs collects what it starts.
func (e *runEnv) interest(procs *scaleProcs, dir string) error {
	cfg := e.cfg.Interest
	s := &scaleRun{e: e, procs: procs, dir: dir, n: cfg.Users / cfg.Nodes,
		cfg: scaleConfig{Nodes: cfg.Nodes, Sessions: cfg.Users / cfg.Nodes, Keepalive: cfg.Keepalive, Rate: cfg.Rate, Changes: cfg.Changes,
			NodeTTL: 10 * time.Second, Sweep: 2 * time.Second}}
	in := &interestRun{s: s, cfg: cfg}
	r := e.run
	if c := e.socketCap(); s.n > c {
		return fmt.Errorf("%d sessions per node, but a worker process can hold only %d client sockets", s.n, c)
	}
	r.Params["nodes"] = cfg.Nodes
	r.Params["redis_masters"] = scaleMasters
	r.Params["users"] = s.n * cfg.Nodes
	r.Params["sessions_per_node"] = s.n
	r.Params["watch_pct_per_node"] = cfg.Watch
	r.Params["filters_per_observer"] = cfg.Filters
	r.Params["change_rate"] = cfg.Rate
	r.Params["changes"] = cfg.Changes
	r.Params["firehose_node"] = cfg.Firehose
	return runPhases(s.startCluster, in.startNodes, in.startClients, in.baseline, s.connect, in.allOnline, in.memory, in.changes)
}

// startNodes starts the nodes with sessions, then the firehose node.
func (in *interestRun) startNodes() error {
	s := in.s
	for i := 0; i < in.cfg.Nodes; i++ {
		nd, err := s.startNode("interest-" + strconv.Itoa(i+1))
		if err != nil {
			return err
		}
		s.ns = append(s.ns, nd)
	}
	s.e.sys = s.ns[0]
	if in.cfg.Firehose {
		var err error
		in.fire, err = s.startNode("interest-firehose")
		return err
	}
	return nil
}

// startClients picks each node's watched users (a disjoint random share of
// all users), connects their observers (per-user filters, --interest-filters
// per connection) and the firehose's observer, and starts one worker per
// node, its sessions not yet connected; the users of node i are n<i>u0, …
func (in *interestRun) startClients() error {
	s, e, cfg := in.s, in.s.e, in.cfg
	bin := s.e.cfg.Scale.Worker
	if bin == "" {
		var err error
		if bin, err = scaleSelfBinary(); err != nil {
			return err
		}
	}
	s.ws = make([]*scaleWorker, cfg.Nodes)
	s.users = make([][]string, cfg.Nodes)
	in.owner = map[string]int{}
	for i, nd := range s.ns {
		prefix := "n" + strconv.Itoa(i+1) + "u"
		for j := 0; j < s.n; j++ {
			u := prefix + strconv.Itoa(j)
			s.users[i] = append(s.users[i], u)
			in.owner[u] = i
		}
		s.all = append(s.all, s.users[i]...)
		w, err := startScaleWorker(bin, "worker "+strconv.Itoa(i+1), nd.addr(), prefix, s.n, cfg.Keepalive, e.cfg.ConnectWorkers, int64(i+1))
		if err != nil {
			return err
		}
		s.procs.mu.Lock()
		s.procs.workers = append(s.procs.workers, w)
		s.procs.mu.Unlock()
		s.ws[i] = w
	}
	per := int(float64(len(s.all)) * cfg.Watch / 100)
	perm := rand.New(rand.NewSource(time.Now().UnixNano())).Perm(len(s.all))
	in.watched = make([]map[string]bool, cfg.Nodes)
	in.watcher = map[string]int{}
	in.wobs = map[string]*observer{}
	in.ousers = map[*observer][]string{}
	in.obs = make([][]*observer, cfg.Nodes)
	for i, nd := range s.ns {
		in.watched[i] = map[string]bool{}
		mine := make([]string, 0, per)
		for _, k := range perm[i*per : (i+1)*per] {
			u := s.all[k]
			mine = append(mine, u)
			in.watched[i][u] = true
			in.watcher[u] = i
		}
		for k := 0; k < len(mine); k += cfg.Filters {
			part := mine[k:min(k+cfg.Filters, len(mine))]
			set := map[string]bool{}
			filters := make([]string, len(part))
			for f, u := range part {
				filters[f] = topicPrefix + u
				set[u] = true
			}
			o, err := e.newObserverAt(nd.addr(), "obs-interest-"+strconv.Itoa(i+1)+"-"+strconv.Itoa(k/cfg.Filters), filters, observerBuf,
				func(u string) bool { return set[u] })
			if err != nil {
				return err
			}
			in.obs[i] = append(in.obs[i], o)
			in.ousers[o] = part
			for _, u := range part {
				in.wobs[u] = o
			}
		}
	}
	e.run.Params["watched_per_node"] = per
	e.run.Params["observers_per_node"] = len(in.obs[0])
	if in.fire != nil {
		var err error
		if in.fireObs, err = e.newObserverAt(in.fire.addr(), "obs-interest-firehose", []string{topicPrefix + "+"}, observerBuf, nil); err != nil {
			return err
		}
	}
	return nil
}

// baseline reads every node's RSS before any session (the observers
// connected).
func (in *interestRun) baseline() error {
	s := in.s
	time.Sleep(300 * time.Millisecond)
	in.rss0 = make([]int64, len(s.ns))
	var err error
	for i, nd := range s.ns {
		if in.rss0[i], err = nd.rssKiB(); err != nil {
			return err
		}
	}
	if in.fire != nil {
		in.fire0, err = in.fire.rssKiB()
	}
	return err
}

// allOnline waits until every node's observers show every user they watch
// online, and the firehose's every user.
func (in *interestRun) allOnline() error {
	s, e := in.s, in.s.e
	want := 0
	for i := range s.ns {
		want += len(in.watched[i])
	}
	count := func() int {
		n := 0
		for i := range s.ns {
			for _, o := range in.obs[i] {
				n += o.count(in.ousers[o], online)
			}
		}
		return n
	}
	if s.failed > 0 {
		return fmt.Errorf("%d sessions failed to connect", s.failed)
	}
	if got, ok := e.waitProgressEvery(250*time.Millisecond, mono()+2*time.Minute, 20*time.Second, want, count); !ok {
		return fmt.Errorf("the watchers showed %d of the %d users they watch online", got, want)
	}
	if in.fireObs != nil {
		if got, ok := e.waitProgressEvery(250*time.Millisecond, mono()+2*time.Minute, 20*time.Second, s.ok, func() int { return in.fireObs.count(s.all, online) }); !ok {
			return fmt.Errorf("the firehose observer showed %d of %d users online (%s)", got, s.ok, in.fireObs.state())
		}
	}
	e.run.Extra["all_online_s"] = round3((mono() - s.t0).Seconds())
	return nil
}

// memory reads, once the nodes are quiet, each node's RSS and what it holds:
// its sessions, the users it hears and the users it shows (watched).
func (in *interestRun) memory() error {
	s, e, r := in.s, in.s.e, in.s.e.run
	nodes := append([]*system(nil), s.ns...)
	if in.fire != nil {
		nodes = append(nodes, in.fire)
	}
	if !e.waitUntil(mono()+30*time.Second, func() bool { return quiet(nodes...) }) {
		e.note("a node still had presence work pending 30 s after all-online")
	}
	e.sleepUntil(mono() + in.cfg.Settle)
	users := float64(len(s.all))
	var heardMax, rssMax, grown float64
	for i, nd := range s.ns {
		st, err := nd.adminStats()
		if err != nil {
			return err
		}
		kib, err := nd.rssKiB()
		if err != nil {
			return err
		}
		k := strconv.Itoa(i + 1)
		heard, watched, sessions := num(st, "interest_users_heard"), num(st, "interest_users_watched"), num(st, "sessions")
		r.Extra["heard_node"+k] = heard
		r.Extra["watched_node"+k] = watched
		r.Extra["sessions_node"+k] = sessions
		// What it holds, in % of all users (its sessions make no interest).
		held := heard / users * 100
		r.Extra["heard_pct_node"+k] = round3(held)
		heardMax = max(heardMax, held)
		r.Extra["rss_mib_node"+k] = round1(float64(kib) / 1024)
		rssMax = max(rssMax, float64(kib)/1024)
		grown += float64(kib - in.rss0[i])
	}
	r.Extra["heard_pct_max"] = round3(heardMax)
	r.Extra["node_rss_mib_max"] = round1(rssMax)
	r.Metrics.RSSMiB = round1(rssMax)
	// Per session of its own and per user it shows, together: what a node
	// without a firehose pays (RSS growth from before the sessions).
	r.Extra["node_rss_kib_per_own_session"] = round3(grown / float64(len(s.ns)) / float64(s.n))
	if in.fire != nil {
		st, err := in.fire.adminStats()
		if err != nil {
			return err
		}
		kib, err := in.fire.rssKiB()
		if err != nil {
			return err
		}
		r.Extra["firehose_heard"] = num(st, "interest_users_heard")
		r.Extra["firehose_flag"] = num(st, "interest_firehose")
		r.Extra["firehose_rss_mib"] = round1(float64(kib) / 1024)
		r.Extra["firehose_rss_kib_per_cluster_user"] = round3(float64(kib-in.fire0) / users)
	}
	return nil
}

// num is a number of a node's stats (-1 when absent).
func num(st map[string]any, key string) float64 {
	if v, ok := st[key].(float64); ok {
		return v
	}
	return -1
}

// redisReading is what one master counted: commands (INFO commandstats) and
// network bytes (INFO stats).
type redisReading struct {
	cmds    map[string]int64
	in, out int64
}

func readMasters(ms []*redisServer) ([]redisReading, error) {
	out := make([]redisReading, len(ms))
	for i, m := range ms {
		cs, err := m.commandStats()
		if err != nil {
			return nil, fmt.Errorf("redis INFO: %w", err)
		}
		body, err := m.info("stats")
		if err != nil {
			return nil, fmt.Errorf("redis INFO: %w", err)
		}
		out[i].cmds = cs
		for _, l := range strings.Split(body, "\n") {
			l = strings.TrimSpace(l)
			if v, ok := strings.CutPrefix(l, "total_net_input_bytes:"); ok {
				out[i].in, _ = strconv.ParseInt(v, 10, 64)
			}
			if v, ok := strings.CutPrefix(l, "total_net_output_bytes:"); ok {
				out[i].out, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return out, nil
}

// feedCounts reads every node's redis_feed_messages_total.
func feedCounts(nodes []*system) ([]float64, error) {
	out := make([]float64, len(nodes))
	for i, nd := range nodes {
		st, err := nd.adminStats()
		if err != nil {
			return nil, err
		}
		out[i] = num(st, "redis_feed_messages_total")
		if out[i] < 0 {
			return nil, errors.New("no redis_feed_messages_total in /api/v1/stats (an older presenced)")
		}
	}
	return out, nil
}

// changes has the workers make the status changes, waits until every
// watcher and the firehose saw them (or 10 s), and records what each node
// received against the changes, the propagation, and Redis's work per
// change.
func (in *interestRun) changes() error {
	s, e, r := in.s, in.s.e, in.s.e.run
	nodes := append([]*system(nil), s.ns...)
	if in.fire != nil {
		nodes = append(nodes, in.fire)
	}
	e.waitUntil(mono()+30*time.Second, func() bool { return quiet(nodes...) })
	f0, err := feedCounts(nodes)
	if err != nil {
		return err
	}
	m0, err := readMasters(s.masters)
	if err != nil {
		return err
	}
	changes, made, err := s.makeChanges()
	if err != nil {
		return err
	}
	var all []scaleChange
	origin := map[string]int{}
	for i, cs := range changes {
		all = append(all, cs...)
		for _, c := range cs {
			origin[c.tag] = i
		}
	}
	// Wait until every change reached its watcher and the firehose.
	var cross, same, fire []float64
	var missing int
	deadline := mono() + 10*time.Second
	for {
		cross, same, fire, missing = in.propagation(all, origin)
		if missing == 0 || mono() >= deadline || e.cancelled() {
			break
		}
		e.sleepUntil(mono() + 500*time.Millisecond)
	}
	e.waitUntil(mono()+10*time.Second, func() bool { return quiet(nodes...) })
	f1, err := feedCounts(nodes)
	if err != nil {
		return err
	}
	m1, err := readMasters(s.masters)
	if err != nil {
		return err
	}
	r.Metrics.Latency = summarize(cross)
	if sum := summarize(same); sum != nil {
		r.Extra["same_node_latency_p50_ms"] = sum.P50
		r.Extra["same_node_latency_p99_ms"] = sum.P99
	}
	if sum := summarize(fire); sum != nil {
		r.Extra["firehose_latency_p50_ms"] = sum.P50
		r.Extra["firehose_latency_p99_ms"] = sum.P99
		r.Extra["firehose_latency_max_ms"] = sum.Max
	}
	if missing > 0 {
		r.Extra["changes_not_seen"] = float64(missing)
		e.note("%d (change, watcher) pairs never seen within 10 s of the last change", missing)
	}
	in.feedSplit(all, made, f0, f1)
	in.redisPerChange(m0, m1, made)
	for i, nd := range nodes {
		if st, err := nd.adminStats(); err == nil {
			e.note("node %d (%s) after the changes: %s", i+1, nd.node(), nonZero(st))
		}
	}
	return nil
}

// propagation is, for every change, the time from the change to its
// watcher's first message carrying its tag (cross: the watcher is on
// another node than the session; same: on its node) and to the firehose
// observer's, in ms; missing counts the pairs not seen.
func (in *interestRun) propagation(all []scaleChange, origin map[string]int) (cross, same, fire []float64, missing int) {
	tls := map[*observer]Timeline{}
	tl := func(o *observer) Timeline {
		t, ok := tls[o]
		if !ok {
			t = o.timeline()
			tls[o] = t
		}
		return t
	}
	seen := func(o *observer, c scaleChange) (float64, bool) {
		for _, ob := range tl(o)[c.user] {
			if ob.Text == c.tag {
				return ms(ob.At - c.at), true
			}
		}
		return 0, false
	}
	for _, c := range all {
		if o := in.wobs[c.user]; o != nil {
			if d, ok := seen(o, c); !ok {
				missing++
			} else if in.watcher[c.user] == origin[c.tag] {
				same = append(same, d)
			} else {
				cross = append(cross, d)
			}
		}
		if in.fireObs != nil {
			if d, ok := seen(in.fireObs, c); ok {
				fire = append(fire, d)
			} else {
				missing++
			}
		}
	}
	return cross, same, fire, missing
}

// feedSplit records, per node, the change messages it received during the
// changes (f1 − f0) in % of the changes made, and what the bench knows of
// the changed users: watched here (its own sessions' users or not), and
// the rest of what it received (neither: 0 when the node hears exactly its
// interest). The changes of its own sessions' users that nobody there
// watches are counted in the note: a session makes no interest.
func (in *interestRun) feedSplit(all []scaleChange, made int, f0, f1 []float64) {
	s, e, r := in.s, in.s.e, in.s.e.run
	if made == 0 {
		return
	}
	pct := func(v float64) float64 { return round3(v / float64(made) * 100) }
	var maxPct float64
	for i := range s.ns {
		got := f1[i] - f0[i]
		watched, ownUnwatched := 0, 0
		for _, c := range all {
			switch {
			case in.watched[i][c.user]:
				watched++
			case in.owner[c.user] == i:
				ownUnwatched++
			}
		}
		other := got - float64(watched)
		k := strconv.Itoa(i + 1)
		r.Extra["feed_msgs_node"+k] = got
		r.Extra["feed_pct_node"+k] = pct(got)
		r.Extra["feed_watched_pct_node"+k] = pct(float64(watched))
		r.Extra["feed_other_pct_node"+k] = pct(other)
		maxPct = max(maxPct, pct(got))
		e.note("node %d received %v change messages for %d changes (%.2f %%): %d of users watched there (%.2f %%), %v besides (%.2f %%); not received: the %d changes of its own sessions' users that nobody there watches (%.2f %%)",
			i+1, got, made, got/float64(made)*100, watched, float64(watched)/float64(made)*100, other, other/float64(made)*100, ownUnwatched, float64(ownUnwatched)/float64(made)*100)
	}
	r.Extra["feed_pct_max"] = maxPct
	if in.fire != nil {
		got := f1[len(f1)-1] - f0[len(f0)-1]
		r.Extra["firehose_feed_msgs"] = got
		r.Extra["firehose_feed_pct"] = pct(got)
	}
}

// redisPerChange records each master's Redis commands and network bytes
// (in and out) per change made, over the changes (background work
// included), and the calls per command in a note.
func (in *interestRun) redisPerChange(m0, m1 []redisReading, made int) {
	s, e, r := in.s, in.s.e, in.s.e.run
	if made == 0 {
		return
	}
	var total int64
	for i := range s.masters {
		d := commandDelta(m0[i].cmds, m1[i].cmds)
		var sum int64
		parts := make([]string, 0, len(d))
		for _, c := range d {
			if c.name == "info" {
				continue
			}
			sum += c.calls
			parts = append(parts, c.name+" "+strconv.FormatInt(c.calls, 10))
		}
		total += sum
		k := strconv.Itoa(i + 1)
		r.Extra["redis_cmds_per_change_master"+k] = round3(float64(sum) / float64(made))
		r.Extra["redis_in_bytes_per_change_master"+k] = round1(float64(m1[i].in-m0[i].in) / float64(made))
		r.Extra["redis_out_bytes_per_change_master"+k] = round1(float64(m1[i].out-m0[i].out) / float64(made))
		e.note("during the changes, master %d (%s): %d Redis commands (INFO commandstats, a script's own calls included): %s; %d bytes in, %d out (INFO stats)",
			i+1, s.masters[i].addr(), sum, strings.Join(parts, ", "), m1[i].in-m0[i].in, m1[i].out-m0[i].out)
	}
	r.Extra["redis_cmds_per_change"] = round3(float64(total) / float64(made))
}
