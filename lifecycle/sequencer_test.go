package lifecycle

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

func kinds(evs []presence.LifecycleEvent) string {
	var b []string
	for _, e := range evs {
		b = append(b, fmt.Sprintf("%s:%s/%d:%s", e.Kind, e.Session.ID, e.Session.Epoch, e.Reason))
	}
	return strings.Join(b, " ")
}

func TestInterimSequencer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	s := NewInterim(t0)
	sv := func(id string, e uint64, c int) presence.SessionView {
		return presence.SessionView{ID: id, Epoch: e, ConnectedAt: at(c)}
	}
	steps := []struct {
		a    presence.Aggregate
		want string
	}{
		// base state: opened before start, no event
		{presence.Aggregate{User: "u", Version: 1, Sessions: []presence.SessionView{sv("old", 1, -5)}}, ""},
		{presence.Aggregate{User: "u", Version: 2, Sessions: []presence.SessionView{sv("old", 1, -5), sv("c", 2, 1)}}, "connected:c/2:"},
		{presence.Aggregate{User: "u", Version: 2, Sessions: nil}, ""}, // stale version
		// takeover: c/2 ends (its reason in Ended), c/3 opens, in that order
		{presence.Aggregate{User: "u", Version: 4, Sessions: []presence.SessionView{sv("old", 1, -5), sv("c", 3, 2)},
			Ended: []presence.EndedView{{SessionView: sv("c", 2, 1), Reason: presence.EndTakeover}}}, "disconnected:c/2:takeover connected:c/3:"},
		// the same end told again: nothing
		{presence.Aggregate{User: "u", Version: 5, Sessions: []presence.SessionView{sv("old", 1, -5), sv("c", 3, 2)},
			Ended: []presence.EndedView{{SessionView: sv("c", 2, 1), Reason: presence.EndTakeover}}}, ""},
		// a blink coalesced away: c/4 opened and ended between two changes
		{presence.Aggregate{User: "u", Version: 7, Sessions: []presence.SessionView{sv("old", 1, -5)},
			Ended: []presence.EndedView{{SessionView: sv("c", 3, 2), Reason: presence.EndNetwork}, {SessionView: sv("c", 4, 3), Reason: presence.EndClean}}},
			"disconnected:c/3:network connected:c/4: disconnected:c/4:clean"},
		// the base-state session ends without a reason found
		{presence.Aggregate{User: "u", Version: 8}, "disconnected:old/1:"},
	}
	for i, st := range steps {
		if got := kinds(s.Apply(st.a)); got != st.want {
			t.Errorf("step %d: %q, want %q", i, got, st.want)
		}
	}
	if n := s.Forget(at(100)); n != 0 {
		t.Errorf("forgot %d: offline since the zero time", n)
	}
}
