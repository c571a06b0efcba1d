package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDocsRecipes runs docs/quickstart.md and docs/production.md command for
// command, as a reader would, and checks that what they say happens does.
// The markers (an HTML comment before a fenced block) and the two
// substitutions are described at the end of docs/quickstart.md, "How this
// page is tested":
//
//	<!-- run -->          the block runs in a fresh sh and must succeed
//	<!-- run: fails -->   ... and must fail
//	<!-- start: NAME -->  the block runs in the background: terminal NAME
//	<!-- type: NAME -->   the block's lines are typed into NAME
//	<!-- ctrl-c: NAME --> SIGINT to NAME, which must exit
//	<!-- ctrl-d: NAME --> NAME's input ends; it must exit
//	<!-- expect: NAME --> NAME prints the block's lines, in order (others may
//	                      come between); "expect" alone: the last run block
//
// `go run ./cmd/presenced` is the binary the test builds, on PATH; the
// default ports in the blocks are free ports, also given as
// PRESENCED_MQTT_ADDR, PRESENCED_MQTT_WS_ADDR and PRESENCED_ADMIN_ADDR.
// In JSON lines, version, since, a non-null last_seen, epoch, connected_at
// and node are not compared (they differ from run to run).
func TestDocsRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	for _, tool := range []string{"mosquitto_sub", "mosquitto_pub", "openssl", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (make deps installs it): %v", tool, err)
		}
	}
	bin := t.TempDir()
	binBuild(t, bin)
	for _, page := range []string{"quickstart.md", "production.md"} {
		t.Run(strings.TrimSuffix(page, ".md"), func(t *testing.T) {
			steps := parseRecipe(t, filepath.Join("..", "docs", page))
			runRecipe(t, bin, steps)
		})
	}
}

// step is one marker and the block after it (if any).
type step struct {
	kind, name string // run, fails, start, type, ctrl-c, ctrl-d, expect
	block      string
	line       int // the marker's line in the page
}

var markerRE = regexp.MustCompile(`^<!-- (run|start|type|ctrl-c|ctrl-d|expect)(?::\s*(\S+))? -->$`)

func parseRecipe(t *testing.T, path string) []step {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var steps []step
	for i := 0; i < len(lines); i++ {
		m := markerRE.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		s := step{kind: m[1], name: m[2], line: i + 1}
		if s.kind == "run" && s.name == "fails" {
			s.kind, s.name = "fails", ""
		}
		if s.kind != "ctrl-c" && s.kind != "ctrl-d" {
			j := i + 1
			for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
				j++
			}
			if j == len(lines) || !strings.HasPrefix(lines[j], "```") {
				t.Fatalf("%s:%d: %s marker without a fenced block after it", path, i+1, s.kind)
			}
			var body []string
			for j++; j < len(lines) && !strings.HasPrefix(lines[j], "```"); j++ {
				body = append(body, lines[j])
			}
			s.block, i = strings.Join(body, "\n")+"\n", j
		}
		steps = append(steps, s)
	}
	if len(steps) < 5 {
		t.Fatalf("%s: only %d steps: are the markers there?", path, len(steps))
	}
	return steps
}

// terminal is a background command of a recipe.
type terminal struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *binBuffer
	seen  int // lines already matched by an expect
	done  chan struct{}
	err   error
}

