package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presenced/presenced/bench/result"
)

// The resilience scenarios (issue 11, "the dot never strobes"): what an
// observer is shown when sessions end without the user leaving — a node
// crashes, the nodes are restarted one by one, devices drop and come back,
// two clients fight over one client id. They run only when named
// (make bench-resilience), into a file set of their own (--out-name).
const (
	scenarioCrash    = "crash"
	scenarioRolling  = "rolling"
	scenarioFlapDrop = "flap-drop"
	scenarioBattle   = "battle"
)

var resilienceScenarios = []string{scenarioCrash, scenarioRolling, scenarioFlapDrop, scenarioBattle}

const (
	naNeedsRedis = "needs several presenced nodes sharing one Redis"
	naNoCluster  = "mosquitto has no cluster to restart node by node (a restart of its one broker drops every client, and without persistence every retained state)"
)

type crashConfig struct {
	Sessions  int           // on node A when it is killed
	MaxDelay  time.Duration // each client reconnects after a random delay in [0, MaxDelay)
	Grace     time.Duration // users back within it should never be shown offline
	Keepalive int
	SweepWait time.Duration // after converging, how long to wait for node B to sweep node A
	NewID     bool          // clients come back with a new client id (a phone that lost its state)
}

type rollingConfig struct {
	Devices      int
	Nodes        int
	MaxDelay     time.Duration // a disconnected device reconnects after a random delay in [0, MaxDelay)
	DrainTimeout time.Duration // SIGKILL a node that has not exited this long after SIGTERM
	Pause        time.Duration // after a restart has converged, before the next node
	Keepalive    int
}

type flapDropConfig struct {
	Devices      int // per variant (same client id; a new client id each time)
	Duration     time.Duration
	UpMin, UpMax time.Duration // connected for a random time in [UpMin, UpMax)
	GapMax       time.Duration // then gone for a random time in [50ms, GapMax)
	Keepalive    int
}

type battleConfig struct {
	Pairs    int           // users, each with two clients sharing one client id
	Duration time.Duration // of the battle
	Window   time.Duration // the first and the last window compared
	Delay    time.Duration // a kicked (or refused) client reconnects after a random delay in [0, Delay)
}

func resilienceDefaults(c *config) {
	c.Crash = crashConfig{Sessions: 5000, MaxDelay: 2 * time.Second, Grace: 5 * time.Second, Keepalive: 30, SweepWait: 20 * time.Second}
	c.Rolling = rollingConfig{Devices: 3000, Nodes: 3, MaxDelay: time.Second, DrainTimeout: 30 * time.Second, Pause: time.Second, Keepalive: 30}
	c.FlapDrop = flapDropConfig{Devices: 50, Duration: 20 * time.Second, UpMin: time.Second, UpMax: 3 * time.Second, GapMax: time.Second, Keepalive: 30}
	c.Battle = battleConfig{Pairs: 5, Duration: 30 * time.Second, Window: 10 * time.Second, Delay: 200 * time.Millisecond}
}

func resilienceFlags(fs *flag.FlagSet, c *config) {
	fs.IntVar(&c.Crash.Sessions, "crash-sessions", c.Crash.Sessions, "crash: sessions on node A when it is SIGKILLed")
	fs.DurationVar(&c.Crash.MaxDelay, "crash-max-delay", c.Crash.MaxDelay, "crash: each client reconnects to node B after a random delay below this")
	fs.DurationVar(&c.Crash.Grace, "crash-grace", c.Crash.Grace, "crash: users back within this of the kill should not be shown offline (presence.offline_grace)")
	fs.IntVar(&c.Crash.Keepalive, "crash-keepalive", c.Crash.Keepalive, "crash: keep-alive in seconds")
	fs.BoolVar(&c.Crash.NewID, "crash-new-id", c.Crash.NewID, "crash: clients come back with a new client id (their sessions on A are then ended only by the sweep, as node_lost)")
	fs.DurationVar(&c.Crash.SweepWait, "crash-sweep-wait", c.Crash.SweepWait, "crash (presenced): after converging, wait up to this for node B to sweep node A (redis_nodes_lost); 0: do not wait")

	fs.IntVar(&c.Rolling.Devices, "rolling-devices", c.Rolling.Devices, "rolling: devices spread over the nodes")
	fs.IntVar(&c.Rolling.Nodes, "rolling-nodes", c.Rolling.Nodes, "rolling: presenced nodes restarted one after another (plus one node for the observer, not restarted)")
	fs.DurationVar(&c.Rolling.MaxDelay, "rolling-max-delay", c.Rolling.MaxDelay, "rolling: a disconnected device reconnects to another live node after a random delay below this")
	fs.DurationVar(&c.Rolling.DrainTimeout, "rolling-drain-timeout", c.Rolling.DrainTimeout, "rolling: a node not gone this long after SIGTERM is SIGKILLed (and noted)")
	fs.DurationVar(&c.Rolling.Pause, "rolling-pause", c.Rolling.Pause, "rolling: pause after a restart has converged, before the next node")
	fs.IntVar(&c.Rolling.Keepalive, "rolling-keepalive", c.Rolling.Keepalive, "rolling: keep-alive in seconds")

	fs.IntVar(&c.FlapDrop.Devices, "flap-drop-devices", c.FlapDrop.Devices, "flap-drop: devices per variant (same client id; a new client id each time)")
	fs.DurationVar(&c.FlapDrop.Duration, "flap-drop-duration", c.FlapDrop.Duration, "flap-drop: how long devices drop and come back")
	fs.DurationVar(&c.FlapDrop.UpMin, "flap-drop-up-min", c.FlapDrop.UpMin, "flap-drop: shortest time a device stays connected")
	fs.DurationVar(&c.FlapDrop.UpMax, "flap-drop-up-max", c.FlapDrop.UpMax, "flap-drop: longest time a device stays connected")
	fs.DurationVar(&c.FlapDrop.GapMax, "flap-drop-gap-max", c.FlapDrop.GapMax, "flap-drop: longest gap between a drop (socket closed, no DISCONNECT) and the reconnect (shortest 50ms)")
	fs.IntVar(&c.FlapDrop.Keepalive, "flap-drop-keepalive", c.FlapDrop.Keepalive, "flap-drop: keep-alive in seconds")

	fs.IntVar(&c.Battle.Pairs, "battle-pairs", c.Battle.Pairs, "battle: users, each with two clients sharing one client id")
	fs.DurationVar(&c.Battle.Duration, "battle-duration", c.Battle.Duration, "battle: how long the clients fight")
	fs.DurationVar(&c.Battle.Window, "battle-window", c.Battle.Window, "battle: the first and the last window whose publish rates are compared")
	fs.DurationVar(&c.Battle.Delay, "battle-delay", c.Battle.Delay, "battle: a kicked or refused client reconnects after a random delay below this")
}

