package main

import (
	"bytes"
	"strings"
	"testing"
)

// presenced -h and --help name the subcommands and --version, and exit 0.
func TestHelpNamesSubcommands(t *testing.T) {
	t.Parallel()
	for _, help := range []string{"-h", "--help"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{help}, nil, &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit code %d", help, code)
		}
		for _, want := range []string{
			"Usage: presenced [flags]",
			"presenced passwd FILE USER",
			"presenced token [-ttl 1h] [-groups g1,g2] [-observer] SECRET_FILE USER",
			"presenced health [-addr ADDR]     exits 0 when the admin port answers ready",
			"presenced --version",
			"presenced who [--status S] [--group G] [--node N] [--prefix P] [--json]",
			"presenced user NAME [--json]",
			"presenced kick USER[/CLIENT_ID]",
			"presenced account USER STATUS [TEXT] | USER --clear",
			"presenced forget USER",
		} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("%s: the help does not say %q:\n%s", help, want, stderr.String())
			}
		}
	}
}
