package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// sentinelMasterName is the name the sentinels know the primary by.
	sentinelMasterName = "presenced"
	// sentinelTimeout bounds the wait for new sentinels to know everything.
	sentinelTimeout = 20 * time.Second
)

// sentinelDataArgs configure the primary and replicas of StartSentinel: a
// replica syncs at once, without a fork writing an RDB file to disk or the
// 5 s wait for other replicas, and announces 127.0.0.1.
var sentinelDataArgs = []string{
	"--repl-diskless-sync", "yes",
	"--repl-diskless-sync-delay", "0",
	"--replica-announce-ip", "127.0.0.1",
}

// Sentinel is a primary with replicas, watched by Redis Sentinel processes
// (redis-server --sentinel) under the master name "presenced".
type Sentinel struct {
	name      string
	nodes     []*Server // the data nodes: the first primary, then its replicas
	sentinels []*Server
}

// StartSentinel starts a primary, replicas replicas of it and sentinels
// sentinel processes (at least 1), each on a random 127.0.0.1 port with no
// persistence. The sentinels monitor the primary as "presenced" with a quorum
// of a majority of them (2 of 3), down-after-milliseconds 1000,
// failover-timeout 3000 and parallel-syncs 1, and announce 127.0.0.1. Each
// sentinel's config file lives in a directory of its own, where the sentinel
// rewrites it; Restart of a sentinel keeps it.
//
// It returns once every replica reports master_link_status:up and every
// sentinel knows the primary as master, knows every replica with its link
// ok, and knows every other sentinel. That takes up to about 2 s: sentinels
// find each other through hello messages sent every 2 s. Every process is
// killed at the end of the test.
//
// A replica's command line names the first primary (--replicaof): after a
// failover, a replica restarted with Restart follows the old primary until
// the sentinels reconfigure it.
func StartSentinel(t testing.TB, replicas, sentinels int) *Sentinel {
	t.Helper()
	if replicas < 0 || sentinels < 1 {
		t.Fatalf("redistest: StartSentinel needs replicas >= 0 and sentinels >= 1, not %d and %d", replicas, sentinels)
	}
	sn := &Sentinel{name: sentinelMasterName}
	primary := start(t, false, sentinelDataArgs)
	sn.nodes = append(sn.nodes, primary)
	for i := 0; i < replicas; i++ {
		args := append(append([]string(nil), sentinelDataArgs...), "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
		sn.nodes = append(sn.nodes, start(t, false, args))
	}
	deadline := time.Now().Add(sentinelTimeout)
	// The replicas first: a sentinel learns them from the primary's INFO,
	// which it asks at once and then every 10 s.
	if err := pollEvery(pollInterval, deadline, func(cs conns) error {
		for _, r := range sn.nodes[1:] {
			info, err := cs.info(r.Addr(), "replication")
			if err != nil {
				return err
			}
			if info["master_link_status"] != "up" {
				return fmt.Errorf("%s: master_link_status is %q", r.Addr(), info["master_link_status"])
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("redistest: the replicas of %s did not sync within %v: %v%s", primary.Addr(), sentinelTimeout, err, sn.tails())
	}

	quorum := sentinels/2 + 1
	for i := 0; i < sentinels; i++ {
		s := newServer(t, nil)
		dir := s.dir
		s.sentinel = &sentinelConf{text: func(port int) string {
			return strings.Join([]string{
				"port " + strconv.Itoa(port),
				"bind 127.0.0.1",
				"daemonize no",
				`logfile ""`,
				"dir " + strconv.Quote(dir),
				"sentinel announce-ip 127.0.0.1",
				"sentinel resolve-hostnames no",
				fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d", sn.name, primary.port, quorum),
				fmt.Sprintf("sentinel down-after-milliseconds %s 1000", sn.name),
				fmt.Sprintf("sentinel failover-timeout %s 3000", sn.name),
				fmt.Sprintf("sentinel parallel-syncs %s 1", sn.name),
			}, "\n") + "\n"
		}}
		s.run(t, false)
		sn.sentinels = append(sn.sentinels, s)
	}
	if err := pollEvery(pollInterval, deadline, func(cs conns) error {
		return sn.ready(cs, primary, replicas)
	}); err != nil {
		t.Fatalf("redistest: the sentinels %v did not learn %s within %v: %v%s",
			sn.SentinelAddrs(), sn.name, sentinelTimeout, err, sn.tails())
	}
	return sn
}

// MasterName is the name the sentinels know the primary by, "presenced".
func (sn *Sentinel) MasterName() string { return sn.name }

// SentinelAddrs are the sentinels' addresses, "127.0.0.1:port", in start
// order.
func (sn *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(sn.sentinels))
	for i, s := range sn.sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Sentinels are the sentinel processes, in the order of SentinelAddrs: Kill
// one to test a failover with a sentinel down.
func (sn *Sentinel) Sentinels() []*Server {
	return append([]*Server(nil), sn.sentinels...)
}

// Nodes are the data nodes in start order: the first primary, then the
// replicas. Master and Replicas tell the current roles.
func (sn *Sentinel) Nodes() []*Server {
	return append([]*Server(nil), sn.nodes...)
}

// Master is the data node the running sentinels name as master (SENTINEL
// GET-MASTER-ADDR-BY-NAME), the one most of them name should they disagree.
// It fails the test when no sentinel answers or they name an unknown address.
func (sn *Sentinel) Master(t testing.TB) *Server {
	t.Helper()
	votes := map[string]int{}
	var errs []string
	for _, s := range sn.sentinels {
		if !s.running() {
			continue
		}
		addr, err := sn.masterAddr(nil, s.Addr())
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		votes[addr]++
	}
	best := ""
	for addr, n := range votes {
		if best == "" || n > votes[best] || n == votes[best] && addr < best {
			best = addr
		}
	}
	if best == "" {
		t.Fatalf("redistest: no sentinel names the master of %s: %s", sn.name, strings.Join(errs, "; "))
	}
	m := sn.byAddr(best)
	if m == nil {
		t.Fatalf("redistest: the sentinels name %s as master, not a node of this test", best)
	}
	return m
}

// Replicas are the data nodes that run and say they are replicas (INFO
// replication), in start order, whatever their master. A node that does not
// answer is left out.
func (sn *Sentinel) Replicas() []*Server { return withRole(sn.nodes, "slave") }

// Client returns a go-redis failover client (redis.NewFailoverClient) for the
// master name and every sentinel, closed at the end of the test. It follows
// the master through failovers.
func (sn *Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    sn.name,
		SentinelAddrs: sn.SentinelAddrs(),
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// WaitReplicated waits until every running replica of the running master has
// processed everything the master had written when it was called, so that a
// write made before it survives a failover. It fails the test after within.
func (sn *Sentinel) WaitReplicated(t testing.TB, within time.Duration) {
	t.Helper()
	if err := waitReplicated(sn.nodes, time.Now().Add(within)); err != nil {
		t.Fatalf("redistest: replicas not caught up within %v: %v", within, err)
	}
}

// WaitFailover waits until every running sentinel names the same master
// other than old (SENTINEL GET-MASTER-ADDR-BY-NAME) and that data node
// reports role:master. It returns that node and the time at which the poll
// (every 25 ms) first saw it, and logs how long after old's Kill that was.
// old is usually the killed primary, but need not be dead. It fails the test
// after within.
func (sn *Sentinel) WaitFailover(t testing.TB, old *Server, within time.Duration) (*Server, time.Time) {
	t.Helper()
	var newMaster *Server
	err := pollUntil(time.Now().Add(within), func(cs conns) error {
		named := ""
		for _, s := range sn.sentinels {
			if !s.running() {
				continue
			}
			addr, err := sn.masterAddr(cs, s.Addr())
			if err != nil {
				return err
			}
			if addr == old.Addr() {
				return fmt.Errorf("%s still names %s", s.Addr(), addr)
			}
			if named != "" && addr != named {
				return fmt.Errorf("the sentinels disagree: %s and %s", named, addr)
			}
			named = addr
		}
		if named == "" {
			return fmt.Errorf("no sentinel runs")
		}
		m := sn.byAddr(named)
		if m == nil {
			return fmt.Errorf("the sentinels name %s, not a node of this test", named)
		}
		info, err := cs.info(m.Addr(), "replication")
		if err != nil {
			return err
		}
		if info["role"] != "master" {
			return fmt.Errorf("%s: role is %q", m.Addr(), info["role"])
		}
		newMaster = m
		return nil
	})
	at := time.Now()
	if err != nil {
		t.Fatalf("redistest: WaitFailover: no new master for %s (was %s) within %v: %v%s", sn.name, old.Addr(), within, err, sn.tails())
	}
	old.mu.Lock()
	killedAt := old.killedAt
	old.mu.Unlock()
	if !killedAt.IsZero() {
		t.Logf("redistest: %s killed; the sentinels named %s, a master, after %v",
			old.Addr(), newMaster.Addr(), at.Sub(killedAt).Round(time.Millisecond))
	}
	return newMaster, at
}

// masterAddr asks one sentinel for the master's address, over cs when it is
// not nil.
func (sn *Sentinel) masterAddr(cs conns, sentinel string) (string, error) {
	cmd := []string{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", sn.name}
	var v any
	var err error
	if cs != nil {
		v, err = cs.do(sentinel, cmd...)
	} else {
		v, err = ask(sentinel, cmd...)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %v", sentinel, err)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return "", fmt.Errorf("%s: GET-MASTER-ADDR-BY-NAME answered %v", sentinel, v)
	}
	host, _ := a[0].(string)
	port, _ := a[1].(string)
	return host + ":" + port, nil
}

// ready checks once that every sentinel knows primary as master with all
// its replicas and the other sentinels.
func (sn *Sentinel) ready(cs conns, primary *Server, replicas int) error {
	for _, s := range sn.sentinels {
		v, err := cs.do(s.Addr(), "SENTINEL", "MASTER", sn.name)
		if err != nil {
			return err
		}
		m := pairs(v)
		want := map[string]string{
			"ip":                  "127.0.0.1",
			"port":                strconv.Itoa(primary.port),
			"flags":               "master",
			"num-slaves":          strconv.Itoa(replicas),
			"num-other-sentinels": strconv.Itoa(len(sn.sentinels) - 1),
		}
		for k, w := range want {
			if m[k] != w {
				return fmt.Errorf("sentinel %s: %s is %q, want %q", s.Addr(), k, m[k], w)
			}
		}
		for _, cmd := range []string{"REPLICAS", "SENTINELS"} {
			v, err := cs.do(s.Addr(), "SENTINEL", cmd, sn.name)
			if err != nil {
				return err
			}
			list, _ := v.([]any)
			for _, e := range list {
				p := pairs(e)
				switch {
				case cmd == "REPLICAS" && (p["flags"] != "slave" || p["master-link-status"] != "ok"):
					return fmt.Errorf("sentinel %s: replica %s:%s is %s, link %s", s.Addr(), p["ip"], p["port"], p["flags"], p["master-link-status"])
				case cmd == "SENTINELS" && p["flags"] != "sentinel":
					return fmt.Errorf("sentinel %s: sentinel %s:%s is %s", s.Addr(), p["ip"], p["port"], p["flags"])
				}
			}
		}
	}
	return nil
}

// byAddr finds a data node by its address.
func (sn *Sentinel) byAddr(addr string) *Server {
	for _, n := range sn.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// tails quotes the end of every process's output.
func (sn *Sentinel) tails() string {
	var b strings.Builder
	for _, n := range append(sn.Nodes(), sn.sentinels...) {
		b.WriteString("\n--- " + n.Addr())
		b.WriteString(n.tail())
	}
	return b.String()
}

// pairs reads a flat array of field, value, field, value... as a map.
func pairs(v any) map[string]string {
	m := map[string]string{}
	a, _ := v.([]any)
	for i := 0; i+1 < len(a); i += 2 {
		k, _ := a[i].(string)
		val, _ := a[i+1].(string)
		m[k] = val
	}
	return m
}

// sentinelConf is a sentinel's config file. The sentinel rewrites it as it
// learns; it is written anew only for a new port, so that Restart keeps what
// the sentinel wrote.
type sentinelConf struct {
	text    func(port int) string
	written int // the port of the file on disk, 0 before the first
}

// file writes the config for port if it is not on disk yet, and returns its
// path.
func (sc *sentinelConf) file(dir string, port int) (string, error) {
	path := filepath.Join(dir, "sentinel.conf")
	if sc.written != port {
		if err := os.WriteFile(path, []byte(sc.text(port)), 0o600); err != nil {
			return "", fmt.Errorf("sentinel config: %w", err)
		}
		sc.written = port
	}
	return path, nil
}
