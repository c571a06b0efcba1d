package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// mqttjsReconnects is how many times each run of mqttjs/reconnect.js calls
// client.reconnect().
const mqttjsReconnects = 5

// mqttjsConfig is the node's config for the test: the default disconnect
// debounce and offline grace (the harness turns pacing off for the older
// tests, which assert the moment the store learns of a change).
func mqttjsConfig(c *configs.Config) {
	d := configs.Defaults()
	c.Presence.OfflineGrace = d.Presence.OfflineGrace
	c.Presence.DisconnectDebounce = d.Presence.DisconnectDebounce
	c.Presence.MinDwell = d.Presence.MinDwell
	c.Presence.Flap = d.Presence.Flap
}

// mqttjsEvent is one line of reconnect.js's output; see the script.
type mqttjsEvent struct {
	Event      string  `json:"event"`
	TMs        float64 `json:"t_ms"`
	Wall       int64   `json:"wall"`
	N          int     `json:"n"`
	Message    string  `json:"message"`
	Reconnects int     `json:"reconnects"`
	MQTT       string  `json:"mqtt"`
	Node       string  `json:"node"`
	// summary
	DisconnectToConnect *mqttjsStats `json:"disconnect_to_connect_ms"`
	DisconnectToConnack *mqttjsStats `json:"disconnect_to_connack_ms"`
}

type mqttjsStats struct{ Min, Median, Max float64 }

// mqttjsRun is a running reconnect.js: its events as they arrive, and the
// process, which the test ends by closing its stdin.
type mqttjsRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	read   chan struct{} // closed when stdout is read to its end
	waited chan struct{} // closed when the process has been waited for
	err    error         // cmd.Wait's, once waited is closed

	mu     sync.Mutex
	events []mqttjsEvent
	bad    []string // lines that are not JSON
}

// mqttjsNode returns the node program, or fails (CI, where make deps
// installs it) or skips the test without it.
func mqttjsNode(t *testing.T) string {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		msg := what + ": run `make deps` (make test does)"
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node not found")
	}
	if _, err := os.Stat(filepath.Join("mqttjs", "node_modules", "mqtt", "package.json")); err != nil {
		missing("MQTT.js not installed in integration/mqttjs/node_modules")
	}
	return node
}

// startMQTTJS starts reconnect.js against url; it holds its last connection
// once done, until stop.
func startMQTTJS(t *testing.T, node, url, user string, protocol, count int) *mqttjsRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	r := &mqttjsRun{t: t, read: make(chan struct{}), waited: make(chan struct{})}
	r.cmd = exec.CommandContext(ctx, node, "reconnect.js", "--url", url, "--user", user,
		"--protocol", fmt.Sprint(protocol), "--count", fmt.Sprint(count),
		"--timeout-ms", fmt.Sprint((2 * waitTimeout).Milliseconds()))
	r.cmd.Dir = "mqttjs"
	r.cmd.Stderr = &r.stderr
	r.cmd.WaitDelay = time.Second
	var err error
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start reconnect.js: %v", err)
	}
	go func() {
		defer close(r.read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e mqttjsEvent
			r.mu.Lock()
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				r.bad = append(r.bad, sc.Text())
			} else {
				r.events = append(r.events, e)
			}
			r.mu.Unlock()
		}
	}()
	go func() {
		defer close(r.waited)
		<-r.read // Wait closes stdout: read it all first
		r.err = r.cmd.Wait()
		cancel()
	}()
	t.Cleanup(func() {
		_ = r.stdin.Close()
		select {
		case <-r.waited:
		case <-time.After(waitTimeout):
			_ = r.cmd.Process.Kill()
			<-r.waited
		}
	})
	return r
}

// find returns the first event named name, if any.
func (r *mqttjsRun) find(name string) (mqttjsEvent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Event == name {
			return e, true
		}
	}
	return mqttjsEvent{}, false
}

// count returns how many events are named name.
func (r *mqttjsRun) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Event == name {
			n++
		}
	}
	return n
}

// waitEvent waits for the event named name, failing on the script's error
// or exit.
func (r *mqttjsRun) waitEvent(name string) mqttjsEvent {
	r.t.Helper()
	var got mqttjsEvent
	testkit.Wait(r.t, 2*waitTimeout, "reconnect.js: "+name, func() error {
		if e, ok := r.find(name); ok {
			got = e
			return nil
		}
		if e, ok := r.find("error"); ok {
			r.t.Fatalf("reconnect.js: %s\n%s", e.Message, r.output())
		}
		select {
		case <-r.waited:
			r.t.Fatalf("reconnect.js exited (%v) before %q\n%s", r.err, name, r.output())
		default:
		}
		return fmt.Errorf("not yet")
	})
	return got
}

// stop closes the script's stdin, so that it ends cleanly, and waits for it
// to exit.
func (r *mqttjsRun) stop() {
	r.t.Helper()
	_ = r.stdin.Close()
	select {
	case <-r.waited:
	case <-time.After(waitTimeout):
		r.t.Fatalf("reconnect.js did not exit\n%s", r.output())
	}
	if r.err != nil {
		r.t.Fatalf("reconnect.js: %v\n%s", r.err, r.output())
	}
}

