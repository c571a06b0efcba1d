package publisher

import (
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// The pacer shows a flapping user's changes with link flaky, in the
// published payload too, and stops once the flap window has passed.
func TestPacerFlakyLink(t *testing.T) {
	net := presence.Cause{Ended: presence.EndNetwork}
	r := newPacerRig(t, presence.Pacing{Grace: time.Second, FlapWindow: time.Minute, FlapEnds: 2, FlapGrace: 10 * time.Second}, 0, 0)
	r.offer("alice", presence.Online, presence.Cause{})
	for range 2 {
		r.advance(time.Second)
		r.offer("alice", presence.Offline, net)
		r.advance(500 * time.Millisecond)
		r.offer("alice", presence.Online, presence.Cause{})
	}
	last := r.shown[len(r.shown)-1]
	if last.Status != presence.Online || last.Link != presence.LinkFlaky {
		t.Fatalf("shown %+v, want online with link flaky", last)
	}
	if b, _ := r.pub.Get("alice"); !strings.Contains(string(b), `"link":"flaky"`) {
		t.Fatalf("payload %s has no flaky link", b)
	}
	if got := r.statuses("alice"); len(got) != 3 { // online, then the two returns: never offline
		t.Fatalf("shown %v", got)
	}
	r.advance(2 * time.Minute)
	r.offer("alice", presence.Away, presence.Cause{})
	if last := r.shown[len(r.shown)-1]; last.Status != presence.Away || last.Link != "" {
		t.Fatalf("shown %+v, want away with no link once the window passed", last)
	}
}
