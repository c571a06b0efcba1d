package main

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// defaultGCPercent is presenced's GOGC when the environment sets none.
//
// Go's GOGC (100 by default) lets the heap grow, before the next
// collection, by as much as the live heap plus every goroutine stack. mochi
// runs two goroutines per connection whose stacks take 20 KiB (see
// bench/README.md, "Memory per idle session"), so with 15,000 idle sessions
// Go's default lets about 450 MiB of garbage pile up: mochi copies its
// client and retained-message maps every second, and an idle broker's
// resident memory keeps growing for minutes. 25 bounds that growth to a
// quarter; the cost is more frequent collections (see the benchmark's
// idle_cpu_ms_per_s).
const defaultGCPercent = 25

// memoryLimitShare is the share of a cgroup memory limit given to the Go
// runtime as its soft limit (GOMEMLIMIT) when the environment sets none.
const memoryLimitShare = 0.9

// gcSettings is what applyGCDefaults decided.
type gcSettings struct {
	GCPercent   int    // set by presenced; 0 when GOGC was in the environment
	MemoryLimit int64  // bytes set by presenced; 0 when none
	LimitFrom   string // the cgroup file the limit was derived from
}

// cgroupLimitFiles are where a container's memory limit is read: cgroup v2,
// then v1.
var cgroupLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// decideGC is the pure part of applyGCDefaults: with GOGC unset, GC percent
// defaultGCPercent; with GOMEMLIMIT unset and a cgroup memory limit, a soft
// limit of memoryLimitShare of it. A variable the operator set always wins
// (the Go runtime has already applied it).
func decideGC(env []string, readFile func(string) ([]byte, error)) gcSettings {
	var s gcSettings
	if !hasEnv(env, "GOGC") {
		s.GCPercent = defaultGCPercent
	}
	if hasEnv(env, "GOMEMLIMIT") {
		return s
	}
	for _, f := range cgroupLimitFiles {
		b, err := readFile(f)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(v, 10, 64)
		// "max" (v2) or a huge number (v1's "unlimited") is no limit.
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			continue
		}
		s.MemoryLimit = int64(float64(n) * memoryLimitShare)
		s.LimitFrom = f
		return s
	}
	return s
}

// applyGCDefaults applies decideGC's settings to the runtime.
func applyGCDefaults(env []string) gcSettings {
	s := decideGC(env, os.ReadFile)
	if s.GCPercent > 0 {
		debug.SetGCPercent(s.GCPercent)
	}
	if s.MemoryLimit > 0 {
		debug.SetMemoryLimit(s.MemoryLimit)
	}
	return s
}

// hasEnv tells whether env sets name to a non-empty value (the Go runtime
// ignores an empty GOGC or GOMEMLIMIT).
func hasEnv(env []string, name string) bool {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name && v != "" {
			return true
		}
	}
	return false
}
