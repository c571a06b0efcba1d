package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// lvWindow counts the commands Redis runs over window, by command.
func lvWindow(t *testing.T, srv *redistest.Server, window time.Duration) (map[string]int64, int64) {
	t.Helper()
	before := srv.Calls(t)
	time.Sleep(window) // a measuring window, not a wait for a condition
	after := srv.Calls(t)
	delta, total := map[string]int64{}, int64(0)
	for cmd, v := range after {
		if d := v - before[cmd]; d > 0 && cmd != "info" {
			delta[cmd] = d
			total += d
		}
	}
	return delta, total
}

// The cost of liveness and of the node topics per node does not grow with
// the number of nodes: 2 and then 4 real nodes on one Redis, nobody on any
// of them watching the node topics, counted by Redis over a window of
// several refreshes and sweeps. Each node's share is its refreshes (ZADD +
// SET every node_ttl/3) and its sweeps (one ZRANGEBYSCORE every
// sweep_interval), whatever the count; before issue 17 a sweep was an
// SMEMBERS and a GET per other node, and every node PUBLISHed its
// announcement to all every 3 s. Then an observer on one node watches the
// node topics: that node, and only it, reads the node states (HGETALL)
// every 3 s.
func TestMultiNodeLivenessCostFlat(t *testing.T) {
	bin := mnBinary(t)
	const window = 6 * time.Second // 6 refreshes and 12 sweeps per node
	perNode := map[int]float64{}
	for _, n := range []int{2, 4} {
		srv := redistest.Start(t)
		var nodes []*mnProc
		for i := range n {
			nodes = append(nodes, mnStart(t, bin, fmt.Sprintf("n%d", i), []string{srv.Addr()}))
		}
		time.Sleep(2 * mnSweep) // every node past its first sweep: a settling pause, not a wait for a condition
		delta, total := lvWindow(t, srv, window)
		perNode[n] = float64(total) / float64(n) / window.Seconds()
		perSweep := float64(total) / (window.Seconds() / mnSweep.Seconds())
		t.Logf("%d nodes: %d commands in %v (%.1f per sweep interval over the deployment, %.2f/s per node): %v",
			n, total, window, perSweep, perNode[n], delta)
		if delta["hgetall"] != 0 || delta["publish"] != 0 || delta["get"] != 0 {
			t.Errorf("%d nodes, nobody watching: node states read (%d HGETALL), announcements broadcast (%d PUBLISH) or records read (%d GET)",
				n, delta["hgetall"], delta["publish"], delta["get"])
		}
		if n == 4 {
			obs := newObserver(t, nodes[0].mqtt, "presence/nodes/+")
			mnWaitNodeState(t, obs, "n3", presence.NodeUp, waitTimeout)
			delta, _ := lvWindow(t, srv, window)
			// 3 s apart: 2 in the window, one more at its edge.
			if got := delta["hgetall"]; got < 1 || got > 3 {
				t.Errorf("one node watching: %d HGETALL in %v, want about one per 3 s", got, window)
			}
			t.Logf("4 nodes, one watching the node topics: %v", delta)
		}
		for _, p := range nodes {
			p.kill(t)
		}
	}
	// Config, not this machine's speed: per node 2 commands per node_ttl/3
	// and 1 per sweep_interval (4/s here); the group topics' lease, one
	// holder for the deployment, adds a little that does not grow.
	want := 2/(mnNodeTTL.Seconds()/3) + 1/mnSweep.Seconds()
	for n, got := range perNode {
		if got > want*1.25 {
			t.Errorf("%d nodes: %.2f commands/s per node, want at most %.2f (%.2f expected from the intervals)", n, got, want*1.25, want)
		}
	}
	if perNode[4] > perNode[2]*1.25 {
		t.Errorf("per node %.2f/s with 4 nodes against %.2f/s with 2: the cost grows with the nodes", perNode[4], perNode[2])
	}
}

// A node killed without a word is announced down by the survivor that
// swept it, within node_ttl + sweep_interval (+1 s); when it starts again
// with the same id it is shown up in its new incarnation, and no late
// report about its old run buries it.
func TestMultiNodeRestartedNodeNotBuried(t *testing.T) {
	bin := mnBinary(t)
	srv := redistest.Start(t)
	addrs := []string{srv.Addr()}
	mnStart(t, bin, "A", addrs)
	b := mnStart(t, bin, "B", addrs)
	obs := newObserver(t, b.mqtt, "presence/nodes/+")
	c := mnStart(t, bin, "C", addrs)
	upC := mnWaitNodeState(t, obs, "C", presence.NodeUp, waitTimeout)
	killed := time.Now()
	c.kill(t)
	down := mnWaitNodeState(t, obs, "C", presence.NodeDown, 2*mnLossBound)
	took := time.Since(killed)
	t.Logf("C killed: shown down by %s after %v (bound node_ttl %v + sweep %v + 1 s)", down.ReportedBy, took.Round(time.Millisecond), mnNodeTTL, mnSweep)
	if down.Incarnation != upC.Incarnation || (down.ReportedBy != "A" && down.ReportedBy != "B") {
		t.Errorf("C down: %+v, want reported by a survivor for incarnation %s", down, upC.Incarnation)
	}
	if took > mnLossBound+3*time.Second { // + one read of the node states (every 3 s)
		t.Errorf("C shown down %v after the kill, want at most %v", took.Round(time.Millisecond), mnLossBound+3*time.Second)
	}
	mnStart(t, bin, "C", addrs)
	again := mnWaitNodeState(t, obs, "C", presence.NodeUp, waitTimeout)
	if again.Incarnation == upC.Incarnation {
		t.Fatalf("restarted C shown with its old incarnation: %+v", again)
	}
	testkit.During(t, mnLossBound, "C stays up", func() error {
		all := mnNodeStates(t, obs, "C")
		last := all[len(all)-1]
		return testkit.Why(last.State == presence.NodeUp && last.Incarnation == again.Incarnation, fmt.Sprintf("%+v", last))
	})
	obs.check()
}
