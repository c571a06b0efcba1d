package groups

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
	"github.com/presenced/presenced/store"
)

// gatedStore is the memory store whose group log reads wait until the gate
// opens: a store that does not answer.
type gatedStore struct {
	*store.Memory
	gate chan struct{}
}

func (s gatedStore) GroupSnapshot(ctx context.Context, g string) (roster.Snapshot, bool, error) {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return roster.Snapshot{}, false, ctx.Err()
	}
	return s.Memory.GroupSnapshot(ctx, g)
}

func (s gatedStore) GroupHistory(ctx context.Context, g string) (roster.Snapshot, []roster.Logged, bool, error) {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return roster.Snapshot{}, nil, false, ctx.Err()
	}
	return s.Memory.GroupHistory(ctx, g)
}

// outlet records what the stage sends to the broker.
type outlet struct {
	mu       sync.Mutex
	retained map[string]roster.Snapshot
	live     []string // topic: payload
	to       [][]*mqtt.Client
}

func (o *outlet) Step(fn func(t Topics)) { fn(o) }

func (o *outlet) Advance(topic string, to []*mqtt.Client, snapshot, live []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var s roster.Snapshot
	if err := json.Unmarshal(snapshot, &s); err != nil {
		return err
	}
	o.retained[topic] = s
	o.live = append(o.live, topic+": "+string(live))
	o.to = append(o.to, to)
	return nil
}

func (o *outlet) Retain(topic string, payload []byte) {}

func (o *outlet) Send(topic string, to []*mqtt.Client, payload []byte, props packets.Properties) error {
	return nil
}

func (o *outlet) Clear(topic string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.retained, topic)
}

func (o *outlet) snapshot(topic string) (roster.Snapshot, bool, [][]*mqtt.Client) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.retained[topic]
	return s, ok, append([][]*mqtt.Client(nil), o.to...)
}

// startTeam sets the group team (ann, bob) in st, loads s from it and
// starts s, stopped when the test ends.
func startTeam(t *testing.T, st interface {
	SetGroup(ctx context.Context, group string, members []string) error
}, s *Stage) {
	t.Helper()
	ctx := context.Background()
	if err := st.SetGroup(ctx, "team", []string{"ann", "bob"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Stop)
}

// published is presence as published: nobody yet.
type published struct{}

func (published) Current(string) (presence.Shown, bool) { return presence.Shown{}, false }

// Watch never waits on the store: with the group log not answering, a
// subscription to a group not kept here returns at once (and twice from
// the same connection waits once); once the log answers, the snapshot is
// retained and sent live to that subscription only.
func TestWatchNeverWaitsOnTheStore(t *testing.T) {
	gs := gatedStore{Memory: store.NewMemory(presence.NewRules(nil), time.Now, func(store.Event) {}), gate: make(chan struct{})}
	out := &outlet{retained: map[string]roster.Snapshot{}}
	s := New(Options{Prefix: "presence", Window: 10 * time.Millisecond, Log: nil, Store: gs, Presence: published{}, Outlet: out,
		Viewer: func(*mqtt.Client) (string, bool) { return "", true }})
	startTeam(t, gs, s)
	cl := &mqtt.Client{ID: "watcher"}
	start := time.Now()
	s.Watch(cl, "presence/groups/team")
	s.Watch(cl, "presence/groups/team")
	s.Watch(cl, "presence/groups/nope") // no such group: not kept
	s.Watch(cl, "presence/groups/+")    // a wildcard keeps nothing
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Fatalf("Watch took %v with the store not answering", d)
	}
	if !s.Watched("team") || s.Watched("nope") {
		t.Fatalf("watched: team %v, nope %v", s.Watched("team"), s.Watched("nope"))
	}
	if _, ok, _ := out.snapshot("presence/groups/team"); ok {
		t.Fatal("a snapshot was retained before the store answered")
	}
	close(gs.gate)
	var to [][]*mqtt.Client
	testkit.Wait(t, 5*time.Second, "the team's snapshot retained", func() error {
		snap, ok, sent := out.snapshot("presence/groups/team")
		to = sent
		return testkit.Why(ok && snap.Version > 0 && len(snap.Members) == 2, "not yet")
	})
	if len(to) != 1 || len(to[0]) != 1 || to[0][0] != cl {
		t.Fatalf("live snapshot for %v, want the one subscription that asked, once", to)
	}
}

