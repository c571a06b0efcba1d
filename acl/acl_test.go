package acl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"unknown keyword", "topic read a\nallow a/b\n", "line 2: unknown keyword \"allow\""},
		{"user without name", "# c\n\nuser\n", "line 3: user needs a name"},
		{"topic without topic", "user alice\ntopic read\n", "line 2: topic: no topic"},
		{"empty topic line", "topic\n", "line 1: topic: no topic"},
		{"hash not last", "user a\n\ntopic read a/#/b\n", "line 3: topic: \"a/#/b\": # must be the last level"},
		{"plus inside a level", "pattern write users/%u+\n", "line 1: pattern: \"users/%u+\": a wildcard must be a whole level"},
		{"hash inside a level", "topic deny a/b#\n", "line 1: topic: \"a/b#\": a wildcard must be a whole level"},
		{"misspelt access", "user a\ntopic reed a/b\n", "line 2: topic: unknown access \"reed\""},
		{"misspelt pattern access", "\n\n\npattern rw users/%u\n", "line 4: pattern: unknown access \"rw\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.text))
			if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse: %v, want ErrSyntax with %q", err, c.want)
			}
		})
	}
}

const sample = `
# anonymous: read the public board
topic read public/#

user alice
topic readwrite shared/#
topic deny shared/secret/#
	topic	read	space topic/x

user bob
topic write inbox/alice

# every user: their own tree, their client's
pattern readwrite users/%u/#
pattern read devices/%c/config
pattern deny users/%u/locked
`

func TestAllows(t *testing.T) {
	rs, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user, client, topic string
		write, want         bool
	}{
		// anonymous
		{"", "anon-1", "public/news", false, true},
		{"", "anon-1", "public/#", false, true},
		{"", "anon-1", "public/news", true, false},
		{"", "anon-1", "shared/x", false, false},
		{"", "anon-1", "users/+/x", false, false},
		{"", "anon-1", "devices/anon-1/config", false, true}, // %c applies to anonymous
		// alice's own lines
		{"alice", "a1", "shared/doc", true, true},
		{"alice", "a1", "shared/+", false, true},
		{"alice", "a1", "shared/secret/k", false, false},
		{"alice", "a1", "shared/secret/#", false, false},
		{"alice", "a1", "shared/#", false, true}, // overlaps the deny: each delivery is checked
		{"alice", "a1", "space topic/x", false, true},
		{"alice", "a1", "public/news", false, false}, // the anonymous lines are not hers
		// patterns
		{"alice", "a1", "users/alice/status", true, true},
		{"alice", "a1", "users/alice/+", false, true},
		{"alice", "a1", "users/alice", false, true}, // users/alice/# covers users/alice
		{"alice", "a1", "users/alice/locked", true, false},
		{"alice", "a1", "users/bob/status", false, false},
		{"alice", "a1", "users/+/status", false, false},
		{"alice", "a1", "users/#", false, false},
		{"alice", "a1", "devices/a1/config", false, true},
		{"alice", "a1", "devices/a1/config", true, false},
		{"alice", "a1", "devices/a2/config", false, false},
		{"bob", "b1", "inbox/alice", true, true},
		{"bob", "b1", "inbox/alice", false, false},
		{"carol", "c1", "users/carol/x", false, true}, // a user without lines: the patterns
		// wildcards that would read everything
		{"alice", "a1", "#", false, false},
		{"alice", "a1", "+", false, false},
		{"alice", "a1", "+/+", false, false},
		{"alice", "a1", "+/alice/status", false, false},
		// %u and %c bringing in wildcards apply to nobody
		{"+", "c", "users/+/x", false, false},
		{"alice", "#", "devices/#/config", false, false},
	} {
		if got := rs.Allows(c.user, c.client, c.topic, c.write); got != c.want {
			t.Errorf("user %q client %q %s write %v: %v, want %v", c.user, c.client, c.topic, c.write, got, c.want)
		}
	}
}

func TestCovers(t *testing.T) {
	for _, c := range []struct {
		rule, filter string
		want         bool
	}{
		{"#", "a/b", true},
		{"#", "#", true},
		{"#", "$SYS/x", false},
		{"+/#", "$share", false},
		{"a/#", "a", true},
		{"a/#", "a/+/c", true},
		{"a/+", "a/#", false},
		{"a/+", "a/+", true},
		{"a/+", "a/b/c", false},
		{"a/b", "a/b/c", false},
		{"a/+/c", "a/b", false},
		{"+", "+", true},
		{"+", "#", false},
		{"a/b", "a/+", false},
	} {
		if got := covers(c.rule, c.filter); got != c.want {
			t.Errorf("covers(%q, %q) = %v, want %v", c.rule, c.filter, got, c.want)
		}
	}
}

func TestFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("pattern read users/%u/#\n")
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Allows("alice", "a", "users/alice/x", false) || f.Allows("alice", "a", "users/alice/x", true) {
		t.Fatal("first rules not applied")
	}
	write("pattern readwrite users/%u/#\nbogus line\n")
	if err := f.Reload(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("Reload of a bad file: %v, want an error naming line 2", err)
	}
	if f.Allows("alice", "a", "users/alice/x", true) {
		t.Error("a failed reload changed the rules")
	}
	write("pattern readwrite users/%u/#\n")
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	if !f.Allows("alice", "a", "users/alice/x", true) {
		t.Error("reloaded rules not applied")
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Load of a missing file: no error")
	}
}
