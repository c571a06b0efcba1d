package main

import (
	"bufio"
	"bytes"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/presenced/presenced/bench/result"
)

// presencedConfig is what a run sets in presenced's config file beyond its
// flags; the zero value writes none.
type presencedConfig struct {
	Groups           map[string][]string // presence.groups_file's content
	GroupBatch       time.Duration       // presence.group_batch
	MaxSubscriptions int                 // mqtt.max_subscriptions
	// PacingOff turns off what holds changes back from observers (the
	// offline grace, the disconnect debounce, the dwell, flap control): the
	// standard scenarios measure how fast a change propagates, which pacing
	// hides on purpose; the resilience scenarios run with the defaults.
	PacingOff bool
	Extra     string // YAML merged over the above (--presenced-config-extra)
}

// pacingOffYAML is PacingOff in presenced's config file.
const pacingOffYAML = "presence: {offline_grace: 0s, disconnect_debounce: 0s, min_dwell: 0s, flap: {ends: 0}}\n"

// paths of the programs the bench starts.
type paths struct {
	Presenced, Mosquitto, Redis string
}

// system is one broker under test, started fresh for a run as a child
// process on free loopback ports.
type system struct {
	name  string
	paths paths
	dir   string // temp dir for config files

	mqttPort, adminPort int
	proc                *exec.Cmd
	waitCh              <-chan error
	stderr              *tailBuffer
	redis               *redisServer // presenced-redis only

	// presenced only: the groups file it is (re)started with,
	// presence.group_batch and mqtt.max_subscriptions (0: the default),
	// written to a config file when any is set.
	groups     map[string][]string
	groupBatch time.Duration
	maxSubs    int
	pacingOff  bool   // presencedConfig.PacingOff
	extra      string // YAML merged into the config file (--presenced-config-extra)
	nodeID     string // --node-id; "bench" when empty

	// classic: the devices follow the classic last-will pattern
	// (mosquitto-lastwill's) on a broker that is not mosquitto: mochi-bare
	// in the churn and ceiling scenarios (classicCycle).
	classic bool

	portWait  time.Duration // how long start waits for the MQTT port; 15 s when zero
	startedAt time.Duration // monotonic time just before the process was started
}

// systemGroup is presenced with the in-memory store and a groups file,
// whose observers watch the group topic presence/groups/{group}. It runs
// the team scenario only; in every other scenario it would be
// presenced-memory.
const systemGroup = result.SystemGroup

func (s *system) hasPresence() bool { return s.name != result.SystemMochi }
func (s *system) isPresenced() bool {
	return s.name == result.SystemMemory || s.name == result.SystemRedis || s.name == result.SystemMochi || s.name == systemGroup
}

// lastWill tells whether the devices follow the classic last-will pattern
// (will "offline", retained "online", statuses and "offline" published on
// presence/users/{user}): on mosquitto-lastwill always, on mochi-bare in
// the scenarios of classicCycle.
func (s *system) lastWill() bool { return s.name == result.SystemMosquitto || s.classic }
func (s *system) addr() string   { return "127.0.0.1:" + strconv.Itoa(s.mqttPort) }
func (s *system) pid() int       { return s.proc.Process.Pid }

func (s *system) parser() parser {
	if s.lastWill() {
		return parseLastWill
	}
	return parsePresenced
}

// classicScenarios are the scenarios where mochi-bare runs bare mochi's
// cycle: the same churn of connects, status changes and disconnects as
// the other systems, with presence off, so that nothing publishes
// presence/users/{user} but the devices themselves, as on
// mosquitto-lastwill. Its other scenarios (steady, storm, memory) measure
// sessions without a will or retained messages.
var classicScenarios = map[string]bool{result.ScenarioChurn: true, scenarioCeiling: true}

// classicCycle tells whether sys runs the classic last-will pattern in
// scenario although it is not mosquitto: mochi-bare in classicScenarios.
func classicCycle(sys, scenario string) bool {
	return sys == result.SystemMochi && classicScenarios[scenario]
}

