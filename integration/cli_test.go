package integration

import (
	"bytes"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/configs"
)

// A user name presence cannot use is a bad user name: CONNACK 0x86, and
// 3.1.1's 0x04 "bad user name or password" (mochi maps 0x86 to 0x05, not
// authorized), with or without authentication configured.
func TestBadUserNameRefusedBothVersions(t *testing.T) {
	n := startAuthNode(t, nil)
	for _, user := range []string{"a/b", "$SYS", "a+b"} {
		for _, version := range []int{4, 5} {
			want := refusedCode(version)
			if got := try(t, ctDialTCP(t, n.MQTTAddr()), version, "bad-name", user, ""); got != want {
				t.Errorf("user %q, MQTT version %d: CONNACK %#x, want %#x", user, version, got, want)
			}
		}
	}
	if got := try(t, ctDialTCP(t, n.MQTTAddr()), 4, "good-name", "alice", ""); got != rc3Accepted {
		t.Errorf("user alice, 3.1.1: CONNACK %#x, want 0", got)
	}
}

// presenced token mints a token that a running broker with that secret
// file takes, over MQTT 5 (no user name) and 3.1.1 (the same user name).
// Redis down at start stops the binary with one error and no warning that
// changes are held.
func TestBinarySubcommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := binBuild(t, t.TempDir())

	t.Run("token", func(t *testing.T) {
		dir := t.TempDir()
		secretFile := filepath.Join(dir, "jwt.secret")
		writeAtomic(t, secretFile, []byte("a development secret of well over thirty-two bytes\n"))
		cmd := exec.Command(bin, "token", "-ttl", "10m", "-groups", "ops", secretFile, "alice")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("presenced token: %v; stderr %q", err, stderr.String())
		}
		token, ok := strings.CutSuffix(stdout.String(), "\n")
		if !ok || stderr.Len() > 0 || strings.Count(token, ".") != 2 {
			t.Fatalf("stdout %q, stderr %q: want one token", stdout.String(), stderr.String())
		}
		n := startAuthNode(t, func(c *configs.Config) { c.Auth.JWT.HS256SecretFile = secretFile })
		if code := try(t, ctDialTCP(t, n.MQTTAddr()), 5, "alice-5", "", token); code != 0 {
			t.Errorf("MQTT 5: CONNACK %#x, want 0", code)
		}
		if code := try(t, ctDialTCP(t, n.MQTTAddr()), 4, "alice-3", "alice", token); code != rc3Accepted {
			t.Errorf("3.1.1: CONNACK %#x, want 0", code)
		}
		if code := try(t, ctDialTCP(t, n.MQTTAddr()), 4, "bob-3", "bob", token); code != rc3BadUserOrPass {
			t.Errorf("3.1.1, another user name: CONNACK %#x, want %#x", code, rc3BadUserOrPass)
		}
	})

	t.Run("redis down at start", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close() // nothing listens there now
		p := binStart(t, bin, binEnv(), "--redis-addr", addr, "--mqtt-addr", "127.0.0.1:0", "--ws-addr", "off",
			"--admin-addr", "off", "--log-format", "json")
		if code := p.wait(t, 2*time.Minute); code == 0 {
			t.Fatalf("exit code 0 with Redis down\nstdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
		}
		out := p.stdout.String() + p.stderr.String()
		want := "redis: cannot reach " + addr + " at start: dial tcp " + addr + ": connect: connection refused (presenced needs Redis at start; it rides out outages after that)"
		if got := strings.Count(out, want); got != 1 {
			t.Errorf("%d lines say %q, want 1:\n%s", got, want, out)
		}
		if strings.Contains(out, "held") || strings.Contains(out, "redis unreachable") {
			t.Errorf("a warning that changes are held:\n%s", out)
		}
		if strings.Count(out, `"level":"error"`) != 1 {
			t.Errorf("want one error line:\n%s", out)
		}
	})
}
