package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// binProc is a running presenced process.
type binProc struct {
	cmd    *exec.Cmd
	lines  chan map[string]any // stdout JSON log lines
	stdout *binBuffer          // every stdout byte
	stderr *binBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // cmd.Wait's result, set before done closes
}

// binBuffer is a bytes.Buffer safe for concurrent use.
type binBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *binBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *binBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// binBuild builds ./cmd/presenced into dir and returns the binary's path.
func binBuild(t *testing.T, dir string) string {
	t.Helper()
	return goBuild(t, dir, "./cmd/presenced")
}

// goBuild builds the command pkg of this module into dir and returns the
// binary's path.
func goBuild(t *testing.T, dir, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// binEnv is this process's environment without any PRESENCED_ variable,
// with pacing off (pacingOffEnv), plus extra (the last of a key wins).
func binEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PRESENCED_") {
			env = append(env, kv)
		}
	}
	env = append(env, pacingOffEnv...)
	return append(env, extra...)
}

// binStart starts the binary; it is killed at cleanup if still running.
func binStart(t *testing.T, bin string, env []string, args ...string) *binProc {
	t.Helper()
	p := &binProc{
		cmd:    exec.Command(bin, args...),
		lines:  make(chan map[string]any, 1024),
		stdout: &binBuffer{},
		stderr: &binBuffer{},
		done:   make(chan struct{}),
	}
	p.cmd.Env = env
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		defer close(p.lines)
		sc := bufio.NewScanner(io.TeeReader(out, p.stdout))
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				select {
				case p.lines <- m:
				default: // nobody is reading any more
				}
			}
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

// waitLine returns the first stdout JSON line whose message is msg.
func (p *binProc) waitLine(t *testing.T, msg string) map[string]any {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case m, ok := <-p.lines:
			if !ok {
				<-p.done
				t.Fatalf("presenced exited (%v) before logging %q\nstdout:\n%s\nstderr:\n%s", p.err, msg, p.stdout, p.stderr)
			}
			if m["message"] == msg {
				return m
			}
		case <-timeout:
			t.Fatalf("presenced did not log %q within %v\nstdout:\n%s\nstderr:\n%s", msg, waitTimeout, p.stdout, p.stderr)
		}
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *binProc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("presenced still running after %v\nstdout:\n%s\nstderr:\n%s", within, p.stdout, p.stderr)
	}
	var exit *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &exit):
		return exit.ExitCode()
	}
	t.Fatalf("wait: %v", p.err)
	return -1
}

// The real binary: it starts, serves presence and the admin port, and stops
// cleanly on SIGTERM; a bad config stops it at once, naming the key.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := binBuild(t, t.TempDir())

	t.Run("serves and stops on SIGTERM", func(t *testing.T) {
		p := binStart(t, bin, binEnv(),
			"--mqtt-addr", "127.0.0.1:0", "--ws-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
			"--node-id", "bin-node", "--log-format", "json")
		started := p.waitLine(t, "presenced started")
		mqttAddr, _ := started["mqtt"].(string)
		adminAddr, _ := started["admin"].(string)
		if !strings.HasPrefix(mqttAddr, "127.0.0.1:") || strings.HasSuffix(mqttAddr, ":0") ||
			!strings.HasPrefix(adminAddr, "127.0.0.1:") || strings.HasSuffix(adminAddr, ":0") {
			t.Fatalf("started line: %v", started)
		}
		if started["node"] != "bin-node" {
			t.Errorf("started line names node %v, want bin-node", started["node"])
		}

		obs := newObserver(t, mqttAddr, "presence/users/+")
		dial5(t, mqttAddr, "una-phone", "una", withDevice("phone"))
		on := obs.waitStatus("una", presence.Online)
		if len(on.Sessions) != 1 || on.Sessions[0].Node != "bin-node" {
			t.Errorf("online: %+v", on)
		}

		resp, err := http.Get("http://" + adminAddr + "/healthz")
		if err != nil {
			t.Fatalf("GET /healthz: %v", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /healthz: %d", resp.StatusCode)
		}

		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM: %v", err)
		}
		if code := p.wait(t, 10*time.Second); code != 0 {
			t.Errorf("exit code %d after SIGTERM, want 0\nstderr:\n%s", code, p.stderr)
		}
		if !strings.Contains(p.stdout.String(), `"message":"presenced stopped"`) {
			t.Errorf("no \"presenced stopped\" in the log:\n%s", p.stdout)
		}
		obs.check()
	})

	t.Run("unknown key in the config file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "presenced.yaml")
		yaml := "mqtt:\n  addr: 127.0.0.1:0\n  keepalive_bogus: 30s\n"
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		p := binStart(t, bin, binEnv(), "--config", file,
			"--mqtt-addr", "127.0.0.1:0", "--ws-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
		if code := p.wait(t, 10*time.Second); code == 0 {
			t.Errorf("exit code 0 with an unknown key")
		}
		if !strings.Contains(p.stderr.String(), "mqtt.keepalive_bogus") {
			t.Errorf("stderr does not name the key:\n%s", p.stderr)
		}
	})

	t.Run("invalid environment variable", func(t *testing.T) {
		p := binStart(t, bin, binEnv("PRESENCED_MQTT_SERVER_KEEPALIVE=abc"),
			"--mqtt-addr", "127.0.0.1:0", "--ws-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
		if code := p.wait(t, 10*time.Second); code == 0 {
			t.Errorf("exit code 0 with PRESENCED_MQTT_SERVER_KEEPALIVE=abc")
		}
		if !strings.Contains(p.stderr.String(), "PRESENCED_MQTT_SERVER_KEEPALIVE") {
			t.Errorf("stderr does not name the variable:\n%s", p.stderr)
		}
	})
}
