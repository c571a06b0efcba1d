package presence

import (
	"cmp"
	"time"
)

// A Sequencer turns a stream of users' aggregates (committed or shown, in
// any order, repeated, coalesced, reloaded) into lifecycle events: per
// client id in epoch order, each open and each end at most once, and the
// end of an epoch always before the open of the next. It is pure: no clock,
// no I/O; the caller serialises its calls.
//
// What it holds per user: the last version applied, and per client id the
// last epoch seen and whether it is open (with its view while it is, to
// describe an end that no change reported). Each Apply diffs that against
// the aggregate's live sessions and the sessions it says ended (Ended):
//
//   - an aggregate at or below the user's last version is ignored;
//   - an ended session of the client id's open epoch ends it, with its
//     reason and time; one of an epoch above (never seen opened) is opened
//     and ended, in that order;
//   - a live session of a new epoch opens; the open epoch it replaced, when
//     no ended session tells its end, ends as a takeover at the new one's
//     connect;
//   - an open session that is neither live nor ended in the aggregate
//     vanished (the change that ended it was missed and aged out of the
//     record): it ends with no reason, at the user's last seen (or since);
//   - whatever happened before the user's horizon (the Sequencer's start,
//     or, for a user it forgot, the latest time given to Forget) is base
//     state: a session opened before it is held open without an event, and
//     an end before it is not told.
//
// The events of one Apply are in time order (then epoch, an end before an
// open), each client id's in its own order whatever the times say.
type Sequencer struct {
	start time.Time
	floor time.Time // the latest before given to Forget: the horizon of users seen again
	users map[string]*seqUser
}

// maxSeqClients bounds the ended client ids a user keeps; the oldest go
// first, and their epochs are remembered as one floor below which an
// unknown client id's end is old news.
const maxSeqClients = 64

type seqUser struct {
	version  uint64
	horizon  time.Time
	offline  bool
	lastSeen time.Time
	floor    uint64 // epochs at or below: of client ids pruned, or older
	clients  map[string]*seqClient
	ended    int // client ids in clients that are not open
}

type seqClient struct {
	epoch uint64
	open  bool
	view  SessionView // while open
}

// NewSequencer returns a Sequencer that tells what happens from start on:
// what it first learns of a user from before start is base state.
func NewSequencer(start time.Time) *Sequencer {
	return &Sequencer{start: start, users: make(map[string]*seqUser)}
}

// Len returns how many users the Sequencer holds.
func (q *Sequencer) Len() int { return len(q.users) }

// Forget drops the users whose last aggregate was offline and last seen
// before before, and returns how many. A user seen again after is new, with
// before as its horizon: what its record still lists from before then is
// not told twice.
func (q *Sequencer) Forget(before time.Time) int {
	if before.After(q.floor) {
		q.floor = before
	}
	n := 0
	for name, u := range q.users {
		if u.offline && u.lastSeen.Before(before) {
			delete(q.users, name)
			n++
		}
	}
	return n
}

// seqFact is what one aggregate says of one epoch of a client id.
type seqFact struct {
	epoch uint64
	live  *SessionView
	ended *EndedView
}

