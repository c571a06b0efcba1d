package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// startTries is how many ports Start tries before giving up.
	startTries = 5
	// readyTimeout bounds the wait for one redis-server to answer PING.
	readyTimeout = 10 * time.Second
	// clusterTimeout bounds the wait for a new cluster to be ok everywhere.
	clusterTimeout = 20 * time.Second
	// createTimeout bounds `redis-cli --cluster create`.
	createTimeout = 30 * time.Second
	// pollInterval is the pause between two polls of a wait.
	pollInterval = 10 * time.Millisecond
	// busOffset is the distance from a cluster node's port to its bus port.
	busOffset = 10000
	// clusterSlots is the number of hash slots of a Redis Cluster.
	clusterSlots = 16384
	// logTail is how much of a server's output a failure message quotes.
	logTail = 4 << 10
)

// Server is a redis-server process started for one test.
type Server struct {
	bin   string
	dir   string
	port  int
	extra []string // appended to the base arguments (later ones win)

	// Set before the first launch, then read-only.
	cluster  bool          // a Redis Cluster node: Kill records what it was
	sentinel *sentinelConf // non-nil: the process is a sentinel

	mu       sync.Mutex
	proc     *proc       // nil while stopped
	last     *proc       // the latest process, for its output
	nodeID   string      // a cluster node's id, once known (kept across Restart)
	before   *nodeRecord // what a cluster node was just before its last kill
	killedAt time.Time   // when Kill or Stop last killed a running process
}

// Start starts redis-server on a random free 127.0.0.1 port with no
// persistence (--save "" --appendonly no) and its own temporary directory,
// and returns once it answers PING. extraArgs are appended to the command
// line (e.g. "--maxmemory", "10mb") and override the defaults. The server is
// killed (SIGKILL) and waited for at the end of the test.
//
// If redis-server is not installed Start fails the test (it never skips).
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	return start(t, false, extraArgs)
}

func start(t testing.TB, bus bool, extra []string) *Server {
	t.Helper()
	s := newServer(t, extra)
	s.run(t, bus)
	return s
}

// newServer prepares a Server that is not started yet.
func newServer(t testing.TB, extra []string) *Server {
	t.Helper()
	bin := lookPath(t, "redis-server")
	return &Server{bin: bin, dir: t.TempDir(), extra: append([]string(nil), extra...)}
}

// run starts s on a free port (whose bus port is free too when bus is set),
// trying new ports when one is taken, and kills it at the end of the test.
func (s *Server) run(t testing.TB, bus bool) {
	t.Helper()
	var errs []string
	for try := 1; try <= startTries; try++ {
		port, err := freePort(bus)
		if err != nil {
			t.Fatalf("redistest: no free port: %v", err)
		}
		if err := s.launch(port); err != nil {
			release(port, bus)
			errs = append(errs, fmt.Sprintf("try %d on port %d: %v", try, port, err))
			continue
		}
		s.port = port
		t.Cleanup(func() {
			s.kill()
			release(port, bus)
		})
		return
	}
	t.Fatalf("redistest: redis-server did not start after %d tries:\n%s", startTries, strings.Join(errs, "\n"))
}

// Addr is the server's address, "127.0.0.1:port". It stays the same across
// Stop and Restart.
func (s *Server) Addr() string { return addr(s.port) }

// String is the server's address, for messages.
func (s *Server) String() string { return s.Addr() }

// Stop kills the server (SIGKILL) and waits for it to exit: its data is lost.
// Stopping a stopped server does nothing. It is Kill under another name.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.Kill(t)
}

// Kill crashes the server: SIGKILL, without a chance to save, hand over or
// tell its peers, and waits until the process has exited, so that its port
// refuses connections when Kill returns. Killing a stopped server does
// nothing; the test's cleanup does not mind a killed server, and Restart
// brings it back (a cluster node with its nodes file, so it rejoins).
//
// A cluster node is first asked what it is (CLUSTER NODES: its id, and if a
// master its slots and replicas), so that WaitPromoted knows what to wait
// for. The time of the kill is kept for the failover waits' logs.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if !s.running() {
		return
	}
	if s.cluster {
		s.remember()
	}
	s.kill()
	s.mu.Lock()
	s.killedAt = time.Now()
	s.mu.Unlock()
}

