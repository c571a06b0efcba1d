package presence

import "time"

// Liveness of nodes, shared by every node of a deployment.
//
// Each run of a node is an incarnation. A node keeps a record naming its
// live incarnation and refreshes it, pushing the incarnation's deadline a
// node_ttl ahead in the same refresh; the sessions of an incarnation whose
// deadline passed and whose record is gone, or names another incarnation,
// are swept: ended as node_lost by whichever node sees it first.

// Sweep is what to do about one incarnation that may hold sessions.
type Sweep uint8

// The answers of SweepDecision.
const (
	KeepIncarnation  Sweep = iota // its record names it: the node is alive
	WaitIncarnation               // replaced by a restart: give its devices time to move over
	SweepIncarnation              // gone: end its sessions
)

// SweepDecision decides about incarnation inc given the incarnation its
// node's record names now (live; "" when the record is gone). A record
// that names another incarnation means the node restarted: its devices are
// reconnecting, and each new session takes the old one over in the same
// step, so sweeping at once would show them offline in between. Such an
// incarnation is swept only once grace has passed since a sweeper first saw
// it replaced (seen; zero when this is the first time): the returned time
// is what to remember as seen. Only the sweeper's own clock is compared
// with itself, never another node's.
//
// A record that is gone means its node stopped refreshing it: dead, so
// its sessions are swept at once, unless the sweeper has doubt: Redis
// failed over lately (a master died, or the sweeper could not reach it), so
// the record may have expired because the node could not reach Redis, or
// been lost with a master that died before its replica had it. A live node
// writes its record again within one refresh of Redis answering it, so a
// gone record in doubt waits for grace like a replaced one.
func SweepDecision(inc, live string, doubt bool, seen, now time.Time, grace time.Duration) (Sweep, time.Time) {
	switch {
	case live == inc:
		return KeepIncarnation, time.Time{}
	case live == "" && !doubt && seen.IsZero():
		return SweepIncarnation, time.Time{}
	case seen.IsZero():
		return WaitIncarnation, now
	case now.Sub(seen) >= grace:
		return SweepIncarnation, time.Time{}
	}
	return WaitIncarnation, seen
}

// Overdue is an incarnation whose deadline has passed, as a sweeper found
// it: Member names it (what the sweeper remembers it by), Live is the
// incarnation its node's record names now ("" when the record is gone).
//
// Every live incarnation pushes its deadline a node_ttl ahead each time it
// refreshes its record, so a sweeper asks the store only for the overdue
// ones, almost always none, instead of reading every node's record.
type Overdue struct {
	Member, Inc, Live string
}

// SweepOverdue decides about every overdue incarnation with SweepDecision,
// doubt being the sweeper's, and returns those to sweep now and what to
// remember as seen from now on (seen is not modified). An incarnation that
// is no longer overdue (its node refreshed: its deadline moved ahead) is
// forgotten when the list is complete (not cut at a limit), so that a wait
// begun in one failover is not counted in the next one.
func SweepOverdue(overdue []Overdue, complete, doubt bool, seen map[string]time.Time, now time.Time, grace time.Duration) ([]Overdue, map[string]time.Time) {
	next := make(map[string]time.Time, len(seen))
	if !complete {
		for m, t := range seen {
			next[m] = t
		}
	}
	var sweep []Overdue
	for _, o := range overdue {
		decision, s := SweepDecision(o.Inc, o.Live, doubt, seen[o.Member], now, grace)
		delete(next, o.Member)
		if !s.IsZero() {
			next[o.Member] = s
		}
		if decision == SweepIncarnation {
			sweep = append(sweep, o)
		}
	}
	return sweep, next
}