func (r *mqttjsRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, e := range r.events {
		j, _ := json.Marshal(e)
		b.Write(j)
		b.WriteByte('\n')
	}
	for _, l := range r.bad {
		b.WriteString("(not JSON) " + l + "\n")
	}
	select {
	case <-r.waited: // the stderr buffer is written until then
		b.WriteString("stderr: " + r.stderr.String())
	default:
		b.WriteString("(still running)")
	}
	return b.String()
}

// MQTT.js's client.reconnect() sends a clean DISCONNECT and connects again
// within milliseconds (reconnect.js measures it). The user must never be shown
// offline for it: the disconnect debounce hides the end. The script does K
// reconnects over TCP and WebSocket, with MQTT 5 and 3.1.1, while an observer
// records every presence/users/{user}; then it holds its connection until the
// observer sees the user online with that one session, and ends cleanly: the
// user's only offline must be that last one.
//
// It needs node and integration/mqttjs/node_modules (make deps installs
// both): without them it skips, or fails when CI is set. It runs in every
// form of make test (binary, Redis store, embedded) in about a second.
func TestMQTTJSReconnectNeverOffline(t *testing.T) {
	node := mqttjsNode(t)
	n := startNode(t, mqttjsConfig)
	for _, tc := range []struct {
		name, url string
		protocol  int
	}{
		{"tcp-v5", "mqtt://" + n.MQTTAddr(), 5},
		{"ws-v5", "ws://" + n.WSAddr() + "/mqtt", 5},
		{"tcp-v311", "mqtt://" + n.MQTTAddr(), 4},
		{"ws-v311", "ws://" + n.WSAddr() + "/mqtt", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			user := "mqttjs-" + tc.name
			obs := newObserver(t, n.MQTTAddr(), "presence/users/"+user)
			r := startMQTTJS(t, node, tc.url, user, tc.protocol, mqttjsReconnects)
			ready := r.waitEvent("ready")
			if e, ok := r.find("start"); ok {
				t.Logf("MQTT.js %s on node %s", e.MQTT, e.Node)
			}
			if s, ok := r.find("summary"); ok && s.DisconnectToConnect != nil && s.DisconnectToConnack != nil {
				t.Logf("%s: DISCONNECT to CONNECT %.2f/%.2f/%.2f ms, to CONNACK %.2f/%.2f/%.2f ms (min/median/max of %d)",
					tc.name, s.DisconnectToConnect.Min, s.DisconnectToConnect.Median, s.DisconnectToConnect.Max,
					s.DisconnectToConnack.Min, s.DisconnectToConnack.Median, s.DisconnectToConnack.Max, s.Reconnects)
			}
			if ready.Reconnects != mqttjsReconnects || r.count("disconnect_sent") != mqttjsReconnects ||
				r.count("connect") != mqttjsReconnects+1 {
				t.Fatalf("want %d reconnects, each a DISCONNECT and a new CONNACK\n%s", mqttjsReconnects, r.output())
			}
			if c := r.count("offline"); c != 0 {
				t.Fatalf("MQTT.js lost its connection %d times on its own\n%s", c, r.output())
			}

			// Held: the user is online with the script's last session, as
			// the admin API has it.
			var live []presence.Session
			testkit.Wait(t, waitTimeout, user+" online with the last session", func() error {
				live, _ = sessionsOf(t, n, user)
				if len(live) != 1 {
					return fmt.Errorf("%d live sessions", len(live))
				}
				p, ok := obs.last(user)
				switch {
				case !ok:
					return fmt.Errorf("nothing seen")
				case p.Status != presence.Online || len(p.Sessions) != 1:
					return fmt.Errorf("seen %s with %d sessions", p.Status, len(p.Sessions))
				case p.Sessions[0].ID != live[0].ID || p.Sessions[0].Epoch != live[0].Epoch:
					return fmt.Errorf("seen session %s/%d, live %s/%d", p.Sessions[0].ID, p.Sessions[0].Epoch, live[0].ID, live[0].Epoch)
				}
				return nil
			})

			// The clean end: offline, and the only offline of the run. Any
			// offline held back for a reconnect would come before it.
			r.stop()
			obs.waitStatus(user, presence.Offline)
			obs.check()
			hist := obs.history(user)
			offline := 0
			for _, p := range hist[:len(hist)-1] {
				if p.Status == presence.Offline {
					offline++
				}
			}
			if offline > 0 {
				var b strings.Builder
				for _, p := range hist {
					fmt.Fprintf(&b, "\n  v%d %s sessions=%d", p.Version, p.Status, len(p.Sessions))
				}
				t.Errorf("%s shown offline %d times during %d reconnect() calls (%.1f per reconnect); observer saw:%s",
					user, offline, mqttjsReconnects, float64(offline)/mqttjsReconnects, b.String())
			}
		})
	}
}
