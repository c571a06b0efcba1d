package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// nodeStatesStore is what the node states tests need of a store.
type nodeStatesStore interface {
	AnnounceNode(ctx context.Context, st presence.NodeStatus) error
	NodeStates(ctx context.Context) ([]presence.NodeHistory, error)
}

// historyOf returns node's history as s holds it (nil: none).
func historyOf(t *testing.T, s nodeStatesStore, node string) presence.NodeHistory {
	t.Helper()
	all, err := s.NodeStates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range all {
		if h.Node() == node {
			return h
		}
	}
	return nil
}

// states returns the states of a history, in order, with who reported
// each: "up", "draining", "down", "down by B".
func states(h presence.NodeHistory) []string {
	var out []string
	for _, st := range h {
		s := string(st.State)
		if st.Reported() {
			s += " by " + st.ReportedBy
		}
		out = append(out, s+" "+st.Incarnation)
	}
	return out
}

// checkNodeStates runs the life of a node through writer and reads it with
// reader (two stores on one Redis, or one memory store): up, draining,
// down; a late "up" refused; a survivor's report for a dead incarnation,
// never for a restarted one; a bad announcement refused.
func checkNodeStates(t *testing.T, writer, survivor, reader nodeStatesStore) {
	t.Helper()
	ctx := context.Background()
	at := time.Now()
	word := func(s nodeStatesStore, state presence.NodeState, inc, by string, sessions int) {
		t.Helper()
		st := presence.NodeStatus{Node: "A", State: state, Incarnation: inc, ReportedBy: by, Sessions: sessions, At: at}
		if err := s.AnnounceNode(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(what string, want ...string) {
		t.Helper()
		if got := states(historyOf(t, reader, "A")); !slices.Equal(got, want) {
			t.Fatalf("%s: A's history %v, want %v", what, got, want)
		}
	}
	word(writer, presence.NodeUp, "i1", "", 1)
	word(writer, presence.NodeUp, "i1", "", 7)
	expect("up twice", "up i1")
	if h := historyOf(t, reader, "A"); h[0].Sessions != 7 {
		t.Fatalf("the periodic word did not replace the last: %+v", h)
	}
	word(writer, presence.NodeDraining, "i1", "", 7)
	word(writer, presence.NodeUp, "i1", "", 8) // a late periodic word
	expect("draining, then a late up", "up i1", "draining i1")
	word(writer, presence.NodeDown, "i1", "", 0)
	expect("down", "up i1", "draining i1", "down i1")
	word(survivor, presence.NodeDown, "i1", "B", 0)
	expect("a survivor's word after the node's own down", "up i1", "draining i1", "down i1")

	word(writer, presence.NodeUp, "i2", "", 0) // a restart
	expect("a restart", "up i2")
	word(survivor, presence.NodeDown, "i1", "B", 0) // late, about the old run
	expect("a survivor's report about the old run", "up i2")
	word(survivor, presence.NodeDown, "i2", "B", 0) // killed, and swept
	expect("a survivor's report about the run it swept", "up i2", "down by B i2")
	word(writer, presence.NodeUp, "i3", "", 0) // back, restarted
	expect("restarted after being swept", "up i3")

	if err := writer.AnnounceNode(ctx, presence.NodeStatus{Node: "A/#", State: presence.NodeUp, Incarnation: "x"}); !errors.Is(err, presence.ErrBadNode) {
		t.Errorf("bad announcement: %v", err)
	}
}

// The node states on Redis: written by one node, a survivor's report by
// another, read by a third, on a single server and on a cluster (the
// script's two keys share a slot).
func TestRedisNodeStates(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		c := redistest.Start(t).Client(t)
		a, _ := newRedisStore(t, c, "A")
		b, _ := newRedisStore(t, c, "B")
		reader, _ := newRedisStore(t, c, "C")
		checkNodeStates(t, a, b, reader)
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, 3).Client(t)
		a, _ := newRedisStore(t, c, "A")
		b, _ := newRedisStore(t, c, "B")
		checkNodeStates(t, a, b, b)
	})
}

// The memory store keeps the same rule.
func TestMemoryNodeStates(t *testing.T) {
	m := NewMemory(presence.NewRules(nil), time.Now, func(Event) {})
	checkNodeStates(t, m, m, m)
}

