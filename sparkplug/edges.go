package sparkplug

import (
	"container/list"
	"time"
)

// EdgeKey names an edge node: its group and its edge node id.
type EdgeKey struct{ Group, Edge string }

// Verdict is what an NDEATH is, against the edge node's live birth.
type Verdict int

// The verdicts.
const (
	// DeathUnknown: nothing to compare with (no birth seen, a birth or a
	// death without a bdSeq, or an edge node not tracked): delivered as is.
	DeathUnknown Verdict = iota
	// DeathLive: the bdSeq of the edge node's latest NBIRTH.
	DeathLive
	// DeathStale: another bdSeq, the death of an earlier connection.
	DeathStale
)

// String names the verdict.
func (v Verdict) String() string {
	switch v {
	case DeathLive:
		return "live"
	case DeathStale:
		return "stale"
	}
	return "unknown"
}

// Death is what Edges.Death decided of an NDEATH.
type Death struct {
	Verdict Verdict
	Live    uint64 // the live birth's bdSeq (DeathStale, DeathLive)
	// Log: a stale death to log now (at most one per edge node per
	// EdgesOptions.LogEvery), with Held more held back since the last one.
	Log  bool
	Held int64
}

// EdgesOptions bound Edges.
type EdgesOptions struct {
	Max         int           // edge nodes tracked; a birth of one more evicts the longest dead, or is not tracked
	ForgetAfter time.Duration // an edge node dead (an NDEATH of its birth, or its connection ended) this long is forgotten
	LogEvery    time.Duration // one stale death logged per edge node per this
}

// Edges is the state of the edge nodes that published an NBIRTH on this
// node: the bdSeq of each one's latest birth, which connection published it,
// and whether it has died since. It is pure (every time is an argument) and
// not safe for concurrent use: its owner locks.
type Edges struct {
	o       EdgesOptions
	m       map[EdgeKey]*edge
	dead    *list.List      // *edge, oldest death first
	byOwner map[any][]*edge // the live edges each connection published the birth of

	forgotten int64 // edge nodes forgotten or evicted, in all
}

type edge struct {
	key     EdgeKey
	bdSeq   uint64
	known   bool // bdSeq read from the birth
	owner   any  // the connection that published the birth; nil once it ended
	deadAt  time.Time
	inDead  *list.Element // in Edges.dead while dead
	lastLog time.Time
	held    int64
}

// NewEdges returns empty state.
func NewEdges(o EdgesOptions) *Edges {
	return &Edges{o: o, m: make(map[EdgeKey]*edge), dead: list.New(), byOwner: make(map[any][]*edge)}
}

// Len is how many edge nodes are tracked.
func (s *Edges) Len() int { return len(s.m) }

// Forgotten is how many edge nodes were forgotten (Forget) or evicted for
// a new one, in all.
func (s *Edges) Forgotten() int64 { return s.forgotten }

// Birth records an NBIRTH of key at now, published by owner (a
// connection, compared with ==), with its bdSeq when has. It reports
// whether the edge node is tracked (false: Max are, none of them dead) and
// how many were forgotten or evicted to make room.
func (s *Edges) Birth(key EdgeKey, owner any, bdSeq uint64, has bool, now time.Time) (tracked bool, forgotten int) {
	forgotten = s.Forget(now)
	e := s.m[key]
	if e == nil {
		if s.o.Max > 0 && len(s.m) >= s.o.Max {
			front := s.dead.Front()
			if front == nil {
				return false, forgotten
			}
			s.remove(front.Value.(*edge))
			forgotten++
		}
		e = &edge{key: key}
		s.m[key] = e
	}
	s.revive(e)
	s.setOwner(e, owner)
	e.bdSeq, e.known = bdSeq, has
	return true, forgotten
}

// Death judges an NDEATH of key at now, with its bdSeq when has: stale
// when the edge node's latest birth had another bdSeq. A live death marks
// the edge node dead.
func (s *Edges) Death(key EdgeKey, bdSeq uint64, has bool, now time.Time) Death {
	s.Forget(now)
	e := s.m[key]
	if e == nil || !e.known || !has {
		return Death{Verdict: DeathUnknown}
	}
	if bdSeq == e.bdSeq {
		s.die(e, now)
		return Death{Verdict: DeathLive, Live: e.bdSeq}
	}
	d := Death{Verdict: DeathStale, Live: e.bdSeq}
	if e.lastLog.IsZero() || now.Sub(e.lastLog) >= s.o.LogEvery {
		d.Log, d.Held = true, e.held
		e.lastLog, e.held = now, 0
	} else {
		e.held++
	}
	return d
}

// Ended records that owner's connection ended at now: the edge nodes whose
// live birth it published are dead from now (an NDEATH may still come, as
// its will).
func (s *Edges) Ended(owner any, now time.Time) {
	for _, e := range s.byOwner[owner] {
		e.owner = nil
		s.die(e, now)
	}
	delete(s.byOwner, owner)
}

// Forget drops the edge nodes dead since before now - ForgetAfter, and
// reports how many.
func (s *Edges) Forget(now time.Time) int {
	n := 0
	for f := s.dead.Front(); f != nil; f = s.dead.Front() {
		e := f.Value.(*edge)
		if now.Sub(e.deadAt) < s.o.ForgetAfter {
			break
		}
		s.remove(e)
		n++
	}
	return n
}

// die marks e dead at now, unless it is already.
func (s *Edges) die(e *edge, now time.Time) {
	if e.inDead != nil {
		return
	}
	e.deadAt = now
	e.inDead = s.dead.PushBack(e)
}

// revive takes e off the dead list.
func (s *Edges) revive(e *edge) {
	if e.inDead != nil {
		s.dead.Remove(e.inDead)
		e.inDead = nil
	}
}

// setOwner moves e to owner's list of edges.
func (s *Edges) setOwner(e *edge, owner any) {
	if e.owner == owner {
		return
	}
	s.unown(e)
	e.owner = owner
	if owner != nil {
		s.byOwner[owner] = append(s.byOwner[owner], e)
	}
}

// unown takes e off its owner's list.
func (s *Edges) unown(e *edge) {
	if e.owner == nil {
		return
	}
	list := s.byOwner[e.owner]
	for i, x := range list {
		if x == e {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(s.byOwner, e.owner)
	} else {
		s.byOwner[e.owner] = list
	}
	e.owner = nil
}

// remove forgets e.
func (s *Edges) remove(e *edge) {
	s.forgotten++
	s.revive(e)
	s.unown(e)
	delete(s.m, e.key)
}