// startSystem starts name fresh, with presenced's config o.
func startSystem(name string, p paths, dir string, o presencedConfig) (*system, error) {
	s := &system{name: name, paths: p, dir: dir, groups: o.Groups, groupBatch: o.GroupBatch, maxSubs: o.MaxSubscriptions,
		pacingOff: o.PacingOff, extra: o.Extra}
	var err error
	if s.mqttPort, err = freePort(); err != nil {
		return nil, err
	}
	if s.adminPort, err = freePort(); err != nil {
		return nil, err
	}
	if name == result.SystemRedis {
		if s.redis, err = startRedis(p.Redis); err != nil {
			return nil, err
		}
	}
	if err := s.start(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// start starts the broker process on the system's ports and waits for its
// MQTT port.
func (s *system) start() error {
	var cmd *exec.Cmd
	switch s.name {
	case result.SystemMemory, result.SystemRedis, result.SystemMochi, systemGroup:
		args := []string{
			"--mqtt-addr", s.addr(), "--ws-addr", "off",
			"--admin-addr", "127.0.0.1:" + strconv.Itoa(s.adminPort),
			"--node-id", s.node(), "--log-level", "warn",
		}
		if s.name == result.SystemRedis {
			args = append(args, "--redis-addr", s.redis.addr())
		}
		if s.name == result.SystemMochi {
			args = append(args, "--presence", "off")
		}
		if s.groups != nil || s.maxSubs > 0 || s.extra != "" || (s.pacingOff && s.name != result.SystemMochi) {
			conf, err := s.writeConfig()
			if err != nil {
				return err
			}
			args = append(args, "--config", conf)
		}
		cmd = exec.Command(s.paths.Presenced, args...)
	case result.SystemMosquitto:
		conf := filepath.Join(s.dir, "mosquitto.conf")
		text := fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 10000\nlog_dest none\n", s.mqttPort)
		if os.Geteuid() == 0 {
			// Started as root, mosquitto would switch to its own user, and
			// that clears the Pdeathsig that kills it with the bench.
			text += "user root\n"
		}
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return err
		}
		cmd = exec.Command(s.paths.Mosquitto, "-c", conf)
	default:
		return fmt.Errorf("unknown system %q", s.name)
	}
	cmd.Env = childEnv()
	s.stderr = &tailBuffer{max: 8 << 10}
	cmd.Stdout = s.stderr
	cmd.Stderr = s.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	s.startedAt = mono()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	s.proc = cmd
	children.add(cmd.Process)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); children.remove(cmd.Process) }()
	wait := s.portWait
	if wait <= 0 {
		wait = 15 * time.Second
	}
	if err := waitPort(s.addr(), wait, exited); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("%s did not listen on %s: %w; output: %s", s.name, s.addr(), err, s.stderr.String())
	}
	s.proc = cmd
	s.waitCh = exited
	return nil
}

// writeConfig writes presenced's config file: the groups file of s.groups
// (named by presence.groups_file), presence.group_batch and
// mqtt.max_subscriptions; it returns the config's path.
func (s *system) writeConfig() (string, error) {
	text := ""
	if s.maxSubs > 0 {
		text += "mqtt:\n  max_subscriptions: " + strconv.Itoa(s.maxSubs) + "\n"
	}
	if s.groups != nil {
		groups, err := s.writeGroups()
		if err != nil {
			return "", err
		}
		text += "presence:\n  groups_file: " + strconv.Quote(groups) + "\n"
		if s.groupBatch > 0 {
			text += "  group_batch: " + s.groupBatch.String() + "\n"
		}
	}
	if s.pacingOff {
		merged, err := mergeYAML(text, pacingOffYAML)
		if err != nil {
			return "", err
		}
		text = merged
	}
	if s.extra != "" {
		merged, err := mergeYAML(text, s.extra)
		if err != nil {
			return "", fmt.Errorf("--presenced-config-extra: %w", err)
		}
		text = merged
	}
	conf := filepath.Join(s.dir, "presenced-"+s.node()+".yaml")
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return "", err
	}
	return conf, nil
}

