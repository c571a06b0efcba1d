package integration

import (
	"fmt"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// Issue 22 item 3: an observer knows when its view is stale. Each node
// publishes presence/clock every presence.clock_interval (S) to its own
// subscribers, not retained; an observer that hears none for 2 S greys
// everyone out.

// clockBeat is a presence/clock message as an observer received it.
type clockBeat struct {
	c     presence.Clock
	at    time.Time // when it arrived
	bytes int       // its payload's size
}

// clockWatcher is an MQTT 5 observer of presence/clock: every message it
// receives is parsed strictly (a payload that is not the broker's fails
// the test).
type clockWatcher struct {
	t  *testing.T
	c  *client5
	mu sync.Mutex
	in []clockBeat
}

// watchClock connects an anonymous observer that subscribes to
// presence/clock (QoS 1 asked; the clock is sent at QoS 0).
func watchClock(t *testing.T, addr string) *clockWatcher {
	t.Helper()
	w := &clockWatcher{t: t, c: dial5(t, addr, fmt.Sprintf("clock-watcher-%d", time.Now().UnixNano()), "")}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case <-done:
				return
			case m := <-w.c.msgs:
				at := time.Now()
				if m.Topic != "presence/clock" || m.Retain || m.QoS != 0 {
					t.Errorf("watcher received %s (retain %v, QoS %d): %q", m.Topic, m.Retain, m.QoS, m.Payload)
					continue
				}
				c, err := presence.ParseClock(m.Payload)
				if err != nil {
					t.Errorf("presence/clock payload %q: %v", m.Payload, err)
					continue
				}
				w.mu.Lock()
				w.in = append(w.in, clockBeat{c: c, at: at, bytes: len(m.Payload)})
				w.mu.Unlock()
			}
		}
	}()
	if got := subAck(t, w.c, "presence/clock"); got > 2 {
		t.Fatalf("SUBSCRIBE presence/clock: %#x", got)
	}
	return w
}

// beats returns the messages received so far.
func (w *clockWatcher) beats() []clockBeat {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]clockBeat(nil), w.in...)
}

// waitBeats waits for n messages in all.
func (w *clockWatcher) waitBeats(n int, within time.Duration) []clockBeat {
	w.t.Helper()
	testkit.Wait(w.t, within, fmt.Sprintf("%d clock messages", n), func() error {
		return testkit.Why(len(w.beats()) >= n, fmt.Sprintf("%d so far", len(w.beats())))
	})
	return w.beats()
}

// clockFigures checks a run of clock messages of one node at interval S:
// one sequence, no gap, and at most one message per S (plus the one at the
// window's edge); it returns the messages per second and the mean size.
func clockFigures(t *testing.T, run []clockBeat, node string, S time.Duration) (perSecond, meanBytes float64) {
	t.Helper()
	if len(run) < 2 {
		t.Fatalf("%d clock messages", len(run))
	}
	total := 0
	for i, b := range run {
		total += b.bytes
		if b.c.Node != node || b.c.Interval != S {
			t.Errorf("message %d: node %q interval %v, want %q %v", i, b.c.Node, b.c.Interval, node, S)
		}
		if i > 0 && (b.c.Seq != run[i-1].c.Seq+1 || b.c.Incarnation != run[i-1].c.Incarnation) {
			t.Errorf("message %d: seq %d (%s) after %d (%s)", i, b.c.Seq, b.c.Incarnation, run[i-1].c.Seq, run[i-1].c.Incarnation)
		}
		if i > 0 && b.c.Version < run[i-1].c.Version {
			t.Errorf("message %d: version %d after %d", i, b.c.Version, run[i-1].c.Version)
		}
	}
	span := run[len(run)-1].at.Sub(run[0].at)
	// n messages span n-1 intervals: they can be no closer than that on
	// average (a ticker never fires early), however late some are.
	if min := time.Duration(len(run)-1) * S * 9 / 10; span < min {
		t.Errorf("%d clock messages within %v: more than one per %v", len(run), span, S)
	}
	return float64(len(run)-1) / span.Seconds(), float64(total) / float64(len(run))
}