func (c *config) validateResilience() error {
	for name, v := range map[string]int{
		"crash-sessions": c.Crash.Sessions, "crash-keepalive": c.Crash.Keepalive,
		"rolling-devices": c.Rolling.Devices, "rolling-keepalive": c.Rolling.Keepalive,
		"flap-drop-devices": c.FlapDrop.Devices, "flap-drop-keepalive": c.FlapDrop.Keepalive,
		"battle-pairs": c.Battle.Pairs,
	} {
		if v <= 0 {
			return fmt.Errorf("--%s must be positive", name)
		}
	}
	for name, v := range map[string]time.Duration{
		"crash-max-delay": c.Crash.MaxDelay, "crash-grace": c.Crash.Grace,
		"rolling-max-delay": c.Rolling.MaxDelay, "rolling-drain-timeout": c.Rolling.DrainTimeout,
		"flap-drop-duration": c.FlapDrop.Duration, "flap-drop-up-min": c.FlapDrop.UpMin,
		"battle-duration": c.Battle.Duration, "battle-window": c.Battle.Window, "battle-delay": c.Battle.Delay,
	} {
		if v <= 0 {
			return fmt.Errorf("--%s must be positive", name)
		}
	}
	if c.Crash.SweepWait < 0 || c.Rolling.Pause < 0 {
		return errors.New("--crash-sweep-wait and --rolling-pause must not be negative")
	}
	if c.Rolling.Nodes < 2 {
		return errors.New("--rolling-nodes must be at least 2 (a device reconnects to another node)")
	}
	if c.FlapDrop.UpMax < c.FlapDrop.UpMin {
		return errors.New("--flap-drop-up-max must be at least --flap-drop-up-min")
	}
	if c.FlapDrop.GapMax <= 50*time.Millisecond {
		return errors.New("--flap-drop-gap-max must be above 50ms")
	}
	if 2*c.Battle.Window > c.Battle.Duration {
		return errors.New("--battle-window must be at most half of --battle-duration")
	}
	if c.Crash.Keepalive > 65535 || c.Rolling.Keepalive > 65535 || c.FlapDrop.Keepalive > 65535 {
		return errors.New("keep-alive must be at most 65535")
	}
	return nil
}

// resilienceNA is why a resilience scenario does not apply to a system
// ("" when it does).
func resilienceNA(sys, scenario string) string {
	switch scenario {
	case scenarioCrash:
		if sys == result.SystemMemory {
			return naNeedsRedis
		}
	case scenarioRolling:
		switch sys {
		case result.SystemMemory:
			return naNeedsRedis
		case result.SystemMosquitto:
			return naNoCluster
		}
	}
	return ""
}

// resilienceExtraTime is what a resilience scenario may take beyond
// --run-timeout: its own configured durations.
func resilienceExtraTime(cfg config, scenario string) time.Duration {
	switch scenario {
	case scenarioCrash:
		return cfg.Crash.SweepWait
	case scenarioRolling:
		return time.Duration(cfg.Rolling.Nodes) * (cfg.Rolling.DrainTimeout + cfg.Rolling.Pause)
	case scenarioFlapDrop:
		return cfg.FlapDrop.Duration
	case scenarioBattle:
		return cfg.Battle.Duration
	}
	return 0
}

// ---------------------------------------------------------------------------
// Nodes

// startNode starts one more presenced node of the run's system, sharing its
// Redis, with its own ports and node id; it is stopped with the run.
func (e *runEnv) startNode(id string) (*system, error) {
	s := &system{name: e.sys.name, paths: e.sys.paths, dir: e.sys.dir, redis: e.sys.redis,
		extra: e.sys.extra, maxSubs: e.sys.maxSubs, pacingOff: e.sys.pacingOff, nodeID: id}
	var err error
	if s.mqttPort, err = freePort(); err != nil {
		return nil, err
	}
	if s.adminPort, err = freePort(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.nodes = append(e.nodes, s)
	e.mu.Unlock()
	if err := s.start(); err != nil {
		return nil, fmt.Errorf("node %s: %w", id, err)
	}
	return s, nil
}

// stopNodes kills the further nodes (not the run's system, nor its Redis).
func (e *runEnv) stopNodes() {
	e.mu.Lock()
	ns := e.nodes
	e.nodes = nil
	e.mu.Unlock()
	for _, s := range ns {
		s.kill()
	}
}

// pending is the presence work a presenced node still holds: its queues
// (tracker, feed), the writes it retries, and any counter named *pending*
// (the offline grace's pending ends, when the node has them).
func pending(stats map[string]any) float64 {
	var n float64
	for k, v := range stats {
		f, ok := v.(float64)
		if !ok {
			continue
		}
		if k == "tracker_queue_depth" || k == "tracker_retrying" || k == "feed_queue_depth" || strings.Contains(k, "pending") {
			n += f
		}
	}
	return n
}

// quiet tells whether every node answers its stats with nothing pending.
func quiet(nodes ...*system) bool {
	for _, s := range nodes {
		if s == nil || !s.isPresenced() {
			continue
		}
		st, err := s.adminStats()
		if err != nil || pending(st) > 0 {
			return false
		}
	}
	return true
}

// statNumber reads one counter of a node's stats (-1 when unreadable).
func statNumber(s *system, key string) float64 {
	st, err := s.adminStats()
	if err != nil {
		return -1
	}
	if v, ok := st[key].(float64); ok {
		return v
	}
	return -1
}

// redisDelta records the Redis commands between two INFO commandstats
// readings: the total and per user in Extra, each command's calls in a
// note (what when names the window).
func (e *runEnv) redisDelta(prefix, when string, c0, c1 map[string]int64, users int) {
	r := e.run
	d := commandDelta(c0, c1)
	var total int64
	for _, c := range d {
		total += c.calls
	}
	r.Extra[prefix+"redis_cmds"] = float64(total)
	if users > 0 {
		r.Extra[prefix+"redis_cmds_per_user"] = round3(float64(total) / float64(users))
	}
	parts := make([]string, 0, len(d))
	for _, c := range d {
		parts = append(parts, c.name+" "+strconv.FormatInt(c.calls, 10))
	}
	e.note("Redis commands %s (INFO commandstats): %d: %s", when, total, strings.Join(parts, ", "))
}

type cmdCalls struct {
	name  string
	calls int64
}

// commandDelta is the calls per command between two commandstats readings,
// most first; the bench's own INFO is left out.
func commandDelta(c0, c1 map[string]int64) []cmdCalls {
	var out []cmdCalls
	for name, v := range c1 {
		d := v - c0[name]
		if name == "info" {
			d-- // the bench's own reading
		}
		if d > 0 {
			out = append(out, cmdCalls{name, d})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].calls != out[j].calls {
			return out[i].calls > out[j].calls
		}
		return out[i].name < out[j].name
	})
	return out
}