// writeGroups writes the groups file of s.groups and returns its path.
func (s *system) writeGroups() (string, error) {
	var b strings.Builder
	b.WriteString("groups:\n")
	names := make([]string, 0, len(s.groups))
	for g := range s.groups {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		b.WriteString("  " + g + ": [" + strings.Join(s.groups[g], ", ") + "]\n")
	}
	path := filepath.Join(s.dir, "groups.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// node is presenced's --node-id.
func (s *system) node() string {
	if s.nodeID == "" {
		return "bench"
	}
	return s.nodeID
}

// mergeYAML merges the YAML mapping extra over the YAML mapping base
// (mappings merged key by key, anything else replaced) and returns the
// result.
func mergeYAML(base, extra string) (string, error) {
	var b, x map[string]any
	if err := yaml.Unmarshal([]byte(base), &b); err != nil {
		return "", err
	}
	if err := yaml.Unmarshal([]byte(extra), &x); err != nil {
		return "", fmt.Errorf("not a YAML mapping: %w", err)
	}
	if x == nil {
		return "", errors.New("not a YAML mapping")
	}
	if b == nil {
		b = map[string]any{}
	}
	mergeMaps(b, x)
	out, err := yaml.Marshal(b)
	return string(out), err
}

func mergeMaps(dst, src map[string]any) {
	for k, v := range src {
		dm, dok := dst[k].(map[string]any)
		sm, sok := v.(map[string]any)
		if dok && sok {
			mergeMaps(dm, sm)
			continue
		}
		dst[k] = v
	}
}

// term sends SIGTERM (presenced's clean shutdown, or its drain) and waits
// up to timeout for the broker to exit, then SIGKILLs it; it returns how
// long the broker took and whether it exited by itself.
func (s *system) term(timeout time.Duration) (time.Duration, bool) {
	if s.proc == nil {
		return 0, false
	}
	t0 := mono()
	_ = s.proc.Process.Signal(syscall.SIGTERM)
	clean := true
	select {
	case <-s.waitCh:
	case <-time.After(timeout):
		clean = false
		_ = s.proc.Process.Kill()
		select {
		case <-s.waitCh:
		case <-time.After(10 * time.Second):
		}
	}
	s.proc = nil
	return mono() - t0, clean
}

// kill SIGKILLs the broker and waits for it.
func (s *system) kill() {
	if s.proc == nil {
		return
	}
	_ = s.proc.Process.Kill()
	if s.waitCh != nil {
		select {
		case <-s.waitCh:
		case <-time.After(10 * time.Second):
		}
	}
	s.proc = nil
}

// stop kills the broker and its redis-server.
func (s *system) stop() {
	s.kill()
	if s.redis != nil {
		s.redis.stop()
	}
}

// rssKiB reads VmRSS of the broker.
func (s *system) rssKiB() (int64, error) { return procRSSKiB(s.pid()) }

// cpu reads the broker's user+system CPU time.
func (s *system) cpu() (time.Duration, error) { return procCPU(s.pid()) }

// cpuSplit reads the broker's CPU time and its redis-server's (zero
// without one): where a figure is bound by the load generator sharing
// the cores, CPU per operation compares the systems.
type cpuSplit struct{ broker, redis time.Duration }

func (s *system) cpuSplit() (cpuSplit, error) {
	b, err := s.cpu()
	if err != nil || s.redis == nil {
		return cpuSplit{broker: b}, err
	}
	r, err := procCPU(s.redis.cmd.Process.Pid)
	return cpuSplit{broker: b, redis: r}, err
}

// perOp records in r.Extra the CPU per operation between a and b, in µs:
// cpu_us_per_<op> for the broker, redis_cpu_us_per_<op> for its
// redis-server.
func perOp(r *result.Run, op string, a, b cpuSplit, n int) {
	if n <= 0 {
		return
	}
	r.Extra["cpu_us_per_"+op] = round3(float64((b.broker - a.broker).Microseconds()) / float64(n))
	if b.redis > 0 {
		r.Extra["redis_cpu_us_per_"+op] = round3(float64((b.redis - a.redis).Microseconds()) / float64(n))
	}
}

// childEnv is the bench's environment without PRESENCED_* variables, so that
// nothing but the flags configures the broker.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PRESENCED_") {
			env = append(env, kv)
		}
	}
	// The admin port's profiles answer only behind a token.
	return append(env, "PRESENCED_ADMIN_TOKEN="+adminToken)
}

// adminToken is the admin token of every presenced the bench starts, made
// anew for each bench process.
var adminToken = func() string {
	b := make([]byte, 16)
	if _, err := crand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}()

// adminGet sends an authorised GET to a presenced admin port, waiting at
// most timeout for the answer.
func adminGet(port int, path string, timeout time.Duration) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	cl := http.Client{Timeout: timeout}
	return cl.Do(req)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitPort waits until addr accepts a connection, the deadline passes or
