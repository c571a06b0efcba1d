package main

// The scale scenario's load generator runs in several processes, since one
// process may hold only RLIMIT_NOFILE sockets (20,000 on the bench
// machines): `presence-bench scale-worker` is a child that holds the MQTT
// sessions of one presenced node and obeys the parent line by line.
//
// Protocol: one command per line on the worker's stdin, one event per line
// on its stdout, fields separated by spaces.
//
//	parent → worker                 worker → parent
//	                                ready <n>
//	connect                         progress <ok> <failed>   (every 200 ms while connecting)
//	                                connected <ok> <failed> <first error, quoted>
//	stats                           stats <live> <closed> <pings sent> <pingresps>
//	status <rate/s> <count>         change <index> <tag> <unix ns>   (one per change, as it is made)
//	                                status-done <made> <errors>
//	disconnect <k>                  disconnected <k>
//	quit (or EOF on stdin)          (the worker closes every socket and exits 0)
//	anything else                   error <message, quoted>
//
// User i of a worker is <prefix><i>, its client id <prefix><i>-d. Every
// session pings at its keep-alive rate, each at a random phase, from its
// CONNACK on. A change is a presence/set with a unique text tag
// <prefix>s<k>; its time is the wall clock in Unix nanoseconds (the parent
// and the workers read the same system clock), taken just before the
// PUBLISH is written.

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const scaleWorkerCmd = "scale-worker"

// scaleWorkerMain is the worker's main: args are its flags, commands come
// from in and events go to out. It returns the exit code.
func scaleWorkerMain(args []string, in io.Reader, out, stderr io.Writer) int {
	fs := flag.NewFlagSet(scaleWorkerCmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "broker address host:port")
	n := fs.Int("n", 0, "sessions to hold")
	prefix := fs.String("prefix", "w", "user name prefix")
	ka := fs.Int("keepalive", 30, "keep-alive in seconds")
	workers := fs.Int("connect-workers", 32, "concurrent connects")
	seed := fs.Int64("seed", 1, "seed of the ping phases")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *addr == "" || *n <= 0 || *ka <= 0 || *ka > 65535 || *workers <= 0 {
		fmt.Fprintln(stderr, "scale-worker: --addr, a positive --n, --keepalive (1..65535) and --connect-workers are needed")
		return 2
	}
	raiseFileLimit()
	w := &scaleChild{addr: *addr, n: *n, prefix: *prefix, ka: time.Duration(*ka) * time.Second, workers: *workers,
		clients: make([]atomic.Pointer[client], *n), next: make([]atomic.Int64, *n), out: bufio.NewWriter(out), stop: make(chan struct{}),
		rng: rand.New(rand.NewSource(*seed))}
	defer w.shutdown()
	w.emit("ready %d", w.n)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] == "quit" {
			return 0
		}
		if err := w.command(f); err != nil {
			w.emit("error %q", err.Error())
		}
	}
	return 0 // EOF: the parent is gone or done
}

// scaleChild is the state of one scale-worker process.
type scaleChild struct {
	addr    string
	n       int
	prefix  string
	ka      time.Duration
	workers int
	rng     *rand.Rand // ping phases; used by the connect goroutines under rngMu

	clients []atomic.Pointer[client] // index i: user <prefix><i>; nil until connected
	next    []atomic.Int64           // index i: when its next PINGREQ is due (monotonic ns)

	outMu sync.Mutex // held across writes to out (a pipe to the parent, not a socket)
	out   *bufio.Writer

	rngMu      sync.Mutex
	connecting atomic.Bool
	pingsSent  atomic.Int64
	stop       chan struct{} // closed by shutdown: every goroutine of the worker returns
	wg         sync.WaitGroup
	pinger     sync.Once
	statusBusy atomic.Bool
	cursor     int // next user to change (status goroutine only; one at a time)
	changes    int // changes made so far, for unique tags (status goroutine only)
}

func (w *scaleChild) emit(format string, a ...any) {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	fmt.Fprintf(w.out, format+"\n", a...)
	_ = w.out.Flush()
}

func (w *scaleChild) user(i int) string { return w.prefix + strconv.Itoa(i) }

