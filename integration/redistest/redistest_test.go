package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/internal/testkit"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestStartSetGet(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := Start(t)
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr = %q", s.Addr())
	}
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}
	// No persistence: the defaults hold.
	if got, err := c.ConfigGet(ctx, "save").Result(); err != nil || got["save"] != "" {
		t.Fatalf("CONFIG GET save = %v, %v; want empty", got, err)
	}
	if got, err := c.ConfigGet(ctx, "appendonly").Result(); err != nil || got["appendonly"] != "no" {
		t.Fatalf("CONFIG GET appendonly = %v, %v; want no", got, err)
	}
}

func TestExtraArgs(t *testing.T) {
	t.Parallel()
	s := Start(t, "--maxmemory", "10mb", "--save", "60 1")
	c := s.Client(t)
	got, err := c.ConfigGet(ctxT(t), "maxmemory").Result()
	if err != nil || got["maxmemory"] != "10485760" {
		t.Fatalf("CONFIG GET maxmemory = %v, %v", got, err)
	}
	if got, err := c.ConfigGet(ctxT(t), "save").Result(); err != nil || got["save"] != "60 1" {
		t.Fatalf("extra --save does not override: %v, %v", got, err)
	}
}

func TestRestartLosesData(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := Start(t)
	addr := s.Addr()
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	s.Restart(t)
	if s.Addr() != addr {
		t.Fatalf("Addr after Restart = %s, want %s", s.Addr(), addr)
	}
	// The same client reconnects; the data is gone.
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart = %q, %v; want redis.Nil", got, err)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after Restart = %d, %v; want 0", n, err)
	}
	// A new client works too.
	if err := s.Client(t).Set(ctx, "k2", "v2", 0).Err(); err != nil {
		t.Fatalf("SET on a new client: %v", err)
	}
}

func TestStopThenPingFails(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := Start(t)
	c := s.Client(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	s.Stop(t)
	s.Stop(t) // a second Stop does nothing
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Stop succeeded")
	}
	if conn, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		conn.Close()
		t.Fatalf("dial %s after Stop succeeded", s.Addr())
	}
	// Restart after Stop brings it back.
	s.Restart(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Stop and Restart: %v", err)
	}
}

func TestInfoGrows(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := Start(t)
	c := s.Client(t)
	if err := c.Ping(ctx).Err(); err != nil { // the client's handshake happens here
		t.Fatalf("PING: %v", err)
	}
	before := s.Info(t, "total_commands_processed")
	const n = 10
	for i := 0; i < n; i++ {
		if err := c.Incr(ctx, "n").Err(); err != nil {
			t.Fatalf("INCR: %v", err)
		}
	}
	after := s.Info(t, "total_commands_processed")
	// n INCRs plus the first Info's own INFO.
	if after != before+n+1 {
		t.Fatalf("total_commands_processed went %d -> %d, want +%d", before, after, n+1)
	}
	if got := s.Info(t, "total_commands_processed"); got != after+1 {
		t.Fatalf("an Info call counts one command: %d -> %d", after, got)
	}
}

