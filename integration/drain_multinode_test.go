package integration

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// Helpers for multi-node drains, for this file's test and for tests built
// on it (a rolling restart of three nodes): node states as an observer
// receives them on presence/nodes/{node}, and a SIGTERM that waits for the
// drained node's exit.

// mnNodeStates returns every presence/nodes/{node} payload o received, in
// order, decoded; a payload that does not decode fails the test.
func mnNodeStates(t *testing.T, o *observer, node string) []presence.NodeStatus {
	t.Helper()
	o.mu.Lock()
	raw := append([]string(nil), o.raw["presence/nodes/"+node]...)
	o.mu.Unlock()
	out := make([]presence.NodeStatus, 0, len(raw))
	for _, b := range raw {
		st, err := presence.ParseNodeStatus([]byte(b))
		if err != nil || st.Node != node {
			t.Fatalf("presence/nodes/%s: bad payload %q: %v", node, b, err)
		}
		out = append(out, st)
	}
	return out
}

// mnWaitNodeState waits until o's newest state of node is state, and
// returns it.
func mnWaitNodeState(t *testing.T, o *observer, node string, state presence.NodeState, within time.Duration) presence.NodeStatus {
	t.Helper()
	var last presence.NodeStatus
	testkit.Wait(t, within, "node "+node+" "+string(state), func() error {
		all := mnNodeStates(t, o, node)
		if len(all) == 0 {
			return fmt.Errorf("nothing on presence/nodes/%s", node)
		}
		last = all[len(all)-1]
		return testkit.Why(last.State == state, fmt.Sprintf("%+v", last))
	})
	return last
}

// mnStateSequence is the states of node o received, repeats folded.
func mnStateSequence(t *testing.T, o *observer, node string) []presence.NodeState {
	var seq []presence.NodeState
	for _, st := range mnNodeStates(t, o, node) {
		if len(seq) == 0 || seq[len(seq)-1] != st.State {
			seq = append(seq, st.State)
		}
	}
	return seq
}

// term sends SIGTERM (the node drains, then stops) and waits for exit 0.
func (n *mnProc) term(t *testing.T, within time.Duration) {
	t.Helper()
	if err := n.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM %s: %v", n.id, err)
	}
	if code := n.p.wait(t, within); code != 0 {
		t.Fatalf("node %s exited %d after SIGTERM\nstdout:\n%s", n.id, code, n.p.stdout)
	}
}

// Two nodes on one Redis: an observer on B sees presence/nodes/A go up,
// draining, down when A is drained by SIGTERM (the admin API's drain
// refuses a request without A's token); the session A held ends as drain,
// as B's admin API shows, and the device reconnecting to B is online there.
// A node killed without a word (C) is announced down by the survivor that
// swept it.
func TestMultiNodeDrain(t *testing.T) {
	bin := mnBinary(t)
	srv := redistest.Start(t)
	addrs := []string{srv.Addr()}
	const token = "drain-secret"
	a := mnStart(t, bin, "A", addrs, "PRESENCED_ADMIN_TOKEN="+token, "PRESENCED_DRAIN_SERVER_REFERENCE="+drainRef)
	b := mnStart(t, bin, "B", addrs)
	obs := newObserver(t, b.mqtt, "presence/nodes/+")
	obs.subscribe("presence/users/+")
	up := mnWaitNodeState(t, obs, "A", presence.NodeUp, waitTimeout)
	mnWaitNodeState(t, obs, "B", presence.NodeUp, waitTimeout)

	phone := dial5(t, a.mqtt, "ann-phone", "ann", withWill("wills/ann", "gone", false))
	obs.waitStatus("ann", presence.Online)
	testkit.Wait(t, waitTimeout, "A announces 1 session", func() error {
		all := mnNodeStates(t, obs, "A")
		last := all[len(all)-1]
		return testkit.Why(last.Sessions == 1 && last.Incarnation == up.Incarnation, fmt.Sprintf("%+v", last))
	})

	if code := drainPost(t, a.admin, ""); code != http.StatusUnauthorized {
		t.Fatalf("POST /api/v1/drain without the token: %d, want 401", code)
	}
	if code := drainPost(t, a.admin, "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("POST /api/v1/drain with a wrong token: %d, want 401", code)
	}
	a.term(t, waitTimeout)
	if d := movedAt(t, phone, "ann-phone", 0x9C, drainRef); d.IsZero() {
		t.Fatal("no DISCONNECT")
	}
	down := mnWaitNodeState(t, obs, "A", presence.NodeDown, waitTimeout)
	if seq := mnStateSequence(t, obs, "A"); len(seq) != 3 || seq[0] != presence.NodeUp || seq[1] != presence.NodeDraining || seq[2] != presence.NodeDown {
		t.Errorf("A went %v, want [up draining down]", seq)
	}
	if down.Incarnation != up.Incarnation || down.ReportedBy != "" || down.Sessions != 0 {
		t.Errorf("A down: %+v (up was %+v)", down, up)
	}
	ended, ok := mnEnded(mnSessionsOf(t, b.admin, "ann"), "ann-phone")
	if !ok || ended.EndReason != presence.EndDrain || ended.Node != "A" {
		t.Errorf("ann-phone on A ended %+v (found %v), want drain", ended, ok)
	}
	dial5(t, b.mqtt, "ann-phone", "ann")
	testkit.Wait(t, waitTimeout, "ann online on B", func() error {
		return testkit.Why(mnShows(obs, "ann", presence.Online, "ann-phone"))
	})

	c := mnStart(t, bin, "C", addrs)
	upC := mnWaitNodeState(t, obs, "C", presence.NodeUp, waitTimeout)
	killed := time.Now()
	c.kill(t)
	downC := mnWaitNodeState(t, obs, "C", presence.NodeDown, 2*mnLossBound)
	t.Logf("node C killed: B published it down after %v (bound node_ttl %v + sweep %v + 1 s = %v)",
		time.Since(killed).Round(time.Millisecond), mnNodeTTL, mnSweep, mnLossBound)
	if downC.ReportedBy != "B" || downC.Incarnation != upC.Incarnation {
		t.Errorf("C down: %+v, want reported_by B for incarnation %s", downC, upC.Incarnation)
	}
	obs.check()
}
