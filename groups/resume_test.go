package groups

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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

// fenceOutlet records, in order, what the stage sends; Step holds a fence
// for writing, as the delivery's does, and subscribe holds it for reading
// while it marks the subscription and records its resume.
type fenceOutlet struct {
	fence  sync.RWMutex
	mu     sync.Mutex
	events []sent
}

type sent struct {
	kind    string // live (every subscriber), to (some), sub (a subscription indexed)
	to      []*mqtt.Client
	payload []byte
	props   packets.Properties
}

func (o *fenceOutlet) Step(fn func(t Topics)) {
	o.fence.Lock()
	defer o.fence.Unlock()
	fn(o)
}

func (o *fenceOutlet) add(e sent) {
	o.mu.Lock()
	o.events = append(o.events, e)
	o.mu.Unlock()
}

func (o *fenceOutlet) Advance(topic string, to []*mqtt.Client, snapshot, live []byte) error {
	if to != nil {
		o.add(sent{kind: "to", to: to, payload: live})
	} else {
		o.add(sent{kind: "live", payload: live})
	}
	return nil
}

func (o *fenceOutlet) Send(topic string, to []*mqtt.Client, payload []byte, props packets.Properties) error {
	o.add(sent{kind: "to", to: to, payload: payload, props: props})
	return nil
}

func (o *fenceOutlet) Retain(string, []byte) {}
func (o *fenceOutlet) Clear(string)          {}

// subscribe is a SUBSCRIBE to the group topic as mochi runs it with the
// hooks: AskResume, the index (a "sub" event), then Resumed, under the
// fence for reading. It returns the filter's retain handling.
func (o *fenceOutlet) subscribe(s *Stage, cl *mqtt.Client, version string, more ...packets.UserProperty) byte {
	pk := packets.Packet{Filters: packets.Subscriptions{{Filter: "presence/groups/team", Qos: 1}}}
	if version != "" {
		pk.Properties.User = []packets.UserProperty{{Key: "version", Val: version}}
	}
	pk.Properties.User = append(pk.Properties.User, more...)
	o.fence.RLock()
	defer o.fence.RUnlock()
	pk = s.AskResume(cl, pk)
	o.add(sent{kind: "sub", to: []*mqtt.Client{cl}})
	s.Watch(cl, "presence/groups/team")
	s.Resumed(cl, pk, []byte{1})
	return pk.Filters[0].RetainHandling
}

// rebuild is what cl holds after the events from the one at from on: its
// state (nil: none yet), and the gaps and duplicates it saw.
func rebuild(t *testing.T, events []sent, from int, cl *mqtt.Client, state *roster.Snapshot) (*roster.Snapshot, int, int) {
	t.Helper()
	gaps, dups := 0, 0
	on := false
	for _, e := range events[from:] {
		switch {
		case e.kind == "sub" && e.to[0] == cl:
			on = true
			continue
		case !on || e.kind == "sub" || e.kind == "to" && !slices.Contains(e.to, cl):
			continue
		}
		var m struct {
			roster.Delta
			Members []roster.Member `json:"members"`
		}
		if err := json.Unmarshal(plain(t, e), &m); err != nil {
			t.Fatal(err)
		}
		if m.Members != nil {
			state = &roster.Snapshot{Group: m.Group, Version: m.Version, Members: m.Members, Counts: m.Counts}
			continue
		}
		switch {
		case state == nil || m.Follows > state.Version:
			gaps++
		case m.Follows < state.Version:
			dups++
		default:
			mir := roster.NewMirror()
			mir.Set(*state)
			next, _ := mir.Apply(m.Delta)
			state = &next
		}
	}
	return state, gaps, dups
}

// presenceMap is presence as published, settable.
type presenceMap struct {
	mu sync.Mutex
	m  map[string]presence.Shown
}

func (p *presenceMap) Current(u string) (presence.Shown, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.m[u]
	return s, ok
}

func (p *presenceMap) set(u string, st presence.Status, v uint64) presence.Aggregate {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[u] = presence.Shown{Status: st, Version: v}
	return presence.Aggregate{User: u, Status: st, Version: v}
}