func TestManyInParallel(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]string{}
	for i := 0; i < 8; i++ {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			s := Start(t)
			mu.Lock()
			if other, dup := seen[s.Addr()]; dup {
				t.Errorf("%s given to %s too", s.Addr(), other)
			}
			seen[s.Addr()] = t.Name()
			mu.Unlock()
			c := s.Client(t)
			if err := c.Set(ctx, "who", t.Name(), 0).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			if got, err := c.Get(ctx, "who").Result(); err != nil || got != t.Name() {
				t.Fatalf("GET = %q, %v (another test's server?)", got, err)
			}
		})
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	begin := time.Now()
	cl := StartCluster(t, 3)
	t.Logf("StartCluster(3) took %v", time.Since(begin))
	if len(cl.Addrs()) != 3 || len(cl.Nodes()) != 3 {
		t.Fatalf("Addrs = %v", cl.Addrs())
	}
	cc := cl.Client(t)

	slots := map[int64]bool{}
	for i := 0; i < 100; i++ {
		k := fmt.Sprintf("key:%d", i)
		if err := cc.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		slot, err := cc.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %s: %v", k, err)
		}
		slots[slot] = true
	}
	for i := 0; i < 100; i++ {
		k := fmt.Sprintf("key:%d", i)
		if got, err := cc.Get(ctx, k).Int(); err != nil || got != i {
			t.Fatalf("GET %s = %d, %v", k, got, err)
		}
	}
	if len(slots) < 50 {
		t.Fatalf("100 keys in only %d slots", len(slots))
	}
	// The keys are spread over every master.
	var total int64
	for _, n := range cl.Nodes() {
		size, err := n.Client(t).DBSize(ctx).Result()
		if err != nil {
			t.Fatalf("DBSIZE on %s: %v", n.Addr(), err)
		}
		if size == 0 {
			t.Errorf("node %s holds no key", n.Addr())
		}
		total += size
	}
	if total != 100 {
		t.Fatalf("the nodes hold %d keys, want 100", total)
	}

	const script = `redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[1]); return redis.call('GET', KEYS[2])`
	s1, _ := cc.ClusterKeySlot(ctx, "a").Result()
	s2, _ := cc.ClusterKeySlot(ctx, "b").Result()
	if s1 == s2 {
		t.Fatalf("a and b share slot %d", s1)
	}
	err := cc.Eval(ctx, script, []string{"a", "b"}, "x").Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("EVAL over two slots: err = %v, want CROSSSLOT", err)
	}
	got, err := cc.Eval(ctx, script, []string{"{tag}a", "{tag}b"}, "x").Text()
	if err != nil || got != "x" {
		t.Fatalf("EVAL over {tag} keys = %q, %v; want x", got, err)
	}
}

func TestClusterTotalCommands(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	cl := StartCluster(t, 3)
	cc := cl.Client(t)
	if err := cc.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	// Let the client learn the slots and open its connections first.
	for i := 0; i < 20; i++ {
		if err := cc.Set(ctx, fmt.Sprint("warm", i), i, 0).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
	}
	before := cl.TotalCommands(t)
	const n = 30
	for i := 0; i < n; i++ {
		if err := cc.Set(ctx, fmt.Sprint("k", i), i, 0).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
	}
	after := cl.TotalCommands(t)
	if after < before+n {
		t.Fatalf("TotalCommands went %d -> %d, want at least +%d", before, after, n)
	}
	for _, n := range cl.Nodes() {
		if n.Info(t, "cluster_enabled") != 1 {
			t.Fatalf("%s: cluster_enabled is not 1", n.Addr())
		}
	}
}

// fatalTB catches Fatalf so that a failure of the package can be tested.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalOf runs fn with a TB whose Fatalf ends fn, and returns its message
// ("" when fn returned normally).
func fatalOf(t *testing.T, fn func(tb testing.TB)) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

// Not parallel: it changes PATH.
func TestNotInstalledFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	msg := fatalOf(t, func(tb testing.TB) { Start(tb) })
	if want := "redis-server not found: run `make deps` (make test does)"; msg != want {
		t.Fatalf("Start without redis-server: %q, want %q", msg, want)
	}
	msg = fatalOf(t, func(tb testing.TB) { StartCluster(tb, 3) })
	if !strings.Contains(msg, "not found: run `make deps` (make test does)") {
		t.Fatalf("StartCluster without redis: %q", msg)
	}
	msg = fatalOf(t, func(tb testing.TB) { StartClusterWithReplicas(tb, 3, 1) })
	if !strings.Contains(msg, "not found: run `make deps` (make test does)") {
		t.Fatalf("StartClusterWithReplicas without redis: %q", msg)
	}
	msg = fatalOf(t, func(tb testing.TB) { StartSentinel(tb, 1, 3) })
	if !strings.Contains(msg, "not found: run `make deps` (make test does)") {
		t.Fatalf("StartSentinel without redis: %q", msg)
	}
}

func TestBadArgsReportOutput(t *testing.T) {
	t.Parallel()
	msg := fatalOf(t, func(tb testing.TB) { Start(tb, "--no-such-directive", "1") })
	for _, want := range []string{"did not start after 5 tries", "exited early", "redis-server output", "no-such-directive"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("failure message lacks %q:\n%s", want, msg)
		}
	}
}

