package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
