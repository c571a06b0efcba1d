package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/presenced/presenced/auth"
)

func TestRunPasswd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     func(file string) []string
		stdin    string
		code     int
		stderr   string // in standard error
		password string // with code 0: the password that must now work
	}{
		{"sets a password", func(f string) []string { return []string{f, "alice"} }, "wonderland\n", 0, "", "wonderland"},
		{"CRLF line", func(f string) []string { return []string{f, "alice"} }, "wonderland\r\n", 0, "", "wonderland"},
		{"no newline", func(f string) []string { return []string{f, "alice"} }, "wonderland", 0, "", "wonderland"},
		{"first line only", func(f string) []string { return []string{f, "alice"} }, "wonderland\nsecond line\n", 0, "", "wonderland"},
		{"spaces kept", func(f string) []string { return []string{f, "alice"} }, " two words \n", 0, "", " two words "},
		{"UTF-8 user", func(f string) []string { return []string{f, "zoë"} }, "pw\n", 0, "", "pw"},
		{"help", func(string) []string { return []string{"-h"} }, "", 0, "", ""},
		{"no arguments", func(string) []string { return nil }, "pw\n", 2, "usage: presenced passwd FILE USER", ""},
		{"one argument", func(f string) []string { return []string{f} }, "pw\n", 2, "usage:", ""},
		{"three arguments", func(f string) []string { return []string{f, "alice", "pw"} }, "pw\n", 2, "usage:", ""},
		{"a flag", func(f string) []string { return []string{"-f", f} }, "pw\n", 2, "usage:", ""},
		{"empty password", func(f string) []string { return []string{f, "alice"} }, "\n", 2, "bad password: empty", ""},
		{"empty input", func(f string) []string { return []string{f, "alice"} }, "", 2, "bad password: empty", ""},
		{"CR only", func(f string) []string { return []string{f, "alice"} }, "\r\n", 2, "bad password: empty", ""},
		{"too long", func(f string) []string { return []string{f, "alice"} }, strings.Repeat("p", 73) + "\n", 2, "73 bytes, at most 72", ""},
		{"empty user", func(f string) []string { return []string{f, ""} }, "pw\n", 2, "invalid name", ""},
		{"colon in user", func(f string) []string { return []string{f, "a:b"} }, "pw\n", 2, "':'", ""},
		{"slash in user", func(f string) []string { return []string{f, "a/b"} }, "pw\n", 2, "invalid name", ""},
		{"plus in user", func(f string) []string { return []string{f, "a+b"} }, "pw\n", 2, "invalid name", ""},
		{"hash in user", func(f string) []string { return []string{f, "#a"} }, "pw\n", 2, "invalid name", ""},
		{"control character in user", func(f string) []string { return []string{f, "a\tb"} }, "pw\n", 2, "invalid name", ""},
		{"user starting with $", func(f string) []string { return []string{f, "$SYS"} }, "pw\n", 2, "invalid name", ""},
		{"user of 129 bytes", func(f string) []string { return []string{f, strings.Repeat("u", 129)} }, "pw\n", 2, "invalid name", ""},
		{"user of 128 bytes", func(f string) []string { return []string{f, strings.Repeat("u", 128)} }, "pw\n", 0, "", "pw"},
		{"no such directory", func(f string) []string { return []string{filepath.Join(f, "nope", "passwd"), "alice"} }, "pw\n", 1, "no such file", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := filepath.Join(dir, "passwd")
			args := tt.args(file)
			var stdout, stderr bytes.Buffer
			code := runPasswd(args, bytes.NewBufferString(tt.stdin), &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit code %d, want %d; stderr %q", code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tt.stderr)
			}
			if tt.stdin != "" && len(strings.TrimSpace(tt.stdin)) > 2 && strings.Contains(stdout.String()+stderr.String(), strings.TrimSpace(tt.stdin)) {
				t.Errorf("the output shows the password: %q %q", stdout.String(), stderr.String())
			}
			if tt.password == "" {
				if _, err := os.Stat(file); err == nil {
					t.Errorf("the file was written")
				}
				return
			}
			user := args[1]
			if !strings.Contains(stdout.String(), user) {
				t.Errorf("stdout %q does not name %s", stdout.String(), user)
			}
			if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
				t.Fatalf("file: %v, %v", info, err)
			}
			a, err := auth.New(auth.Config{PasswordFile: file})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Authenticate(user, []byte(tt.password), "c", nil); err != nil {
				t.Errorf("the new password: %v", err)
			}
		})
	}
}

// A second run replaces the user's password and keeps the other users.
func TestRunPasswdReplaces(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "passwd")
	for _, step := range []struct{ user, password string }{{"alice", "one"}, {"bob", "two"}, {"alice", "three"}} {
		var stdout, stderr bytes.Buffer
		if code := runPasswd([]string{file, step.user}, strings.NewReader(step.password+"\n"), &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit code %d, %s", step.user, code, stderr.String())
		}
	}
	a, err := auth.New(auth.Config{PasswordFile: file})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user, password string
		ok             bool
	}{{"alice", "three", true}, {"alice", "one", false}, {"bob", "two", true}} {
		if _, err := a.Authenticate(c.user, []byte(c.password), "c", nil); (err == nil) != c.ok {
			t.Errorf("%s/%s: %v, want ok=%v", c.user, c.password, err, c.ok)
		}
	}
}

// On a terminal the password is asked for twice; the reader stands in for
// term.ReadPassword.
func TestPromptTwice(t *testing.T) {
	t.Parallel()
	readErr := errors.New("terminal gone")
	tests := []struct {
		name    string
		answers []string
		err     error // from the reader after the answers
		want    string
		bad     bool   // errBadPassword
		stderr  string // in standard error
	}{
		{"both match", []string{"s3cret", "s3cret"}, nil, "s3cret", false, "New password for alice: \nAgain: \n"},
		{"they differ", []string{"s3cret", "secret"}, nil, "", true, "Again:"},
		{"empty", []string{""}, nil, "", true, "New password for alice:"},
		{"too long", []string{strings.Repeat("x", 73)}, nil, "", true, ""},
		{"read error", nil, readErr, "", false, ""},
		{"read error the second time", []string{"s3cret"}, readErr, "", false, "Again:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			answers := tt.answers
			read := func() ([]byte, error) {
				if len(answers) == 0 {
					return nil, tt.err
				}
				a := answers[0]
				answers = answers[1:]
				return []byte(a), nil
			}
			var stderr bytes.Buffer
			got, err := promptTwice(read, "alice", &stderr)
			switch {
			case tt.want != "":
				if err != nil || string(got) != tt.want {
					t.Fatalf("got %q, %v; want %q", got, err, tt.want)
				}
			case tt.bad:
				if !errors.Is(err, errBadPassword) {
					t.Fatalf("error %v, want a bad password", err)
				}
			default:
				if !errors.Is(err, tt.err) || errors.Is(err, errBadPassword) {
					t.Fatalf("error %v, want %v", err, tt.err)
				}
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tt.stderr)
			}
			if len(tt.answers) > 0 && tt.answers[0] != "" && strings.Contains(stderr.String(), tt.answers[0]) {
				t.Errorf("stderr %q echoes the password", stderr.String())
			}
		})
	}
}
