package sparkplug

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func newTestEdges(max int) *Edges {
	return NewEdges(EdgesOptions{Max: max, ForgetAfter: time.Hour, LogEvery: time.Minute})
}

// The stale-death rule: the death of an earlier connection (its will,
// late) carries the bdSeq of the birth before; the live one matches.
func TestEdgesStaleDeath(t *testing.T) {
	s := newTestEdges(10)
	e1 := EdgeKey{"G", "E1"}
	connA, connB := "conn-a", "conn-b"
	if d := s.Death(e1, 0, true, at(0)); d.Verdict != DeathUnknown {
		t.Fatalf("death before any birth: %v", d.Verdict)
	}
	s.Birth(e1, connA, 0, true, at(time.Second))
	s.Birth(e1, connB, 1, true, at(2*time.Second)) // reconnected, new bdSeq
	d := s.Death(e1, 0, true, at(3*time.Second))   // conn A's will, late
	if d.Verdict != DeathStale || d.Live != 1 || !d.Log || d.Held != 0 {
		t.Fatalf("late will: %+v, want stale against 1, logged", d)
	}
	s.Ended(connA, at(3*time.Second)) // A's connection ended: it owns no birth now
	if d := s.Death(e1, 1, true, at(4*time.Second)); d.Verdict != DeathLive || d.Live != 1 {
		t.Fatalf("matching death: %+v", d)
	}
	// A duplicate of the live death is no stale one.
	if d := s.Death(e1, 1, true, at(5*time.Second)); d.Verdict != DeathLive {
		t.Fatalf("repeated death: %+v", d)
	}
	// A death without a bdSeq, or of an edge whose birth had none: unknown.
	if d := s.Death(e1, 0, false, at(6*time.Second)); d.Verdict != DeathUnknown {
		t.Fatalf("death without bdSeq: %+v", d)
	}
	e2 := EdgeKey{"G", "E2"}
	s.Birth(e2, connA, 0, false, at(7*time.Second))
	if d := s.Death(e2, 5, true, at(8*time.Second)); d.Verdict != DeathUnknown {
		t.Fatalf("death after a birth without bdSeq: %+v", d)
	}
	// Same edge node id in another group is another edge node.
	if d := s.Death(EdgeKey{"H", "E1"}, 0, true, at(9*time.Second)); d.Verdict != DeathUnknown {
		t.Fatalf("other group: %+v", d)
	}
}

// A stale death is logged once per edge node per LogEvery; the rest are
// counted as held back.
func TestEdgesStaleLogLimit(t *testing.T) {
	s := newTestEdges(10)
	e := EdgeKey{"G", "E"}
	s.Birth(e, "c", 2, true, at(0))
	var logs []Death
	for i := range 5 {
		if d := s.Death(e, 1, true, at(time.Duration(i)*20*time.Second)); d.Log {
			logs = append(logs, d)
		}
	}
	// At 0s, 20s, 40s, 60s, 80s: logged at 0s and 60s, two held back between.
	if len(logs) != 2 || logs[0].Held != 0 || logs[1].Held != 2 {
		t.Fatalf("logs %+v, want 2 (held 0, then 2)", logs)
	}
	other := EdgeKey{"G", "F"}
	s.Birth(other, "d", 2, true, at(0))
	if d := s.Death(other, 1, true, at(90*time.Second)); !d.Log {
		t.Fatalf("another edge node's first stale death not logged")
	}
}

// An edge node dead long enough is forgotten; its connection's end counts
// as its death.
func TestEdgesForget(t *testing.T) {
	s := newTestEdges(10)
	a, b := EdgeKey{"G", "A"}, EdgeKey{"G", "B"}
	s.Birth(a, "ca", 0, true, at(0))
	s.Birth(b, "cb", 0, true, at(0))
	s.Death(a, 0, true, at(time.Minute)) // dead by its NDEATH
	s.Ended("cb", at(2*time.Minute))     // dead by its connection's end
	if n := s.Forget(at(time.Hour)); n != 0 || s.Len() != 2 {
		t.Fatalf("forgot %d before the hour (len %d)", n, s.Len())
	}
	if n := s.Forget(at(time.Hour + time.Minute)); n != 1 || s.Len() != 1 {
		t.Fatalf("forgot %d at 1h1m, want A (len %d)", n, s.Len())
	}
	// B born again before its hour: alive, not forgotten.
	s.Birth(b, "cb2", 1, true, at(time.Hour+90*time.Second))
	if n := s.Forget(at(10 * time.Hour)); n != 0 || s.Len() != 1 {
		t.Fatalf("forgot %d of a live edge node (len %d)", n, s.Len())
	}
	// A late will of A after it was forgotten is unknown, delivered.
	if d := s.Death(a, 7, true, at(10*time.Hour)); d.Verdict != DeathUnknown {
		t.Fatalf("forgotten edge: %+v", d)
	}
	if len(s.byOwner) != 1 {
		t.Fatalf("owners kept: %v", s.byOwner)
	}
}

// The state is bounded: at Max, a new edge node takes the place of the
// longest dead one, or is not tracked when every one is alive.
func TestEdgesBounded(t *testing.T) {
	s := newTestEdges(2)
	a, b, c := EdgeKey{"G", "A"}, EdgeKey{"G", "B"}, EdgeKey{"G", "C"}
	s.Birth(a, "ca", 0, true, at(0))
	s.Birth(b, "cb", 0, true, at(0))
	if tracked, _ := s.Birth(c, "cc", 0, true, at(time.Second)); tracked || s.Len() != 2 {
		t.Fatalf("a third edge node tracked at Max 2 (len %d)", s.Len())
	}
	if d := s.Death(c, 5, true, at(2*time.Second)); d.Verdict != DeathUnknown {
		t.Fatalf("untracked edge node judged: %+v", d)
	}
	s.Ended("cb", at(3*time.Second))
	s.Ended("ca", at(4*time.Second))
	tracked, evicted := s.Birth(c, "cc", 0, true, at(5*time.Second))
	if !tracked || evicted != 1 || s.Len() != 2 {
		t.Fatalf("tracked %v, evicted %d, len %d; want B evicted for C", tracked, evicted, s.Len())
	}
	if d := s.Death(b, 9, true, at(6*time.Second)); d.Verdict != DeathUnknown {
		t.Fatalf("B was evicted, not A (the longest dead): %+v", d)
	}
	if d := s.Death(a, 9, true, at(6*time.Second)); d.Verdict != DeathStale {
		t.Fatalf("A kept: %+v", d)
	}
}
