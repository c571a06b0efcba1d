package notify

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)

func TestDecide(t *testing.T) {
	grace := 5 * time.Second
	tests := []struct {
		name     string
		live     int
		lastSeen time.Time
		grace    time.Duration
		want     Verdict
		deadline time.Time
	}{
		{"online", 1, time.Time{}, grace, Route, time.Time{}},
		{"online, seen lately too", 2, t0.Add(-time.Second), grace, Route, time.Time{}},
		{"never seen", 0, time.Time{}, grace, Push, time.Time{}},
		{"offline long ago", 0, t0.Add(-time.Hour), grace, Push, time.Time{}},
		{"offline exactly a grace ago", 0, t0.Add(-grace), grace, Push, time.Time{}},
		{"left a second ago: the rest of the grace", 0, t0.Add(-time.Second), grace, Wait, t0.Add(4 * time.Second)},
		{"left just now", 0, t0, grace, Wait, t0.Add(grace)},
		{"a store clock ahead: never more than a grace", 0, t0.Add(time.Hour), grace, Wait, t0.Add(grace)},
		{"grace off", 0, t0.Add(-time.Second), 0, Push, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, d := Decide(tt.live, tt.lastSeen, t0, tt.grace)
			if v != tt.want || !d.Equal(tt.deadline) {
				t.Errorf("Decide = %v %v, want %v %v", v, d, tt.want, tt.deadline)
			}
		})
	}
}

func msg(user, id string) Message {
	return Message{ID: id, User: user, Payload: []byte(id), QueuedAt: t0}
}

func ids(ms []Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func TestMachineReturnWithinGraceDelivers(t *testing.T) {
	tests := []struct {
		name     string
		seen     []Session
		live     []Session
		forwards []Forward
		waiting  bool // still held after Live
	}{
		{name: "offline user back on another node: forwarded there",
			live:     []Session{{"b", "phone", 2}},
			forwards: []Forward{{"b", msg("alice", "m1")}}},
		{name: "back on two nodes: one forward each, one per node",
			live:     []Session{{"b", "phone", 2}, {"b", "tab", 1}, {"c", "pc", 1}},
			forwards: []Forward{{"b", msg("alice", "m1")}, {"c", msg("alice", "m1")}}},
		{name: "back on this node: waits for its subscription",
			live: []Session{{"a", "phone", 2}}, waiting: true},
		{name: "back here and there: forwarded there, waits here too",
			live:     []Session{{"a", "phone", 2}, {"b", "pc", 1}},
			forwards: []Forward{{"b", msg("alice", "m1")}}, waiting: true},
		{name: "only the sessions that had it (a miss here): nothing new",
			seen: []Session{{"b", "pc", 1}}, live: []Session{{"b", "pc", 1}}, waiting: true},
		{name: "a new epoch of a session that had it is a return",
			seen: []Session{{"b", "pc", 1}}, live: []Session{{"b", "pc", 2}},
			forwards: []Forward{{"b", msg("alice", "m1")}}},
		{name: "still offline", waiting: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMachine("a", 4, 100)
			if ev, refused := m.Hold(msg("alice", "m1"), t0.Add(5*time.Second), tt.seen); ev != nil || refused {
				t.Fatalf("Hold: evicted %v refused %v", ev, refused)
			}
			got := m.Live("alice", tt.live)
			if !slices.EqualFunc(got, tt.forwards, func(a, b Forward) bool { return a.Node == b.Node && a.Msg.ID == b.Msg.ID }) {
				t.Errorf("forwards %v, want %v", got, tt.forwards)
			}
			if m.Waiting("alice") != tt.waiting || (m.Len() == 1) != tt.waiting {
				t.Errorf("waiting %v (len %d), want %v", m.Waiting("alice"), m.Len(), tt.waiting)
			}
			// The same sessions again send nothing twice.
			if again := m.Live("alice", tt.live); len(again) != 0 {
				t.Errorf("the same sessions again: forwards %v", again)
			}
		})
	}
}

func TestMachineDeadlines(t *testing.T) {
	m := NewMachine("a", 4, 100)
	m.Hold(msg("alice", "m1"), t0.Add(5*time.Second), nil)
	m.Hold(msg("alice", "m2"), t0.Add(7*time.Second), nil)
	m.Hold(msg("bob", "m3"), t0.Add(6*time.Second), nil)
	if n := m.Next(); !n.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("Next %v", n)
	}
	if d := m.Due(t0.Add(4 * time.Second)); len(d) != 0 {
		t.Fatalf("due early: %v", d)
	}
	if d := m.Due(t0.Add(6 * time.Second)); !slices.Equal(d, []string{"alice", "bob"}) {
		t.Fatalf("Due %v", d)
	}
	if got := ids(m.Expire("alice", t0.Add(6*time.Second))); !slices.Equal(got, []string{"m1"}) {
		t.Fatalf("Expire alice %v", got)
	}
	if m.Len() != 2 || !m.Waiting("alice") {
		t.Fatalf("len %d", m.Len())
	}
	if got := ids(m.Take("alice")); !slices.Equal(got, []string{"m2"}) {
		t.Fatalf("Take %v", got)
	}
	if got := ids(m.Expire("bob", t0.Add(6*time.Second))); !slices.Equal(got, []string{"m3"}) {
		t.Fatalf("Expire bob %v", got)
	}
	if m.Len() != 0 || m.Users() != 0 || !m.Next().IsZero() {
		t.Fatalf("left: len %d users %d next %v", m.Len(), m.Users(), m.Next())
	}
}

func TestMachineBounds(t *testing.T) {
	m := NewMachine("a", 2, 3)
	for _, id := range []string{"m1", "m2"} {
		if ev, refused := m.Hold(msg("alice", id), t0, nil); ev != nil || refused {
			t.Fatalf("%s: evicted %v refused %v", id, ev, refused)
		}
	}
	ev, refused := m.Hold(msg("alice", "m3"), t0, nil)
	if refused || !slices.Equal(ids(ev), []string{"m1"}) {
		t.Fatalf("over the user's bound: evicted %v refused %v, want m1 evicted", ids(ev), refused)
	}
	if _, refused := m.Hold(msg("bob", "m4"), t0, nil); refused {
		t.Fatal("bob refused below the limit")
	}
	if ev, refused := m.Hold(msg("carol", "m5"), t0, nil); !refused || ev != nil {
		t.Fatalf("over the limit: evicted %v refused %v, want refused", ev, refused)
	}
	if m.Len() != 3 || m.Users() != 2 {
		t.Fatalf("len %d users %d", m.Len(), m.Users())
	}
	if got := ids(m.Take("alice")); !slices.Equal(got, []string{"m2", "m3"}) {
		t.Fatalf("Take %v", got)
	}
}
