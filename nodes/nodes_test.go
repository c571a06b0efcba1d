package nodes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/store"
)

// shared is one store for every stage of a test, as Redis is for the
// nodes of a deployment: a memory store, which keeps the store's rule
// (presence.NodeHistory.Record).
type shared struct{ m *store.Memory }

func newShared(now func() time.Time) *shared {
	return &shared{m: store.NewMemory(presence.NewRules(nil), now, func(store.Event) {})}
}

// nodeStore is one node's view of the shared store: its incarnation, its
// reads counted, its calls failing while down.
type nodeStore struct {
	s     *shared
	inc   atomic.Pointer[string]
	reads atomic.Int64
	down  atomic.Bool
}

var errDown = errors.New("store down")

func (s *nodeStore) AnnounceNode(ctx context.Context, st presence.NodeStatus) error {
	if s.down.Load() {
		return errDown
	}
	return s.s.m.AnnounceNode(ctx, st)
}

func (s *nodeStore) NodeStates(ctx context.Context) ([]presence.NodeHistory, error) {
	if s.down.Load() {
		return nil, errDown
	}
	s.reads.Add(1)
	return s.s.m.NodeStates(ctx)
}

func (s *nodeStore) Incarnation() string { return *s.inc.Load() }

// outlet is one node's broker: what it published on each topic, in order,
// what it retains, and the filters subscribed there.
type outlet struct {
	mu        sync.Mutex
	published map[string][]presence.NodeStatus
	retained  map[string]string
	cleared   []string
	filters   []string
}

func newOutlet() *outlet {
	return &outlet{published: map[string][]presence.NodeStatus{}, retained: map[string]string{}}
}

func (o *outlet) Announce(topic string, payload []byte) error {
	st, err := presence.ParseNodeStatus(payload)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.published[topic] = append(o.published[topic], st)
	o.retained[topic] = string(payload)
	return nil
}

func (o *outlet) Retain(topic string, payload []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.retained[topic] = string(payload)
}

func (o *outlet) Clear(topic string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.retained, topic)
	o.cleared = append(o.cleared, topic)
}

// Subscribed matches topic against the filters as MQTT does; a "+" level
// of topic matches only a wildcard there.
func (o *outlet) Subscribed(topic string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range o.filters {
		if match(f, topic) {
			return true
		}
	}
	return false
}

func match(filter, topic string) bool {
	fs, ts := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, f := range fs {
		switch {
		case f == "#":
			return true
		case i >= len(ts):
			return false
		case f != "+" && f != ts[i]:
			return false
		}
	}
	return len(fs) == len(ts)
}

// subscribe adds a filter and tells the stage, as the Delivery hook does.
func (o *outlet) subscribe(n *Nodes, filter string) {
	o.mu.Lock()
	o.filters = append(o.filters, filter)
	o.mu.Unlock()
	n.Watch(filter)
}

func (o *outlet) unsubscribe(filter string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.filters = slices.DeleteFunc(o.filters, func(f string) bool { return f == filter })
}

// seq is what o published on node's topic: "up i1", "down i1 by B"…
func (o *outlet) seq(node string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, st := range o.published["presence/nodes/"+node] {
		s := string(st.State) + " " + st.Incarnation
		if st.Reported() {
			s += " by " + st.ReportedBy
		}
		out = append(out, s)
	}
	return out
}

// every is the stages' interval in these tests: short, since nothing here
// waits on a network; the assertions poll (testkit.Wait) or watch a window
// of several intervals (testkit.During).
const every = 20 * time.Millisecond

type stage struct {
	*Nodes
	store *nodeStore
	out   *outlet
	once  sync.Once
}

// halt stops the stage once (a kill, or after its own "down").
func (s *stage) halt() { s.once.Do(s.Nodes.Stop) }