// presence/clock on a node (every form and store): an observer receives
// one message per presence.clock_interval (two filters matching it
// included), QoS 0, not retained, strictly
// the documented payload (schema/clock.schema.json's fields), in one
// sequence, carrying the highest version the node published; nothing is
// retained; a client's publish there is refused (0x87) and counted, and
// reaches nobody.
func TestClock(t *testing.T) {
	const S = time.Second
	n := startNode(t, func(c *configs.Config) {
		d := configs.Duration(S)
		c.Presence.ClockInterval = &d
	})
	w := watchClock(t, n.MQTTAddr())
	// A second filter that matches the clock: still one message per S
	// (mochi delivers a topic once per client; clockFigures refuses a
	// repeated seq).
	if got := subAck(t, w.c, "presence/+"); got > 2 {
		t.Fatalf("SUBSCRIBE presence/+: %#x", got)
	}
	users := newObserver(t, n.MQTTAddr(), "presence/users/+")
	dev := dial5(t, n.MQTTAddr(), "cleo-phone", "cleo", withDevice("phone"))
	on := users.waitStatus("cleo", presence.Online)

	// A forged clock, by a user: refused, counted, delivered to nobody.
	denied := n.Stats().Get("writes_denied_total")
	forged := presence.Clock{Node: "node-a", Incarnation: "forged", Seq: 1 << 40, Time: time.Now(), Interval: time.Hour}
	if rc := dev.publish(t, "presence/clock", string(forged.AppendJSON(nil)), 1, false); rc != rcNotAuthorized {
		t.Errorf("QoS 1 publish to presence/clock: reason %#x, want %#x", rc, rcNotAuthorized)
	}
	dev.publish(t, "presence/clock", string(forged.AppendJSON(nil)), 0, true)
	testkit.Wait(t, waitTimeout, "the refusals counted", func() error {
		got := n.Stats().Get("writes_denied_total") - denied
		return testkit.Why(got == 2, fmt.Sprintf("writes_denied_total +%d, want +2", got))
	})

	// Two messages after cleo was shown online: the version is hers at
	// least (the clock reads it when it sends).
	first := len(w.waitBeats(1, waitTimeout))
	run := w.waitBeats(first+6, waitTimeout+6*S)[first:]
	perSecond, meanBytes := clockFigures(t, run, "node-a", S)
	t.Logf("presence/clock at S=%v: %.2f messages/s per observer over %d messages, %.0f bytes of payload each (e.g. %s)",
		S, perSecond, len(run), meanBytes, run[0].c.AppendJSON(nil))
	if last := run[len(run)-1].c; last.Version < on.Version {
		t.Errorf("clock version %d, below cleo's online version %d, published before", last.Version, on.Version)
	}
	for _, b := range w.beats() {
		if b.c.Incarnation == "forged" {
			t.Errorf("the forged clock was delivered: %+v", b.c)
		}
	}
	if r := ctRetained(n, "presence/clock"); len(r) != 0 {
		t.Errorf("retained on presence/clock: %q", r)
	}
	if got := n.Stats().Get("clock_messages_total"); got < int64(len(run)) {
		t.Errorf("clock_messages_total %d, below the %d received", got, len(run))
	}
	// The clock is not presence: the users' observer saw only cleo.
	for _, topic := range ctTopics(users) {
		if topic != "presence/users/cleo" {
			t.Errorf("presence/users/+ observer received %s", topic)
		}
	}
	users.check()
}

// presence.clock_interval 0: no presence/clock at all.
func TestClockOff(t *testing.T) {
	n := startNode(t, func(c *configs.Config) {
		off := configs.Duration(0)
		c.Presence.ClockInterval = &off
	})
	w := watchClock(t, n.MQTTAddr())
	testkit.During(t, 2500*time.Millisecond, "no clock message", func() error {
		return testkit.Why(len(w.beats()) == 0, fmt.Sprintf("%d received", len(w.beats())))
	})
	if got := n.Stats().Get("clock_messages_total"); got != 0 {
		t.Errorf("clock_messages_total %d with the clock off", got)
	}
}

