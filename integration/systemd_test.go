package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/configs"
)

// systemdExposure is the most `systemd-analyze security` may rate the
// unit, on its 0-100 scale (10 is its "1.0"); it rates it 1.3 now.
const systemdExposure = 20

// deploy/systemd/presenced.service: systemd-analyze verify finds nothing
// to say about it (any line it prints fails the test: a misspelt key is a
// warning, not an error), its offline security rating stays low, the user
// it names is the one deploy/systemd/presenced.sysusers creates, and it
// gives the drain its time. systemd does not run here (no systemd as PID
// 1), so the unit is checked, not started; `systemd-analyze security`
// rates the file (--offline), not a running service.
func TestSystemd(t *testing.T) {
	deployTools(t, "go", "systemd-analyze", "systemd-sysusers")
	dir := t.TempDir()
	bin := binBuild(t, dir)
	b, err := os.ReadFile("../deploy/systemd/presenced.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	const execStart = "ExecStart=/usr/local/bin/presenced --config /etc/presenced/presenced.yaml\n"
	if !strings.Contains(unit, execStart) {
		t.Fatalf("the unit has no %q", execStart)
	}
	// verify checks that ExecStart's program exists: the binary built here.
	local := filepath.Join(dir, "presenced.service")
	if err := os.WriteFile(local, []byte(strings.Replace(unit, execStart, "ExecStart="+bin+" --config /etc/presenced/presenced.yaml\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("verify", func(t *testing.T) {
		out, err := runCmdCombined(t, "systemd-analyze", "verify", "--man=no", "--generators=no", local)
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	})

	t.Run("security", func(t *testing.T) {
		out, err := runCmdCombined(t, "systemd-analyze", "security", "--offline=yes", "--no-pager",
			"--threshold="+strconv.Itoa(systemdExposure), local)
		m := regexp.MustCompile(`Overall exposure level for presenced.service: ([0-9.]+) (\S+)`).FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("systemd-analyze security: %v (more than %d?)\n%s", err, systemdExposure, out)
		}
		t.Logf("exposure %s %s", m[1], m[2])
	})

	t.Run("user", func(t *testing.T) {
		root := filepath.Join(dir, "root")
		if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
		conf, err := filepath.Abs("../deploy/systemd/presenced.sysusers") // sysusers reads a relative path under --root
		if err != nil {
			t.Fatal(err)
		}
		if out, err := runCmdCombined(t, "systemd-sysusers", "--root="+root, conf); err != nil {
			t.Fatalf("systemd-sysusers: %v\n%s", err, out)
		}
		passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^presenced:x:[0-9]+:[0-9]+:[^:]*:/:/usr/sbin/nologin$`).Match(passwd) {
			t.Errorf("systemd-sysusers made no presenced user with nologin:\n%s", passwd)
		}
		for _, want := range []string{"User=presenced\n", "Group=presenced\n"} {
			if !strings.Contains(unit, want) {
				t.Errorf("the unit has no %q", want)
			}
		}
	})

	t.Run("stop and reload", func(t *testing.T) {
		cfg, err := configs.Load(nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^TimeoutStopSec=(\S+)$`).FindStringSubmatch(unit)
		if m == nil {
			t.Fatal("the unit has no TimeoutStopSec")
		}
		stop, err := time.ParseDuration(m[1])
		if drain := cfg.Drain.Timeout.D() + 10*time.Second; err != nil || stop < drain {
			t.Errorf("TimeoutStopSec=%s, want at least the drain's %v", m[1], drain)
		}
		for _, want := range []string{"ExecReload=/bin/kill -HUP $MAINPID\n", "KillSignal=SIGTERM\n", "Type=simple\n"} {
			if !strings.Contains(unit, want) {
				t.Errorf("the unit has no %q", want)
			}
		}
	})
}

// runCmdCombined runs name with args here within a minute and returns its
// standard output and error together.
func runCmdCombined(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