// A subscriber that comes back with the version it holds gets no retained
// snapshot, then exactly what it missed, before the batches after it, while
// batches are cut all along: no gap, no duplicate, the group's state in
// the end. With an unknown or garbage version it gets the snapshot.
func TestResumeInOrder(t *testing.T) {
	var s *Stage
	var ready sync.WaitGroup
	ready.Add(1)
	st := store.NewMemory(presence.NewRules(nil), time.Now, func(e store.Event) {
		if e.Kind == store.GroupBatch {
			ready.Wait()
			s.Apply(e.Delta)
		}
	})
	out := &fenceOutlet{}
	pres := &presenceMap{m: map[string]presence.Shown{}}
	s = New(Options{Prefix: "presence", Window: 10 * time.Millisecond, Store: st, Presence: pres, Outlet: out,
		Viewer: func(*mqtt.Client) (string, bool) { return "", true },
		Resume: roster.LogLimits{MaxAge: time.Minute, MaxDeltas: 1000, MaxBytes: 1 << 20}})
	ready.Done()
	ctx := context.Background()
	users := make([]string, 50)
	for i := range users {
		users[i] = fmt.Sprintf("u%02d", i)
	}
	if err := st.SetGroup(ctx, "team", users); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Stop()
	srv := mqtt.New(nil)
	client := func(id string) *mqtt.Client {
		cl := srv.NewClient(nil, "t", id, false)
		cl.Properties.ProtocolVersion = 5
		return cl
	}
	var version uint64 = 1
	change := func() {
		version++
		u := users[int(version)%len(users)]
		s.Note(pres.set(u, []presence.Status{presence.Online, presence.Away, presence.Offline}[version%3], version))
	}
	waitVersion := func(atLeast uint64) roster.Snapshot {
		var snap roster.Snapshot
		testkit.Wait(t, 5*time.Second, "the group's batches applied", func() error {
			snap, _ = s.mirror.Get("team")
			return testkit.Why(snap.Version >= atLeast && snap.Version > 0, fmt.Sprintf("at %d", snap.Version))
		})
		return snap
	}

	// The first subscriber gets the snapshot, then batches.
	first := client("first")
	if rh := out.subscribe(s, first, ""); rh != 0 {
		t.Fatalf("a plain subscribe's retain handling %d", rh)
	}
	v0 := waitVersion(1).Version
	for range 5 {
		change()
	}
	held := waitVersion(v0 + 1)
	out.mu.Lock()
	events := slices.Clone(out.events)
	out.mu.Unlock()
	state, gaps, dups := rebuild(t, events, 0, first, nil)
	if state == nil || gaps+dups != 0 {
		t.Fatalf("first subscriber: %v, %d gaps, %d dups", state, gaps, dups)
	}
	// It holds what it was sent up to now (later batches it misses).
	testkit.Wait(t, 5*time.Second, "the first subscriber current", func() error {
		out.mu.Lock()
		events = slices.Clone(out.events)
		out.mu.Unlock()
		state, _, _ = rebuild(t, events, 0, first, nil)
		return testkit.Why(state.Version >= held.Version, fmt.Sprintf("at %d", state.Version))
	})
	away := *state

	// Away: batches go on. Then it comes back (a new connection) with the
	// version it holds, while batches are still being cut.
	for range 40 {
		change()
		time.Sleep(time.Millisecond) // spread the changes over a few windows
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			change()
			time.Sleep(500 * time.Microsecond)
		}
	})
	back := client("back")
	mark := len(events)
	if rh := out.subscribe(s, back, fmt.Sprint(away.Version)); rh != 2 {
		t.Fatalf("a resume's retain handling %d, want 2 (no retained snapshot)", rh)
	}
	testkit.Wait(t, 5*time.Second, "the resume served", func() error {
		return testkit.Why(s.Resumes.Resumed.Load()+s.Resumes.Current.Load() == 1, "not yet")
	})
	after, _ := s.mirror.Version("team")
	waitVersion(after + 3) // a few more batches after it
	close(stop)
	wg.Wait()
	final := waitVersion(0)
	testkit.Wait(t, 5*time.Second, "the last batch", func() error {
		time.Sleep(20 * time.Millisecond)
		f, _ := s.mirror.Get("team")
		if f.Version != final.Version {
			final = f
			return fmt.Errorf("still moving")
		}
		return nil
	})
	out.mu.Lock()
	events = slices.Clone(out.events)
	out.mu.Unlock()
	got, gaps, dups := rebuild(t, events, mark, back, &away)
	if gaps+dups != 0 {
		t.Fatalf("resumed: %d gaps, %d duplicates", gaps, dups)
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(final)
	if string(g) != string(w) {
		t.Fatalf("resumed subscriber holds\n%s\nthe group is\n%s", g, w)
	}
	for _, e := range events[mark:] {
		if e.kind == "to" && slices.Contains(e.to, back) && strings.Contains(string(e.payload), `"members"`) {
			t.Fatal("the resumed subscriber was sent the snapshot")
		}
	}

	// Unknown (too old: below the log) and garbage: the snapshot.
	for _, c := range []struct {
		version string
		rh      byte
	}{{"1", 2}, {"x12", 0}} {
		cl := client("again-" + c.version)
		mark := len(out.events)
		if rh := out.subscribe(s, cl, c.version); rh != c.rh {
			t.Fatalf("version %q: retain handling %d, want %d", c.version, rh, c.rh)
		}
		if c.rh == 0 {
			continue // the retained snapshot, as any subscriber (mochi's)
		}
		testkit.Wait(t, 5*time.Second, "the snapshot sent", func() error {
			out.mu.Lock()
			events := slices.Clone(out.events)
			out.mu.Unlock()
			st, _, _ := rebuild(t, events, mark, cl, nil)
			return testkit.Why(st != nil && st.Version == final.Version, "not yet")
		})
	}
	if n := s.Resumes.Fallbacks(roster.CauseTooOld); n != 1 {
		t.Errorf("too old: %d", n)
	}
	if n := s.Resumes.Fallbacks(roster.CauseGarbage); n != 1 {
		t.Errorf("garbage: %d", n)
	}
	t.Logf("log %+v", s.LogStats())
}