// ---------------------------------------------------------------------------
// Devices that come back

// roamer is a device that, when its connection ends, comes back after a
// random delay on a node the run picks.
type roamer struct {
	user, id string
	ka       int

	mu      sync.Mutex
	d       *device
	node    int           // index of the node it is on; -1 while away
	backAt  time.Duration // CONNACK of its latest reconnect
	backs   int           // reconnects
	failed  int           // reconnect attempts that failed
	lastErr string
}

func (r *roamer) state() (d *device, node int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.d, r.node
}

// roam waits for the roamer's connection to end, then reconnects it after
// a random delay below maxDelay to the node pick gives (pick is told the
// node it was on), retrying (up to 20 times) on a failure; with once it
// stops after the first reconnect, else at stop.
func (e *runEnv) roam(r *roamer, rng *rand.Rand, maxDelay time.Duration, pick func(from int) (int, string, bool), once bool, stop <-chan struct{}) {
	for {
		d, from := r.state()
		select {
		case <-d.c.Done():
		case <-stop:
			return
		case <-e.cancel:
			return
		}
		e.tr.down(d.iv, mono(), detectWindow(time.Duration(r.ka)*time.Second))
		r.mu.Lock()
		r.node = -1
		r.mu.Unlock()
		for try := 0; ; try++ {
			wait := time.NewTimer(time.Duration(rng.Int63n(int64(maxDelay))))
			select {
			case <-wait.C:
			case <-stop:
				wait.Stop()
				return
			case <-e.cancel:
				wait.Stop()
				return
			}
			to, addr, ok := pick(from)
			if ok {
				nd, err := e.connectDeviceAt(addr, r.user, r.id, r.ka, 10*time.Second)
				if err == nil {
					r.mu.Lock()
					r.d, r.node, r.backAt = nd, to, nd.c.ConnackAt
					r.backs++
					r.mu.Unlock()
					break
				}
				r.mu.Lock()
				r.failed++
				r.lastErr = err.Error()
				r.mu.Unlock()
			}
			if try >= 20 {
				return
			}
		}
		if once {
			return
		}
	}
}

// roamerStats sums the roamers' reconnects and failures.
func roamerStats(rs []*roamer) (backs, failed int, lastErr string) {
	for _, r := range rs {
		r.mu.Lock()
		backs += r.backs
		failed += r.failed
		if r.lastErr != "" {
			lastErr = r.lastErr
		}
		r.mu.Unlock()
	}
	return backs, failed, lastErr
}

// newerThan is a check that the shown state is online with only sessions
// newer than those in before (the highest generation per client id shown
// until then), on node (any node when empty).
func newerThan(before map[string]uint64, node func(user string) string) func(string, Obs) bool {
	return func(user string, ob Obs) bool {
		if !ob.Online || len(ob.Gens) == 0 {
			return false
		}
		want := ""
		if node != nil {
			want = node(user)
		}
		for i, g := range ob.Gens {
			if g.Gen <= before[g.ID] {
				return false
			}
			if want != "" && (i >= len(ob.Nodes) || ob.Nodes[i] != want) {
				return false
			}
		}
		return true
	}
}

