package publisher

import (
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// FlappingCount counts the users with FlapEnds ends within FlapWindow, as
// Holds lists them, and forgets them once the window has passed.
func TestPacerFlappingCount(t *testing.T) {
	net := presence.Cause{Ended: presence.EndNetwork}
	r := newPacerRig(t, presence.Pacing{FlapWindow: time.Minute, FlapEnds: 2, FlapGrace: 10 * time.Second}, 0, 0)
	for _, u := range []string{"alice", "bob"} {
		r.offer(u, presence.Online, presence.Cause{})
	}
	for range 2 { // alice's connection drops twice; bob's once
		r.offer("alice", presence.Offline, net)
		r.advance(time.Second)
		r.offer("alice", presence.Online, presence.Cause{})
		r.advance(time.Second)
	}
	r.offer("bob", presence.Offline, net)
	_, flapping := r.q.Holds(r.now)
	if n := r.q.FlappingCount(r.now); n != 1 || len(flapping) != 1 || flapping[0] != "alice" {
		t.Fatalf("flapping %d, Holds says %v: want alice alone", n, flapping)
	}
	if n := r.q.FlappingCount(r.now.Add(2 * time.Minute)); n != 0 {
		t.Fatalf("flapping %d after the window, want 0", n)
	}
}