// A batch applied after a resume was recorded, before the resume worker
// served it, sends the resume first: the subscriber gets what it missed,
// then the batch.
func TestResumeBeforeTheNextBatch(t *testing.T) {
	st := store.NewMemory(presence.NewRules(nil), time.Now, func(store.Event) {})
	out := &fenceOutlet{}
	s := New(Options{Prefix: "presence", Window: 10 * time.Millisecond, Store: st, Presence: &presenceMap{m: map[string]presence.Shown{}}, Outlet: out,
		Viewer: func(*mqtt.Client) (string, bool) { return "", true },
		Resume: roster.LogLimits{MaxAge: time.Minute, MaxDeltas: 1000, MaxBytes: 1 << 20}})
	ctx := context.Background()
	if err := st.SetGroup(ctx, "team", []string{"ann", "bob"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	// Not started: no worker serves the resume; only the next batch does.
	snap := roster.Snapshot{Group: "team", Version: 10, Members: []roster.Member{{User: "ann", Status: presence.Offline}, {User: "bob", Status: presence.Offline}}}
	s.mirror.Set(snap)
	d := func(v uint64, u string, st presence.Status) *roster.Delta {
		return &roster.Delta{Group: "team", Version: v, Follows: v - 1, Changes: []roster.Member{{User: u, Status: st, Version: v}}}
	}
	s.Apply(d(11, "ann", presence.Online))
	held, _ := s.mirror.Get("team")
	s.Apply(d(12, "bob", presence.Online))
	s.Apply(d(13, "ann", presence.Away))
	cl := mqtt.New(nil).NewClient(nil, "t", "back", false)
	cl.Properties.ProtocolVersion = 5
	mark := len(out.events)
	out.subscribe(s, cl, "11")
	s.Apply(d(14, "bob", presence.Busy))
	got, gaps, dups := rebuild(t, out.events, mark, cl, &held)
	want, _ := s.mirror.Get("team")
	if gaps+dups != 0 || got.Version != 14 || fmt.Sprint(got.Members) != fmt.Sprint(want.Members) {
		t.Fatalf("%d gaps, %d dups; holds %+v, want %+v", gaps, dups, got, want)
	}
	if n := len(out.events) - mark; n != 3 { // sub, the resume, the batch
		t.Fatalf("%d events after the subscribe, want 3", n)
	}
}
