package publisher

import (
	"container/heap"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presenced/presenced/presence"
)

// Pacer stands between the store's feed and the publisher. For each user
// it holds back a change that would only blink (presence.Pacing: the
// offline grace, the disconnect debounce, the flap grace, the dwell), and
// it publishes what is ready at a bounded rate per node, coalesced per
// user (a newer change replaces a waiting one in its place), in the order
// users became ready, so that a storm is a swell and one hot user cannot
// starve the others. Every node runs one on the same feed, so every node
// shows the same.
//
// Its methods are called from one goroutine (the pump); Holds, Hold,
// Flapping and the Stats may be read from any. The lock is never held
// while publishing.
type Pacer struct {
	rules presence.Pacing
	out   Shower
	rate  float64 // publishes per second; 0: no limit
	burst float64

	mu     sync.Mutex
	paces  map[string]presence.Pace // users with something held, or recent ends
	dues   dueHeap                  // held users by due time (stale entries skipped)
	ready  map[string]presence.Aggregate
	order  []string // users in ready, first ready first
	tokens float64
	filled time.Time // when tokens was last topped up
	swept  time.Time

	Stats PacerStats
}

// PacerStats are counts read with atomic loads.
type PacerStats struct {
	Held      atomic.Int64 // changes held back
	Hidden    atomic.Int64 // held changes replaced by another status before they were shown: blinks no observer saw
	Released  atomic.Int64 // held changes shown at their due time
	Coalesced atomic.Int64 // ready changes replaced by a newer one before the rate limit let them out
	Holding   atomic.Int64 // users with a change held now
	Queued    atomic.Int64 // users whose change waits for the rate limit now
	MaxQueued atomic.Int64 // the most users that ever waited for the rate limit at once
}

// Shower is where the pacer's decisions go (the Publisher): what observers
// were shown of a user, and the change to show them now.
type Shower interface {
	Shown(user string) presence.Shown
	Publish(a presence.Aggregate)
}

// NewPacer returns a pacer that shows changes through out at most rate a
// second (bursts of burst; rate 0: no limit).
func NewPacer(rules presence.Pacing, rate, burst int, out Shower) *Pacer {
	if burst < 1 {
		burst = 1
	}
	return &Pacer{rules: rules, out: out, rate: float64(rate), burst: float64(burst),
		paces: make(map[string]presence.Pace), ready: make(map[string]presence.Aggregate), tokens: float64(burst)}
}

// shown is what observers were shown of user, or will be once the rate
// limit lets its waiting change out. Called with mu held.
func (q *Pacer) shown(user string) presence.Shown {
	if a, ok := q.ready[user]; ok {
		return a.Shown()
	}
	return q.out.Shown(user)
}

// Offer takes a committed change, made by c, at now. Call Run after.
func (q *Pacer) Offer(a presence.Aggregate, c presence.Cause, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	before := q.paces[a.User]
	p, show := q.rules.Offer(before, q.shown(a.User), a, c, now)
	if before.Holding() && p.Held.Version != before.Held.Version && q.hides(before.Held.Status, p, show) {
		q.Stats.Hidden.Add(1)
	}
	if p.Holding() && p.Held.Version != before.Held.Version {
		q.Stats.Held.Add(1)
		if !before.Holding() || !p.Due.Equal(before.Due) {
			heap.Push(&q.dues, due{at: p.Due, user: a.User})
		}
	}
	q.keep(a.User, before, p, now)
	if show.Version != 0 {
		q.enqueue(show)
	}
}

// hides reports whether a held change of status held, replaced by what p
// holds or show shows, was a blink no observer will see: the status that
// replaces it differs (a newer change of the same status, a new text, say,
// only updates it).
func (q *Pacer) hides(held presence.Status, p presence.Pace, show presence.Aggregate) bool {
	switch {
	case show.Version != 0:
		return show.Status != held
	case p.Holding():
		return p.Held.Status != held
	}
	return false
}

// keep stores p, user's pace that was before, or forgets it when it holds
// nothing that matters.
func (q *Pacer) keep(user string, before, p presence.Pace, now time.Time) {
	if q.rules.Dormant(p, now) {
		delete(q.paces, user)
	} else {
		q.paces[user] = p
	}
	switch {
	case p.Holding() && !before.Holding():
		q.Stats.Holding.Add(1)
	case !p.Holding() && before.Holding():
		q.Stats.Holding.Add(-1)
	}
}

// enqueue makes a ready: in its user's place when one waits already.
func (q *Pacer) enqueue(a presence.Aggregate) {
	if prev, ok := q.ready[a.User]; ok {
		q.Stats.Coalesced.Add(1)
		if len(prev.Ended) > 0 { // the sessions the replaced change ended go on with a
			a.Ended, _ = presence.MergeEnded(prev.Ended, a.Ended, presence.MaxEndedCarried)
		}
	} else {
		q.order = append(q.order, a.User)
	}
	q.ready[a.User] = a
	n := int64(len(q.ready))
	q.Stats.Queued.Store(n)
	if n > q.Stats.MaxQueued.Load() {
		q.Stats.MaxQueued.Store(n)
	}
}