func TestClusterNeedsThreeMasters(t *testing.T) {
	t.Parallel()
	msg := fatalOf(t, func(tb testing.TB) { StartCluster(tb, 2) })
	if !strings.Contains(msg, "at least 3 masters") {
		t.Fatalf("StartCluster(2): %q", msg)
	}
}

func TestRESPReader(t *testing.T) {
	t.Parallel()
	s := Start(t)
	rc, err := dialRESP(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"SET", "k", "line1\r\nline2"}, "OK"},
		{[]string{"GET", "k"}, "line1\r\nline2"},
		{[]string{"INCR", "n"}, "1"},
		{[]string{"GET", "missing"}, "<nil>"},
		{[]string{"RPUSH", "l", "a", "b"}, "2"},
		{[]string{"LRANGE", "l", "0", "-1"}, "[a b]"},
	} {
		v, err := rc.do(tc.cmd...)
		if got := fmt.Sprint(v); err != nil || got != tc.want {
			t.Fatalf("%v = %s, %v; want %s", tc.cmd, got, err, tc.want)
		}
	}
	if _, err := rc.do("NOSUCHCOMMAND"); err == nil || !strings.Contains(err.Error(), "ERR") {
		t.Fatalf("unknown command: %v", err)
	}
}

func TestParseClusterNodes(t *testing.T) {
	t.Parallel()
	const out = "" +
		"07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host.a slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected\n" +
		"67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922\n" +
		"e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 10923 [10924->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]\n" +
		"6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:30005@31005 master,fail - 1426238316232 0 5 disconnected\n"
	nodes, err := parseClusterNodes(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 4 {
		t.Fatalf("%d nodes", len(nodes))
	}
	me, ok := myself(nodes)
	if !ok || me.addr != "127.0.0.1:30001" || !me.has("master") || me.epoch != 1 {
		t.Fatalf("myself = %+v", me)
	}
	if fmt.Sprint(me.slots) != "[0-5460 10923]" {
		t.Fatalf("slots = %v", me.slots)
	}
	r, _ := byID(nodes, "07c37dfeb235213a872192d90877d0cd55635b91")
	if !r.has("slave") || r.master != me.id || r.addr != "127.0.0.1:30004" {
		t.Fatalf("replica = %+v", r)
	}
	if f, _ := byID(nodes, "6ec23923021cf3ffec47632106199cb7f496ce01"); !f.has("fail") || len(f.slots) != 0 {
		t.Fatalf("failed node = %+v", f)
	}
	if _, err := parseClusterNodes("abc 127.0.0.1:1@2 master\n"); err == nil {
		t.Fatal("a short line parsed")
	}

	have := []slotRange{{10, 19}, {0, 9}, {30, 40}}
	for _, tc := range []struct {
		want []slotRange
		ok   bool
	}{
		{[]slotRange{{0, 19}}, true},
		{[]slotRange{{5, 15}, {35, 35}}, true},
		{[]slotRange{{0, 20}}, false},
		{[]slotRange{{25, 25}}, false},
		{nil, true},
	} {
		if got := covers(have, tc.want); got != tc.ok {
			t.Errorf("covers(%v, %v) = %v", have, tc.want, got)
		}
	}
	if got := fmt.Sprint(spreadSlots(3)); got != "[0-5460 5461-10921 10922-16383]" {
		t.Errorf("spreadSlots(3) = %s", got)
	}
}

// pidsOf are the process ids of the servers that run.
func pidsOf(servers []*Server) []int {
	var pids []int
	for _, s := range servers {
		if pid := s.PID(); pid != 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// checkGone checks, after the test that started them ended, that every
// server's process has exited and been waited for, and on Linux that none of
// pids is left.
func checkGone(t *testing.T, servers []*Server, pids []int) {
	t.Helper()
	if len(servers) == 0 || len(pids) == 0 {
		t.Fatal("no process to check")
	}
	for _, s := range servers {
		if s.PID() != 0 {
			t.Errorf("%s still has process %d", s.Addr(), s.PID())
		}
		s.mu.Lock()
		p := s.last
		s.mu.Unlock()
		select {
		case <-p.done:
		default:
			t.Errorf("%s: process %d not waited for", s.Addr(), p.cmd.Process.Pid)
		}
	}
	if runtime.GOOS == "linux" {
		for _, pid := range pids {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
				t.Errorf("process %d is left", pid)
			}
		}
	}
}

// getAll polls until every key:i of n keys reads i through c.
func getAll(t *testing.T, ctx context.Context, c redis.Cmdable, n int, within time.Duration) {
	t.Helper()
	i := 0 // keys below i have been read
	testkit.Wait(t, within, fmt.Sprintf("every one of %d keys read", n), func() error {
		for ; i < n; i++ {
			k := fmt.Sprintf("key:%d", i)
			if got, err := c.Get(ctx, k).Int(); err != nil || got != i {
				return fmt.Errorf("GET %s = %d, %v", k, got, err)
			}
		}
		return nil
	})
}

// A replica cluster starts with the roles asked for; when the master of a
// key is SIGKILLed, its replica is promoted and owns its slots on every
// survivor, and a cluster client that reloads its slot map reads every key
// (replicated before the kill) and writes to the new master.
func TestClusterReplicaPromoted(t *testing.T) {
	t.Parallel()
	var nodes []*Server
	var pids []int
	t.Run("failover", func(t *testing.T) {
		ctx := ctxT(t)
		begin := time.Now()
		cl := StartClusterWithReplicas(t, 3, 1)
		t.Logf("StartClusterWithReplicas(3, 1) took %v", time.Since(begin).Round(time.Millisecond))
		nodes = cl.Nodes()
		pids = pidsOf(nodes)
		if len(nodes) != 6 || len(pids) != 6 {
			t.Fatalf("%d nodes, %d processes", len(nodes), len(pids))
		}
		if got, want := cl.Masters(), nodes[:3]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Masters = %v, want %v", got, want)
		}
		if got, want := cl.Replicas(), nodes[3:]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Replicas = %v, want %v", got, want)
		}
		for i, m := range nodes[:3] {
			if r := cl.ReplicaOf(t, m); r != nodes[3+i] {
				t.Fatalf("ReplicaOf(%s) = %s, want %s", m.Addr(), r.Addr(), nodes[3+i].Addr())
			}
		}
		if got, err := nodes[4].Client(t).ConfigGet(ctx, "cluster-node-timeout").Result(); err != nil || got["cluster-node-timeout"] != "2000" {
			t.Fatalf("cluster-node-timeout = %v, %v", got, err)
		}

		cc := cl.Client(t)
		const keys = 100
		for i := 0; i < keys; i++ {
			if err := cc.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
		}
		m := cl.MasterOf(t, "key:0")
		if got, err := m.Client(t).Get(ctx, "key:0").Result(); err != nil || got != "0" {
			t.Fatalf("GET key:0 on MasterOf %s = %q, %v", m.Addr(), got, err)
		}
		r := cl.ReplicaOf(t, m)
		cl.WaitReplicated(t, 5*time.Second)

		m.Kill(t)
		killed := time.Now()
		if m.PID() != 0 {
			t.Fatalf("PID after Kill = %d", m.PID())
		}
		if conn, err := net.DialTimeout("tcp", m.Addr(), time.Second); err == nil {
			conn.Close()
			t.Fatalf("dial %s after Kill succeeded", m.Addr())
		}
		m.Kill(t) // a second Kill does nothing

		nm, at := cl.WaitPromoted(t, m, 20*time.Second)
		t.Logf("promotion observed %v after the kill", at.Sub(killed).Round(time.Millisecond))
		if nm != r {
			t.Fatalf("WaitPromoted = %s, want the replica %s", nm.Addr(), r.Addr())
		}
		if got := cl.MasterOf(t, "key:0"); got != nm {
			t.Fatalf("MasterOf(key:0) = %s, want %s", got.Addr(), nm.Addr())
		}
		if got := cl.Masters(); len(got) != 3 || !slices.Contains(got, nm) || slices.Contains(got, m) {
			t.Fatalf("Masters after the failover = %v", got)
		}
		if got := cl.Replicas(); len(got) != 2 || slices.Contains(got, nm) {
			t.Fatalf("Replicas after the failover = %v", got)
		}

		// The client that knew the dead master, once it reloads its slot map.
		cc.ReloadState(ctx)
		reload := time.Now()
		getAll(t, ctx, cc, keys, 5*time.Second)
		t.Logf("the old client read every key %v after ReloadState", time.Since(reload).Round(time.Millisecond))
		// A write in the dead master's slot lands on the new master.
		if err := cc.Set(ctx, "{key:0}after", "x", 0).Err(); err != nil {
			t.Fatalf("SET after the failover: %v", err)
		}
		if got, err := nm.Client(t).Get(ctx, "{key:0}after").Result(); err != nil || got != "x" {
			t.Fatalf("GET {key:0}after on the new master = %q, %v", got, err)
		}
		// A new client, seeded with every address, the dead one too.
		getAll(t, ctx, cl.Client(t), keys, 5*time.Second)

		// The dead master comes back empty and follows its successor.
		m.Restart(t)
		// Every failoverPoll, not every testkit.Tick: replicaOf dials every node.
		if _, err := testkit.Poll(10*time.Second, failoverPoll, func() error {
			return testkit.Why(replicaOf(cl.Nodes(), nm) == m, "not yet")
		}); err != nil {
			t.Fatalf("the restarted %s does not follow %s", m.Addr(), nm.Addr())
		}
		cl.WaitReplicated(t, 5*time.Second)
		if got, err := query(m.Addr(), []string{"READONLY"}, []string{"GET", "{key:0}after"}); err != nil || got != "x" {
			t.Fatalf("GET {key:0}after on the restarted replica = %q, %v", got, err)
		}
		pids = append(pids, m.PID())
	})
	checkGone(t, nodes, pids)
}