// Apply takes a user's aggregate and returns the lifecycle events it
// implies, oldest first (nil when none, or when a is not newer).
func (q *Sequencer) Apply(a Aggregate) []LifecycleEvent {
	u := q.users[a.User]
	if u == nil {
		u = &seqUser{horizon: q.start, clients: make(map[string]*seqClient)}
		if q.floor.After(u.horizon) {
			u.horizon = q.floor
		}
		q.users[a.User] = u
	} else if a.Version <= u.version {
		return nil
	}
	u.version = a.Version
	u.offline = len(a.Sessions) == 0
	u.lastSeen = a.LastSeen

	// What the aggregate says, by client id.
	facts := make(map[string][]seqFact, len(a.Sessions)+len(a.Ended))
	for i := range a.Sessions {
		s := &a.Sessions[i]
		facts[s.ID] = append(facts[s.ID], seqFact{epoch: s.Epoch, live: s})
	}
	for i := range a.Ended {
		x := &a.Ended[i]
		facts[x.ID] = append(facts[x.ID], seqFact{epoch: x.Epoch, ended: x})
	}
	unknownAt := a.LastSeen
	if unknownAt.IsZero() {
		unknownAt = a.Since
	}

	var lists [][]LifecycleEvent
	emit := func(evs []LifecycleEvent, e LifecycleEvent) []LifecycleEvent {
		if e.At.Before(u.horizon) {
			return evs // base state
		}
		e.User, e.Version = a.User, a.Version
		return append(evs, e)
	}
	for id, fs := range facts {
		c := u.clients[id]
		sortFacts(fs)
		var evs []LifecycleEvent
		for _, f := range fs {
			if c == nil {
				if f.live == nil && f.epoch <= u.floor {
					continue // an end older than what was pruned: told already, or too old
				}
				c = &seqClient{}
				u.clients[id] = c
				u.ended++
			}
			switch {
			case f.epoch < c.epoch:
				// older than what this client id is at: told, or superseded
			case f.epoch == c.epoch:
				switch {
				case f.ended != nil && c.open:
					evs = emit(evs, endEvent(*f.ended, unknownAt))
					u.close(c)
				case f.live != nil && c.open:
					c.view = *f.live // its latest status and device, for an end nobody reports
				}
			default: // a new epoch
				view := f.view()
				if c.open {
					// Replaced without a word of its end (that epoch's own
					// end, when reported, sorts before this fact).
					evs = emit(evs, LifecycleEvent{Kind: LifecycleDisconnected, Session: c.view, Reason: EndTakeover, At: view.ConnectedAt})
					u.close(c)
				}
				c.epoch = f.epoch
				evs = emit(evs, LifecycleEvent{Kind: LifecycleConnected, Session: view, At: view.ConnectedAt})
				if f.ended != nil {
					evs = emit(evs, endEvent(*f.ended, unknownAt))
				} else {
					u.open(c, view)
				}
			}
		}
		if len(evs) > 0 {
			lists = append(lists, evs)
		}
	}
	// Open sessions the aggregate neither lists live nor ended: vanished.
	for id, c := range u.clients {
		if !c.open {
			continue
		}
		if _, said := facts[id]; said {
			continue
		}
		view := c.view
		u.close(c)
		at := unknownAt
		if at.Before(view.ConnectedAt) {
			at = view.ConnectedAt
		}
		if ev := emit(nil, LifecycleEvent{Kind: LifecycleDisconnected, Session: view, At: at}); len(ev) > 0 {
			lists = append(lists, ev)
		}
	}
	u.prune()
	return mergeEvents(lists)
}

// view is the session the fact describes.
func (f seqFact) view() SessionView {
	if f.ended != nil {
		return f.ended.SessionView
	}
	return *f.live
}

// sortFacts orders one client id's facts by epoch, an end before a live
// session of the same epoch (both cannot be true; the end wins).
func sortFacts(fs []seqFact) {
	for i := 1; i < len(fs); i++ { // few: insertion sort, stable
		for j := i; j > 0 && factLess(fs[j], fs[j-1]); j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}

func factLess(a, b seqFact) bool {
	if a.epoch != b.epoch {
		return a.epoch < b.epoch
	}
	return a.ended != nil && b.ended == nil
}

func endEvent(x EndedView, unknownAt time.Time) LifecycleEvent {
	at := x.EndedAt
	if at.IsZero() {
		at = unknownAt
		if at.Before(x.ConnectedAt) {
			at = x.ConnectedAt
		}
	}
	return LifecycleEvent{Kind: LifecycleDisconnected, Session: x.SessionView, Reason: x.Reason, At: at}
}

func (u *seqUser) open(c *seqClient, v SessionView) {
	if !c.open {
		u.ended--
	}
	c.open, c.view = true, v
}

func (u *seqUser) close(c *seqClient) {
	if c.open {
		u.ended++
	}
	c.open, c.view = false, SessionView{}
}

// prune drops the oldest ended client ids above maxSeqClients, raising the
// floor to their epochs.
func (u *seqUser) prune() {
	for u.ended > maxSeqClients {
		var oldest string
		var min uint64
		for id, c := range u.clients {
			if !c.open && (oldest == "" || c.epoch < min) {
				oldest, min = id, c.epoch
			}
		}
		delete(u.clients, oldest)
		u.ended--
		u.floor = max(u.floor, min)
	}
}

// mergeEvents merges per-client-id lists, each in its own order, into one
// in time order (then epoch, an end before an open, client id), never
// reordering a list.
func mergeEvents(lists [][]LifecycleEvent) []LifecycleEvent {
	switch len(lists) {
	case 0:
		return nil
	case 1:
		return lists[0]
	}
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]LifecycleEvent, 0, n)
	for len(out) < n {
		best := -1
		for i, l := range lists {
			if len(l) > 0 && (best < 0 || eventLess(l[0], lists[best][0])) {
				best = i
			}
		}
		out = append(out, lists[best][0])
		lists[best] = lists[best][1:]
	}
	return out
}

func eventLess(a, b LifecycleEvent) bool {
	if c := a.At.Compare(b.At); c != 0 {
		return c < 0
	}
	if a.Session.Epoch != b.Session.Epoch {
		return a.Session.Epoch < b.Session.Epoch
	}
	if a.Kind != b.Kind {
		return a.Kind == LifecycleDisconnected
	}
	return cmp.Less(a.Session.ID, b.Session.ID)
}
