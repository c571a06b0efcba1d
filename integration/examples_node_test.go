package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// examplesJS is examples/js, seen from this package's directory.
var examplesJS = filepath.Join("..", "examples", "js")

// exampleNode returns the node program, failing the test when it or
// examples/js's MQTT.js is missing (make deps installs both).
func exampleNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node not found: run `make deps` (make test does)")
	}
	if _, err := os.Stat(filepath.Join(examplesJS, "node_modules", "mqtt", "dist", "mqtt.min.js")); err != nil {
		t.Fatal("MQTT.js not installed in examples/js/node_modules: run `make deps` (make test does)")
	}
	return node
}

// examples/js/observer.js under node, against the binary: its client rules
// under node:test; then live: the group's snapshot, then alice and bob
// coming online, bob away, alice leaving, each printed once from the user
// topic and once from the group's deltas, with nothing dropped; then the
// rules through the broker, on crafted messages under another prefix.
func TestExamplesNodeObserver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	node := exampleNode(t)
	out := runExample(t, examplesJS, node, "--test", filepath.Join("test", "presence-state.test.js"))
	t.Logf("node --test:\n%s", out)

	mqttAddr, wsAddr := examplesBroker(t)
	t.Run("live", func(t *testing.T) {
		obs := startExample(t, examplesJS, nil, node, "observer.js", "--url", "ws://"+wsAddr+"/mqtt", "--group", examplesGroup)
		obs.waitLine(0, `^ready$`)
		at, _ := obs.waitLine(0, `^group team snapshot v\d+ online=0 total=3 alice=offline bob=offline carol=offline$`)

		alice := dial5(t, mqttAddr, "alice-phone", "alice", withDevice("phone"))
		bob := dial5(t, mqttAddr, "bob-laptop", "bob", withDevice("laptop"))
		obs.waitLine(at, `^user alice online v\d+ sessions=1$`)
		obs.waitLine(at, `^user bob online v\d+ sessions=1$`)
		obs.waitLine(at, `^group team v\d+ alice online$`)
		at, _ = obs.waitLine(at, `^group team v\d+ bob online$`)

		bob.publish(t, "presence/set", `{"status":"away","text":"lunch"}`, 1, false)
		obs.waitLine(at, `^user bob away v\d+ sessions=1$`)
		at, _ = obs.waitLine(at, `^group team v\d+ bob away$`)

		alice.disconnect()
		obs.waitLine(at, `^user alice offline v\d+ sessions=0$`)
		obs.waitLine(at, `^group team v\d+ alice offline$`)
		obs.waitLine(at, `^group team v\d+ online=1 total=3$`)
		obs.stop(false)
		checkObserverLive(t, obs)
	})
	t.Run("rules", func(t *testing.T) {
		checkObserverRules(t, mqttAddr, func() *exampleProc {
			return startExample(t, examplesJS, nil, node, "observer.js", "--url", "mqtt://"+mqttAddr,
				"--prefix", craftedPrefix, "--group", examplesGroup, "--user", "ann")
		})
	})
}