// highestGens is the highest generation shown per client id.
func highestGens(tl Timeline) map[string]uint64 {
	out := make(map[string]uint64)
	for _, l := range tl {
		for _, ob := range l {
			for _, g := range ob.Gens {
				out[g.ID] = max(out[g.ID], g.Gen)
			}
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// crash

// crashRun is what one run of the crash scenario carries from phase to
// phase.
type crashRun struct {
	e            *runEnv
	cfg          crashConfig
	n            int  // sessions
	mosq         bool // mosquitto: the sockets are closed instead of a node killed
	addrB, nodeB string
	b            *system // node B; nil on mosquitto
	obs          *observer
	devs         []*device
	before       map[string]uint64 // the highest generation per client id shown before the crash

	stop      chan struct{} // closed when the run ends
	rs        []*roamer
	c0, cConv map[string]int64 // Redis commands at the kill, and once converged
	kill      time.Duration
	backs     int
	back      []string // the users whose client came back
	backAt    map[string]time.Duration
	lastBack  time.Duration          // the last client's return
	fresh     func(string, Obs) bool // a user shown back online, on node B
	end       time.Duration
}

// crash: node A holds the sessions and is SIGKILLed; every client comes back
// on node B after a random delay. On mosquitto (one broker, no cluster) the
// clients' sockets are closed at once without DISCONNECT instead, and every
// client comes back to the same broker.
func (e *runEnv) crash() error {
	c := &crashRun{e: e, cfg: e.cfg.Crash}
	if err := c.setup(); err != nil {
		return err
	}
	c.stop = make(chan struct{})
	defer close(c.stop)
	if err := runPhases(c.crash, c.converge); err != nil {
		return err
	}
	c.report()
	return nil
}

// setup records the parameters, starts node B (on mosquitto, notes why
// there is none), connects the observer there and the sessions to node A,
// and waits until the observer shows every user online and the nodes are
// quiet.
func (c *crashRun) setup() error {
	e, r, cfg := c.e, c.e.run, c.cfg
	c.n = e.capDevices(cfg.Sessions, 20, "crash sessions")
	r.Params["sessions"] = c.n
	r.Params["max_delay_s"] = cfg.MaxDelay.Seconds()
	r.Params["grace_s"] = cfg.Grace.Seconds()
	r.Params["keepalive_s"] = cfg.Keepalive
	r.Params["observers"] = 1
	c.mosq = e.sys.lastWill()
	c.addrB = e.sys.addr()
	var err error
	if c.mosq {
		e.note("mosquitto has no cluster, and a killed mosquitto loses every client and (without persistence) every retained state: no fair comparison with a node crash. This run is the nearest: the clients' sockets are closed at once without DISCONNECT (a dead middlebox) and each comes back to the same broker after the same random delay; each will fires")
	} else {
		if c.b, err = e.startNode("bench-b"); err != nil {
			return err
		}
		c.addrB, c.nodeB = c.b.addr(), c.b.node()
		r.Params["nodes"] = 2
		r.Params["observer_on"] = "node B"
	}
	if c.obs, err = e.newObserverAt(c.addrB, "obs-crash", []string{topicPrefix + "+"}, observerBuf, nil); err != nil {
		return err
	}
	if c.devs, _, _, err = e.loadDevices("x", c.n, cfg.Keepalive); err != nil {
		return err
	}
	up := usersOf(c.devs)
	if got, ok := e.waitProgress(mono()+60*time.Second, 10*time.Second, len(up), func() int { return c.obs.count(up, online) }); !ok {
		return fmt.Errorf("the observer showed %d of %d users online before the crash (%s)", got, len(up), c.obs.state())
	}
	e.waitUntil(mono()+10*time.Second, func() bool { return quiet(e.sys, c.b) })
	c.before = highestGens(c.obs.timeline())
	return nil
}

// crash makes every device a roamer that comes back once, to node B, after
// a random delay; kills node A (on mosquitto, closes every socket); and
// waits until every client is back or has given up.
func (c *crashRun) crash() error {
	e, cfg := c.e, c.cfg
	for _, d := range c.devs {
		if d != nil {
			id := d.id
			if cfg.NewID {
				id += "-b"
			}
			c.rs = append(c.rs, &roamer{user: d.user, id: id, ka: cfg.Keepalive, d: d})
		}
	}
	if e.sys.redis != nil {
		var err error
		if c.c0, err = e.sys.redis.commandStats(); err != nil {
			return fmt.Errorf("redis INFO: %w", err)
		}
	}
	var wg sync.WaitGroup
	pick := func(int) (int, string, bool) { return 1, c.addrB, true }
	for i, ro := range c.rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.roam(ro, rand.New(rand.NewSource(int64(i+1))), cfg.MaxDelay, pick, true, c.stop)
		}()
	}
	c.kill = mono()
	if c.mosq {
		for _, ro := range c.rs {
			ro.d.c.Close()
		}
	} else {
		e.sys.kill()
	}
	wg.Wait()
	backs, failed, lastErr := roamerStats(c.rs)
	c.backs = backs
	if backs < len(c.rs) {
		e.note("%d of %d clients did not come back (%d failed attempts; last error: %s)", len(c.rs)-backs, len(c.rs), failed, lastErr)
	}
	c.backAt = make(map[string]time.Duration, len(c.rs))
	for _, ro := range c.rs {
		if _, node := ro.state(); node >= 0 {
			c.back = append(c.back, ro.user)
			c.backAt[ro.user] = ro.backAt
			c.lastBack = max(c.lastBack, ro.backAt)
		}
	}
	if len(c.back) == 0 {
		return fmt.Errorf("no client came back (%d failed attempts; last error: %s)", failed, lastErr)
	}
	return nil
}

// converge waits until the observer shows every client that came back
// online with a session newer than the crash, on node B, and node B is
// quiet: the time from the kill is the convergence. Then it waits for node
// B to sweep node A (part of the storm), and records the Redis commands
// until converged and until swept.
func (c *crashRun) converge() error {
	e, r, obs, back, kill := c.e, c.e.run, c.obs, c.back, c.kill
	onB := func(string) string { return c.nodeB }
	if c.mosq {
		onB = nil
	}
	c.fresh = newerThan(c.before, onB)
	converged := true
	if got, ok := e.waitProgress(mono()+60*time.Second, 15*time.Second, len(back), func() int { return obs.count(back, c.fresh) }); !ok {
		converged = false
		r.Extra["not_converged"] = float64(len(back) - got)
		e.note("the observer never showed every user back online on node B: %d of %d after the count stopped growing (%s)", got, len(back), obs.state())
	}
	if !e.waitUntil(mono()+30*time.Second, func() bool { return quiet(c.b) }) {
		converged = false
		e.note("node B still had presence work pending 30 s after the users were shown back")
	}
	quietAt := mono()
	if converged {
		if at, ok := convergeAt(obs.timeline(), back, kill, c.fresh); ok {
			r.Metrics.ConvergeMs = round1(ms(max(at, quietAt) - kill))
			r.Extra["shown_back_ms"] = round1(ms(at - kill))
		}
	}
	r.Extra["last_client_back_ms"] = round1(ms(c.lastBack - kill))
	if e.sys.redis != nil {
		var err error
		if c.cConv, err = e.sys.redis.commandStats(); err != nil {
			return fmt.Errorf("redis INFO: %w", err)
		}
	}
	c.sweep()
	time.Sleep(time.Second) // late publishes count
	c.end = mono()
	if e.sys.redis != nil {
		c1, err := e.sys.redis.commandStats()
		if err != nil {
			return fmt.Errorf("redis INFO: %w", err)
		}
		e.redisDelta("to_converge_", "from the kill until converged", c.c0, c.cConv, len(c.rs))
		e.redisDelta("storm_", "from the kill until node A was swept + 1 s", c.c0, c1, len(c.rs))
	}
	return nil
}

// sweep waits (up to --crash-sweep-wait) until node A's record expires and
// node B sweeps what A still held, and records when and how many sessions
// it swept (not on mosquitto).
func (c *crashRun) sweep() {
	e, r, b := c.e, c.e.run, c.b
	if b == nil || c.cfg.SweepWait <= 0 {
		return
	}
	if e.waitUntil(mono()+c.cfg.SweepWait, func() bool { return statNumber(b, "redis_nodes_lost") >= 1 }) {
		r.Extra["node_a_swept_ms"] = round1(ms(mono() - c.kill))
		e.waitUntil(mono()+10*time.Second, func() bool { return quiet(b) })
	} else {
		e.note("node B did not report node A lost (redis_nodes_lost) within %v of converging", c.cfg.SweepWait)
	}
	r.Extra["swept_sessions"] = max(0, statNumber(b, "redis_swept"))
}

// report counts, from the kill to the end, the users shown offline (and
// those of them back within the grace), the strobes and the retained
// publishes per user, with the verdicts on the two targets, and judges the
// observer.
func (c *crashRun) report() {
	e, r, cfg, kill := c.e, c.e.run, c.cfg, c.kill
	tl := c.obs.timeline()
	msgs := make([]int, 0, len(c.rs))
	offUsers, offBackInGrace, strobes := 0, 0, 0
	for _, ro := range c.rs {
		sc := showIn(tl[ro.user], kill, c.end)
		msgs = append(msgs, sc.Msgs)
		strobes += sc.Strobes
		if sc.Offline > 0 {
			offUsers++
			if at, ok := c.backAt[ro.user]; ok && at-kill <= cfg.Grace {
				offBackInGrace++
			}
		}
	}
	mean, worst, over := spread(msgs, 2)
	r.Metrics.Sessions = len(c.rs)
	r.Extra["clients_back"] = float64(c.backs)
	r.Extra["users_shown_offline"] = float64(offUsers)
	r.Extra["users_shown_offline_back_within_grace"] = float64(offBackInGrace)
	r.Extra["strobes"] = float64(strobes)
	r.Extra["publishes_per_user_mean"] = round3(mean)
	r.Extra["publishes_per_user_max"] = float64(worst)
	r.Extra["users_over_2_publishes"] = float64(over)
	e.note("target 0 users shown offline who came back within the grace (%v): %d: %s", cfg.Grace, offBackInGrace, verdictText(offBackInGrace == 0))
	e.note("target ≤ 2 retained publishes per user during the storm: max %d, mean %s, %d users over 2: %s", worst, fmtFloat(round3(mean)), over, verdictText(worst <= 2))
	e.evaluateObservers(c.end, c.obs)
}

func verdictText(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// ---------------------------------------------------------------------------
// rolling

// rollingRun is what one run of the rolling scenario carries from phase to
// phase.
type rollingRun struct {
	e       *runEnv
	cfg     rollingConfig
	n       int       // devices
	nodes   []*system // restarted one after the other
	obsNode *system   // the observer's, not restarted
	all     []*system // every node
	obs     *observer
	rs      []*roamer
	users   []string
	byUser  map[string]*roamer

	lmu     sync.Mutex
	live    []bool // per node: devices may reconnect to it
	pickRng *rand.Rand

	t0, lastConv, end time.Duration // the first SIGTERM, the last convergence, the end
}

// rolling: nodes on one Redis, devices spread over them; each node in turn
// gets SIGTERM, exits and is started again; a disconnected device comes
// back on another live node. The observer is on a further node that is
// not restarted.
func (e *runEnv) rolling() error {
	s := &rollingRun{e: e, cfg: e.cfg.Rolling}
	if err := runPhases(s.startNodes, s.connect); err != nil {
		return err
	}
	stopRoaming := s.roamAll()
	defer stopRoaming()
	if err := s.restarts(); err != nil {
		return err
	}
	s.report()
	return nil
}

// startNodes records the parameters, starts the further nodes and the
// observer's node, and connects the observer there.
func (s *rollingRun) startNodes() error {
	e, r, cfg := s.e, s.e.run, s.cfg
	s.n = e.capDevices(cfg.Devices, 20, "rolling devices")
	r.Params["devices"] = s.n
	r.Params["nodes"] = cfg.Nodes
	r.Params["max_delay_s"] = cfg.MaxDelay.Seconds()
	r.Params["keepalive_s"] = cfg.Keepalive
	r.Params["observers"] = 1
	r.Params["observer_on"] = "a further node, not restarted"
	s.nodes = []*system{e.sys}
	for i := 2; i <= cfg.Nodes; i++ {
		nd, err := e.startNode("bench-" + strconv.Itoa(i))
		if err != nil {
			return err
		}
		s.nodes = append(s.nodes, nd)
	}
	var err error
	if s.obsNode, err = e.startNode("bench-obs"); err != nil {
		return err
	}
	s.obs, err = e.newObserverAt(s.obsNode.addr(), "obs-rolling", []string{topicPrefix + "+"}, observerBuf, nil)
	return err
}

// connect connects the devices, spread over the nodes in turn, and waits
// until the observer shows them all online and every node is quiet.
func (s *rollingRun) connect() error {
	e, cfg, n := s.e, s.cfg, s.n
	s.rs = make([]*roamer, n)
	failed, err := connectMany(n, e.cfg.ConnectWorkers, func(i int) error {
		u := "r" + strconv.Itoa(i)
		d, err := e.connectDeviceAt(s.nodes[i%len(s.nodes)].addr(), u, u+"-d", cfg.Keepalive, connectTimeout)
		if err != nil {
			return err
		}
		s.rs[i] = &roamer{user: u, id: u + "-d", ka: cfg.Keepalive, d: d, node: i % len(s.nodes)}
		return nil
	})
	if failed > 0 {
		return fmt.Errorf("%d of %d devices failed to connect: %w", failed, n, err)
	}
	s.users = make([]string, n)
	s.byUser = make(map[string]*roamer, n)
	for i, ro := range s.rs {
		s.users[i] = ro.user
		s.byUser[ro.user] = ro
	}
	if got, ok := e.waitProgress(mono()+60*time.Second, 10*time.Second, n, func() int { return s.obs.count(s.users, online) }); !ok {
		return fmt.Errorf("the observer showed %d of %d devices online before the restarts (%s)", got, n, s.obs.state())
	}
	s.all = append(append([]*system(nil), s.nodes...), s.obsNode)
	e.waitUntil(mono()+10*time.Second, func() bool { return quiet(s.all...) })
	return nil
}

// roamAll has every device come back, whenever its connection ends, on
// another live node after a random delay; the func it returns stops them
// and waits.
func (s *rollingRun) roamAll() func() {
	s.live = make([]bool, len(s.nodes))
	for i := range s.live {
		s.live[i] = true
	}
	s.pickRng = rand.New(rand.NewSource(7))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, ro := range s.rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.e.roam(ro, rand.New(rand.NewSource(int64(i+1))), s.cfg.MaxDelay, s.pick, false, stop)
		}()
	}
	return func() { close(stop); wg.Wait() }
}