// command runs one command; long ones run in a goroutine of the worker and
// report when done.
func (w *scaleChild) command(f []string) error {
	switch f[0] {
	case "connect":
		if !w.connecting.CompareAndSwap(false, true) {
			return errors.New("connect: already connecting or connected")
		}
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.connectAll() }()
		w.pinger.Do(func() {
			w.wg.Add(1)
			go func() { defer w.wg.Done(); w.pingLoop() }()
		})
	case "stats":
		live, closed, pongs := 0, 0, int64(0)
		for i := range w.clients {
			c := w.clients[i].Load()
			if c == nil {
				continue
			}
			pongs += c.Pings()
			select {
			case <-c.Done():
				closed++
			default:
				live++
			}
		}
		w.emit("stats %d %d %d %d", live, closed, w.pingsSent.Load(), pongs)
	case "status":
		if len(f) != 3 {
			return errors.New("status: want status <rate> <count>")
		}
		rate, err1 := strconv.ParseFloat(f[1], 64)
		count, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || rate <= 0 || count < 0 {
			return fmt.Errorf("status: bad rate %q or count %q", f[1], f[2])
		}
		if !w.statusBusy.CompareAndSwap(false, true) {
			return errors.New("status: changes already running")
		}
		w.wg.Add(1)
		go func() { defer w.wg.Done(); defer w.statusBusy.Store(false); w.changeStatuses(rate, count) }()
	case "disconnect":
		k := 0
		if len(f) != 2 {
			return errors.New("disconnect: want disconnect <k>")
		}
		want, err := strconv.Atoi(f[1])
		if err != nil || want < 0 {
			return fmt.Errorf("disconnect: bad count %q", f[1])
		}
		for i := range w.clients {
			if k >= want {
				break
			}
			if c := w.clients[i].Load(); c != nil && !c.closed.Load() {
				_ = c.Disconnect()
				k++
			}
		}
		w.emit("disconnected %d", k)
	default:
		return fmt.Errorf("unknown command %q", f[0])
	}
	return nil
}

// connectAll connects every session, reporting progress every 200 ms.
func (w *scaleChild) connectAll() {
	var ok atomic.Int64
	var failed atomic.Int64
	done := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-w.stop:
				return
			case <-t.C:
				w.emit("progress %d %d", ok.Load(), failed.Load())
			}
		}
	}()
	nfail, err := connectMany(w.n, w.workers, func(i int) error {
		select {
		case <-w.stop:
			return errors.New("worker stopping")
		default:
		}
		u := w.user(i)
		c, err := connect(w.addr, connectOpts{ClientID: u + "-d", Username: u, Keepalive: uint16(w.ka / time.Second)}, connectTimeout)
		if err != nil {
			failed.Add(1)
			return err
		}
		w.rngMu.Lock()
		phase := time.Duration(w.rng.Int63n(int64(w.ka)))
		w.rngMu.Unlock()
		w.next[i].Store(int64(c.ConnackAt + phase))
		w.clients[i].Store(c)
		ok.Add(1)
		return nil
	})
	close(done)
	pwg.Wait()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	w.emit("connected %d %d %q", w.n-nfail, nfail, msg)
}

// pingLoop sends each live session's PINGREQ when its next ping is due,
// every keep-alive from a random phase, as devices do.
func (w *scaleChild) pingLoop() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		now := int64(mono())
		for i := range w.clients {
			c := w.clients[i].Load()
			if c == nil || c.closed.Load() || w.next[i].Load() > now {
				continue
			}
			w.next[i].Store(now + int64(w.ka))
			if c.Ping() == nil {
				w.pingsSent.Add(1)
			}
		}
	}
}

