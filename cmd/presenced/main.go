package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/redis/go-redis/v9"

	presenced "github.com/presenced/presenced"
	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/store"
)

// hup receives SIGHUP (reload) from the main package's initialisation on,
// before main runs: Go's default action for a SIGHUP nobody asked for ends
// the process, and start-up (config, the store, the listeners) takes
// milliseconds. One that comes before the broker has started waits here,
// and reloads once it has.
var hup = notifyHUP()

func notifyHUP() chan os.Signal {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	return c
}

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code.
func run(args, env []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "token" {
		return runToken(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "passwd" {
		return runPasswd(args[1:], os.Stdin, stdout, stderr)
	}
	if wantsVersion(args) {
		bi, ok := debug.ReadBuildInfo()
		fmt.Fprintln(stdout, versionLine(bi, ok))
		return 0
	}
	if len(args) > 0 && args[0] == "health" {
		return runHealth(args[1:], env, stdout, stderr)
	}
	if len(args) > 0 && isCLI(args[0]) { // who, user, kick, account, forget (cli.go)
		return runCLI(args[0], args[1:], env, stdout, stderr)
	}
	cfg, notes, err := configs.LoadWithNotes(args, env, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "presenced: %v\n", err)
		return 2
	}
	log, slogLog, err := NewLogger(stdout, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		fmt.Fprintf(stderr, "presenced: %v\n", err)
		return 2
	}
	if len(notes.IgnoredEnv) > 0 {
		log.Info().Strs("vars", notes.IgnoredEnv).Msg("ignored Kubernetes service-link variables")
	}
	gc := applyGCDefaults(env)
	log.Info().Int("gc_percent", gc.GCPercent).Int64("memory_limit", gc.MemoryLimit).Str("memory_limit_from", gc.LimitFrom).
		Msg("Go GC settings (0: as GOGC / GOMEMLIMIT in the environment, or Go's own)")
	redis.SetLogger(store.RedisLogger(slogLog.With("component", "go-redis")))
	n, err := presenced.NewBroker(cfg, slogLog)
	if err != nil {
		log.Error().Err(err).Msg("cannot build the broker")
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := n.Start(ctx); err != nil {
		log.Error().Err(err).Msg("cannot start")
		return 1
	}
	for waiting := true; waiting; {
		select {
		case <-hup:
			if err := n.Reload(); err != nil {
				log.Error().Err(err).Msg("reload failed: what could not be read is kept as it was")
			} else {
				log.Info().Msg("reloaded: password file, token keys, TLS certificates, admin token file")
			}
		case <-ctx.Done():
			waiting = false
		case <-n.Drained(): // POST /api/v1/drain drained and stopped the node
			waiting = false
		}
	}
	// A second SIGTERM or SIGINT, once stop has run, ends the process at
	// once (Go's default action): the drain is the polite way out, not the
	// only one.
	stop()
	if ctx.Err() != nil {
		log.Info().Int64("timeout_ms", cfg.Drain.Timeout.D().Milliseconds()).Int("rate", cfg.Drain.Rate).Msg("signal received, draining")
	}
	if err := n.Drain(); err != nil {
		log.Warn().Err(err).Msg("shutdown was not clean")
		return 1
	}
	return 0
}
