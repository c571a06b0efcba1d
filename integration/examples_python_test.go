package integration

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// examplesPython is examples/python, seen from this package's directory.
var examplesPython = filepath.Join("..", "examples", "python")

// examplePython returns Debian's python3 (EXAMPLES_PYTHON overrides it),
// failing the test when it cannot import paho-mqtt (make deps installs
// python3-paho-mqtt).
func examplePython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("EXAMPLES_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	out := runExampleErr(t, examplesPython, py, "-B", "-c", "import paho_compat; print(paho_compat.VERSION, paho_compat.PAHO2)")
	t.Logf("%s: paho-mqtt %s", py, out)
	return py
}

// runExampleErr is runExample, with a hint to run make deps on failure.
func runExampleErr(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	if _, err := os.Stat(name); err != nil {
		t.Fatalf("%s: %v: run `make deps` (make test does)", name, err)
	}
	return runExample(t, dir, name, args...)
}

// tcpProxy forwards connections to a broker until cut closes every one of
// them: a network drop the client sees as a reset, not a DISCONNECT.
type tcpProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, to string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", to)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(up, c); _ = up.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, up); _ = c.Close() })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

// cut closes every connection made so far.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// examples/python under Debian's python3 and paho-mqtt, against the binary:
// the rules of presence_state.py under unittest; then device.py as alice
// (a status on connect, another from its stdin, a network drop it comes
// back from with its status, a clean end on EOF) while observer.py watches
// the group and the users over WebSocket; then the rules through the
// broker, on crafted messages under another prefix.
func TestExamplesPython(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	py := examplePython(t)
	out := runExample(t, examplesPython, py, "-B", "-m", "unittest", "-v", "test_presence_state")
	t.Logf("unittest:\n%s", out)

	mqttAddr, wsAddr := examplesBroker(t)
	t.Run("live", func(t *testing.T) {
		obs := startExample(t, examplesPython, nil, py, "-B", "observer.py", "--url", "ws://"+wsAddr+"/mqtt", "--group", examplesGroup)
		obs.waitLine(0, `^connected paho-mqtt `)
		obs.waitLine(0, `^ready$`)
		at, _ := obs.waitLine(0, `^group team snapshot v\d+ online=0 total=3 alice=offline bob=offline carol=offline$`)

		proxy := startProxy(t, mqttAddr)
		dev := startExample(t, examplesPython, nil, py, "-B", "device.py", "--url", "mqtt://"+proxy.addr(),
			"--user", "alice", "--client-id", "alice-laptop", "--keepalive", "5",
			"--status", "away", "--text", "lunch", "--device", "laptop")
		dev.waitLine(0, `^connected alice-laptop$`)
		dat, _ := dev.waitLine(0, `^set \{"status":"away","text":"lunch","device":"laptop"\}$`)
		obs.waitLine(at, `^user alice away v\d+ sessions=1$`)
		at, _ = obs.waitLine(at, `^group team v\d+ alice away$`)

		if _, err := io.WriteString(dev.stdin, `{"status":"dnd","text":"focus"}`+"\n"); err != nil {
			t.Fatal(err)
		}
		obs.waitLine(at, `^user alice dnd v\d+ sessions=1$`)
		at, _ = obs.waitLine(at, `^group team v\d+ alice dnd$`)

		// The network drops: paho reconnects, and the new session (which
		// starts online) is told the status again.
		proxy.cut()
		dat, _ = dev.waitLine(dat, `^disconnected rc=[1-9]`)
		dat, _ = dev.waitLine(dat, `^connected alice-laptop$`)
		dev.waitLine(dat, `^set \{"status":"dnd","text":"focus","device":"laptop"\}$`)
		at, _ = obs.waitLine(at, `^user alice (offline|online) v\d+ sessions=[01]$`)
		at, _ = obs.waitLine(at, `^user alice dnd v\d+ sessions=1$`)

		// The end of stdin: a clean DISCONNECT, alice leaves.
		dev.stop(true)
		obs.waitLine(at, `^user alice offline v\d+ sessions=0$`)
		obs.waitLine(at, `^group team v\d+ alice offline$`)
		obs.stop(false)
		checkObserverLive(t, obs)
	})
	t.Run("rules", func(t *testing.T) {
		checkObserverRules(t, mqttAddr, func() *exampleProc {
			return startExample(t, examplesPython, nil, py, "-B", "observer.py", "--url", "mqtt://"+mqttAddr,
				"--prefix", craftedPrefix, "--group", examplesGroup, "--user", "ann")
		})
	})
}