// pick is a random live node other than from, with its address; false when
// there is none.
func (s *rollingRun) pick(from int) (int, string, bool) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	var cand []int
	for i, ok := range s.live {
		if ok && i != from {
			cand = append(cand, i)
		}
	}
	if len(cand) == 0 {
		return 0, "", false
	}
	i := cand[s.pickRng.Intn(len(cand))]
	return i, s.nodes[i].addr(), true
}

// setLive marks node i as one devices may reconnect to, or not.
func (s *rollingRun) setLive(i int, ok bool) {
	s.lmu.Lock()
	s.live[i] = ok
	s.lmu.Unlock()
}

// settled tells whether ob shows user online with only sessions on the
// node it is on now (converged).
func (s *rollingRun) settled(user string, ob Obs) bool {
	want := "away"
	if _, node := s.byUser[user].state(); node >= 0 {
		want = s.nodes[node].node()
	}
	if !ob.Online || len(ob.Gens) == 0 || want == "away" {
		return false
	}
	for i := range ob.Gens {
		if i >= len(ob.Nodes) || ob.Nodes[i] != want {
			return false
		}
	}
	return true
}

// restarts restarts every node in turn and records the Redis commands from
// the first SIGTERM until the end.
func (s *rollingRun) restarts() error {
	e := s.e
	c0, err := e.sys.redis.commandStats()
	if err != nil {
		return fmt.Errorf("redis INFO: %w", err)
	}
	s.t0 = mono()
	for i, nd := range s.nodes {
		if err := s.restart(i, nd); err != nil {
			return err
		}
	}
	time.Sleep(time.Second) // late publishes count
	s.end = mono()
	c1, err := e.sys.redis.commandStats()
	if err != nil {
		return fmt.Errorf("redis INFO: %w", err)
	}
	e.redisDelta("", "from the first SIGTERM until the end", c0, c1, s.n)
	return nil
}