func runRecipe(t *testing.T, bin string, steps []step) {
	dir := t.TempDir()
	mqtt, ws, admin := freePort(t), freePort(t), freePort(t)
	ports := strings.NewReplacer("1883", mqtt, "8883", mqtt, "1882", ws, "8443", ws, "8080", admin)
	env := append(binEnv(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PRESENCED_MQTT_ADDR=127.0.0.1:"+mqtt,
		"PRESENCED_MQTT_WS_ADDR=127.0.0.1:"+ws,
		"PRESENCED_ADMIN_ADDR=127.0.0.1:"+admin,
	)
	// binEnv turns pacing off for the other binary tests; a recipe shows the
	// defaults, so those variables go again (the last of a key wins, and an
	// empty value would be an invalid one: drop them instead).
	env = withoutPacingEnv(env)
	script := func(block string) string {
		return ports.Replace(strings.ReplaceAll(block, "go run ./cmd/presenced", "presenced"))
	}
	terms := map[string]*terminal{}
	t.Cleanup(func() {
		for _, term := range terms {
			select {
			case <-term.done:
			default:
				_ = syscall.Kill(-term.cmd.Process.Pid, syscall.SIGKILL)
				<-term.done
			}
		}
	})
	var last string // the output of the last run block
	for _, s := range steps {
		where := fmt.Sprintf("line %d (%s %s)", s.line, s.kind, s.name)
		switch s.kind {
		case "run", "fails":
			block := script(s.block)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			cmd := exec.CommandContext(ctx, "sh", "-ec", block)
			cmd.Dir, cmd.Env = dir, env
			out, err := cmd.CombinedOutput()
			cancel()
			last = string(out)
			if s.kind == "run" && err != nil {
				t.Fatalf("%s: %v\n%s\noutput:\n%s", where, err, block, out)
			}
			if s.kind == "fails" && err == nil {
				t.Fatalf("%s: succeeded, the page says it fails\n%s\noutput:\n%s", where, block, out)
			}
		case "start":
			if terms[s.name] != nil {
				t.Fatalf("%s: terminal %s started twice", where, s.name)
			}
			terms[s.name] = startTerminal(t, dir, env, script(s.block))
		case "type":
			term := mustTerm(t, terms, s.name, where)
			if _, err := io.WriteString(term.stdin, s.block); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		case "ctrl-c", "ctrl-d":
			term := mustTerm(t, terms, s.name, where)
			if s.kind == "ctrl-c" {
				_ = syscall.Kill(-term.cmd.Process.Pid, syscall.SIGINT)
			} else {
				_ = term.stdin.Close()
			}
			select {
			case <-term.done:
				if term.err != nil {
					t.Fatalf("%s: %s exited with %v\noutput:\n%s", where, s.name, term.err, term.out)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: %s still running 30 s after %s\noutput:\n%s", where, s.name, s.kind, term.out)
			}
		case "expect":
			want := nonEmptyLines(s.block)
			if s.name == "" {
				if i := matchLines(nonEmptyLines(last), 0, want); i < 0 {
					t.Fatalf("%s: the last run block printed\n%s\nthe page says\n%s", where, last, s.block)
				}
				continue
			}
			term := mustTerm(t, terms, s.name, where)
			deadline := time.Now().Add(30 * time.Second)
			for {
				got := nonEmptyLines(term.out.String())
				if i := matchLines(got, term.seen, want); i >= 0 {
					term.seen = i
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %s printed\n%s\nthe page says, in order\n%s", where, s.name, strings.Join(got[term.seen:], "\n"), s.block)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

func mustTerm(t *testing.T, terms map[string]*terminal, name, where string) *terminal {
	t.Helper()
	term := terms[name]
	if term == nil {
		t.Fatalf("%s: no terminal %q was started", where, name)
	}
	return term
}

func startTerminal(t *testing.T, dir string, env []string, block string) *terminal {
	t.Helper()
	term := &terminal{out: &binBuffer{}, done: make(chan struct{})}
	// exec: the terminal's process is the command itself, so Ctrl-C reaches
	// it as it would from a shell; a process group of its own for the kill.
	term.cmd = exec.Command("sh", "-ec", "exec "+strings.TrimSpace(strings.ReplaceAll(block, "\\\n", " ")))
	term.cmd.Dir, term.cmd.Env = dir, env
	term.cmd.Stdout, term.cmd.Stderr = term.out, term.out
	term.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var err error
	if term.stdin, err = term.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := term.cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", block, err)
	}
	go func() {
		term.err = term.cmd.Wait()
		close(term.done)
	}()
	return term
}

// matchLines finds want in got, in order, from got[from]; it returns the
// index after the last line matched, or -1.
func matchLines(got []string, from int, want []string) int {
	i := from
	for _, w := range want {
		for i < len(got) && !sameLine(got[i], w) {
			i++
		}
		if i == len(got) {
			return -1
		}
		i++
	}
	return i
}

// sameLine compares a printed line with a line of the page: as JSON (after
// an optional topic) without the fields that differ from run to run, else
// as text.
func sameLine(got, want string) bool {
	got, want = strings.TrimSpace(got), strings.TrimSpace(want)
	gt, gj := splitJSON(got)
	wt, wj := splitJSON(want)
	if gj == nil || wj == nil {
		return got == want
	}
	return gt == wt && reflect.DeepEqual(normalise(gj), normalise(wj))
}

func splitJSON(line string) (prefix string, v any) {
	i := strings.IndexByte(line, '{')
	if i < 0 || json.Unmarshal([]byte(line[i:]), &v) != nil {
		return line, nil
	}
	return strings.TrimSpace(line[:i]), v
}

// varying are the payload fields that differ from run to run.
var varying = map[string]bool{"version": true, "since": true, "last_seen": true, "epoch": true, "connected_at": true, "node": true}

func normalise(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if varying[k] && x != nil {
				v[k] = "*"
				continue
			}
			v[k] = normalise(x)
		}
	case []any:
		for i := range v {
			v[i] = normalise(v[i])
		}
	}
	return v
}

func nonEmptyLines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func freePort(t *testing.T) string {
	t.Helper()
	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	if _, err := strconv.Atoi(port); err != nil {
		t.Fatalf("free address %q", addr)
	}
	return port
}

func withoutPacingEnv(env []string) []string {
	drop := map[string]bool{}
	for _, kv := range pacingOffEnv {
		k, _, _ := strings.Cut(kv, "=")
		drop[k] = true
	}
	var out []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			out = append(out, kv)
		}
	}
	return out
}
