package publisher

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// sink is a Broker that records what it is asked to publish.
type sink struct {
	mu  sync.Mutex
	got []string
}

func (s *sink) Publish(_ string, _ uint64, topic string, payload []byte, commit func()) error {
	s.mu.Lock()
	s.got = append(s.got, topic+" "+string(payload))
	s.mu.Unlock()
	commit()
	return nil
}

// resend is what the pump gives Publisher.Resend: here, sent like any
// message, without being retained.
func (s *sink) resend(_ uint64, topic string, payload []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, topic+" "+string(payload))
	return nil
}

// retained returns what p holds as retained presence (Snapshots), by
// topic.
func retained(p *Publisher) map[string]string {
	m := map[string]string{}
	p.Snapshots("", true, func(user string, _ uint64, payload []byte) { m[p.Topic(user)] = string(payload) })
	return m
}

func (s *sink) snapshot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// Old and duplicated versions are never published; a resend publishes the
// current state again, unchanged.
func TestPublisherVersionsAndResend(t *testing.T) {
	s := &sink{}
	p := New(Options{Prefix: "presence", Broker: s, Log: nil})
	p.Publish(presence.Aggregate{User: "amy", Status: presence.Online, Version: 5})
	p.Publish(presence.Aggregate{User: "amy", Status: presence.Offline, Version: 4}) // late
	p.Publish(presence.Aggregate{User: "amy", Status: presence.Online, Version: 5})  // duplicate
	p.Publish(presence.Aggregate{User: "amy", Status: presence.Away, Version: 6})
	if got := s.snapshot(); len(got) != 2 {
		t.Fatalf("published %q", got)
	}
	if !p.Resend("amy", s.resend) || p.Resend("nobody", s.resend) { // nobody was never published: nothing to resend
		t.Fatal("Resend")
	}
	got := s.snapshot()
	if len(got) != 3 || got[1] != got[2] || p.Stats.Resent.Load() != 1 {
		t.Fatalf("published %q (resent %d)", got, p.Stats.Resent.Load())
	}
	if v, _ := p.Get("amy"); got[2] != "presence/users/amy "+string(v) {
		t.Fatalf("resent %q, retained %q", got[2], v)
	}
	if p.Stats.Old.Load() != 2 {
		t.Fatalf("old versions dropped %d, want 2", p.Stats.Old.Load())
	}
	if vs := p.Versions(); vs["amy"] != 6 || p.Users() != 1 {
		t.Fatalf("versions %v users %d", vs, p.Users())
	}
	// The retained presence is the publisher's own: the current payload,
	// which no broker is asked to keep (there is no refresh any more).
	if v, _ := p.Get("amy"); retained(p)["presence/users/amy"] != string(v) {
		t.Fatalf("retained %q", retained(p)["presence/users/amy"])
	}
}

// Offline users last seen before the cut are forgotten and their retained
// presence removed; online users and recent ones are kept.
func TestPublisherForget(t *testing.T) {
	s := &sink{}
	p := New(Options{Prefix: "presence", Broker: s, Log: nil})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p.Publish(presence.Aggregate{User: "old", Status: presence.Offline, Version: 1, LastSeen: t0})
	p.Publish(presence.Aggregate{User: "recent", Status: presence.Offline, Version: 1, LastSeen: t0.Add(time.Hour)})
	p.Publish(presence.Aggregate{User: "online", Status: presence.Online, Version: 1})
	if n := p.Forget(t0.Add(time.Minute)); n != 1 {
		t.Fatalf("forgot %d, want 1", n)
	}
	if _, ok := p.Get("old"); ok {
		t.Fatal("old is still published")
	}
	if _, ok := retained(p)["presence/users/old"]; ok {
		t.Fatal("old is still retained")
	}
	for _, u := range []string{"recent", "online"} {
		if _, ok := retained(p)["presence/users/"+u]; !ok {
			t.Fatalf("%s was removed", u)
		}
	}
	// Coming back online, then offline again, the user is kept until the
	// new last seen is old enough.
	p.Publish(presence.Aggregate{User: "recent", Status: presence.Online, Version: 2})
	if n := p.Forget(t0.Add(24 * time.Hour)); n != 0 || p.Users() != 2 || p.Stats.Forgotten.Load() != 1 {
		t.Fatalf("forgot %d, users %d, counted %d", n, p.Users(), p.Stats.Forgotten.Load())
	}
}

