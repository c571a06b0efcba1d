package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestWantsVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--version"}, true},
		{[]string{"-version"}, true},
		{[]string{"--log-level", "debug", "--version"}, true},
		{[]string{"--version", "--bogus"}, true},
		{[]string{"--", "--version"}, false},
		{[]string{"-v"}, false},
		{[]string{"version"}, false},
		{[]string{"--versions"}, false},
		{[]string{"-h"}, false},
	}
	for _, tt := range tests {
		if got := wantsVersion(tt.args); got != tt.want {
			t.Errorf("wantsVersion(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

func TestVersionLine(t *testing.T) {
	t.Parallel()
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "0123abcd0123abcd0123abcd0123abcd0123abcd"
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"tagged and clean", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/presenced/presenced", Version: "v1.2.0"},
			Settings:  settings("-compiler", "gc", "vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-30T10:00:00Z", "vcs.modified", "false"),
		}, true, "presenced v1.2.0 revision " + rev + " 2026-11-30T10:00:00Z go1.26.8"},
		{"devel and modified", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Version: "(devel)"},
			Settings:  settings("vcs.revision", rev, "vcs.time", "2026-11-30T10:00:00Z", "vcs.modified", "true"),
		}, true, "presenced (devel) revision " + rev + " 2026-11-30T10:00:00Z (modified) go1.26.8"},
		{"revision without time", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Version: "(devel)"},
			Settings:  settings("vcs.revision", rev),
		}, true, "presenced (devel) revision " + rev + " go1.26.8"},
		{"no VCS settings", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Version: "v1.2.0"},
		}, true, "presenced v1.2.0 (no VCS revision) go1.26.8"},
		{"empty build info", &debug.BuildInfo{}, true, "presenced (unknown version) (no VCS revision)"},
		{"no build info", nil, false, "presenced: no build information (built without module support)"},
		{"nil with ok", nil, true, "presenced: no build information (built without module support)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := versionLine(tt.bi, tt.ok)
			if got != tt.want {
				t.Errorf("versionLine =\n%q\nwant\n%q", got, tt.want)
			}
			if strings.Contains(got, "\n") {
				t.Errorf("versionLine is more than one line: %q", got)
			}
		})
	}
}

// run --version prints one line to stdout and exits 0 before reading any
// configuration, so a bad environment does not stop it.
func TestRunVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--version", "-version"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{arg}, []string{"PRESENCED_MQTT_ADR=x"}, &stdout, &stderr)
		if code != 0 {
			t.Errorf("%s: exit code %d, want 0 (stderr %q)", arg, code, stderr.String())
		}
		out := stdout.String()
		if !strings.HasPrefix(out, "presenced") || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
			t.Errorf("%s: stdout %q, want one line starting with presenced", arg, out)
		}
		if stderr.Len() != 0 {
			t.Errorf("%s: stderr %q, want nothing", arg, stderr.String())
		}
	}
}

func TestStampedVersionLine(t *testing.T) {
	t.Parallel()
	const rev = "0123abcd0123abcd0123abcd0123abcd0123abcd"
	const other = "fedcba98fedcba98fedcba98fedcba98fedcba98"
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/presenced/presenced", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: other}, {Key: "vcs.time", Value: "2026-11-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		},
	}
	noVCS := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}
	tests := []struct {
		name string
		s    stamp
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"stamp wins over build info", stamp{"0.9.0", rev, "2026-12-02T00:57:47Z", "false"}, bi, true,
			"presenced 0.9.0 revision " + rev + " 2026-12-02T00:57:47Z go1.26.8"},
		{"stamped modified", stamp{"0.9.0", rev, "2026-12-02T00:57:47Z", "true"}, noVCS, true,
			"presenced 0.9.0 revision " + rev + " 2026-12-02T00:57:47Z (modified) go1.26.8"},
		{"no git at build, build info has VCS", stamp{Version: "0.9.0", Revision: "unknown"}, bi, true,
			"presenced 0.9.0 revision " + other + " 2026-11-01T00:00:00Z (modified) go1.26.8"},
		{"no git at build, -buildvcs=false", stamp{Version: "0.9.0", Revision: "unknown"}, noVCS, true,
			"presenced 0.9.0 revision unknown go1.26.8"},
		{"version only", stamp{Version: "0.9.0"}, nil, false, "presenced 0.9.0 revision unknown"},
		{"no stamp: build info", stamp{}, bi, true,
			"presenced (devel) revision " + other + " 2026-11-01T00:00:00Z (modified) go1.26.8"},
		{"no stamp, no build info", stamp{}, nil, false, "presenced: no build information (built without module support)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := stampedVersionLine(tt.s, tt.bi, tt.ok); got != tt.want {
				t.Errorf("stampedVersionLine =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// The -X names the Makefile gives the linker are this package's variables:
// a binary built with them prints them, even without VCS information
// (-buildvcs=false); one built without them prints Go's build information.
func TestVersionLinkerStamp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	const rev = "0123abcd0123abcd0123abcd0123abcd0123abcd"
	dir := t.TempDir()
	build := func(name string, args ...string) string {
		bin := filepath.Join(dir, name)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a cold build cache on a busy machine
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", append(append([]string{"build", "-buildvcs=false", "-trimpath", "-o", bin}, args...), ".")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		return bin
	}
	versionOf := func(bin string) string {
		out, err := exec.Command(bin, "--version").Output()
		if err != nil {
			t.Fatalf("%s --version: %v", bin, err)
		}
		return strings.TrimSuffix(string(out), "\n")
	}

	stamped := build("stamped", "-ldflags", "-X main.version=0.9.0 -X main.revision="+rev+
		" -X main.revisionTime=2026-12-02T00:57:47Z -X main.modified=true")
	want := "presenced 0.9.0 revision " + rev + " 2026-12-02T00:57:47Z (modified) " + runtime.Version()
	if got := versionOf(stamped); got != want {
		t.Errorf("stamped build: --version\n%q\nwant\n%q", got, want)
	}
	plain := build("plain")
	if got, want := versionOf(plain), "presenced (devel) (no VCS revision) "+runtime.Version(); got != want {
		t.Errorf("plain build: --version\n%q\nwant\n%q", got, want)
	}
}
