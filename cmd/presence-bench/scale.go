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

// stopMasters stops the Redis servers ms and forgets them.
func (p *scaleProcs) stopMasters(ms []*redisServer) {
	p.mu.Lock()
	kept := p.masters[:0]
	for _, m := range p.masters {
		stop := false
		for _, x := range ms {
			stop = stop || x == m
		}
		if !stop {
			kept = append(kept, m)
		}
	}
	p.masters = kept
	p.mu.Unlock()
	for _, m := range ms {
		m.stop()
	}
}

// runScale runs the scale scenario on its own processes (it starts no
// system of runOne's kind), stopping it after its time.
func runScale(cfg config, r result.Run, fdLimit uint64) result.Run {
	s := cfg.Scale
	timeout := cfg.RunTimeout + s.NodeTTL + s.Settle + s.Window + time.Duration(float64(s.Changes)/s.Rate*float64(time.Second))
	return runOwnProcs(cfg, r, fdLimit, timeout, (*runEnv).scale)
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
