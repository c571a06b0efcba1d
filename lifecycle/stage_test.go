package lifecycle

import (
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// fakeSequencer answers Apply with what the test gave it for a version.
type fakeSequencer struct {
	out       map[uint64][]presence.LifecycleEvent
	forgotten []time.Time
}

func (f *fakeSequencer) Apply(a presence.Aggregate) []presence.LifecycleEvent {
	return f.out[a.Version]
}
func (f *fakeSequencer) Forget(before time.Time) int {
	f.forgotten = append(f.forgotten, before)
	return 1
}

// fakeBroker records what was sent; block holds Send until closed.
type fakeBroker struct {
	mu    sync.Mutex
	sent  []string
	block chan struct{}
}

func (b *fakeBroker) Send(topic string, _ []byte) error {
	if b.block != nil {
		<-b.block
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sent = append(b.sent, topic)
	return nil
}

func (b *fakeBroker) topics() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.sent...)
}

func view(id string, epoch uint64) presence.SessionView {
	return presence.SessionView{ID: id, Epoch: epoch, Node: "n1"}
}

func TestStageRawAndShown(t *testing.T) {
	raw := &fakeSequencer{out: map[uint64][]presence.LifecycleEvent{
		1: {{Kind: presence.LifecycleConnected, User: "u", Session: view("c", 1)}},
	}}
	shown := &fakeSequencer{out: map[uint64][]presence.LifecycleEvent{
		2: {{Kind: presence.LifecycleDisconnected, User: "u", Session: view("c", 1)}}, // reason lost in coalescing
	}}
	seqs := []Sequencer{raw, shown}
	b := &fakeBroker{}
	s := New(Options{Broker: b, Outputs: []Output{{Name: "aws", Dialect: AWS{}, Mode: Raw}, {Name: "emqx", Dialect: EMQX{}, Mode: Shown}},
		NewSequencer: func(time.Time) Sequencer { q := seqs[0]; seqs = seqs[1:]; return q }})
	s.Start()
	defer s.Stop()
	s.Committed(presence.Aggregate{User: "u", Version: 1})
	s.Committed(presence.Aggregate{User: "u", Version: 2, Ended: []presence.EndedView{{SessionView: view("c", 1), Reason: presence.EndTimeout}}})
	s.Shown(presence.Aggregate{User: "u", Version: 2})
	testkit.Wait(t, 5*time.Second, "two messages", func() error { return testkit.Why(len(b.topics()) == 2, "not yet") })
	got := b.topics()
	if got[0] != "$aws/events/presence/connected/c" || got[1] != "$SYS/brokers/n1/clients/c/disconnected" {
		t.Errorf("sent %v", got)
	}
	if n := s.Forget(time.Unix(100, 0)); n != 2 || len(raw.forgotten) != 1 || len(shown.forgotten) != 1 {
		t.Errorf("Forget: %d", n)
	}
}

func TestStageShownReasonFromCommitted(t *testing.T) {
	shown := &fakeSequencer{out: map[uint64][]presence.LifecycleEvent{
		2: {{Kind: presence.LifecycleDisconnected, User: "u", Session: view("c", 1)}},
	}}
	var got []presence.LifecycleEvent
	var mu sync.Mutex
	s := New(Options{Broker: &fakeBroker{}, Outputs: []Output{{Dialect: dialectFunc(func(ev presence.LifecycleEvent) {
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	}), Mode: Shown}}, NewSequencer: func(time.Time) Sequencer { return shown }})
	s.Start()
	s.Committed(presence.Aggregate{User: "u", Version: 2, Ended: []presence.EndedView{{SessionView: view("c", 1), Reason: presence.EndTimeout}}})
	s.Shown(presence.Aggregate{User: "u", Version: 2})
	s.Stop()
	if len(got) != 1 || got[0].Reason != presence.EndTimeout {
		t.Errorf("shown end: %+v", got)
	}
}

// dialectFunc is a Dialect that records the events it is given.
type dialectFunc func(presence.LifecycleEvent)

func (f dialectFunc) Encode(ev presence.LifecycleEvent) (string, []byte, bool) {
	f(ev)
	return "t", nil, true
}

func TestStageOverflow(t *testing.T) {
	b := &fakeBroker{block: make(chan struct{})}
	s := New(Options{Broker: b, Depth: 3, Outputs: []Output{{Dialect: AWS{}, Mode: Raw}}})
	s.Start()
	ev := presence.LifecycleEvent{Kind: presence.LifecycleConnectFailed, User: "u", Session: view("c", 0), Reason: RefusedAuth}
	s.Refused(ev) // taken by the goroutine, which blocks in Send
	testkit.Wait(t, 5*time.Second, "the first taken", func() error { return testkit.Why(s.Stats.Queued.Load() == 0, "not yet") })
	for range 5 {
		s.Refused(ev)
	}
	if q, o := s.Stats.Queued.Load(), s.Stats.Overflow.Load(); q != 3 || o != 2 {
		t.Errorf("queued %d overflow %d, want 3 and 2", q, o)
	}
	close(b.block)
	s.Stop()
	if n := len(b.topics()); n != 4 {
		t.Errorf("%d sent, want 4", n)
	}
	if s.Stats.Refusals.Load() != 6 {
		t.Errorf("refusals %d", s.Stats.Refusals.Load())
	}
}

func TestStageShownOnlyIgnoresRefusals(t *testing.T) {
	b := &fakeBroker{}
	s := New(Options{Broker: b, Outputs: []Output{{Dialect: AWS{}, Mode: Shown}}})
	s.Start()
	s.Refused(presence.LifecycleEvent{Kind: presence.LifecycleConnectFailed, Session: view("c", 0)})
	s.Stop()
	if len(b.topics()) != 0 {
		t.Errorf("a shown output sent a refusal: %v", b.topics())
	}
}

func TestStageStopWithoutStart(t *testing.T) {
	New(Options{Broker: &fakeBroker{}}).Stop()
}