// PID is the process id of the running redis-server, or 0 while it is
// stopped (after Stop or Kill, before Restart).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// running reports whether the server's process was started and not killed.
// A process that died by itself still counts until it is killed: its peers
// find out by asking.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

// Restart stops the server if it runs and starts a new redis-server on the
// same port, directory and arguments, and waits until it answers PING. With
// the default arguments (no persistence) it comes back empty. It fails the
// test when the port cannot be had again.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.kill()
	var errs []string
	for try := 1; try <= startTries; try++ {
		err := s.launch(s.port)
		if err == nil {
			return
		}
		errs = append(errs, fmt.Sprintf("try %d: %v", try, err))
	}
	t.Fatalf("redistest: restart of redis-server on %s failed after %d tries:\n%s", s.Addr(), startTries, strings.Join(errs, "\n"))
}

// Client returns a go-redis client for the server (default options), closed
// at the end of the test. It keeps working across Restart.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Info returns the integer field of the server's INFO reply (the default
// sections, which include stats), e.g. Info(t, "total_commands_processed").
// It asks over a connection of its own, outside any client: the INFO it sends
// is one command, counted by later calls but not by this one. It fails the
// test when the server does not answer or the field is missing or not an
// integer.
func (s *Server) Info(t testing.TB, field string) int64 {
	t.Helper()
	info, err := infoOf(s.Addr())
	if err != nil {
		t.Fatalf("redistest: INFO on %s: %v%s", s.Addr(), err, s.tail())
	}
	raw, ok := info[field]
	if !ok {
		t.Fatalf("redistest: INFO on %s has no field %q", s.Addr(), field)
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		t.Fatalf("redistest: INFO field %q on %s is %q, not an integer", field, s.Addr(), raw)
	}
	return v
}

// Calls reads INFO commandstats: how many times each command ran ("get",
// "evalsha", "cluster|slots"…), those a script ran included, as Redis
// counts them, the INFO that reads them left out (it is counted by later
// calls). Like Info, it asks over a connection of its own.
func (s *Server) Calls(t testing.TB) map[string]int64 {
	t.Helper()
	raw, err := query(s.Addr(), []string{"INFO", "commandstats"})
	if err != nil {
		t.Fatalf("redistest: INFO commandstats on %s: %v%s", s.Addr(), err, s.tail())
	}
	out := map[string]int64{}
	for k, v := range parseInfo(raw) {
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		if n, err := strconv.ParseInt(calls, 10, 64); err == nil && strings.HasPrefix(k, "cmdstat_") {
			out[strings.TrimPrefix(k, "cmdstat_")] = n
		}
	}
	return out
}

// launch starts redis-server on port and waits until that very process
// answers. On failure the process is killed and waited for, and the error
// quotes the tail of its output.
func (s *Server) launch(port int) error {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", "",
	}
	args = append(args, s.extra...)
	if s.sentinel != nil {
		conf, err := s.sentinel.file(s.dir, port)
		if err != nil {
			return err
		}
		args = []string{conf, "--sentinel"}
	}
	p, err := startProc(s.bin, args)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.last = p
	s.mu.Unlock()
	if err := p.waitReady(addr(port), time.Now().Add(readyTimeout)); err != nil {
		p.kill()
		return fmt.Errorf("%v%s", err, p.out.tail())
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

// kill kills the running process, if any, and waits for it.
func (s *Server) kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// tail is the end of the latest process's output, for failure messages.
func (s *Server) tail() string {
	s.mu.Lock()
	p := s.last
	s.mu.Unlock()
	if p == nil {
		return ""
	}
	return p.out.tail()
}

// Cluster is a Redis Cluster of redis-server processes: masters only
// (StartCluster), or masters with replicas (StartClusterWithReplicas).
type Cluster struct {
	nodes []*Server

	mu        sync.Mutex
	takeovers map[*Server]handover // FailoverTakeover's, until WaitTakeover
}

// StartCluster starts masters (at least 3) redis-server processes with
// --cluster-enabled yes, each with its own directory and nodes file on a
// random port whose bus port (port+10000) is also free, creates the cluster
// with `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes`,
// and returns once CLUSTER INFO on every node reports cluster_state:ok, all
// 16384 slots assigned and ok, and all the nodes known. Every process is
// killed at the end of the test.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redistest: a Redis Cluster needs at least 3 masters, not %d", masters)
	}
	cli := lookPath(t, "redis-cli")
	c := &Cluster{}
	for i := 0; i < masters; i++ {
		s := newServer(t, []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000",
			"--cluster-announce-ip", "127.0.0.1",
		})
		s.cluster = true
		s.run(t, true)
		c.nodes = append(c.nodes, s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s%s", strings.Join(args, " "), err, lastBytes(out, logTail), c.tails())
	}

	if err := c.waitOK(masters, time.Now().Add(clusterTimeout)); err != nil {
		t.Fatalf("redistest: cluster %v not ok within %v: %v\nredis-cli said:\n%s%s",
			c.Addrs(), clusterTimeout, err, lastBytes(out, logTail), c.tails())
	}
	return c
}

