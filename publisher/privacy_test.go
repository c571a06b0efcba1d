package publisher

import (
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// privy records what the publisher keeps and sends to the entitled.
type privy struct {
	kept   map[string][2]string // user -> public, truth
	sent   []string
	forgot []string
}

func (p *privy) Keep(user string, public, truth []byte) {
	if p.kept == nil {
		p.kept = map[string][2]string{}
	}
	p.kept[user] = [2]string{string(public), string(truth)}
}
func (p *privy) Forget(user string) { delete(p.kept, user); p.forgot = append(p.forgot, user) }
func (p *privy) Send(user string, _ uint64, _ string, payload []byte) error {
	p.sent = append(p.sent, string(payload))
	return nil
}

// A user with a privacy setting: the public view is retained and handed
// to the group board; a change the public view does not show is sent to
// the entitled only, and moves no public version; Current is the public
// view, Get and Shown the truth; back to no setting, the truth is shown
// and the Privy forgets the user.
func TestPublisherPrivacy(t *testing.T) {
	s, pv := &sink{}, &privy{}
	var public []presence.Aggregate
	p := New(Options{Prefix: "presence", Broker: s, Privy: pv, Public: func(a presence.Aggregate) { public = append(public, a) }})
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	inv := presence.Privacy{Invisible: true, Since: t0, Seen: t0}
	live := []presence.SessionView{{ID: "phone", Epoch: 1, Node: "n1", Status: presence.Online, ConnectedAt: t0}}
	p.Publish(presence.Aggregate{User: "amy", Status: presence.Online, Version: 1, Since: t0, Sessions: live})
	p.Publish(presence.Aggregate{User: "amy", Status: presence.Online, Version: 2, Since: t0, Sessions: live, Privacy: inv})
	p.Publish(presence.Aggregate{User: "amy", Status: presence.Busy, Text: "secret", Version: 3, Since: t0, Sessions: live, Privacy: inv})
	got := s.snapshot()
	if len(got) != 2 || strings.Contains(got[1], "secret") || !strings.Contains(got[1], `"status":"offline"`) {
		t.Fatalf("published: %q", got)
	}
	if len(pv.sent) != 1 || !strings.Contains(pv.sent[0], "secret") {
		t.Fatalf("sent to the entitled: %q", pv.sent)
	}
	if k := pv.kept["amy"]; !strings.Contains(k[1], "secret") || strings.Contains(k[0], "secret") {
		t.Fatalf("kept: %q", k)
	}
	if len(public) != 2 || public[1].Status != presence.Offline || public[1].Version != 2 {
		t.Fatalf("the board was told: %+v", public)
	}
	if c, _ := p.Current("amy"); c.Status != presence.Offline || c.Version != 2 {
		t.Fatalf("Current: %+v", c)
	}
	if sh := p.Shown("amy"); sh.Status != presence.Busy || sh.Version != 3 {
		t.Fatalf("Shown: %+v", sh)
	}
	if b, _ := p.Get("amy"); !strings.Contains(string(b), "secret") {
		t.Fatalf("Get: %s", b)
	}
	if r := retained(p)["presence/users/amy"]; "presence/users/amy "+r != got[1] {
		t.Fatalf("retained %q, want the public view %q", r, got[1])
	}
	if p.Stats.Private.Load() != 1 {
		t.Fatalf("private changes: %d", p.Stats.Private.Load())
	}
	// Visible again: the truth is published, and the Privy forgets amy.
	p.Publish(presence.Aggregate{User: "amy", Status: presence.Busy, Text: "secret", Version: 4, Since: t0, Sessions: live})
	if got := s.snapshot(); len(got) != 3 || !strings.Contains(got[2], "secret") {
		t.Fatalf("published: %q", got)
	}
	if _, ok := pv.kept["amy"]; ok {
		t.Fatal("the Privy still keeps amy")
	}
	// Dropped users are forgotten by the Privy too.
	p.Publish(presence.Aggregate{User: "amy", Status: presence.Busy, Version: 5, Since: t0, Sessions: live, Privacy: presence.Privacy{LastSeen: presence.LastSeenHidden}})
	p.Drop([]string{"amy"})
	if _, ok := pv.kept["amy"]; ok {
		t.Fatal("the Privy keeps a dropped user")
	}
}