// changeStatuses makes count status changes at rate per second, over the
// live sessions in turn, and reports each one.
func (w *scaleChild) changeStatuses(rate float64, count int) {
	statuses := [2]string{"away", "busy"}
	start := time.Now()
	made, errs := 0, 0
	for k := 0; k < count; k++ {
		due := start.Add(time.Duration(float64(k) / rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-w.stop:
				t.Stop()
				return
			}
		}
		var c *client
		idx := -1
		for tries := 0; tries < w.n; tries++ {
			i := w.cursor % w.n
			w.cursor++
			if cl := w.clients[i].Load(); cl != nil && !cl.closed.Load() {
				c, idx = cl, i
				break
			}
		}
		if c == nil {
			errs++
			continue
		}
		w.changes++
		tag := w.prefix + "s" + strconv.Itoa(w.changes)
		at := time.Now().UnixNano()
		if err := c.Publish("presence/set", []byte(`{"status":"`+statuses[w.changes%2]+`","text":"`+tag+`"}`), 1, false); err != nil {
			errs++
			continue
		}
		made++
		w.emit("change %d %s %d", idx, tag, at)
	}
	w.emit("status-done %d %d", made, errs)
}

// shutdown stops every goroutine and closes every socket.
func (w *scaleChild) shutdown() {
	close(w.stop)
	for i := range w.clients {
		if c := w.clients[i].Load(); c != nil {
			c.Close()
		}
	}
	w.wg.Wait()
}

// ---------------------------------------------------------------------------
// The parent's side

// scaleChange is one status change a worker made.
type scaleChange struct {
	user string
	tag  string
	wall int64         // as the worker stamped it: Unix ns
	at   time.Duration // on the parent's monotonic clock (changesMade)
}

// scaleWorker is a running scale-worker child process.
type scaleWorker struct {
	name   string
	prefix string
	cmd    *exec.Cmd
	in     io.WriteCloser
	exited chan struct{} // closed when the process has been waited for
	stderr *tailBuffer

	ok, failed atomic.Int64  // from progress lines
	replies    chan []string // every line but progress and change
	readDone   chan struct{} // closed when stdout ends

	mu      sync.Mutex
	changes []scaleChange
}

// wallOffset converts the workers' wall-clock stamps to the parent's
// monotonic clock: mono = wall − wallOffset. It is read when the stamps
// are converted, so that a wall clock slewed by NTP moves it little.
func wallOffset() time.Duration { return time.Duration(time.Now().UnixNano()) - mono() }

// startScaleWorker starts bin as a scale-worker holding n sessions on addr
// and waits for its "ready".
func startScaleWorker(bin, name, addr, prefix string, n, keepalive, workers int, seed int64) (*scaleWorker, error) {
	cmd := exec.Command(bin, scaleWorkerCmd, "--addr", addr, "--n", strconv.Itoa(n), "--prefix", prefix,
		"--keepalive", strconv.Itoa(keepalive), "--connect-workers", strconv.Itoa(workers), "--seed", strconv.FormatInt(seed, 10))
	cmd.Env = childEnv()
	w := &scaleWorker{name: name, prefix: prefix, cmd: cmd, stderr: &tailBuffer{max: 4 << 10},
		replies: make(chan []string, 64), readDone: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stderr = w.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	var err error
	if w.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	children.add(cmd.Process)
	go w.read(out)
	go func() {
		<-w.readDone
		_ = cmd.Wait()
		children.remove(cmd.Process)
		close(w.exited)
	}()
	if _, err := w.await("ready", 15*time.Second); err != nil {
		w.kill()
		return nil, err
	}
	return w, nil
}

// read parses the worker's stdout until it ends: progress and changes are
// recorded, every other line goes to replies.
func (w *scaleWorker) read(out io.Reader) {
	defer close(w.readDone)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "progress":
			if len(f) == 3 {
				ok, _ := strconv.ParseInt(f[1], 10, 64)
				failed, _ := strconv.ParseInt(f[2], 10, 64)
				w.ok.Store(ok)
				w.failed.Store(failed)
			}
			continue
		case "change":
			if len(f) == 4 {
				ns, err := strconv.ParseInt(f[3], 10, 64)
				if err == nil {
					w.mu.Lock()
					w.changes = append(w.changes, scaleChange{user: w.prefix + f[1], tag: f[2], wall: ns})
					w.mu.Unlock()
				}
			}
			continue
		case "connected":
			if len(f) >= 3 {
				ok, _ := strconv.ParseInt(f[1], 10, 64)
				failed, _ := strconv.ParseInt(f[2], 10, 64)
				w.ok.Store(ok)
				w.failed.Store(failed)
			}
		}
		// One command at a time is outstanding, so replies never fill
		// up; a full channel drops the line rather than block the reader.
		select {
		case w.replies <- unquoteRest(line, f):
		default:
		}
	}
}