func startStage(t *testing.T, s *shared, node, inc string, now func() time.Time) *stage {
	t.Helper()
	ns := &nodeStore{s: s}
	ns.inc.Store(&inc)
	out := newOutlet()
	n := New(Options{Node: node, Prefix: "presence", Every: every, Now: now, Store: ns, Outlet: out, Sessions: func() int { return 3 }})
	n.Start(context.Background())
	st := &stage{Nodes: n, store: ns, out: out}
	t.Cleanup(st.halt)
	return st
}

func waitSeq(t *testing.T, o *outlet, node string, want ...string) {
	t.Helper()
	testkit.Wait(t, 5*time.Second, node+" "+strings.Join(want, ", "), func() error {
		got := o.seq(node)
		return testkit.Why(slices.Equal(got, want), fmt.Sprint(got))
	})
}

// A node shows its own state at once, even while the store does not
// answer, and never moves it back.
func TestOwnStateAtOnce(t *testing.T) {
	s := newShared(time.Now)
	a := startStage(t, s, "A", "i1", time.Now)
	if got := a.out.seq("A"); !slices.Equal(got, []string{"up i1"}) {
		t.Fatalf("after Start: %v", got)
	}
	a.store.down.Store(true)
	if err := a.Announce(context.Background(), presence.NodeDraining); !errors.Is(err, errDown) {
		t.Fatalf("announce with the store down: %v", err)
	}
	if got := a.out.seq("A"); !slices.Equal(got, []string{"up i1", "draining i1"}) {
		t.Fatalf("draining with the store down: %v", got)
	}
	if err := a.Announce(context.Background(), presence.NodeUp); !errors.Is(err, errDown) || a.State() != presence.NodeDraining {
		t.Fatalf("up after draining: %v, state %s", err, a.State())
	}
	a.store.down.Store(false)
	if err := a.Announce(context.Background(), presence.NodeDown); err != nil {
		t.Fatal(err)
	}
	if err := a.Announce(context.Background(), presence.NodeUp); err != nil || a.State() != presence.NodeDown {
		t.Fatalf("a node down announces nothing more: %v, %s", err, a.State())
	}
	if got := a.out.seq("A"); !slices.Equal(got, []string{"up i1", "draining i1", "down i1"}) {
		t.Fatalf("down: %v", got)
	}
}

// A reader watching the node topics sees a node go up, draining, down, in
// order, even when the drain is shorter than a read; a node killed without
// a word is recorded down by the survivor that swept it; a restarted node
// is never buried by a late report about its old run.
func TestReaderSeesEveryNode(t *testing.T) {
	s := newShared(time.Now)
	reader := startStage(t, s, "B", "b1", time.Now)
	a := startStage(t, s, "A", "a1", time.Now)
	reader.out.subscribe(reader.Nodes, "presence/nodes/+")
	waitSeq(t, reader.out, "A", "up a1")

	// A drain and a stop between two reads: the reader is stopped reading.
	reader.store.down.Store(true)
	ctx := context.Background()
	if err := a.Announce(ctx, presence.NodeDraining); err != nil {
		t.Fatal(err)
	}
	if err := a.Announce(ctx, presence.NodeDown); err != nil {
		t.Fatal(err)
	}
	a.halt()
	reader.store.down.Store(false)
	waitSeq(t, reader.out, "A", "up a1", "draining a1", "down a1")

	// A restarts and is killed; the reader sweeps it.
	a2 := startStage(t, s, "A", "a2", time.Now)
	waitSeq(t, reader.out, "A", "up a1", "draining a1", "down a1", "up a2")
	a2.halt() // a kill: no word
	reader.Lost("A", "a2")
	waitSeq(t, reader.out, "A", "up a1", "draining a1", "down a1", "up a2", "down a2 by B")

	// A restarts; a late report about its old run buries nothing.
	startStage(t, s, "A", "a3", time.Now)
	waitSeq(t, reader.out, "A", "up a1", "draining a1", "down a1", "up a2", "down a2 by B", "up a3")
	other := startStage(t, s, "C", "c1", time.Now)
	other.Lost("A", "a2")
	testkit.During(t, 10*every, "A not buried", func() error {
		got := reader.out.seq("A")
		return testkit.Why(got[len(got)-1] == "up a3", fmt.Sprint(got))
	})
}

