package integration

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// TestBinaryIdleWakeups: an idle broker's threads wake about as often
// with presence as without it. A 5 ms leader tick (with no group to lead)
// and a 20 ms resend tick (with nobody missing anything) woke an idle
// presenced ~750 times a second against bare mochi's ~10, and that busy
// scheduler let a peer's PUBLISH overtake a SUBSCRIBE sent before it (the
// paho interoperability suite's test_request_response, issue 18). Each
// binary is measured over the same window, side by side; the bound is far
// from both (a busy machine slows a process, it does not make it wake
// more).
func TestBinaryIdleWakeups(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if runtime.GOOS != "linux" {
		t.Skip("counts context switches in /proc")
	}
	bin := binBuild(t, t.TempDir())
	start := func(mode string) (pid int) {
		p := binStart(t, bin, binEnv(),
			"--mqtt-addr", "127.0.0.1:0", "--ws-addr", "off", "--admin-addr", "off",
			"--presence", mode, "--log-format", "json")
		started := p.waitLine(t, "presenced started")
		addr, _ := started["mqtt"].(string)
		if mode == "on" {
			// A subscriber and a device, idle: what a quiet node holds.
			obs := newObserver(t, addr, "presence/users/+")
			dial5(t, addr, "ida-phone", "ida")
			obs.waitStatus("ida", presence.Online)
		}
		return p.cmd.Process.Pid
	}
	on, off := start("on"), start("off")

	const window = 3 * time.Second
	a0, b0 := wakeups(t, on), wakeups(t, off)
	deadline := time.Now().Add(window)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // the window itself is what is measured
	}
	a, b := wakeups(t, on)-a0, wakeups(t, off)-b0
	t.Logf("context switches in %v: presence %d, bare mochi %d", window, a, b)
	if limit := 3*b + 60; a > limit {
		t.Errorf("an idle presenced woke %d times in %v (bare mochi %d): more than %d", a, window, b, limit)
	}
}

// wakeups sums the context switches of every thread of process pid.
func wakeups(t *testing.T, pid int) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "status"))
	if err != nil || len(files) == 0 {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				c, _ := strconv.Atoi(strings.TrimSpace(v))
				n += c
			}
		}
	}
	return n
}
