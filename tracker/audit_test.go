package tracker

import (
	"context"
	"testing"

	"github.com/presenced/presenced/presence"
)

// ownStore is a store whose Own answers from the memory store's records,
// as Redis's does (the memory store loses nothing, so its own Own is
// empty).
type ownStore struct{ *countingStore }

func (s ownStore) Own(ctx context.Context) ([]presence.StoredSession, error) {
	var out []presence.StoredSession
	for _, user := range []string{"ann", "ben"} {
		u, _, _ := s.User(ctx, user)
		for _, ss := range u.Sessions {
			out = append(out, presence.StoredSession{SessionRef: presence.SessionRef{User: user, ID: ss.ID, Epoch: ss.Epoch},
				Device: ss.Device, Status: ss.Status, Text: ss.Text})
		}
	}
	return out, nil
}

// The audit after a failover writes again, session by session, the own
// state the store lost (the dead master took an acknowledged update), and
// nothing else: a session whose state is what the node wrote costs no
// write. It needs no user's version.
func TestAuditRewritesLostUpdates(t *testing.T) {
	tr, cs, _, _ := newTestTracker(t)
	tr.store = ownStore{cs}
	tr.Start()
	defer tr.Stop()
	ctx := context.Background()
	tr.Connect(1, "a", "ann", "phone", nil, presence.Conn{})
	tr.Established(1, "a")
	tr.Connect(2, "b", "ben", "", nil, presence.Conn{})
	tr.Established(2, "b")
	away, text := presence.Away, "lunch"
	tr.Set(1, "a", "ann", presence.SetRequest{Status: &away, Text: &text})
	waitIdle(t, tr)
	// The failover loses ann's update: the store holds her session as it
	// was opened.
	u, _, _ := cs.User(ctx, "ann")
	online, none := presence.Online, ""
	if err := cs.Memory.Update(ctx, presence.SessionRef{User: "ann", ID: "a", Epoch: u.Sessions[0].Epoch}, presence.Update{Status: &online, Text: &none}); err != nil {
		t.Fatal(err)
	}
	_, _, before := cs.counts()
	res, err := tr.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitIdle(t, tr)
	if res.Rewritten != 1 || res.GhostsEnded != 0 {
		t.Fatalf("audit %+v, want ann's one session written again", res)
	}
	if _, _, after := cs.counts(); after != before+1 {
		t.Fatalf("%d updates written, want 1", after-before)
	}
	u, _, _ = cs.User(ctx, "ann")
	if s := u.Sessions[0]; s.Status != presence.Away || s.Text != "lunch" || s.Device != "phone" {
		t.Fatalf("ann's session after the audit: %+v", s)
	}
	// Nothing lost: nothing written.
	if res, err := tr.Audit(ctx); err != nil || res.Rewritten != 0 {
		t.Fatalf("a second audit: %+v %v", res, err)
	}
}
