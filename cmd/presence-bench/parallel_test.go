package main

import (
	"reflect"
	"testing"
)

func TestChildArgsDropsTheParentsOwnFlags(t *testing.T) {
	args := []string{"--presenced", "bin/presenced", "--systems", "a,b", "-scenarios=memory", "--parallel", "--repeat", "3",
		"--memory-idle", "60s", "--out-dir=x", "-out-name", "y", "--include", "m.json", "--parallel=true"}
	got := childArgs(args, parallelFlags, map[string]bool{"parallel": true})
	want := []string{"--presenced", "bin/presenced", "--memory-idle", "60s"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("childArgs = %q, want %q", got, want)
	}
}
