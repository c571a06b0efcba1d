package roster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseFile(t *testing.T) {
	g, err := ParseFile([]byte("groups:\n  team: [alice, bob]\n  ops:\n    - carol\n  empty:\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != 3 || !slices.Equal(g["team"], []string{"alice", "bob"}) || g["empty"] == nil || len(g["empty"]) != 0 {
		t.Fatalf("groups %v", g)
	}
	if g, err := ParseFile(nil); err != nil || len(g) != 0 {
		t.Fatalf("empty file: %v %v", g, err)
	}
	bad := map[string]string{
		"unknown key":      "group:\n  team: [a]\n",
		"bad group name":   "groups:\n  \"a/b\": [x]\n",
		"bad member name":  "groups:\n  team: [\"\\u202Eecila\"]\n",
		"mixed scripts":    "groups:\n  team: [\"аlice\"]\n",
		"not a list":       "groups:\n  team: alice\n",
		"wildcard member":  "groups:\n  team: [\"+\"]\n",
		"leading $ group":  "groups:\n  $SYS: [a]\n",
		"member is a list": "groups:\n  team: [[a]]\n",
	}
	for name, in := range bad {
		if _, err := ParseFile([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ParseFile([]byte(strings.Repeat("#", MaxFileBytes+1))); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("oversized file: %v", err)
	}
}

func TestLoadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "groups.yaml")
	if err := os.WriteFile(p, []byte("groups:\n  team: [alice]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := LoadFile(p)
	if err != nil || !slices.Equal(g["team"], []string{"alice"}) {
		t.Fatalf("%v %v", g, err)
	}
	if _, err := LoadFile(p + ".missing"); err == nil {
		t.Fatal("a missing file loaded")
	}
}