// unquoteRest returns the fields of line, with a trailing quoted string
// (an error message) as one field.
func unquoteRest(line string, f []string) []string {
	i := strings.IndexByte(line, '"')
	if i < 0 {
		return f
	}
	s, err := strconv.Unquote(strings.TrimSpace(line[i:]))
	if err != nil {
		return f
	}
	return append(strings.Fields(line[:i]), s)
}

// send writes one command line.
func (w *scaleWorker) send(cmd string) error {
	if _, err := io.WriteString(w.in, cmd+"\n"); err != nil {
		return fmt.Errorf("%s: %s: %w (stderr: %s)", w.name, cmd, err, w.stderr.String())
	}
	return nil
}

// await waits for the next reply whose first field is want; an error
// reply, or the worker's end, is an error.
func (w *scaleWorker) await(want string, timeout time.Duration) ([]string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case f := <-w.replies:
			if f[0] == want {
				return f, nil
			}
			if f[0] == "error" {
				return nil, fmt.Errorf("%s: %s", w.name, strings.Join(f[1:], " "))
			}
		case <-w.readDone:
			// Lines read before the end are still in replies.
			select {
			case f := <-w.replies:
				if f[0] == want {
					return f, nil
				}
			default:
			}
			return nil, fmt.Errorf("%s exited before %q (stderr: %s)", w.name, want, w.stderr.String())
		case <-t.C:
			return nil, fmt.Errorf("%s: no %q within %v", w.name, want, timeout)
		}
	}
}

// request sends cmd and waits for the reply named want.
func (w *scaleWorker) request(cmd, want string, timeout time.Duration) ([]string, error) {
	if err := w.send(cmd); err != nil {
		return nil, err
	}
	return w.await(want, timeout)
}

// scaleWorkerStats is a worker's "stats" reply.
type scaleWorkerStats struct {
	live, closed     int
	pingsSent, pongs int64
}

func (w *scaleWorker) stats() (scaleWorkerStats, error) {
	f, err := w.request("stats", "stats", 10*time.Second)
	if err != nil {
		return scaleWorkerStats{}, err
	}
	if len(f) != 5 {
		return scaleWorkerStats{}, fmt.Errorf("%s: bad stats %v", w.name, f)
	}
	var s scaleWorkerStats
	var e [4]error
	s.live, e[0] = strconv.Atoi(f[1])
	s.closed, e[1] = strconv.Atoi(f[2])
	s.pingsSent, e[2] = strconv.ParseInt(f[3], 10, 64)
	s.pongs, e[3] = strconv.ParseInt(f[4], 10, 64)
	if err := errors.Join(e[:]...); err != nil {
		return scaleWorkerStats{}, fmt.Errorf("%s: bad stats %v: %w", w.name, f, err)
	}
	return s, nil
}

// changesMade is a copy of the changes the worker reported, with their
// times on the bench's monotonic clock.
func (w *scaleWorker) changesMade() []scaleChange {
	w.mu.Lock()
	cs := append([]scaleChange(nil), w.changes...)
	w.mu.Unlock()
	off := wallOffset()
	for i := range cs {
		cs[i].at = time.Duration(cs[i].wall) - off
	}
	return cs
}

// quit asks the worker to exit and waits up to timeout, then kills it.
func (w *scaleWorker) quit(timeout time.Duration) {
	_ = w.send("quit")
	_ = w.in.Close()
	select {
	case <-w.exited:
	case <-time.After(timeout):
		w.kill()
	}
}

// kill SIGKILLs the worker and waits for it.
func (w *scaleWorker) kill() {
	_ = w.cmd.Process.Kill()
	select {
	case <-w.exited:
	case <-time.After(10 * time.Second):
	}
}

// scaleSelfBinary is this program, which runs the workers.
func scaleSelfBinary() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find presence-bench itself to run the workers: %w", err)
	}
	return p, nil
}