// A planned takeover: the replica is master of its former master's slots
// everywhere, the former master follows it, and a client that knew the old
// layout is redirected (MOVED) without reloading.
func TestClusterTakeover(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	cl := StartClusterWithReplicas(t, 3, 1)
	cc := cl.Client(t)
	if err := cc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	m := cl.MasterOf(t, "k")
	r := cl.ReplicaOf(t, m)
	cl.WaitReplicated(t, 5*time.Second)

	sent := time.Now()
	if former := cl.FailoverTakeover(t, r); former != m {
		t.Fatalf("FailoverTakeover replaced %s, want %s", former.Addr(), m.Addr())
	}
	at := cl.WaitTakeover(t, r, 10*time.Second)
	t.Logf("takeover complete %v after CLUSTER FAILOVER TAKEOVER", at.Sub(sent).Round(time.Millisecond))

	if got := cl.MasterOf(t, "k"); got != r {
		t.Fatalf("MasterOf(k) = %s, want %s", got.Addr(), r.Addr())
	}
	if got := cl.ReplicaOf(t, r); got != m {
		t.Fatalf("ReplicaOf(%s) = %s, want the former master %s", r.Addr(), got.Addr(), m.Addr())
	}
	if len(cl.Masters()) != 3 || len(cl.Replicas()) != 3 {
		t.Fatalf("Masters %v, Replicas %v", cl.Masters(), cl.Replicas())
	}
	if got, err := cc.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET k after the takeover = %q, %v", got, err)
	}
	if err := cc.Set(ctx, "k", "w", 0).Err(); err != nil {
		t.Fatalf("SET after the takeover: %v", err)
	}
	if got, err := r.Client(t).Get(ctx, "k").Result(); err != nil || got != "w" {
		t.Fatalf("GET k on the new master = %q, %v", got, err)
	}

	// Misuse fails the test with a clear message.
	if msg := fatalOf(t, func(tb testing.TB) { cl.WaitTakeover(tb, r, time.Second) }); !strings.Contains(msg, "no FailoverTakeover") {
		t.Errorf("WaitTakeover without FailoverTakeover: %q", msg)
	}
	if msg := fatalOf(t, func(tb testing.TB) { cl.WaitPromoted(tb, m, time.Second) }); !strings.Contains(msg, "still runs") {
		t.Errorf("WaitPromoted of a running node: %q", msg)
	}
	m.Kill(t) // now a replica
	if msg := fatalOf(t, func(tb testing.TB) { cl.WaitPromoted(tb, m, time.Second) }); !strings.Contains(msg, "not a master") {
		t.Errorf("WaitPromoted of a killed replica: %q", msg)
	}
}