// the process exits.
func waitPort(addr string, timeout time.Duration, exited <-chan error) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("process exited: %v", werr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// procRSSKiB reads VmRSS from /proc/<pid>/status.
func procRSSKiB(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, errors.New("no VmRSS")
}

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100

// procCPU reads utime+stime from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bad stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// After the comm field: state is field 3, utime 14, stime 15.
	if len(f) < 13 {
		return 0, errors.New("short stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad stat times")
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// redisServer is a redis-server the bench starts for presenced-redis.
type redisServer struct {
	port   int
	cmd    *exec.Cmd
	waitCh chan error
}

func (r *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func startRedis(path string) (*redisServer, error) {
	var errs []string
	for try := 0; try < 5; try++ { // another process may take the port first (launchRedis)
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		r, out, err := launchRedis(path, os.TempDir(), port)
		if err != nil {
			errs = append(errs, fmt.Sprintf("port %d: %v; output: %s", port, err, out))
			continue
		}
		return r, nil
	}
	return nil, fmt.Errorf("redis-server did not listen: %s", strings.Join(errs, "; "))
}

// launchRedis starts redis-server on port of 127.0.0.1 without
// persistence, with args added, in dir, killed with the bench, and waits
// until it listens. On failure it returns the tail of its output.
func launchRedis(path, dir string, port int, args ...string) (*redisServer, string, error) {
	cmd := exec.Command(path, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}, args...)...)
	cmd.Env = childEnv()
	out := &tailBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start redis-server: %w", err)
	}
	r := &redisServer{port: port, cmd: cmd, waitCh: make(chan error, 1)}
	children.add(cmd.Process)
	go func() { r.waitCh <- cmd.Wait(); children.remove(cmd.Process) }()
	if err := waitPort(r.addr(), 10*time.Second, r.waitCh); err != nil {
		_ = cmd.Process.Kill()
		return nil, out.String(), err
	}
	// Who answers: another process (a parallel test's server) may have
	// taken the port between freePort and the start, ours then failing to
	// bind while theirs answers (a cluster node of theirs refused
	// ADDSLOTSRANGE: "Slot … is already busy").
	if pid, err := r.pid(); err != nil || pid != cmd.Process.Pid {
		r.stop()
		if err == nil {
			err = fmt.Errorf("port %d answered by process %d, not the redis-server started (%d)", port, pid, cmd.Process.Pid)
		}
		return nil, out.String(), err
	}
	return r, "", nil
}

// pid returns the process_id the server at r's port reports (INFO server).
func (r *redisServer) pid() (int, error) {
	body, err := r.info("server")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(body, "\r\n") {
		if v, ok := strings.CutPrefix(l, "process_id:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("INFO server: no process_id")
}

func (r *redisServer) stop() {
	_ = r.cmd.Process.Kill()
	select {
	case <-r.waitCh:
	case <-time.After(10 * time.Second):
	}
}

// commands returns INFO's total_commands_processed.
func (r *redisServer) commands() (int64, error) {
	c, err := net.DialTimeout("tcp", r.addr(), 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n")); err != nil {
		return 0, err
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(line, "$") {
		return 0, fmt.Errorf("INFO: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return 0, err
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(br, body); err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(l, "total_commands_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("INFO: no total_commands_processed")
}

// commandStats returns INFO commandstats: calls per command.
func (r *redisServer) commandStats() (map[string]int64, error) {
	body, err := r.info("commandstats")
	if err != nil {
		return nil, err
	}
	return parseCommandStats(body), nil
}

// info runs INFO section and returns its body.
func (r *redisServer) info(section string) (string, error) {
	c, err := net.DialTimeout("tcp", r.addr(), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n", len(section), section); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(line, "$") {
		return "", fmt.Errorf("INFO: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return "", err
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(br, body); err != nil {
		return "", err
	}
	return string(body), nil
}

// parseCommandStats reads INFO commandstats lines
// ("cmdstat_evalsha:calls=12,usec=…"): calls per command.
func parseCommandStats(body string) map[string]int64 {
	out := make(map[string]int64)
	for _, l := range strings.Split(body, "\n") {
		l = strings.TrimSpace(l)
		name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(l, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					out[name] = n
				}
			}
		}
	}
	return out
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// adminStats reads presenced's /api/v1/stats.
func (s *system) adminStats() (map[string]any, error) {
	resp, err := adminGet(s.adminPort, "/api/v1/stats", 3*time.Second)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// children are the processes the bench started and has not seen exit, to
// kill when the bench is interrupted.
var children = &procSet{m: make(map[*os.Process]bool)}

type procSet struct {
	mu sync.Mutex
	m  map[*os.Process]bool
}

func (p *procSet) add(pr *os.Process) {
	p.mu.Lock()
	p.m[pr] = true
	p.mu.Unlock()
}

func (p *procSet) remove(pr *os.Process) {
	p.mu.Lock()
	delete(p.m, pr)
	p.mu.Unlock()
}

// killAll SIGKILLs every child still running.
func (p *procSet) killAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pr := range p.m {
		_ = pr.Kill()
	}
}
