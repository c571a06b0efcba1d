package main

import (
	"errors"
	"runtime/debug"
	"testing"
)

func files(m map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		if v, ok := m[p]; ok {
			return []byte(v), nil
		}
		return nil, errors.New("no such file")
	}
}

func TestDecideGC(t *testing.T) {
	const v2, v1 = "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"
	for _, c := range []struct {
		name    string
		env     []string
		files   map[string]string
		percent int
		limit   int64
		from    string
	}{
		{"nothing set, no cgroup", nil, nil, defaultGCPercent, 0, ""},
		{"GOGC set wins", []string{"GOGC=100"}, nil, 0, 0, ""},
		{"GOGC empty is unset", []string{"GOGC="}, nil, defaultGCPercent, 0, ""},
		{"GOGC=off wins", []string{"GOGC=off"}, nil, 0, 0, ""},
		{"cgroup v2 limit", nil, map[string]string{v2: "1073741824\n"}, defaultGCPercent, 966367641, v2},
		{"cgroup v2 max is no limit", nil, map[string]string{v2: "max\n"}, defaultGCPercent, 0, ""},
		{"cgroup v1 limit", nil, map[string]string{v1: "2147483648\n"}, defaultGCPercent, 1932735283, v1},
		{"cgroup v1 unlimited", nil, map[string]string{v1: "9223372036854771712\n"}, defaultGCPercent, 0, ""},
		{"GOMEMLIMIT set wins", []string{"GOMEMLIMIT=500MiB"}, map[string]string{v2: "1073741824"}, defaultGCPercent, 0, ""},
		{"both set", []string{"GOGC=50", "GOMEMLIMIT=1GiB"}, map[string]string{v2: "1073741824"}, 0, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := decideGC(c.env, files(c.files))
			if s.GCPercent != c.percent || s.MemoryLimit != c.limit || s.LimitFrom != c.from {
				t.Errorf("got %+v, want percent %d limit %d from %q", s, c.percent, c.limit, c.from)
			}
		})
	}
}

// applyGCDefaults sets the runtime's GC percent when GOGC is not in the
// environment, and leaves it alone when it is.
func TestApplyGCDefaults(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	oldLimit := debug.SetMemoryLimit(-1) // a cgroup limit on this machine sets it
	defer debug.SetMemoryLimit(oldLimit)
	applyGCDefaults([]string{"GOGC=100"})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: GC percent %d, want 100 (left alone)", got)
	}
	applyGCDefaults(nil)
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("without GOGC: GC percent %d, want %d", got, defaultGCPercent)
	}
}
