package integration

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// Issue 18: a SIGHUP in the first milliseconds of start-up killed the
// process (Go's default action, before the reload handler was installed
// after the broker had started). A SIGHUP during start-up must never end
// it: the binary is sent SIGHUP every few hundred microseconds from its
// first log line on, and must go on to start and stop cleanly.
func TestSIGHUPDuringStartup(t *testing.T) {
	bin := mnBinary(t)
	const rounds = 5
	for r := range rounds {
		p := binStart(t, bin, binEnv(),
			"--mqtt-addr", "127.0.0.1:0", "--ws-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
			"--node-id", "bin-hup", "--log-format", "json")
		// SIGHUP from its first log line (config read, the broker not yet
		// built) until it says it started. Before Go's runtime has set up
		// its signal handlers (microseconds after exec) no Go program can
		// keep a SIGHUP from ending it, so the first line is the start.
		first := make(chan struct{})
		go func() {
			select {
			case <-p.lines:
			case <-p.done:
			}
			close(first)
		}()
		<-first
		stopHup := make(chan struct{})
		hupped := make(chan int)
		go func() {
			n := 0
			defer func() { hupped <- n }()
			for {
				select {
				case <-stopHup:
					return
				case <-p.done:
					return
				default:
				}
				if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
					if errors.Is(err, os.ErrProcessDone) {
						return
					}
				}
				n++
				time.Sleep(time.Duration(200+r*100) * time.Microsecond)
			}
		}()
		p.waitLine(t, "presenced started")
		close(stopHup)
		n := <-hupped
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("round %d: SIGTERM: %v", r, err)
		}
		if code := p.wait(t, waitTimeout); code != 0 {
			t.Fatalf("round %d: exit code %d after %d SIGHUPs during start-up and a SIGTERM, want 0\nstderr:\n%s", r, code, n, p.stderr)
		}
		t.Logf("round %d: %d SIGHUPs during start-up, then a clean stop", r, n)
	}
}