// restart gives node i SIGTERM (SIGKILL after the drain timeout) while
// devices may not reconnect to it, starts it again, and waits until every
// device is shown online on its node and every node is quiet: the time
// from the SIGTERM is the node's convergence. It pauses before the next
// node.
func (s *rollingRun) restart(i int, nd *system) error {
	e, r, cfg, n := s.e, s.e.run, s.cfg, s.n
	s.setLive(i, false)
	tTerm := mono()
	took, clean := nd.term(cfg.DrainTimeout)
	r.Extra[fmt.Sprintf("node%d_exit_ms", i+1)] = round1(ms(took))
	if !clean {
		e.note("node %d had not exited %v after SIGTERM: SIGKILLed", i+1, cfg.DrainTimeout)
	}
	if err := nd.start(); err != nil {
		return fmt.Errorf("restart node %d: %w", i+1, err)
	}
	if i == 0 {
		e.watchDrops()
	}
	s.setLive(i, true)
	if got, ok := e.waitProgress(mono()+60*time.Second, 15*time.Second, n, func() int { return s.obs.count(s.users, s.settled) }); !ok {
		e.note("after restarting node %d the observer showed %d of %d devices online on their node (the count stopped growing)", i+1, got, n)
	}
	if !e.waitUntil(mono()+30*time.Second, func() bool { return quiet(s.all...) }) {
		e.note("after restarting node %d presence work was still pending 30 s after the devices were shown back", i+1)
	}
	s.lastConv = mono()
	r.Extra[fmt.Sprintf("node%d_converge_ms", i+1)] = round1(ms(s.lastConv - tTerm))
	if i < len(s.nodes)-1 {
		e.sleepUntil(mono() + cfg.Pause)
	}
	return nil
}

// report counts, from the first SIGTERM to the end, the users shown
// offline, the strobes and the retained publishes per user, with the
// verdict on the target, and judges the observer.
func (s *rollingRun) report() {
	e, r, n := s.e, s.e.run, s.n
	backs, failedBacks, lastErr := roamerStats(s.rs)
	if failedBacks > 0 {
		e.note("%d reconnect attempts failed (retried; last error: %s)", failedBacks, lastErr)
	}
	tl := s.obs.timeline()
	msgs := make([]int, 0, n)
	offUsers, strobes := 0, 0
	for _, u := range s.users {
		sc := showIn(tl[u], s.t0, s.end)
		msgs = append(msgs, sc.Msgs)
		strobes += sc.Strobes
		if sc.Offline > 0 {
			offUsers++
		}
	}
	mean, worst, over := spread(msgs, 2)
	r.Metrics.Sessions = n
	r.Metrics.ConvergeMs = round1(ms(s.lastConv - s.t0))
	r.Extra["total_s"] = round3((s.lastConv - s.t0).Seconds())
	r.Extra["reconnects"] = float64(backs)
	r.Extra["users_shown_offline"] = float64(offUsers)
	r.Extra["strobes"] = float64(strobes)
	r.Extra["publishes_per_user_mean"] = round3(mean)
	r.Extra["publishes_per_user_max"] = float64(worst)
	r.Extra["users_over_2_publishes"] = float64(over)
	e.note("target 0 users shown offline during the rolling restart: %d: %s", offUsers, verdictText(offUsers == 0))
	e.evaluateObservers(s.end, s.obs)
}

// ---------------------------------------------------------------------------
// flap-drop

// flapDropRun is what one run of the flap-drop scenario carries from phase
// to phase.
type flapDropRun struct {
	e                    *runEnv
	cfg                  flapDropConfig
	obs                  *observer
	same, fresh          []*device // the devices that come back with the same client id, with a new one
	up                   []string
	start, stopAt        time.Duration
	drops, backs, failed atomic.Int64
	firstErr             atomic.Value
}

// flapDrop: devices stay connected for a while, then close their socket
// without DISCONNECT and come back after a short gap, over and over: half
// with the same client id, half with a new client id each time (a network
// change). The users never leave.
func (e *runEnv) flapDrop() error {
	s := &flapDropRun{e: e, cfg: e.cfg.FlapDrop}
	if err := s.setup(); err != nil {
		return err
	}
	s.flapAll()
	s.report()
	return nil
}