// Sentinel: the primary is SIGKILLed, the sentinels promote a replica, and a
// failover client writes to and reads from the new master; the other replica
// is moved over to it.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	var all []*Server
	var pids []int
	t.Run("failover", func(t *testing.T) {
		ctx := ctxT(t)
		begin := time.Now()
		sn := StartSentinel(t, 2, 3)
		t.Logf("StartSentinel(2, 3) took %v", time.Since(begin).Round(time.Millisecond))
		nodes := sn.Nodes()
		all = append(nodes, sn.Sentinels()...)
		pids = pidsOf(all)
		if len(nodes) != 3 || len(sn.SentinelAddrs()) != 3 || len(pids) != 6 {
			t.Fatalf("%d nodes, sentinels %v, %d processes", len(nodes), sn.SentinelAddrs(), len(pids))
		}
		if sn.MasterName() != "presenced" {
			t.Fatalf("MasterName = %q", sn.MasterName())
		}
		p := sn.Master(t)
		if p != nodes[0] {
			t.Fatalf("Master = %s, want %s", p.Addr(), nodes[0].Addr())
		}
		if got := sn.Replicas(); fmt.Sprint(got) != fmt.Sprint(nodes[1:]) {
			t.Fatalf("Replicas = %v, want %v", got, nodes[1:])
		}
		if got := sn.Sentinels()[0].Info(t, "sentinel_masters"); got != 1 {
			t.Fatalf("sentinel_masters = %d", got)
		}

		fc := sn.Client(t)
		if err := fc.Set(ctx, "before", "v", 0).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
		sn.WaitReplicated(t, 5*time.Second)

		p.Kill(t)
		killed := time.Now()
		nm, at := sn.WaitFailover(t, p, 30*time.Second)
		t.Logf("failover observed %v after the kill", at.Sub(killed).Round(time.Millisecond))
		if nm == p || !slices.Contains(nodes[1:], nm) {
			t.Fatalf("WaitFailover = %s", nm.Addr())
		}
		if got := sn.Master(t); got != nm {
			t.Fatalf("Master = %s, want %s", got.Addr(), nm.Addr())
		}

		// The failover client finds the new master.
		testkit.Wait(t, 5*time.Second, "SET through the failover client after the failover", func() error {
			return fc.Set(ctx, "after", "x", 0).Err()
		})
		t.Logf("the failover client wrote %v after the failover was observed", time.Since(at).Round(time.Millisecond))
		for k, want := range map[string]string{"before": "v", "after": "x"} {
			if got, err := fc.Get(ctx, k).Result(); err != nil || got != want {
				t.Fatalf("GET %s through the failover client = %q, %v", k, got, err)
			}
		}
		if got, err := nm.Client(t).Get(ctx, "after").Result(); err != nil || got != "x" {
			t.Fatalf("GET after on the new master = %q, %v", got, err)
		}

		// The sentinels move the other replica over to the new master.
		other := nodes[1]
		if other == nm {
			other = nodes[2]
		}
		if _, err := testkit.Poll(15*time.Second, failoverPoll, func() error {
			return testkit.Why(replicaOf(nodes, nm) == other, "not yet")
		}); err != nil {
			t.Fatalf("%s does not follow the new master %s", other.Addr(), nm.Addr())
		}
		t.Logf("the other replica followed the new master %v after the failover was observed", time.Since(at).Round(time.Millisecond))
		if got := sn.Replicas(); len(got) != 1 || got[0] != other {
			t.Fatalf("Replicas = %v, want [%s]", got, other.Addr())
		}
	})
	checkGone(t, all, pids)
}

func TestBadTopologies(t *testing.T) {
	t.Parallel()
	if msg := fatalOf(t, func(tb testing.TB) { StartClusterWithReplicas(tb, 2, 1) }); !strings.Contains(msg, "at least 3 masters") {
		t.Errorf("StartClusterWithReplicas(2, 1): %q", msg)
	}
	if msg := fatalOf(t, func(tb testing.TB) { StartSentinel(tb, 1, 0) }); !strings.Contains(msg, "sentinels >= 1") {
		t.Errorf("StartSentinel(1, 0): %q", msg)
	}
}
