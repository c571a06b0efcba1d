package tracker

import (
	"context"
	"testing"

	"github.com/presenced/presenced/presence"
)

// The connection's facts reach the store with the open, and with the open
// of a takeover the new connection's, not the old's.
func TestTrackerCarriesConnectionFacts(t *testing.T) {
	tr, cs, f, _ := newTestTracker(t)
	tr.Start()
	defer tr.Stop()
	first := presence.Conn{Username: "alice", IP: "192.0.2.1", Port: 1883, Listener: "tcp", ProtoVer: 4, KeepAlive: 30}
	second := presence.Conn{Username: "alice", IP: "192.0.2.2", Port: 8883, Listener: "tls", ProtoVer: 5, CleanStart: true, Expiry: 60}
	tr.Connect(1, "alice-phone", "alice", "phone", nil, first)
	tr.Established(1, "alice-phone")
	waitIdle(t, tr)
	tr.Connect(2, "alice-phone", "alice", "phone", nil, second)
	tr.Established(2, "alice-phone")
	waitIdle(t, tr)
	got := f.All()
	if len(got) != 2 || got[0].Sessions[0].Conn != first || got[1].Sessions[0].Conn != second {
		t.Fatalf("changes: %+v", got)
	}
	u, _, _ := cs.User(context.Background(), "alice")
	if len(u.Ended) != 1 || u.Ended[0].Conn != first || u.Ended[0].EndReason != presence.EndTakeover {
		t.Fatalf("record: %+v", u.Ended)
	}
}