// The counts by status follow every publish, status change, old version
// refused and forget.
func TestPublisherStatuses(t *testing.T) {
	p := New(Options{Prefix: "presence", Broker: &sink{}, Log: nil})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	want := func(step string, w map[presence.Status]int) {
		t.Helper()
		got := p.Statuses()
		if len(got) != len(w) {
			t.Fatalf("%s: %v, want %v", step, got, w)
		}
		for s, n := range w {
			if got[s] != n {
				t.Fatalf("%s: %v, want %v", step, got, w)
			}
		}
	}
	p.Publish(presence.Aggregate{User: "a", Status: presence.Online, Version: 1})
	p.Publish(presence.Aggregate{User: "b", Status: presence.Online, Version: 1})
	p.Publish(presence.Aggregate{User: "c", Status: presence.Offline, Version: 1, LastSeen: t0})
	want("published", map[presence.Status]int{presence.Online: 2, presence.Offline: 1})
	p.Publish(presence.Aggregate{User: "a", Status: presence.Away, Version: 2})
	p.Publish(presence.Aggregate{User: "b", Status: presence.Busy, Version: 1}) // old: refused
	want("changed", map[presence.Status]int{presence.Online: 1, presence.Away: 1, presence.Offline: 1})
	p.Forget(t0.Add(time.Minute))
	want("forgotten", map[presence.Status]int{presence.Online: 1, presence.Away: 1})
}

// Published is told of every publish, with what observers were shown of
// the user before, and of nothing else: an old version is not published,
// and a publish that failed showed nothing. Current is what was shown last,
// as values (the group topics read it).
func TestPublished(t *testing.T) {
	type call struct {
		a      presence.Aggregate
		before presence.Shown
	}
	var calls []call
	p := New(Options{Prefix: "presence", Broker: &sink{}, Log: nil, Published: func(a presence.Aggregate, before presence.Shown) {
		calls = append(calls, call{a, before})
	}})
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	on := presence.Aggregate{User: "ann", Status: presence.Online, Version: 10, Since: t0, Text: "hi"}
	off := presence.Aggregate{User: "ann", Status: presence.Offline, Version: 12, Since: t0.Add(time.Minute), LastSeen: t0.Add(time.Minute)}
	p.Publish(on)
	p.Publish(presence.Aggregate{User: "ann", Status: presence.Away, Version: 9}) // old
	p.Publish(on)                                                                 // repeated
	p.Publish(off)
	if len(calls) != 2 {
		t.Fatalf("%d calls, want 2 (the old and the repeated one are not published): %+v", len(calls), calls)
	}
	if calls[0].a.Version != 10 || calls[0].before != (presence.Shown{}) {
		t.Errorf("first: %+v", calls[0])
	}
	if calls[1].a.Version != 12 || calls[1].before != on.Shown() {
		t.Errorf("second: before %+v, want %+v", calls[1].before, on.Shown())
	}
	if s, ok := p.Current("ann"); !ok || s != off.Shown() {
		t.Errorf("current %+v %v, want %+v", s, ok, off.Shown())
	}
	if _, ok := p.Current("bob"); ok {
		t.Error("bob was never published")
	}
	failing := New(Options{Prefix: "presence", Broker: &failBroker{}, Log: nil, Published: func(presence.Aggregate, presence.Shown) {
		t.Error("a failed publish was reported as published")
	}})
	failing.Publish(on)
}

// failBroker fails every publish.
type failBroker struct{ sink }

func (*failBroker) Publish(string, uint64, string, []byte, func()) error {
	return errors.New("broker down")
}

// Drop removes a user's retained presence and forgets it: a later publish
// of any version shows the user again (the store's version is then at or
// above any shown before).
func TestPublisherDrop(t *testing.T) {
	s := &sink{}
	p := New(Options{Prefix: "presence", Broker: s, Log: nil})
	p.Publish(presence.Aggregate{User: "ann", Status: presence.Online, Version: 10})
	p.Publish(presence.Aggregate{User: "bob", Status: presence.Away, Version: 3})
	p.Drop([]string{"ann", "nobody"})
	if _, ok := p.Get("ann"); ok || p.Users() != 1 || p.Statuses()[presence.Online] != 0 {
		t.Fatalf("after Drop: ann kept %v, users %d, online %d", ok, p.Users(), p.Statuses()[presence.Online])
	}
	if _, ok := retained(p)["presence/users/ann"]; ok {
		t.Fatal("ann's retained message kept")
	}
	if got := p.Stats.Dropped.Load(); got != 1 {
		t.Fatalf("dropped %d, want 1", got)
	}
	p.Publish(presence.Aggregate{User: "ann", Status: presence.Offline, Version: 10})
	if _, ok := p.Get("ann"); !ok {
		t.Fatal("ann not shown again after a drop")
	}
}
