package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/auth"
)

// tokenNow is the clock of the token tests.
var tokenNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// writeSecret writes an HS256 secret file as an operator would: the secret
// and a newline.
func writeSecret(t *testing.T, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwt.secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const tokenSecret = "a development secret of 32 bytes or more, for tokens"

// mint runs `presenced token args...` at tokenNow and returns the token,
// checking that stdout holds it and nothing else.
func mint(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := runTokenAt(args, func() time.Time { return tokenNow }, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d; stderr %q", code, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Fatalf("stderr %q, want nothing", stderr.String())
	}
	out := stdout.String()
	token, ok := strings.CutSuffix(out, "\n")
	if !ok || strings.ContainsAny(token, " \n") || strings.Count(token, ".") != 2 {
		t.Fatalf("stdout %q, want one compact JWT and a newline", out)
	}
	return token
}

// verifier is the broker's authenticator for tokens signed with the secret
// in file, at time at.
func verifier(t *testing.T, file string, at time.Time, tweak func(*auth.JWTConfig)) *auth.Authenticator {
	t.Helper()
	c := auth.Config{JWT: auth.JWTConfig{HS256SecretFile: file, RequireExp: true}, Now: func() time.Time { return at }}
	if tweak != nil {
		tweak(&c.JWT)
	}
	a, err := auth.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A minted token is one the broker's verifier takes, with its user, groups,
// observer claim and exp; it lives ttl.
func TestTokenVerifies(t *testing.T) {
	t.Parallel()
	file := writeSecret(t, tokenSecret)
	observer := func(c *auth.JWTConfig) { c.ObserverClaim = "presence_observer" }
	tests := []struct {
		name  string
		args  []string
		tweak func(*auth.JWTConfig)
		want  auth.Identity
	}{
		{"plain", []string{file, "alice"}, nil, auth.Identity{User: "alice"}},
		{"groups", []string{"-groups", "ops, dev", file, "bob"}, nil, auth.Identity{User: "bob", Groups: []string{"ops", "dev"}}},
		{"observer", []string{"-observer", file, "svc"}, observer, auth.Identity{User: "svc", Observer: true}},
		{"observer claim not configured", []string{"-observer", file, "svc"}, nil, auth.Identity{User: "svc"}},
		{"observer claim named", []string{"-observer", "-observer-claim", "admin", file, "svc"}, func(c *auth.JWTConfig) { c.ObserverClaim = "admin" }, auth.Identity{User: "svc", Observer: true}},
		{"UTF-8 user", []string{file, "zoë"}, nil, auth.Identity{User: "zoë"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			token := mint(t, tt.args...)
			got, err := verifier(t, file, tokenNow, tt.tweak).Authenticate("", []byte(token), "c1", nil)
			if err != nil {
				t.Fatalf("the verifier refused the token: %v", err)
			}
			if got.User != tt.want.User || got.Method != auth.MethodJWT || !slices.Equal(got.Groups, tt.want.Groups) || got.Observer != tt.want.Observer {
				t.Fatalf("identity %+v, want %+v", got, tt.want)
			}
			if want := tokenNow.Add(time.Hour).Add(auth.DefaultLeeway); !got.Expires.Equal(want) {
				t.Fatalf("expires %s, want %s (1h and the leeway)", got.Expires, want)
			}
		})
	}
}

// The ttl is the token's life: the verifier takes it until exp (and the
// leeway), not after; one whose max_lifetime is shorter refuses it.
func TestTokenTTL(t *testing.T) {
	t.Parallel()
	file := writeSecret(t, tokenSecret)
	token := []byte(mint(t, "-ttl", "10m", file, "alice"))
	if _, err := verifier(t, file, tokenNow.Add(10*time.Minute), nil).Authenticate("", token, "c", nil); err != nil {
		t.Fatalf("at exp: %v", err)
	}
	if _, err := verifier(t, file, tokenNow.Add(11*time.Minute), nil).Authenticate("", token, "c", nil); err == nil || !strings.Contains(err.Error(), "token expired") {
		t.Fatalf("a minute after exp: %v, want token expired", err)
	}
	long := []byte(mint(t, "-ttl", "2h", file, "alice"))
	_, err := verifier(t, file, tokenNow, func(c *auth.JWTConfig) { c.MaxLifetime = time.Hour }).Authenticate("", long, "c", nil)
	if err == nil || !strings.Contains(err.Error(), "max_lifetime") {
		t.Fatalf("ttl 2h, max_lifetime 1h: %v, want a refusal naming max_lifetime", err)
	}
	other := writeSecret(t, strings.Repeat("x", 40))
	if _, err := verifier(t, other, tokenNow, nil).Authenticate("", token, "c", nil); err == nil || !strings.Contains(err.Error(), "bad signature") {
		t.Fatalf("another secret: %v, want bad signature", err)
	}
}

func TestTokenRefusals(t *testing.T) {
	t.Parallel()
	file := writeSecret(t, tokenSecret)
	short := writeSecret(t, strings.Repeat("s", 31))
	crlf := filepath.Join(t.TempDir(), "crlf.secret")
	if err := os.WriteFile(crlf, []byte(strings.Repeat("s", 31)+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no arguments", nil, 2, "usage: presenced token"},
		{"one argument", []string{file}, 2, "usage: presenced token"},
		{"three arguments", []string{file, "alice", "bob"}, 2, "usage: presenced token"},
		{"unknown flag", []string{"-ttl2", "1h", file, "alice"}, 2, "flag provided but not defined: -ttl2"},
		{"flag after the user", []string{file, "alice", "-ttl", "1h"}, 2, "usage: presenced token"},
		{"short secret", []string{short, "alice"}, 1, "the secret is 31 bytes, at least 32 are needed"},
		{"short secret with CRLF", []string{crlf, "alice"}, 1, "the secret is 31 bytes"},
		{"no secret file", []string{filepath.Join(t.TempDir(), "nope"), "alice"}, 1, "no such file"},
		{"ttl 0", []string{"-ttl", "0", file, "alice"}, 2, "-ttl 0s: want 1s to 8760h0m0s"},
		{"ttl negative", []string{"-ttl", "-1h", file, "alice"}, 2, "-ttl -1h0m0s: want 1s to"},
		{"ttl over a year", []string{"-ttl", "8761h", file, "alice"}, 2, "-ttl 8761h0m0s: want 1s to"},
		{"ttl without a unit", []string{"-ttl", "60", file, "alice"}, 2, `invalid value "60" for flag -ttl`},
		{"empty user", []string{file, ""}, 2, "invalid name"},
		{"slash in user", []string{file, "a/b"}, 2, "invalid name"},
		{"user starting with $", []string{file, "$SYS"}, 2, "invalid name"},
		{"user of 129 bytes", []string{file, strings.Repeat("u", 129)}, 2, "invalid name"},
		{"bad group", []string{"-groups", "ok,a/b", file, "alice"}, 2, "-groups:"},
		{"empty group", []string{"-groups", "ok,", file, "alice"}, 2, "-groups:"},
		{"observer claim sub", []string{"-observer", "-observer-claim", "sub", file, "alice"}, 2, `-observer-claim "sub"`},
		{"observer claim empty", []string{"-observer", "-observer-claim", "", file, "alice"}, 2, `-observer-claim ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := runTokenAt(tt.args, func() time.Time { return tokenNow }, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
				t.Fatalf("exit code %d, stderr %q; want %d and %q", code, stderr.String(), tt.code, tt.stderr)
			}
			if stdout.Len() > 0 {
				t.Fatalf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// -h prints the usage on stdout; run dispatches "token" to it.
func TestTokenHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"token", "-h"}, {"token", "--help"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, nil, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "usage: presenced token [-ttl 1h]") {
			t.Fatalf("%v: exit code %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
}
