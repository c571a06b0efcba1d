package main

// The join scenario (issue 17): a presenced node joining a three-master
// Redis Cluster whose store already holds N offline users, against the same
// node joining the empty cluster (each node joins a fresh cluster of its own:
// nothing in it but the seeded users). The bench seeds the users straight into
// Redis in the store's own format (store.SeedOffline: the first user by the
// store's scripts, the rest as copies of its record, pipelined). For each
// node it measures the time from the process start to /readyz 200, its RSS
// then and --join-after later, and then the time from the SUBACK of a
// subscription to one random seeded user (presence/users/{user}, one after
// the other on one client) to that user's snapshot. With --join-old it does
// the same, side by side, for an older build (the pre-interest one loads
// every user at start) up to --join-old-max users.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/bench/result"
	"github.com/presenced/presenced/store"
)

const (
	scenarioJoin = "join"
	naJoin       = "the join scenario runs presenced nodes on a Redis Cluster (presenced-redis only)"
	// joinPrefix is the store's key prefix (redis.key_prefix's default).
	joinPrefix = "presenced:"
	// joinRetention is redis.retention's default: the seeded records' TTL.
	joinRetention = 720 * time.Hour
)

// joinConfig sizes the join scenario.
type joinConfig struct {
	Users        []int         // store sizes, ascending; each in a fresh cluster
	Snapshots    int           // random seeded users subscribed to, per node
	After        time.Duration // RSS is read again this long after ready
	ReadyWait    time.Duration // how long a node may take to be ready
	SnapWait     time.Duration // how long one snapshot may take
	Old          string        // an older presenced binary joined side by side; "" none
	OldMax       int           // the largest store the old build joins
	OldSnapshots int           // random users subscribed to on the old build
}

func joinDefaults(c *config) {
	c.Join = joinConfig{Users: []int{100000, 1000000}, Snapshots: 1000, After: 10 * time.Second, ReadyWait: 2 * time.Minute,
		SnapWait: 2 * time.Second, OldMax: 100000, OldSnapshots: 100}
}

func joinFlags(fs *flag.FlagSet, c *config) {
	j := &c.Join
	fs.Func("join-users", "join: store sizes (users seeded), comma-separated, ascending (default 100000,1000000)", func(v string) error {
		var ns []int
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 || (len(ns) > 0 && n <= ns[len(ns)-1]) {
				return fmt.Errorf("want positive ascending numbers, got %q", v)
			}
			ns = append(ns, n)
		}
		j.Users = ns
		return nil
	})
	fs.IntVar(&j.Snapshots, "join-snapshots", j.Snapshots, "join: random seeded users a client subscribes to, one after the other, per node (time from SUBACK to the snapshot)")
	fs.DurationVar(&j.After, "join-after", j.After, "join: RSS is read at ready and again this long after")
	fs.DurationVar(&j.ReadyWait, "join-ready-wait", j.ReadyWait, "join: how long a node may take to answer /readyz 200")
	fs.DurationVar(&j.SnapWait, "join-snapshot-wait", j.SnapWait, "join: how long one snapshot may take before it counts as missing")
	fs.StringVar(&j.Old, "join-old", j.Old, "join: an older presenced binary joined side by side (e.g. the pre-interest build, 53da37f); empty: none")
	fs.IntVar(&j.OldMax, "join-old-max", j.OldMax, "join: the largest store the old build joins")
	fs.IntVar(&j.OldSnapshots, "join-old-snapshots", j.OldSnapshots, "join: random seeded users subscribed to on the old build")
}

func (c *config) validateJoin() error {
	j := c.Join
	if len(j.Users) == 0 || j.Snapshots <= 0 || j.OldSnapshots <= 0 || j.After < 0 || j.ReadyWait <= 0 || j.SnapWait <= 0 {
		return errors.New("--join-users, --join-snapshots, --join-old-snapshots, --join-ready-wait and --join-snapshot-wait must be positive, --join-after not negative")
	}
	return nil
}

// joinNA is why the join scenario does not apply to sys ("" when it does).
func joinNA(sys, scenario string) string {
	if scenario == scenarioJoin && sys != result.SystemRedis {
		return naJoin
	}
	return ""
}