// setup records the parameters, connects the observer and both halves of
// the devices, and waits until the observer shows them all online.
func (s *flapDropRun) setup() error {
	e, r, cfg := s.e, s.e.run, s.cfg
	n := e.capDevices(2*cfg.Devices, 20, "flap-drop devices") / 2
	r.Params["devices_per_variant"] = n
	r.Params["duration_s"] = cfg.Duration.Seconds()
	r.Params["up_s"] = fmt.Sprintf("%g–%g", cfg.UpMin.Seconds(), cfg.UpMax.Seconds())
	r.Params["gap_s"] = fmt.Sprintf("0.05–%g", cfg.GapMax.Seconds())
	r.Params["keepalive_s"] = cfg.Keepalive
	r.Params["observers"] = 1
	var err error
	if s.obs, err = e.newObserver("obs-flap-drop", topicPrefix+"+", observerBuf); err != nil {
		return err
	}
	if s.same, _, _, err = e.loadDevices("fs", n, cfg.Keepalive); err != nil {
		return err
	}
	if s.fresh, _, _, err = e.loadDevices("fn", n, cfg.Keepalive); err != nil {
		return err
	}
	s.up = append(usersOf(s.same), usersOf(s.fresh)...)
	if got, ok := e.waitProgress(mono()+30*time.Second, 10*time.Second, len(s.up), func() int { return s.obs.count(s.up, online) }); !ok {
		return fmt.Errorf("the observer showed %d of %d devices online (%s)", got, len(s.up), s.obs.state())
	}
	return nil
}

// flapAll has every device drop and come back until the duration is over,
// and waits for them.
func (s *flapDropRun) flapAll() {
	s.start = mono() + 100*time.Millisecond
	s.stopAt = s.start + s.cfg.Duration
	var wg sync.WaitGroup
	for i, d := range s.same {
		if d != nil {
			wg.Add(1)
			go func() { defer wg.Done(); s.flap(d, int64(i+1), false) }()
		}
	}
	for i, d := range s.fresh {
		if d != nil {
			wg.Add(1)
			go func() { defer wg.Done(); s.flap(d, int64(100000+i), true) }()
		}
	}
	wg.Wait()
	if f := s.failed.Load(); f > 0 {
		s.e.note("%d reconnects failed (retried): %v", f, s.firstErr.Load())
	}
}

// flap is one device's life: connected for a random time in [UpMin, UpMax),
// then dropped (its socket closed without DISCONNECT) and back after a
// random gap in [50ms, GapMax), retried until it is, with a new client id
// each time when newID; until the duration is over.
func (s *flapDropRun) flap(d *device, seed int64, newID bool) {
	e, cfg := s.e, s.cfg
	rng := rand.New(rand.NewSource(seed))
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int63n(int64(hi-lo)))
	}
	k := 0
	for {
		e.sleepUntil(min(mono()+between(cfg.UpMin, cfg.UpMax), s.stopAt))
		if mono() >= s.stopAt || e.cancelled() {
			return
		}
		d.drop(mono())
		s.drops.Add(1)
		for {
			e.sleepUntil(mono() + between(50*time.Millisecond, cfg.GapMax))
			if e.cancelled() {
				return
			}
			id := d.id
			if newID {
				k++
				id = d.user + "-d" + strconv.Itoa(k)
			}
			nd, err := e.connectDevice(d.user, id, cfg.Keepalive, 10*time.Second)
			if err == nil {
				d = nd
				s.backs.Add(1)
				break
			}
			s.failed.Add(1)
			s.firstErr.CompareAndSwap(nil, err.Error())
		}
	}
}

// report waits for the last drops' states, then counts per variant the
// strobes, the offline states shown and the retained publishes per user
// per minute, with the verdict on the target, and judges the observer.
func (s *flapDropRun) report() {
	e, r, cfg := s.e, s.e.run, s.cfg
	time.Sleep(2 * time.Second) // the last drops' states arrive
	end := mono()
	tl := s.obs.timeline()
	minutes := cfg.Duration.Minutes()
	for _, v := range []struct {
		name string
		devs []*device
	}{{"same_id", s.same}, {"new_id", s.fresh}} {
		users := usersOf(v.devs)
		strobes, offline, msgs, strobed := 0, 0, 0, 0
		for _, u := range users {
			sc := showIn(tl[u], s.start, end)
			strobes += sc.Strobes
			offline += sc.Offline
			msgs += sc.Msgs
			if sc.Strobes > 0 {
				strobed++
			}
		}
		k := float64(max(1, len(users)))
		r.Extra[v.name+"_strobes"] = float64(strobes)
		r.Extra[v.name+"_users_strobed"] = float64(strobed)
		r.Extra[v.name+"_offline_shown"] = float64(offline)
		r.Extra[v.name+"_strobes_per_user_min"] = round3(float64(strobes) / k / minutes)
		r.Extra[v.name+"_publishes_per_user_min"] = round3(float64(msgs) / k / minutes)
		e.note("%s: target 0 strobes (offline shown, then online again): %d strobes of %d users: %s", strings.ReplaceAll(v.name, "_", " "), strobes, strobed, verdictText(strobes == 0))
	}
	r.Metrics.Sessions = len(s.up)
	r.Extra["drops"] = float64(s.drops.Load())
	r.Extra["reconnects"] = float64(s.backs.Load())
	e.evaluateObservers(end, s.obs)
}

// ---------------------------------------------------------------------------
// battle

// battleKA is the keep-alive of the battle's clients, in seconds.
const battleKA = 30

// battleRun is what one run of the battle scenario carries from phase to
// phase.
type battleRun struct {
	e     *runEnv
	cfg   battleConfig
	obs   *observer
	pairs []*battlePair
	users []string

	start, stopAt, end         time.Duration
	takeovers, refused, failed atomic.Int64
	cmu                        sync.Mutex
	codes                      map[byte]int // CONNACK refusals by code
	firstErr                   atomic.Value
}

// battlePair is the live client of one user's two.
type battlePair struct {
	mu   sync.Mutex
	live *device
}

// battle: pairs of clients share one client id; each reconnects (after a
// short random delay) whenever it is kicked or refused. The publish rate of
// the first window is set against the last one's: a broker that damps
// takeover battles publishes less and less.
func (e *runEnv) battle() error {
	cfg := e.cfg.Battle
	r := e.run
	r.Params["pairs"] = cfg.Pairs
	r.Params["duration_s"] = cfg.Duration.Seconds()
	r.Params["window_s"] = cfg.Window.Seconds()
	r.Params["reconnect_delay_s"] = fmt.Sprintf("0–%g", cfg.Delay.Seconds())
	r.Params["observers"] = 1
	obs, err := e.newObserver("obs-battle", topicPrefix+"+", observerBuf)
	if err != nil {
		return err
	}
	s := &battleRun{e: e, cfg: cfg, obs: obs, codes: map[byte]int{}}
	s.fightAll()
	s.report()
	return nil
}

