package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
)

// The examples of examples/ (issue 19), each run as its users run it,
// against the real binary: examples/js (observer.js under node, and its
// client rules under node:test), examples/python (device.py and observer.py
// under /usr/bin/python3 with paho-mqtt, and their rules under unittest) and
// examples/browser (the page in a headless Chromium, driven with chromedp;
// examples_browser_test.go). make deps installs node, MQTT.js
// (examples/js/node_modules), python3-paho-mqtt and chromium: these tests
// fail, never skip, without them.

// examplesGroup is the group every example watches, and its members.
const examplesGroup = "team"

var examplesMembers = []string{"alice", "bob", "carol"}

// examplesBroker starts the binary on random loopback ports with the group
// team of alice, bob and carol (a groups file; pacing off, as the harness
// has it) and returns its MQTT and WebSocket addresses. It is killed at
// cleanup.
func examplesBroker(t *testing.T) (mqttAddr, wsAddr string) {
	t.Helper()
	dir := t.TempDir()
	bin := binBuild(t, dir)
	groups := filepath.Join(dir, "groups.yaml")
	yaml := "groups:\n  " + examplesGroup + ": [" + strings.Join(examplesMembers, ", ") + "]\n"
	if err := os.WriteFile(groups, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := binStart(t, bin, binEnv("PRESENCED_PRESENCE_GROUPS_FILE="+groups),
		"--mqtt-addr", "127.0.0.1:0", "--ws-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
		"--node-id", "examples", "--log-format", "json")
	started := p.waitLine(t, "presenced started")
	mqttAddr, _ = started["mqtt"].(string)
	wsAddr, _ = started["ws"].(string)
	if mqttAddr == "" || wsAddr == "" {
		t.Fatalf("started line without mqtt or ws: %v", started)
	}
	return mqttAddr, wsAddr
}

// exampleProc is a running example program: its stdout lines as they come.
type exampleProc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr binBuffer
	done   chan struct{} // closed once the process is waited for
	err    error         // cmd.Wait's, once done is closed

	mu    sync.Mutex
	lines []string
}

