package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/presenced/presenced/bench/result"
)

// parallelFlags are the flags runParallel sets for each child itself.
var parallelFlags = map[string]bool{"systems": true, "scenarios": true, "out-dir": true, "out-name": true,
	"repeat": true, "parallel": true, "include": true}

// childArgs returns args without the flags in drop (in any of the forms
// -x v, --x v, -x=v, --x=v; a boolean flag takes no value unless =).
func childArgs(args []string, drop map[string]bool, boolean map[string]bool) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		if name == a || a == "--" { // not a flag
			out = append(out, a)
			continue
		}
		name, _, hasValue := strings.Cut(name, "=")
		if !drop[name] {
			out = append(out, a)
			continue
		}
		if !hasValue && !boolean[name] {
			i++ // its value
		}
	}
	return out
}

// runParallel runs every round of every system as a presence-bench child
// process of its own, all at the same time, and gathers their runs into
// one file. It is for scenarios that measure a broker at rest (memory):
// an idle minute is spent once, not once per system and round, and each
// child has a file-descriptor limit of its own. It is not for figures of
// speed, which sharing the cores would spoil.
func runParallel(cfg config, args []string) (result.File, error) {
	dir, err := os.MkdirTemp("", "presence-bench-parallel-")
	if err != nil {
		return result.File{}, err
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return result.File{}, err
	}
	base := childArgs(args, parallelFlags, map[string]bool{"parallel": true})
	rounds := max(cfg.Repeat, 1)
	start := time.Now()
	f := result.File{Started: start.UTC().Truncate(time.Millisecond), Command: cfg.Command, Machine: machineInfo(cfg.Paths),
		Presenced: firstLine(cfg.Paths.Presenced, "presenced", "--version")}
	if rounds > 1 {
		f.Repeat = rounds
	}
	type job struct {
		system string
		round  int
		name   string
		out    *tailBuffer
		err    error
	}
	var jobs []*job
	for round := 1; round <= rounds; round++ {
		for _, sys := range cfg.Systems {
			jobs = append(jobs, &job{system: sys, round: round, name: fmt.Sprintf("%s-r%d", sys, round), out: &tailBuffer{max: 8 << 10}})
		}
	}
	logf(cfg, "parallel: %d children (%d systems × %d rounds) of %s", len(jobs), len(cfg.Systems), rounds, strings.Join(cfg.Scenarios, ","))
	var wg sync.WaitGroup
	for _, j := range jobs {
		a := append(append([]string(nil), base...), "--systems", j.system, "--scenarios", strings.Join(cfg.Scenarios, ","),
			"--out-dir", dir, "--out-name", j.name)
		cmd := exec.Command(self, a...)
		cmd.Stdout, cmd.Stderr = j.out, j.out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return f, fmt.Errorf("start %s: %w", j.name, err)
		}
		children.add(cmd.Process)
		wg.Add(1)
		go func() {
			defer wg.Done()
			j.err = cmd.Wait()
			children.remove(cmd.Process)
		}()
	}
	wg.Wait()
	for _, j := range jobs {
		b, err := os.ReadFile(filepath.Join(dir, j.name+".json"))
		var part result.File
		if err == nil {
			err = json.Unmarshal(b, &part)
		}
		if err != nil {
			f.Runs = append(f.Runs, result.Run{System: j.system, Scenario: strings.Join(cfg.Scenarios, ","), Round: roundOf(j.round, rounds),
				Error: fmt.Sprintf("child %s: %v (exit: %v): %s", j.name, err, j.err, lastLines(j.out.String(), 3))})
			continue
		}
		for _, r := range part.Runs {
			r.Round = roundOf(j.round, rounds)
			r.Notes = append(r.Notes, "run at the same time as the other systems and rounds, each in a process of its own (--parallel)")
			f.Runs = append(f.Runs, r)
			logf(cfg, "[%s] %s", j.name, summaryLine(r, 0))
		}
	}
	f.Duration = math.Round(time.Since(start).Seconds()*10) / 10
	return f, nil
}

func roundOf(round, rounds int) int {
	if rounds > 1 {
		return round
	}
	return 0
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// include adds the runs of earlier result files (e.g. a --parallel run of
// the memory scenario) to f, so that one report shows them all.
func include(f *result.File, paths []string) error {
	var before []string // the included runs' commands, in order
	defer func() {
		if len(before) > 0 {
			f.Command = strings.Join(append(before, f.Command), " && ")
		}
	}()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("--include: %w", err)
		}
		var g result.File
		if err := json.Unmarshal(b, &g); err != nil {
			return fmt.Errorf("--include %s: %w", p, err)
		}
		f.Runs = append(f.Runs, g.Runs...)
		f.Repeat = max(f.Repeat, g.Repeat)
		f.Duration += g.Duration
		if g.Command != "" {
			before = append(before, g.Command)
		}
	}
	return nil
}