// fightAll has both clients of every pair fight until the duration is
// over, and waits for the last takeovers' states.
func (s *battleRun) fightAll() {
	s.pairs = make([]*battlePair, s.cfg.Pairs)
	s.users = make([]string, s.cfg.Pairs)
	for i := range s.pairs {
		s.pairs[i] = &battlePair{}
		s.users[i] = "bt" + strconv.Itoa(i)
	}
	s.start = mono() + 100*time.Millisecond
	s.stopAt = s.start + s.cfg.Duration
	var wg sync.WaitGroup
	for i := range s.pairs {
		for side := range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); s.fight(i, side) }()
		}
	}
	wg.Wait()
	time.Sleep(time.Second) // the last takeovers' states arrive
	s.end = mono()
	if f := s.failed.Load(); f > 0 {
		s.e.note("%d connects failed without a CONNACK refusal: %v", f, s.firstErr.Load())
	}
}

// fight is one client of pair i: it connects (the second side after a
// random delay), stays until it is kicked, and reconnects after a random
// delay, until the duration is over; a refusal is counted by its code.
func (s *battleRun) fight(i, side int) {
	e, cfg, p := s.e, s.cfg, s.pairs[i]
	rng := rand.New(rand.NewSource(int64(2*i + side + 1)))
	e.sleepUntil(s.start + time.Duration(side)*time.Duration(rng.Int63n(int64(cfg.Delay))))
	for mono() < s.stopAt && !e.cancelled() {
		d, err := e.connectDevice(s.users[i], s.users[i]+"-d", battleKA, 10*time.Second)
		if err != nil {
			var ce *connackError
			if errors.As(err, &ce) {
				s.refused.Add(1)
				s.cmu.Lock()
				s.codes[ce.code]++
				s.cmu.Unlock()
			} else {
				s.failed.Add(1)
				s.firstErr.CompareAndSwap(nil, err.Error())
			}
		} else {
			p.mu.Lock()
			if p.live != nil {
				e.tr.down(p.live.iv, d.c.ConnackAt, detectWindow(battleKA*time.Second))
			}
			p.live = d
			p.mu.Unlock()
			s.takeovers.Add(1)
			t := time.NewTimer(max(0, s.stopAt-mono()))
			select {
			case <-d.c.Done():
			case <-t.C:
			case <-e.cancel:
			}
			t.Stop()
			if mono() >= s.stopAt {
				return
			}
		}
		e.sleepUntil(mono() + time.Duration(rng.Int63n(int64(cfg.Delay))))
	}
}

// report sets the publish rate of the first window against the last's,
// and records the takeovers, the refusals by code, the strobes and the
// offline states shown, and judges the observer.
func (s *battleRun) report() {
	e, r, cfg, start, stopAt := s.e, s.e.run, s.cfg, s.start, s.stopAt
	tl := s.obs.timeline()
	firstMsgs, lastMsgs, strobes, offline := 0, 0, 0, 0
	for _, u := range s.users {
		firstMsgs += showIn(tl[u], start, start+cfg.Window).Msgs
		lastMsgs += showIn(tl[u], stopAt-cfg.Window, stopAt).Msgs
		sc := showIn(tl[u], start, s.end)
		strobes += sc.Strobes
		offline += sc.Offline
	}
	perMin := func(msgs int) float64 {
		return round1(float64(msgs) / float64(cfg.Pairs) / cfg.Window.Minutes())
	}
	r.Metrics.Sessions = cfg.Pairs
	r.Extra["takeovers"] = float64(s.takeovers.Load())
	r.Extra["takeovers_per_user_min"] = round1(float64(s.takeovers.Load()) / float64(cfg.Pairs) / cfg.Duration.Minutes())
	r.Extra["refused"] = float64(s.refused.Load())
	s.cmu.Lock()
	for c, k := range s.codes {
		r.Extra[fmt.Sprintf("refused_code_%#x", c)] = float64(k)
	}
	s.cmu.Unlock()
	r.Extra["first_window_publishes_per_user_min"] = perMin(firstMsgs)
	r.Extra["last_window_publishes_per_user_min"] = perMin(lastMsgs)
	if firstMsgs > 0 {
		r.Extra["last_to_first_ratio"] = round3(float64(lastMsgs) / float64(firstMsgs))
	}
	r.Extra["strobes"] = float64(strobes)
	r.Extra["offline_shown"] = float64(offline)
	e.note("retained publishes per user per minute: %s in the first %v, %s in the last %v (a broker that damps the battle publishes less in the last)",
		fmtFloat(perMin(firstMsgs)), cfg.Window, fmtFloat(perMin(lastMsgs)), cfg.Window)
	e.evaluateObservers(s.end, s.obs)
}

// ---------------------------------------------------------------------------
// Counting (pure)

// shown counts what one observer was shown of one user in [from, to).
type shown struct {
	Msgs    int // messages received (every retained publish, duplicates included)
	Offline int // times the shown state turned offline
	Strobes int // times it turned offline and then online again, both in the window
}

// showIn replays one user's messages (in receive order) as an observer
// following the contract shows them: a message whose version is not above
// the highest seen is ignored. The state shown before from is the starting
// point: a user shown online before the window and offline in it turned
// offline; a user first shown offline in the window turned offline too.
func showIn(obs []Obs, from, to time.Duration) shown {
	var s shown
	var maxV uint64
	state := 0 // 0 nothing shown, 1 online, 2 offline
	offInWindow := false
	for _, ob := range obs {
		in := ob.At >= from && ob.At < to
		if in {
			s.Msgs++
		}
		if ob.At >= to {
			break
		}
		if ob.Version != 0 {
			if ob.Version <= maxV {
				continue
			}
			maxV = ob.Version
		}
		next := 1
		if !ob.Online {
			next = 2
		}
		if in && next != state {
			if next == 2 {
				s.Offline++
				offInWindow = true
			} else if state == 2 && offInWindow {
				s.Strobes++
				offInWindow = false
			}
		}
		state = next
	}
	return s
}

// spread is the mean and the maximum of counts, and how many exceed limit.
func spread(counts []int, limit int) (mean float64, most, over int) {
	if len(counts) == 0 {
		return 0, 0, 0
	}
	sum := 0
	for _, c := range counts {
		sum += c
		most = max(most, c)
		if c > limit {
			over++
		}
	}
	return float64(sum) / float64(len(counts)), most, over
}