// Addrs are the nodes' addresses, "127.0.0.1:port", in start order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes are the cluster's servers, in the order of Addrs: with replicas, the
// masters first, then the replicas of the first master, of the second, and
// so on (the roles at start; Masters and Replicas tell the current ones).
// Stop or Kill kills one node; Restart brings it back empty with its nodes
// file, so it rejoins.
func (c *Cluster) Nodes() []*Server {
	return append([]*Server(nil), c.nodes...)
}

// Client returns a go-redis cluster client seeded with every node (default
// options), closed at the end of the test.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TotalCommands is the sum of total_commands_processed over the nodes. Like
// Info, each call sends one INFO to every node, counted by later calls only.
func (c *Cluster) TotalCommands(t testing.TB) int64 {
	t.Helper()
	var sum int64
	for _, n := range c.nodes {
		sum += n.Info(t, "total_commands_processed")
	}
	return sum
}

// waitOK polls CLUSTER INFO on every node until all are ok and agree.
func (c *Cluster) waitOK(masters int, deadline time.Time) error {
	return c.waitState(masters, masters, deadline)
}

// waitState polls CLUSTER INFO on every node until each is ok, with every
// slot served, known nodes and masters with slots (size).
func (c *Cluster) waitState(known, size int, deadline time.Time) error {
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": strconv.Itoa(clusterSlots),
		"cluster_slots_ok":       strconv.Itoa(clusterSlots),
		"cluster_known_nodes":    strconv.Itoa(known),
		"cluster_size":           strconv.Itoa(size),
	}
	return c.poll(deadline, func(cs conns) error {
		for _, n := range c.nodes {
			info, err := cs.clusterInfo(n.Addr())
			if err != nil {
				return err
			}
			for k, v := range want {
				if info[k] != v {
					return fmt.Errorf("%s: %s is %q, want %q", n.Addr(), k, info[k], v)
				}
			}
		}
		return nil
	})
}

// tails quotes the end of every node's output.
func (c *Cluster) tails() string {
	var b strings.Builder
	for _, n := range c.nodes {
		b.WriteString("\n--- " + n.Addr())
		b.WriteString(n.tail())
	}
	return b.String()
}

// lookPath finds a program or fails the test with how to install it.
func lookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: run `make deps` (make test does)", name)
	}
	return p
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// Ports handed to servers of this process that may still be in use, so two
// parallel tests of one binary never get the same one. Other processes are
// covered by the retries and by checking who answers.
var (
	portsMu sync.Mutex
	ports   = map[int]bool{}
)

// freePort finds a free 127.0.0.1 port, with port+10000 free too when bus
// is set, and reserves it (and its bus port) in this process.
func freePort(bus bool) (int, error) {
	for i := 0; i < 100; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		ok := true
		if bus {
			if port+busOffset > 65535 {
				ok = false
			} else if bl, err := net.Listen("tcp", addr(port+busOffset)); err != nil {
				ok = false
			} else {
				_ = bl.Close()
			}
		}
		_ = l.Close()
		if ok && reserve(port, bus) {
			return port, nil
		}
	}
	return 0, errors.New("none found in 100 tries")
}

func reserve(port int, bus bool) bool {
	portsMu.Lock()
	defer portsMu.Unlock()
	if ports[port] || ports[port+busOffset] || ports[port-busOffset] {
		return false
	}
	ports[port] = true
	if bus {
		if ports[port+busOffset] {
			delete(ports, port)
			return false
		}
		ports[port+busOffset] = true
	}
	return true
}