// A node down for longer than the retention is forgotten (on Redis, at the
// next change of any node's state; the memory store on its clock); one up
// is kept however old its word.
func TestNodeStatesForgetOldDowns(t *testing.T) {
	ctx := context.Background()
	t.Run("redis", func(t *testing.T) {
		c := redistest.Start(t).Client(t)
		a, _ := newRedisStore(t, c, "A")
		b, _ := newRedisStore(t, c, "B")
		const retention = 300 * time.Millisecond
		a.nodeRetention, b.nodeRetention = retention, retention
		for _, st := range []presence.NodeStatus{
			{Node: "A", State: presence.NodeDown, Incarnation: "i1", At: time.Now()},
			{Node: "C", State: presence.NodeUp, Incarnation: "i1", At: time.Now()},
		} {
			if err := a.AnnounceNode(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
		down := time.Now()
		started := 0
		testkit.Wait(t, 10*time.Second, "A forgotten", func() error {
			started++ // a node that starts: a change of state
			if err := b.AnnounceNode(ctx, presence.NodeStatus{Node: fmt.Sprintf("B%d", started), State: presence.NodeUp, Incarnation: "i1", At: time.Now()}); err != nil {
				return err
			}
			if h := historyOf(t, b, "A"); h != nil {
				return fmt.Errorf("A still there: %v", states(h))
			}
			return nil
		})
		if d := time.Since(down); d < retention-50*time.Millisecond {
			t.Fatalf("A forgotten %v after it went down, before the retention %v", d, retention)
		}
		if historyOf(t, b, "C") == nil || historyOf(t, b, "B1") == nil {
			t.Fatal("a node up was forgotten")
		}
		if n, err := c.ZCard(ctx, b.k.nodesDown()).Result(); err != nil || n != 0 {
			t.Fatalf("%d nodes down left (%v)", n, err)
		}
	})
	t.Run("memory", func(t *testing.T) {
		clock := testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		m := NewMemory(presence.NewRules(nil), clock.Now, func(Event) {})
		if err := m.AnnounceNode(ctx, presence.NodeStatus{Node: "A", State: presence.NodeDown, Incarnation: "i1", At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(presence.NodeRetention - time.Millisecond)
		up := presence.NodeStatus{Node: "B", State: presence.NodeUp, Incarnation: "i1", At: clock.Now()}
		if err := m.AnnounceNode(ctx, up); err != nil {
			t.Fatal(err)
		}
		if historyOf(t, m, "A") == nil {
			t.Fatal("A forgotten before the retention")
		}
		clock.Advance(time.Millisecond)
		if err := m.AnnounceNode(ctx, up); err != nil {
			t.Fatal(err)
		}
		if historyOf(t, m, "A") != nil || historyOf(t, m, "B") == nil {
			t.Fatalf("after the retention: A %v, B %v", historyOf(t, m, "A"), historyOf(t, m, "B"))
		}
	})
}

// A history that does not decode is left out of NodeStates, the others
// read.
func TestRedisNodeStatesSkipBadEntries(t *testing.T) {
	c := redistest.Start(t).Client(t)
	r, _ := newRedisStore(t, c, "A")
	ctx := context.Background()
	if err := r.AnnounceNode(ctx, presence.NodeStatus{Node: "A", State: presence.NodeUp, Incarnation: "i1", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, r.k.nodeStates(), "evil", `{"node":"other","state":"up"}`).Err(); err != nil {
		t.Fatal(err)
	}
	all, err := r.NodeStates(ctx)
	if err != nil || len(all) != 1 || all[0].Node() != "A" {
		t.Fatalf("node states %v (%v), want A's only", all, err)
	}
}

// decodeNodeHistory takes anything without panicking, and what it accepts
// is a history of the node named, of one incarnation, that encodes back to
// the same statuses.
func FuzzDecodeNodeHistory(f *testing.F) {
	f.Add("A", `{"node":"A","state":"up","sessions":1,"incarnation":"i1","at":"2026-01-01T00:00:00.000Z"}`+"\n"+
		`{"node":"A","state":"down","sessions":0,"incarnation":"i1","at":"2026-01-01T00:00:01.000Z","reported_by":"B"}`)
	f.Add("A", `{"node":"B","state":"up","sessions":1,"incarnation":"i1","at":"2026-01-01T00:00:00.000Z"}`)
	f.Add("A", "\n\n")
	f.Fuzz(func(t *testing.T, node, v string) {
		h, err := decodeNodeHistory(node, v)
		if err != nil {
			return
		}
		var lines []string
		for _, st := range h {
			if st.Node != node || st.Incarnation != h[0].Incarnation {
				t.Fatalf("accepted %+v in %s's history", st, node)
			}
			b, err := st.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, string(b))
		}
		again, err := decodeNodeHistory(node, strings.Join(lines, "\n"))
		if err != nil || len(again) != len(h) {
			t.Fatalf("re-encoded history: %v, %v", again, err)
		}
		for i := range h {
			if !again[i].Same(h[i]) || !again[i].At.Equal(h[i].At.Truncate(time.Millisecond)) { // the payload keeps ms
				t.Fatalf("re-encoded %+v as %+v", h[i], again[i])
			}
		}
	})
}

// This node's periodic word that says the same as the last one recorded is
// not written again (no command at all), unless Redis may have lost it
// since: after a failover the next one is written, and restores a lost
// entry.
func TestRedisOwnWordWrittenWhenItChanges(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	r, _ := newRedisStore(t, c, "A")
	ctx := context.Background()
	word := func(sessions int) {
		t.Helper()
		st := presence.NodeStatus{Node: "A", State: presence.NodeUp, Incarnation: r.Incarnation(), Sessions: sessions, At: time.Now()}
		if err := r.AnnounceNode(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	hsets := func() int64 { return srv.Calls(t)["hset"] }
	word(1)
	before := hsets()
	word(1)
	word(1)
	if n := hsets() - before; n != 0 {
		t.Fatalf("the same word written %d times", n)
	}
	word(2)
	if n := hsets() - before; n != 1 {
		t.Fatalf("a new count written %d times, want 1", n)
	}
	if err := c.HDel(ctx, r.k.nodeStates(), "A").Err(); err != nil { // lost with a master
		t.Fatal(err)
	}
	r.failoverAt.Store(time.Now().UnixNano())
	word(2)
	if h := historyOf(t, r, "A"); len(h) != 1 || h[0].Sessions != 2 {
		t.Fatalf("after a failover the same word was not written again: %v", h)
	}
}