// The staleness detector end to end, with the binary frozen (SIGSTOP): an
// observer (Go, examples/js/observer.js and examples/python/observer.py)
// hears presence/clock every S, then the node stops answering without
// closing anything, as a node or a link that died silently; every
// observer declares its view stale within 2 S of the freeze (plus a
// margin), the examples show every user unknown, and no message comes
// from the frozen node meanwhile. SIGCONT brings the clock back, in the
// same sequence, and all are fresh again.
func TestExamplesNodeClockStale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	const S = time.Second
	// margin: the detectors poll (the Go one every 20 ms, observer.js every
	// 100 ms) and a loaded machine delays a process by some hundreds of
	// milliseconds; a view is stale after 2 S whatever the margin.
	const margin = S / 2
	node := exampleNode(t)
	py := examplePython(t)
	bin := binBuild(t, t.TempDir())
	p := binStart(t, bin, binEnv("PRESENCED_PRESENCE_CLOCK_INTERVAL=1s"),
		"--mqtt-addr", "127.0.0.1:0", "--ws-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
		"--node-id", "clockd", "--log-format", "json")
	started := p.waitLine(t, "presenced started")
	addr, _ := started["mqtt"].(string)
	pid := p.cmd.Process.Pid

	w := watchClock(t, addr)
	examples := []*exampleProc{
		startExample(t, examplesJS, nil, node, "observer.js", "--url", "mqtt://"+addr),
		startExample(t, examplesPython, nil, py, "-B", "observer.py", "--url", "mqtt://"+addr),
	}
	for _, obs := range examples {
		obs.waitLine(0, `^ready$`)
		obs.waitLine(0, `^clock node=clockd interval=1000ms$`)
	}
	dial5(t, addr, "alice-phone", "alice", withDevice("phone"))
	at := make([]int, len(examples))
	for i, obs := range examples {
		at[i], _ = obs.waitLine(0, `^user alice online v\d+ sessions=1$`)
	}

	first := len(w.waitBeats(1, waitTimeout))
	run := w.waitBeats(first+5, waitTimeout+5*S)[first:]
	perSecond, meanBytes := clockFigures(t, run, "clockd", S)
	t.Logf("binary, S=%v: %.2f clock messages/s per observer over %d, %.0f payload bytes each", S, perSecond, len(run), meanBytes)

	// Freeze the node right after a clock message, the worst case: the
	// observers wait the whole 2 S.
	seen := len(w.beats())
	w.waitBeats(seen+1, waitTimeout)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP presenced (pid %d): %v", pid, err)
	}
	frozen := time.Now()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT presenced (pid %d): %v", pid, err)
			}
		}
	}
	t.Cleanup(thaw) // before binStart's kill: cleanups run last first

	// The Go observer's detector: presence.ClockStale on its last message.
	var goStale time.Duration
	_, err := testkit.Poll(2*S+margin, 20*time.Millisecond, func() error {
		b := w.beats()
		last := b[len(b)-1]
		if !presence.ClockStale(last.at, last.c.Interval, time.Now()) {
			return fmt.Errorf("fresh: last message seq %d %v ago", last.c.Seq, time.Since(last.at))
		}
		goStale = time.Since(frozen)
		return nil
	})
	if err != nil {
		t.Fatalf("Go observer not stale within 2 S + %v of the freeze: %v", margin, err)
	}
	// The examples: "stale", then every user unknown.
	staleLine := regexp.MustCompile(`^stale node=clockd silent=(\d+)ms: 1 users unknown$`)
	stale := make([]time.Duration, len(examples))
	_, err = testkit.Poll(2*S+margin, 20*time.Millisecond, func() error {
		for i, obs := range examples {
			if stale[i] != 0 {
				continue
			}
			for _, l := range obs.snapshot()[at[i]:] {
				if staleLine.MatchString(l) {
					stale[i] = time.Since(frozen)
				}
			}
			if stale[i] == 0 {
				return fmt.Errorf("%s: no stale line yet", obs.name)
			}
		}
		return nil
	})
	if err != nil {
		for _, obs := range examples {
			t.Logf("%s:\n%s", obs.name, obs.output())
		}
		t.Fatalf("an example not stale within 2 S + %v of the freeze: %v", margin, err)
	}
	for i, obs := range examples {
		at[i], _ = obs.waitLine(at[i], `^stale node=clockd `)
		at[i], _ = obs.waitLine(at[i], `^user alice unknown v\d+$`)
	}
	t.Logf("stale after the freeze: Go observer %v, observer.js %v, observer.py %v (2 S = %v)",
		goStale.Round(time.Millisecond), stale[0].Round(time.Millisecond), stale[1].Round(time.Millisecond), 2*S)
	for _, b := range w.beats()[seen+1:] {
		if b.c.Time.After(frozen) {
			t.Errorf("a clock message from the frozen node: %+v", b.c)
		}
	}

	// Thawed: the clock comes back in the same sequence; fresh again.
	thaw()
	back := w.waitBeats(len(w.beats())+1, waitTimeout)
	if b := back[len(back)-1].c; b.Incarnation != run[0].c.Incarnation || b.Seq <= run[len(run)-1].c.Seq {
		t.Errorf("after SIGCONT: %+v, want the same incarnation and a later seq", b)
	}
	for i, obs := range examples {
		at[i], _ = obs.waitLine(at[i], `^fresh node=clockd seq=\d+ silent=\d+ms$`)
		obs.waitLine(at[i], `^user alice online v\d+$`)
		obs.stop(false)
		checkObserverLive(t, obs)
	}
}