// joinSize names a store size in figure names: 100k, 1m, 2500.
func joinSize(n int) string {
	switch {
	case n >= 1000000 && n%1000000 == 0:
		return strconv.Itoa(n/1000000) + "m"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// runJoin runs the join scenario on its own processes, stopping it after
// its time.
func runJoin(cfg config, r result.Run, fdLimit uint64) result.Run {
	j := cfg.Join
	joins := 1 + len(j.Users)
	if j.Old != "" {
		joins *= 2
	}
	timeout := cfg.RunTimeout + time.Duration(joins)*(j.ReadyWait+j.After) + time.Duration(j.Users[len(j.Users)-1]/10000)*time.Second
	return runOwnProcs(cfg, r, fdLimit, timeout, (*runEnv).join)
}

// joinRun is what one run of the join scenario carries from step to step.
type joinRun struct {
	e       *runEnv
	cfg     joinConfig
	procs   *scaleProcs
	dir     string
	masters []*redisServer
	extra   string // the nodes' config extra: the cluster's addresses
	users   []string
	seeded  int
	rng     *rand.Rand
}

// join is the scenario; procs collects what it starts.
func (e *runEnv) join(procs *scaleProcs, dir string) error {
	j := &joinRun{e: e, cfg: e.cfg.Join, procs: procs, dir: dir, rng: rand.New(rand.NewSource(time.Now().UnixNano()))}
	r := e.run
	r.Params["redis_masters"] = scaleMasters
	r.Params["users"] = j.cfg.Users
	r.Params["snapshots"] = j.cfg.Snapshots
	r.Params["after_s"] = j.cfg.After.Seconds()
	if j.cfg.Old != "" {
		r.Params["old_build_max_users"] = j.cfg.OldMax
		r.Params["old_snapshots"] = j.cfg.OldSnapshots
		if v := firstLine(j.cfg.Old, "presenced", "--version"); v != "" {
			e.note("old build: %s (%s)", v, j.cfg.Old)
		}
	}
	n := j.cfg.Users[len(j.cfg.Users)-1]
	j.users = make([]string, n)
	for i := range j.users {
		j.users[i] = "j" + strconv.Itoa(i)
	}
	// Every node joins a cluster of its own, fresh, that holds nothing but
	// the seeded users: no incarnation of an earlier node to sweep.
	sizes := append([]int{0}, j.cfg.Users...)
	for _, size := range sizes {
		if err := j.joinFresh("", e.cfg.Paths.Presenced, size); err != nil {
			return err
		}
		if j.cfg.Old != "" && size <= j.cfg.OldMax {
			if err := j.joinFresh("old_", j.cfg.Old, size); err != nil {
				return err
			}
		}
	}
	return nil
}

// joinFresh starts a fresh cluster, seeds size users in it, has a node of
// bin join it (joinNode) and stops the cluster.
func (j *joinRun) joinFresh(pre, bin string, size int) error {
	e := j.e
	masters, err := startRedisCluster(e.cfg.Paths.Redis, j.dir, scaleMasters, j.procs)
	if err != nil {
		return err
	}
	defer j.procs.stopMasters(masters)
	j.masters, j.seeded = masters, 0
	addrs := make([]string, len(masters))
	for i, m := range masters {
		addrs[i] = strconv.Quote(m.addr())
	}
	j.extra = fmt.Sprintf("redis: {cluster: true, addrs: [%s]}\n", strings.Join(addrs, ", "))
	if e.cfg.PresencedExtra != "" {
		if j.extra, err = mergeYAML(j.extra, e.cfg.PresencedExtra); err != nil {
			return fmt.Errorf("--presenced-config-extra: %w", err)
		}
	}
	if size > 0 {
		if err := j.seed(size); err != nil {
			return err
		}
	}
	return j.joinNode(pre, bin, size)
}

// seed seeds the users up to size, on top of those seeded already (none
// in a fresh cluster).
func (j *joinRun) seed(size int) error {
	addrs := make([]string, len(j.masters))
	for i, m := range j.masters {
		addrs[i] = m.addr()
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t := mono()
	if _, err := store.SeedOffline(ctx, c, joinPrefix, j.users[j.seeded:size], joinRetention); err != nil {
		return err
	}
	took := mono() - t
	if _, ok := j.e.run.Extra["seed_s_"+joinSize(size)]; !ok { // the new build's cluster
		j.e.run.Extra["seed_s_"+joinSize(size)] = round3(took.Seconds())
		j.e.run.Extra["seed_users_per_s_"+joinSize(size)] = round1(float64(size-j.seeded) / took.Seconds())
	}
	j.seeded = size
	var keys int64
	for _, m := range j.masters {
		n, err := redis.NewClient(&redis.Options{Addr: m.addr()}).DBSize(ctx).Result()
		if err != nil {
			return fmt.Errorf("redis %s: DBSIZE: %w", m.addr(), err)
		}
		keys += n
	}
	if keys < int64(size) {
		return fmt.Errorf("seeded %d users, but the masters hold %d keys", size, keys)
	}
	mem, err := clusterUsedMemory(j.masters)
	if err == nil {
		j.e.run.Extra["redis_used_memory_mib_"+joinSize(size)] = round1(float64(mem) / (1 << 20))
	}
	return nil
}

// joinNode starts a node of binary bin on the cluster holding size users,
// measures it (figures named with pre and the size: "empty" for none) and
// stops it.
func (j *joinRun) joinNode(pre, bin string, size int) error {
	e, r := j.e, j.e.run
	name := "empty"
	if size > 0 {
		name = joinSize(size)
	}
	p := e.cfg.Paths
	p.Presenced = bin
	nd := &system{name: result.SystemRedis, paths: p, dir: j.dir, redis: j.masters[0], extra: j.extra,
		nodeID: "join-" + strings.TrimSuffix(pre, "_") + name, portWait: j.cfg.ReadyWait}
	var err error
	if nd.mqttPort, err = freePort(); err != nil {
		return err
	}
	if nd.adminPort, err = freePort(); err != nil {
		return err
	}
	j.procs.mu.Lock()
	j.procs.nodes = append(j.procs.nodes, nd)
	j.procs.mu.Unlock()
	defer nd.kill()
	if err := nd.start(); err != nil {
		return fmt.Errorf("node %s: %w", nd.node(), err)
	}
	readyAt, ok := nd.waitReady(nd.startedAt + j.cfg.ReadyWait)
	if !ok {
		return fmt.Errorf("node %s (%s users) did not answer /readyz 200 within %v: %s", nd.node(), name, j.cfg.ReadyWait, scaleLastLines(nd.stderr.String(), 3))
	}
	rss, err := nd.rssKiB()
	if err != nil {
		return err
	}
	r.Extra[pre+"ready_s_"+name] = round3((readyAt - nd.startedAt).Seconds())
	r.Extra[pre+"rss_ready_mib_"+name] = round1(float64(rss) / 1024)
	e.sleepUntil(readyAt + j.cfg.After)
	if e.cancelled() {
		return errors.New("stopped")
	}
	if rss, err = nd.rssKiB(); err != nil {
		return err
	}
	r.Extra[pre+"rss_after_mib_"+name] = round1(float64(rss) / 1024)
	if size > 0 {
		for _, k := range []string{"ready", "after"} {
			if v, ok := r.Extra[pre+"rss_"+k+"_mib_empty"]; ok {
				r.Extra[pre+"rss_"+k+"_over_empty_mib_"+name] = round1(r.Extra[pre+"rss_"+k+"_mib_"+name] - v)
			}
		}
		count := j.cfg.Snapshots
		if pre != "" {
			count = j.cfg.OldSnapshots
		}
		pick := make([]string, 0, count)
		for _, i := range j.rng.Perm(size)[:min(count, size)] {
			pick = append(pick, j.users[i])
		}
		snap, err := joinSnapshots(nd.addr(), "join-sub-"+pre+name, pick, j.cfg.SnapWait)
		if err != nil {
			return fmt.Errorf("node %s: snapshots: %w", nd.node(), err)
		}
		if s := summarize(snap.lat); s != nil {
			r.Extra[pre+"snapshot_p50_ms_"+name] = s.P50
			r.Extra[pre+"snapshot_p99_ms_"+name] = s.P99
			r.Extra[pre+"snapshot_max_ms_"+name] = s.Max
		}
		r.Extra[pre+"snapshots_"+name] = float64(len(snap.lat))
		if snap.missing > 0 || snap.wrong > 0 || snap.early > 0 {
			r.Extra[pre+"snapshots_missing_"+name] = float64(snap.missing)
			r.Extra[pre+"snapshots_not_offline_"+name] = float64(snap.wrong)
			label := "new"
			if pre != "" {
				label = "old"
			}
			e.note("%s node on %s users: %d of %d snapshots missing after %v, %d not the seeded offline user, %d before the SUBACK",
				label, name, snap.missing, len(pick), j.cfg.SnapWait, snap.wrong, snap.early)
		}
	}
	if st, err := nd.adminStats(); err == nil {
		parts := []string{}
		for _, k := range []string{"sessions", "interest_users_heard", "interest_users_watched", "interest_firehose", "redis_channels", "redis_feed_messages_total", "publish_queue_depth"} {
			if v, ok := st[k].(float64); ok {
				parts = append(parts, k+" "+strconv.FormatFloat(v, 'f', -1, 64))
			}
		}
		if len(parts) > 0 {
			e.note("%snode on %s users, at the end: %s", pre, name, strings.Join(parts, ", "))
		}
	}
	return nil
}

// waitReady polls /readyz until it answers 200 (the time it was seen) or
// deadline passes.
func (s *system) waitReady(deadline time.Duration) (time.Duration, bool) {
	cl := http.Client{Timeout: time.Second}
	url := "http://127.0.0.1:" + strconv.Itoa(s.adminPort) + "/readyz"
	for mono() < deadline {
		if resp, err := cl.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return mono(), true
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0, false
}

// joinSnaps is what joinSnapshots measured.
type joinSnaps struct {
	lat     []float64 // ms from each SUBACK to its user's first message
	missing int       // users whose message did not come in time
	wrong   int       // messages that were not an offline user's
	early   int       // messages read before their SUBACK (counted as 0 ms)
}

// joinSubsPerClient is how many users one client of joinSnapshots
// subscribes to (mqtt.max_subscriptions is 100 by default).
const joinSubsPerClient = 50

// joinSnapshots subscribes to presence/users/{user} of each of users in turn
// (a new client every joinSubsPerClient users) and times, for each, from its
// SUBACK to the first message on its topic (the user's snapshot), waiting at
// most wait.
func joinSnapshots(addr, id string, users []string, wait time.Duration) (joinSnaps, error) {
	var out joinSnaps
	for k := 0; k < len(users); k += joinSubsPerClient {
		if err := joinSnapshotsOn(addr, id+"-"+strconv.Itoa(k/joinSubsPerClient), users[k:min(k+joinSubsPerClient, len(users))], wait, &out); err != nil {
			return out, err
		}
	}
	sort.Float64s(out.lat)
	return out, nil
}

// joinSnapshotsOn is joinSnapshots on one client.
func joinSnapshotsOn(addr, id string, users []string, wait time.Duration, out *joinSnaps) error {
	type arrival struct {
		topic   string
		payload []byte
		at      time.Duration
	}
	ch := make(chan arrival, 1024)
	c, err := connect(addr, connectOpts{ClientID: id, Keepalive: 60, OnPublish: func(topic string, payload []byte, at time.Duration) {
		select {
		case ch <- arrival{topic, payload, at}:
		default:
		}
	}}, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, u := range users {
		topic := topicPrefix + u
		if err := c.Subscribe(10*time.Second, topic); err != nil {
			return err
		}
		sub := time.Duration(c.subackAt.Load())
		t := time.NewTimer(wait)
	wait:
		for {
			select {
			case a := <-ch:
				if a.topic != topic {
					continue // a late one of an earlier user
				}
				d := a.at - sub
				if d < 0 {
					out.early++
					d = 0
				}
				out.lat = append(out.lat, ms(d))
				if ob, ok := parsePresenced(u, a.payload); !ok || ob.Status != "offline" {
					out.wrong++
				}
				break wait
			case <-t.C:
				out.missing++
				break wait
			case <-c.Done():
				t.Stop()
				return fmt.Errorf("connection closed: %w", c.Err())
			}
		}
		t.Stop()
	}
	return nil
}