// The leader sleeps while nothing is due: an idle leader looks about once
// a third of the lease's TTL (3 s with the memory store), not every 5 ms;
// a member's change still wakes it, and its batch is cut.
func TestLeaderSleepsWhenIdle(t *testing.T) {
	ms := store.NewMemory(presence.NewRules(nil), time.Now, func(store.Event) {})
	out := &outlet{retained: map[string]roster.Snapshot{}}
	const window = 20 * time.Millisecond
	s := New(Options{Prefix: "presence", Window: window, Log: nil, Store: ms, Presence: published{}, Outlet: out,
		Viewer: func(*mqtt.Client) (string, bool) { return "", true }})
	startTeam(t, ms, s)
	testkit.Wait(t, 5*time.Second, "leading", func() error { return testkit.Why(s.leading.Load(), "not leading") })
	s.Watch(&mqtt.Client{ID: "watcher"}, "presence/groups/team")
	testkit.Wait(t, 5*time.Second, "the team's snapshot retained", func() error {
		_, ok, _ := out.snapshot("presence/groups/team")
		return testkit.Why(ok, "not yet")
	})

	// Idle: the measured span is the point of the test, so it sleeps; a
	// slow machine can only make it look less.
	before := s.looks.Load()
	const idle = 600 * time.Millisecond
	time.Sleep(idle)
	if n := s.looks.Load() - before; n > 2 {
		t.Fatalf("the idle leader looked %d times in %v (a 5 ms tick: about %d; want at most 2)", n, idle, idle/leadTick)
	}

	// A change wakes it: the batch carrying it is cut and committed (this
	// store's feed goes nowhere, so the board's count tells).
	cut := s.board.Stats().Batches
	s.board.NoteShown("ann", presence.Shown{Version: 7, Status: presence.Busy})
	testkit.Wait(t, 5*time.Second, "ann's change cut", func() error {
		return testkit.Why(s.board.Stats().Batches > cut, "no batch yet")
	})
}

// A roster change that lands while the leader tells the interest the
// members (after lead read the roster, before leadOnce reconciles the
// board) is told on the next look: the interest ends with every group's
// members, not those lead read. Lead's callback makes the change itself,
// so the window is hit every run (CI at 884d867: the leader watched 2 of
// 4 members 10 s after SetGroups of two groups).
func TestLeaderTellsAChangeMadeWhileLeading(t *testing.T) {
	ms := store.NewMemory(presence.NewRules(nil), time.Now, func(store.Event) {})
	out := &outlet{retained: map[string]roster.Snapshot{}}
	ctx := context.Background()
	var (
		s    *Stage
		mu   sync.Mutex
		told []string
		once sync.Once
	)
	lead := func(members []string) {
		mu.Lock()
		told = append([]string(nil), members...)
		mu.Unlock()
		if members == nil {
			return
		}
		once.Do(func() { // in lead's window: the second group arrives
			if err := ms.SetGroup(ctx, "crew", []string{"cat", "dan"}); err != nil {
				t.Error(err)
			}
			s.index.SetMembers("crew", []string{"cat", "dan"}, true)
		})
	}
	s = New(Options{Prefix: "presence", Window: 10 * time.Millisecond, Log: nil, Store: ms, Presence: published{}, Outlet: out,
		Viewer: func(*mqtt.Client) (string, bool) { return "", true }, Lead: lead})
	startTeam(t, ms, s)
	testkit.Wait(t, 5*time.Second, "the interest told all four members", func() error {
		mu.Lock()
		defer mu.Unlock()
		have := map[string]bool{}
		for _, u := range told {
			have[u] = true
		}
		return testkit.Why(len(told) == 4 && have["ann"] && have["bob"] && have["cat"] && have["dan"], fmt.Sprintf("told %v", told))
	})
}