func release(port int, bus bool) {
	portsMu.Lock()
	defer portsMu.Unlock()
	delete(ports, port)
	if bus {
		delete(ports, port+busOffset)
	}
}

// proc is one redis-server process.
type proc struct {
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed when Wait returned
	err  error         // Wait's result, set before done is closed
}

func startProc(bin string, args []string) (*proc, error) {
	out := &tailBuffer{max: 64 << 10}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &proc{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill sends SIGKILL and waits for the process to exit.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// waitReady polls until this process answers PING on addr. It fails when the
// process exits, when another process answers there, or at the deadline.
func (p *proc) waitReady(addr string, deadline time.Time) error {
	var last error
	for {
		select {
		case <-p.done:
			return fmt.Errorf("redis-server exited early (%v)", p.err)
		default:
		}
		pid, err := pidOf(addr)
		switch {
		case err != nil:
			last = err
		case pid != p.cmd.Process.Pid:
			last = fmt.Errorf("%s is answered by another redis-server (pid %d, not %d)", addr, pid, p.cmd.Process.Pid)
		default:
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING on %s in time: %v", addr, last)
		}
		select {
		case <-p.done:
		case <-time.After(pollInterval):
		}
	}
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

// tail is the last output, formatted to follow an error message.
func (b *tailBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return "\nredis-server output (tail):\n" + lastBytes(b.buf, logTail)
}

func lastBytes(out []byte, n int) string {
	if len(out) > n {
		out = out[len(out)-n:]
		if i := strings.IndexByte(string(out), '\n'); i >= 0 {
			out = out[i+1:]
		}
		return "...\n" + string(out)
	}
	return string(out)
}

// A minimal RESP client, so that readiness checks and INFO go over plain
// connections of their own: no pool, no retries, no handshake commands.

type respConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRESP(addr string) (*respConn, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return &respConn{c: c, r: bufio.NewReader(c)}, nil
}

func (rc *respConn) Close() error { return rc.c.Close() }

// do sends one command and reads its reply: a string, an int64, nil, or a
// []any; an error reply is returned as an error.
func (rc *respConn) do(args ...string) (any, error) {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := rc.c.Write(b); err != nil {
		return nil, err
	}
	return rc.read()
}

func (rc *respConn) read() (any, error) {
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return nil, errors.New("empty RESP line")
	}
	switch body := line[1:]; line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, errors.New(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = rc.read(); err != nil {
				return nil, err
			}
		}
		return arr, nil
	default:
		return nil, fmt.Errorf("unexpected RESP line %q", line)
	}
}

// query runs commands on one new connection and returns the last reply as a
// string.
func query(addr string, cmds ...[]string) (string, error) {
	rc, err := dialRESP(addr)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	var s string
	for _, cmd := range cmds {
		v, err := rc.do(cmd...)
		if err != nil {
			return "", fmt.Errorf("%s: %w", cmd[0], err)
		}
		var ok bool
		if s, ok = v.(string); !ok {
			return "", fmt.Errorf("%s: unexpected reply %v", cmd[0], v)
		}
	}
	return s, nil
}

// ask runs one command on a new connection and returns its reply.
func ask(addr string, args ...string) (any, error) {
	rc, err := dialRESP(addr)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	v, err := rc.do(args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", args[0], err)
	}
	return v, nil
}

// pidOf sends PING and returns the process_id from INFO server.
func pidOf(addr string) (int, error) {
	rc, err := dialRESP(addr)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	v, err := rc.do("PING")
	if err != nil {
		return 0, fmt.Errorf("PING: %w", err)
	}
	if v != "PONG" {
		return 0, fmt.Errorf("PING answered %v", v)
	}
	v, err = rc.do("INFO", "server")
	if err != nil {
		return 0, fmt.Errorf("INFO server: %w", err)
	}
	s, _ := v.(string)
	return strconv.Atoi(parseInfo(s)["process_id"])
}

func infoOf(addr string) (map[string]string, error) {
	s, err := query(addr, []string{"INFO"})
	if err != nil {
		return nil, err
	}
	return parseInfo(s), nil
}

// parseInfo reads the "field:value" lines of INFO or CLUSTER INFO.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}
