package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/presenced/presenced/bench/result"
)

// The password storm: N devices, each its own user of a password file
// (bcrypt at the default cost, as `presenced passwd` writes), connect at
// once, drop, and reconnect at once; once with the cache of verified
// passwords (auth.passwords.cache_size, the default) and once without.
// Each phase's figures are the time from the release to the last CONNACK
// and the broker's CPU, and what the password checks cost
// (auth_password_checks_total).
const (
	scenarioPwStorm = "password-storm"
	naPwStorm       = "the password storm runs presenced-memory only (the cache is per node)"
)

// pwStormConfig sizes the password storm.
type pwStormConfig struct {
	Devices int
	Wait    time.Duration // auth.passwords.queue_wait: long, so that no check is refused as busy
}

func pwStormDefaults(c *config) {
	c.PwStorm = pwStormConfig{Devices: 200, Wait: time.Minute}
}

func pwStormFlags(fs *flag.FlagSet, c *config) {
	fs.IntVar(&c.PwStorm.Devices, "pwstorm-devices", c.PwStorm.Devices, "password-storm: devices (one user each) connecting and reconnecting at once")
	fs.DurationVar(&c.PwStorm.Wait, "pwstorm-queue-wait", c.PwStorm.Wait, "password-storm: auth.passwords.queue_wait of the broker")
}

func (c *config) validatePwStorm() error {
	if c.PwStorm.Devices <= 0 || c.PwStorm.Wait <= 0 {
		return errors.New("--pwstorm-devices and --pwstorm-queue-wait must be positive")
	}
	return nil
}

// pwStormNA is why the password storm does not apply to sys ("" when it
// does).
func pwStormNA(sys, scenario string) string {
	if scenario == scenarioPwStorm && sys != result.SystemMemory {
		return naPwStorm
	}
	return ""
}

// runPwStorm runs the password storm on its own processes.
func runPwStorm(cfg config, r result.Run, fdLimit uint64) result.Run {
	// Two brokers, three bcrypt-bound phases each at most: a generous bound.
	timeout := cfg.RunTimeout + time.Duration(cfg.PwStorm.Devices)*400*time.Millisecond
	return runOwnProcs(cfg, r, fdLimit, timeout, (*runEnv).pwStorm)
}

const pwStormPassword = "a device's password, 24+"

// pwStorm is the scenario.
func (e *runEnv) pwStorm(_ *scaleProcs, dir string) error {
	c, r := e.cfg.PwStorm, e.run
	n := e.capDevices(c.Devices, 2, "password-storm devices")
	r.Params["devices"] = n
	r.Params["bcrypt_cost"] = bcrypt.DefaultCost
	r.Params["queue_wait_s"] = c.Wait.Seconds()
	hash, err := bcrypt.GenerateFromPassword([]byte(pwStormPassword), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	users := make([]string, n)
	var b strings.Builder
	for i := range users {
		users[i] = "pw" + strconv.Itoa(i)
		fmt.Fprintf(&b, "%s:%s\n", users[i], hash) // one hash for every user: each still costs its own comparison
	}
	pwfile := filepath.Join(dir, "passwd")
	if err := os.WriteFile(pwfile, []byte(b.String()), 0o600); err != nil {
		return err
	}
	for _, v := range []struct {
		name  string
		cache int
	}{{"cache", 0}, {"nocache", -1}} {
		if err := e.pwStormOnce(dir, pwfile, users, v.name, v.cache); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
	}
	if a, b := r.Extra["nocache_reconnect_cpu_s"], r.Extra["cache_reconnect_cpu_s"]; b > 0 {
		r.Extra["reconnect_cpu_ratio"] = round1(a / b)
	}
	return nil
}

// pwStormOnce starts a broker with the cache size given (0: the default,
// -1: off), connects every device at once, drops them all, and connects
// them again at once.
func (e *runEnv) pwStormOnce(dir, pwfile string, users []string, name string, cache int) error {
	r := e.run
	sdir := filepath.Join(dir, name)
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		return err
	}
	extra := fmt.Sprintf("auth: {password_file: %q, passwords: {queue_wait: %s, cache_size: %d}}\n", pwfile, e.cfg.PwStorm.Wait, cache)
	if e.cfg.PresencedExtra != "" {
		merged, err := mergeYAML(extra, e.cfg.PresencedExtra)
		if err != nil {
			return err
		}
		extra = merged
	}
	sys, err := startSystem(result.SystemMemory, e.cfg.Paths, sdir, presencedConfig{Extra: extra})
	if err != nil {
		return err
	}
	defer sys.stop()
	for _, phase := range []string{"connect", "reconnect"} {
		cpu0, err := sys.cpu()
		if err != nil {
			return err
		}
		clients, took, failed := pwStormConnect(sys.addr(), users)
		cpu1, err := sys.cpu()
		if err != nil {
			return err
		}
		ok := 0
		for _, c := range clients {
			if c != nil {
				ok++
			}
		}
		if failed != "" {
			e.note("%s %s: %d of %d connected; first failure: %s", name, phase, ok, len(users), failed)
		}
		p := name + "_" + phase
		r.Extra[p+"_s"] = round3(took.Seconds())
		r.Extra[p+"_cpu_s"] = round3((cpu1 - cpu0).Seconds())
		r.Extra[p+"_connected"] = float64(ok)
		if st, err := sys.adminStats(); err == nil {
			if m, ok := st["auth_password_checks_total"].(map[string]any); ok {
				for _, k := range []string{"hashed", "cached", "busy"} {
					if f, ok := m[k].(float64); ok {
						r.Extra[p+"_checks_"+k] = f // since the broker started
					}
				}
			}
		}
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}
	return nil
}

// pwStormConnect connects a device for each user, all released at once,
// and returns the clients (nil where it failed), the time from the
// release to the last CONNACK, and the first failure.
func pwStormConnect(addr string, users []string) ([]*client, time.Duration, string) {
	clients := make([]*client, len(users))
	gate := make(chan struct{})
	var ready, wg sync.WaitGroup
	var mu sync.Mutex
	first := ""
	for i, u := range users {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-gate
			c, err := connect(addr, connectOpts{ClientID: u + "-d", Username: u, Password: pwStormPassword, Keepalive: 600}, 5*time.Minute)
			if err != nil {
				mu.Lock()
				if first == "" {
					first = err.Error()
				}
				mu.Unlock()
				return
			}
			clients[i] = c
		}()
	}
	ready.Wait()
	release := mono()
	close(gate)
	wg.Wait()
	var last time.Duration
	for _, c := range clients {
		if c != nil {
			last = max(last, c.ConnackAt)
		}
	}
	return clients, last - release, first
}
