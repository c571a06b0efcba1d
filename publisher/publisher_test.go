package node

import (
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/presenced/presenced/presence"
)

type sink struct {
	mu  sync.Mutex
	got []string
}

func (s *sink) publish(topic string, payload []byte) error {
	s.mu.Lock()
	s.got = append(s.got, topic+" "+string(payload))
	s.mu.Unlock()
	return nil
}

func (s *sink) snapshot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

func waitLen(t *testing.T, s *sink, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got := s.snapshot(); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("published %d, want %d: %q", len(s.snapshot()), n, s.snapshot())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Old and duplicated versions are never published; a resend publishes the
// current state again, unchanged.
func TestPublisherVersionsAndResend(t *testing.T) {
	s := &sink{}
	p := NewPublisher("presence", s.publish, zerolog.Nop())
	p.Start()
	defer p.Stop()
	p.Offer(presence.Presence{User: "amy", Status: presence.Online, Version: 5})
	waitLen(t, s, 1)
	p.Offer(presence.Presence{User: "amy", Status: presence.Offline, Version: 4}) // late
	p.Offer(presence.Presence{User: "amy", Status: presence.Online, Version: 5})  // duplicate
	p.Offer(presence.Presence{User: "amy", Status: presence.Away, Version: 6})
	got := waitLen(t, s, 2)
	p.Resend("amy")
	p.Resend("nobody") // never published: nothing to resend
	got = waitLen(t, s, 3)
	if len(got) != 3 || got[1] != got[2] || p.Stats.Resent.Load() != 1 {
		t.Fatalf("published %q (resent %d)", got, p.Stats.Resent.Load())
	}
	if v, _ := p.Get("amy"); got[2] != "presence/users/amy "+string(v) {
		t.Fatalf("resent %q, retained %q", got[2], v)
	}
	if p.Stats.Old.Load() != 2 {
		t.Fatalf("old versions dropped %d, want 2", p.Stats.Old.Load())
	}
}