// startExample starts name (args...) in dir, its stdin a pipe; it is
// killed at cleanup if still running.
func startExample(t *testing.T, dir string, env []string, name string, args ...string) *exampleProc {
	t.Helper()
	p := &exampleProc{t: t, name: filepath.Base(name), cmd: exec.Command(name, args...), done: make(chan struct{})}
	for _, a := range args {
		if strings.HasSuffix(a, ".js") || strings.HasSuffix(a, ".py") {
			p.name = a
			break
		}
	}
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s %v: %v", name, args, err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
	}()
	go func() {
		<-scanned // Wait closes the pipe: read everything first
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// snapshot returns the lines so far.
func (p *exampleProc) snapshot() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// waitLine waits for a line at index from or later that matches re, and
// returns its index and the line. It fails if the program exits first.
func (p *exampleProc) waitLine(from int, re string) (int, string) {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	at, got := -1, ""
	_, err := testkit.Poll(2*waitTimeout, testkit.Tick, func() error {
		lines := p.snapshot()
		for i := from; i < len(lines); i++ {
			if rx.MatchString(lines[i]) {
				at, got = i, lines[i]
				return nil
			}
		}
		select {
		case <-p.done:
			return nil // fails below
		default:
		}
		return fmt.Errorf("not yet")
	})
	if at < 0 {
		p.t.Fatalf("%s: no line matching %q from line %d (%v)\n%s", p.name, re, from, err, p.output())
	}
	return at, got
}

// count returns how many lines match re.
func (p *exampleProc) count(re string) int {
	rx := regexp.MustCompile(re)
	n := 0
	for _, l := range p.snapshot() {
		if rx.MatchString(l) {
			n++
		}
	}
	return n
}

// stop sends SIGTERM (or, with eof, closes stdin) and waits for a clean
// exit; an example whose name ends in .js or .py must print "end" last.
func (p *exampleProc) stop(eof bool) {
	p.t.Helper()
	if eof {
		_ = p.stdin.Close()
	} else if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("%s: SIGTERM: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(waitTimeout):
		p.t.Fatalf("%s did not exit\n%s", p.name, p.output())
	}
	if p.err != nil {
		p.t.Fatalf("%s: %v\n%s", p.name, p.err, p.output())
	}
	if lines := p.snapshot(); filepath.Ext(p.name) != "" && (len(lines) == 0 || lines[len(lines)-1] != "end") {
		p.t.Errorf("%s: last line is not \"end\"\n%s", p.name, p.output())
	}
}

func (p *exampleProc) output() string {
	var b strings.Builder
	for _, l := range p.snapshot() {
		b.WriteString("  " + l + "\n")
	}
	select {
	case <-p.done:
		b.WriteString("stderr: " + p.stderr.String())
	default:
		b.WriteString("(still running)")
	}
	return b.String()
}

// runExample runs a program to its end and fails on a non-zero exit.
func runExample(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkObserverLive checks what an observer (observer.js or observer.py)
// printed on a live run: nothing dropped, no gap, nothing it could not
// read (the broker sends each version once, in order), and group versions
// one after the other.
func checkObserverLive(t *testing.T, p *exampleProc) {
	t.Helper()
	if n := p.count(`^(drop|gap|bad|error|refused) `); n != 0 {
		t.Errorf("%s: %d drop, gap, bad or error lines on a live run\n%s", p.name, n, p.output())
	}
	version := 0
	rx := regexp.MustCompile(`^group ` + examplesGroup + ` (?:snapshot )?v(\d+) `)
	for _, l := range p.snapshot() {
		m := rx.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var v int
		fmt.Sscan(m[1], &v)
		if strings.Contains(l, " snapshot ") {
			version = v
			continue
		}
		if v != version && v != version+1 {
			t.Errorf("%s: group version %d after %d: %q\n%s", p.name, v, version, l, p.output())
		}
		version = v
	}
}

// craftedPrefix is a topic prefix outside presence's: the tests publish
// crafted presence messages there (the broker refuses any publish under
// presence/), and an observer started with --prefix reads them as it reads
// presence, through the real broker. The live run cannot show a stale
// version or a gap, which the broker never sends; these can.
const craftedPrefix = "crafted/presence"

// craftedUser is a presence/users/{user} payload of version v.
func craftedUser(user, status string, v int64) string {
	return fmt.Sprintf(`{"user":%q,"status":%q,"text":"","version":%d,"since":"2026-11-30T03:30:00.000Z","last_seen":null,"sessions":[]}`,
		user, status, v)
}

// craftedGroup is a snapshot (follows 0) or a delta of group team with
// one member change.
func craftedGroup(version, follows int, user, status string) string {
	member := fmt.Sprintf(`{"user":%q,"status":%q,"last_seen":null,"version":%d}`, user, status, version*100)
	if follows == 0 {
		return fmt.Sprintf(`{"group":"team","version":%d,"members":[%s],"online":1,"total":1,"by_status":{%q:1}}`,
			version, member, status)
	}
	return fmt.Sprintf(`{"group":"team","version":%d,"follows":%d,"changes":[%s],"online":1,"total":1,"by_status":{%q:1}}`,
		version, follows, member, status)
}

// checkObserverRules drives an observer started with --prefix craftedPrefix
// --group team, after its "ready", through crafted deliveries: a stale and
// a duplicate user version are dropped; a delta that follows is applied; a
// duplicate delta is dropped; a gap makes the observer subscribe again,
// which the broker answers with the retained snapshot, and the next delta
// follows that.
func checkObserverRules(t *testing.T, mqttAddr string, obs func() *exampleProc) {
	t.Helper()
	// A user's connection: anonymous observers may only subscribe.
	pub := dial5(t, mqttAddr, fmt.Sprintf("crafter-%d", time.Now().UnixNano()), "crafter")
	t.Cleanup(pub.disconnect)
	// The retained snapshot, v7, before the observer subscribes.
	pub.publish(t, craftedPrefix+"/groups/team", craftedGroup(7, 0, "ann", "online"), 1, true)
	p := obs()
	p.waitLine(0, `^ready$`)
	at, _ := p.waitLine(0, `^group team snapshot v7 online=1 total=1 ann=online$`)

	pub.publish(t, craftedPrefix+"/users/ann", craftedUser("ann", "online", 100), 1, false)
	at, _ = p.waitLine(at, `^user ann online v100 sessions=0$`)
	pub.publish(t, craftedPrefix+"/users/ann", craftedUser("ann", "offline", 99), 1, false)
	at, _ = p.waitLine(at, `^drop user ann v99 held v100$`)
	pub.publish(t, craftedPrefix+"/users/ann", craftedUser("ann", "away", 100), 1, false)
	at, _ = p.waitLine(at, `^drop user ann v100 held v100$`)
	pub.publish(t, craftedPrefix+"/users/ann", craftedUser("ann", "busy", 101), 1, false)
	at, _ = p.waitLine(at, `^user ann busy v101 sessions=0$`)

	pub.publish(t, craftedPrefix+"/groups/team", craftedGroup(8, 7, "ann", "busy"), 1, false)
	at, _ = p.waitLine(at, `^group team v8 ann busy$`)
	pub.publish(t, craftedPrefix+"/groups/team", craftedGroup(8, 7, "ann", "dnd"), 1, false)
	at, _ = p.waitLine(at, `^drop group team v8 held v8$`)
	// v9 is lost: v10 is a gap. The observer subscribes again and gets the
	// retained snapshot (still v7: the crafter retained no other), which it
	// takes whatever it held: the snapshot is the broker's word.
	pub.publish(t, craftedPrefix+"/groups/team", craftedGroup(10, 9, "ann", "away"), 1, false)
	at, _ = p.waitLine(at, `^gap group team follows v9 held v8: resubscribe$`)
	at, _ = p.waitLine(at, `^group team snapshot v7 online=1 total=1 ann=online$`)
	pub.publish(t, craftedPrefix+"/groups/team", craftedGroup(8, 7, "ann", "idle"), 1, false)
	p.waitLine(at, `^group team v8 ann idle$`)
	if n := p.count(`^(user|group) .*(away|dnd)$`); n != 0 {
		t.Errorf("%s applied a dropped message\n%s", p.name, p.output())
	}
	if n := p.count(`^(bad|error|refused) `); n != 0 {
		t.Errorf("%s: bad or error lines\n%s", p.name, p.output())
	}
	p.stop(false)
}