// Run shows the held changes whose time has come at now, and publishes
// the ready ones the rate allows. It returns when to run again (zero:
// nothing is waiting).
func (q *Pacer) Run(now time.Time) time.Time {
	q.mu.Lock()
	for q.dues.Len() > 0 && !q.dues[0].at.After(now) {
		d := heap.Pop(&q.dues).(due)
		p, ok := q.paces[d.user]
		if !ok || !p.Holding() || !p.Due.Equal(d.at) {
			continue // replaced since
		}
		after, show := q.rules.Release(p, q.shown(d.user), now)
		q.keep(d.user, p, after, now)
		if show.Version != 0 {
			q.Stats.Released.Add(1)
			q.enqueue(show)
		}
	}
	if now.Sub(q.swept) >= time.Second {
		q.sweep(now)
	}
	out := q.take(now)
	next := q.next(now)
	q.mu.Unlock()
	for _, a := range out {
		q.out.Publish(a)
	}
	return next
}

// take removes from ready what the rate allows at now, first ready first.
func (q *Pacer) take(now time.Time) []presence.Aggregate {
	if len(q.order) == 0 {
		return nil
	}
	n := len(q.order)
	if q.rate > 0 {
		if !q.filled.IsZero() {
			q.tokens = min(q.burst, q.tokens+now.Sub(q.filled).Seconds()*q.rate)
		}
		q.filled = now
		n = min(n, int(q.tokens))
		q.tokens -= float64(n)
	}
	out := make([]presence.Aggregate, 0, n)
	for _, u := range q.order[:n] {
		out = append(out, q.ready[u])
		delete(q.ready, u)
	}
	q.order = append(q.order[:0], q.order[n:]...)
	q.Stats.Queued.Store(int64(len(q.ready)))
	return out
}

// next is when Run has work again: the first due time, or the next token
// while changes wait for one.
func (q *Pacer) next(now time.Time) time.Time {
	var t time.Time
	if q.dues.Len() > 0 {
		t = q.dues[0].at
	}
	if len(q.order) > 0 {
		wait := now
		if q.rate > 0 && q.tokens < 1 {
			wait = now.Add(time.Duration((1 - q.tokens) / q.rate * float64(time.Second)))
		}
		if t.IsZero() || wait.Before(t) {
			t = wait
		}
	}
	return t
}

// sweep forgets the paces that hold nothing that matters any more.
func (q *Pacer) sweep(now time.Time) {
	q.swept = now
	for u, p := range q.paces {
		if q.rules.Dormant(p, now) {
			delete(q.paces, u)
		}
	}
}

// Hold is a change held back, as the admin API shows it.
type Hold struct {
	User     string             `json:"user"`
	Shown    presence.Status    `json:"shown"`  // what observers see meanwhile
	Status   presence.Status    `json:"status"` // what they will see, unless something newer comes first
	Version  uint64             `json:"version"`
	Until    time.Time          `json:"until"`
	Reason   presence.EndReason `json:"reason,omitempty"` // the end that made the change
	Flapping bool               `json:"flapping"`
}

// Hold returns what is held of user at now.
func (q *Pacer) Hold(user string, now time.Time) (Hold, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	p, ok := q.paces[user]
	if !ok || !p.Holding() {
		return Hold{}, false
	}
	return q.hold(user, p, now), true
}

func (q *Pacer) hold(user string, p presence.Pace, now time.Time) Hold {
	return Hold{User: user, Shown: q.shown(user).Status, Status: p.Held.Status, Version: p.Held.Version,
		Until: p.Due, Reason: p.HeldCause.Ended, Flapping: q.rules.Flapping(p, now)}
}

// Holds returns every change held at now, and the users who flap, by user.
func (q *Pacer) Holds(now time.Time) (held []Hold, flapping []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for u, p := range q.paces {
		if p.Holding() {
			held = append(held, q.hold(u, p, now))
		}
		if q.rules.Flapping(p, now) {
			flapping = append(flapping, u)
		}
	}
	sort.Slice(held, func(i, j int) bool { return held[i].User < held[j].User })
	sort.Strings(flapping)
	return held, flapping
}

// due is when a user's held change is shown.
type due struct {
	at   time.Time
	user string
}

type dueHeap []due

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(due)) }
func (h *dueHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}

// Drop forgets what the pacer holds of users (nobody on this node shows
// them any more): a held change, a change waiting for the rate, the recent
// ends. Their stale due times are skipped when they come up.
func (q *Pacer) Drop(users []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	dropped := false
	for _, u := range users {
		if p, ok := q.paces[u]; ok {
			if p.Holding() {
				q.Stats.Holding.Add(-1)
			}
			delete(q.paces, u)
		}
		if _, ok := q.ready[u]; ok {
			delete(q.ready, u)
			dropped = true
		}
	}
	if dropped {
		q.order = slices.DeleteFunc(q.order, func(u string) bool { _, ok := q.ready[u]; return !ok })
		q.Stats.Queued.Store(int64(len(q.ready)))
	}
}