// The other nodes' states are read only while someone here watches the
// node topics: by a wildcard, or by a node's name (one the store does not
// hold yet too); a subscription to this node's own topic needs no read.
func TestReadsOnlyWhileWatched(t *testing.T) {
	s := newShared(time.Now)
	r := startStage(t, s, "B", "b1", time.Now)
	startStage(t, s, "A", "a1", time.Now)
	// quiet: no read over 10 intervals but the one a tick may have begun
	// before the subscriptions changed (a stage still reading makes ten).
	quiet := func(what string) {
		t.Helper()
		before := r.store.reads.Load()
		testkit.During(t, 10*every, what, func() error {
			n := r.store.reads.Load() - before
			return testkit.Why(n <= 1, fmt.Sprintf("%d reads", n))
		})
	}
	reading := func(what string) {
		t.Helper()
		before := r.store.reads.Load()
		testkit.Wait(t, 5*time.Second, what, func() error {
			n := r.store.reads.Load() - before
			return testkit.Why(n >= 3, fmt.Sprintf("%d reads", n))
		})
	}
	quiet("nobody watching")
	before := r.store.reads.Load()
	r.out.subscribe(r.Nodes, "presence/nodes/B")
	testkit.Wait(t, 5*time.Second, "the read a subscription asks for", func() error {
		return testkit.Why(r.store.reads.Load() > before, "none")
	})
	quiet("only this node's own topic watched")

	r.out.subscribe(r.Nodes, "presence/#")
	reading("a wildcard watching")
	waitSeq(t, r.out, "A", "up a1")
	r.out.unsubscribe("presence/#")
	quiet("the wildcard gone")

	r.out.subscribe(r.Nodes, "presence/nodes/D") // a node not started yet
	reading("a node watched by name")
	startStage(t, s, "D", "d1", time.Now)
	waitSeq(t, r.out, "D", "up d1")
	r.out.unsubscribe("presence/nodes/D")
	quiet("the name unsubscribed")
}

// A node down for longer than presence.NodeRetention is forgotten by the
// store, then by a reader, which clears its retained topic; a node up is
// kept.
func TestOldDownsForgotten(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newShared(clock.Now)
	r := startStage(t, s, "B", "b1", clock.Now)
	a := startStage(t, s, "A", "a1", clock.Now)
	startStage(t, s, "C", "c1", clock.Now)
	r.out.subscribe(r.Nodes, "presence/nodes/#")
	waitSeq(t, r.out, "C", "up c1")
	if err := a.Announce(context.Background(), presence.NodeDown); err != nil {
		t.Fatal(err)
	}
	a.halt()
	waitSeq(t, r.out, "A", "up a1", "down a1")
	clock.Advance(presence.NodeRetention - time.Millisecond)
	testkit.During(t, 10*every, "A kept within the retention", func() error {
		r.out.mu.Lock()
		defer r.out.mu.Unlock()
		return testkit.Why(r.out.retained["presence/nodes/A"] != "", "cleared")
	})
	clock.Advance(time.Millisecond)
	testkit.Wait(t, 5*time.Second, "A forgotten", func() error {
		r.out.mu.Lock()
		defer r.out.mu.Unlock()
		_, kept := r.out.retained["presence/nodes/A"]
		return testkit.Why(!kept && slices.Equal(r.out.cleared, []string{"presence/nodes/A"}), fmt.Sprint(r.out.cleared))
	})
	r.out.mu.Lock()
	defer r.out.mu.Unlock()
	if r.out.retained["presence/nodes/C"] == "" || r.out.retained["presence/nodes/B"] == "" {
		t.Fatalf("a node up was forgotten: %v", r.out.retained)
	}
}
