package publisher

import (
	"fmt"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// pacerRig is a pacer over a real publisher, on a fake clock.
type pacerRig struct {
	t     *testing.T
	now   time.Time
	pub   *Publisher
	q     *Pacer
	shown []presence.Aggregate
	ver   map[string]uint64
}

func newPacerRig(t *testing.T, rules presence.Pacing, rate, burst int) *pacerRig {
	r := &pacerRig{t: t, now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), ver: map[string]uint64{}}
	r.pub = New(Options{Prefix: "presence", Broker: &sink{}, Log: nil, Published: func(a presence.Aggregate, _ presence.Shown) {
		r.shown = append(r.shown, a)
	}})
	r.q = NewPacer(rules, rate, burst, r.pub)
	return r
}

func (r *pacerRig) offer(user string, st presence.Status, c presence.Cause) {
	r.ver[user]++
	r.q.Offer(presence.Aggregate{User: user, Status: st, Version: r.ver[user], Since: r.now}, c, r.now)
	r.q.Run(r.now)
}

func (r *pacerRig) advance(d time.Duration) { r.now = r.now.Add(d); r.q.Run(r.now) }

func (r *pacerRig) statuses(user string) []presence.Status {
	var out []presence.Status
	for _, a := range r.shown {
		if a.User == user {
			out = append(out, a.Status)
		}
	}
	return out
}

func TestPacerHoldsAndReleases(t *testing.T) {
	net := presence.Cause{Ended: presence.EndNetwork}
	r := newPacerRig(t, presence.Pacing{Grace: 5 * time.Second, Debounce: time.Second}, 0, 0)
	r.offer("alice", presence.Online, presence.Cause{})
	r.offer("alice", presence.Offline, net)
	if h, ok := r.q.Hold("alice", r.now); !ok || h.Status != presence.Offline || h.Shown != presence.Online || h.Reason != presence.EndNetwork {
		t.Fatalf("hold: %+v %v", h, ok)
	}
	if r.q.Stats.Holding.Load() != 1 {
		t.Fatalf("holding %d", r.q.Stats.Holding.Load())
	}
	r.advance(2 * time.Second)
	r.offer("alice", presence.Online, presence.Cause{}) // back within the grace
	r.advance(10 * time.Second)
	if got := r.statuses("alice"); fmt.Sprint(got) != "[online online]" {
		t.Fatalf("shown %v", got)
	}
	if r.q.Stats.Hidden.Load() != 1 || r.q.Stats.Holding.Load() != 0 {
		t.Fatalf("hidden %d holding %d", r.q.Stats.Hidden.Load(), r.q.Stats.Holding.Load())
	}
	// The second online keeps the first one's since: observers saw no change.
	if !r.shown[1].Since.Equal(r.shown[0].Since) {
		t.Fatalf("since moved: %v then %v", r.shown[0].Since, r.shown[1].Since)
	}
	r.offer("alice", presence.Offline, net)
	r.offer("alice", presence.Offline, presence.Cause{}) // a new text while held: no blink hidden
	if r.q.Stats.Hidden.Load() != 1 {
		t.Fatalf("hidden %d after a same-status replacement, want still 1", r.q.Stats.Hidden.Load())
	}
	r.advance(4 * time.Second)
	if _, ok := r.q.Hold("alice", r.now); !ok {
		t.Fatal("not held within the grace")
	}
	r.advance(time.Second)
	if got := r.statuses("alice"); fmt.Sprint(got) != "[online online offline]" {
		t.Fatalf("shown %v", got)
	}
	if r.q.Stats.Released.Load() != 1 {
		t.Fatalf("released %d", r.q.Stats.Released.Load())
	}
	if next := r.q.Run(r.now); !next.IsZero() {
		t.Fatalf("work left at %v", next)
	}
}

// A storm is a swell: at most rate changes a second get out, a newer change
// of a waiting user replaces it in its place, one hot user cannot starve
// the others, and the final state of every user gets out.
func TestPacerRateLimitAndCoalescing(t *testing.T) {
	r := newPacerRig(t, presence.Pacing{}, 100, 10)
	for i := range 50 {
		r.offer(fmt.Sprintf("u%02d", i), presence.Online, presence.Cause{})
	}
	if len(r.shown) != 10 {
		t.Fatalf("a burst of %d got out, want 10", len(r.shown))
	}
	if q := r.q.Stats.Queued.Load(); q != 40 {
		t.Fatalf("queued %d, want 40", q)
	}
	for range 20 { // a hot user changes 20 times while the others wait
		r.offer("u49", presence.Busy, presence.Cause{})
		r.offer("u49", presence.Online, presence.Cause{})
	}
	if q := r.q.Stats.Queued.Load(); q != 40 {
		t.Fatalf("queued %d after the hot user, want 40 (coalesced)", q)
	}
	r.advance(100 * time.Millisecond) // 10 tokens
	if len(r.shown) != 20 || r.shown[10].User != "u10" {
		t.Fatalf("after 100ms: %d shown, the 11th is %s (want 20, u10: first ready first)", len(r.shown), r.shown[10].User)
	}
	for range 40 {
		r.advance(100 * time.Millisecond)
	}
	if r.q.Stats.Queued.Load() != 0 || r.q.Stats.MaxQueued.Load() != 40 {
		t.Fatalf("queued %d, max %d", r.q.Stats.Queued.Load(), r.q.Stats.MaxQueued.Load())
	}
	last := r.shown[len(r.shown)-1]
	if last.User != "u49" || last.Version != r.ver["u49"] {
		t.Fatalf("u49's final state did not get out: %+v (want version %d)", last, r.ver["u49"])
	}
	if n := len(r.statuses("u49")); n != 1 {
		t.Fatalf("u49 published %d times, want 1 (coalesced while waiting)", n)
	}
	if c := r.q.Stats.Coalesced.Load(); c != 40 {
		t.Fatalf("coalesced %d, want 40", c)
	}
}

// Run says when it has work again: the next due time, or the next token.
func TestPacerNextWake(t *testing.T) {
	r := newPacerRig(t, presence.Pacing{Grace: 5 * time.Second}, 10, 1)
	r.offer("a", presence.Online, presence.Cause{})
	r.offer("b", presence.Online, presence.Cause{})
	if next := r.q.Run(r.now); !next.Equal(r.now.Add(100 * time.Millisecond)) {
		t.Fatalf("next %v, want a token in 100ms", next.Sub(r.now))
	}
	r.advance(100 * time.Millisecond)
	r.offer("a", presence.Offline, presence.Cause{Ended: presence.EndTimeout})
	if next := r.q.Run(r.now); !next.Equal(r.now.Add(5 * time.Second)) {
		t.Fatalf("next %v, want the grace", next.Sub(r.now))
	}
	held, _ := r.q.Holds(r.now)
	if len(held) != 1 || held[0].User != "a" || !held[0].Until.Equal(r.now.Add(5*time.Second)) {
		t.Fatalf("holds %+v", held)
	}
}

// Drop forgets a held change and one waiting for the rate: neither is
// shown after.
func TestPacerDrop(t *testing.T) {
	net := presence.Cause{Ended: presence.EndNetwork}
	r := newPacerRig(t, presence.Pacing{Grace: 5 * time.Second}, 1, 1)
	r.offer("ann", presence.Online, presence.Cause{})
	r.offer("bob", presence.Online, presence.Cause{}) // waits for the rate (1/s)
	r.offer("ann", presence.Offline, net)             // held: the grace
	if r.q.Stats.Holding.Load() != 1 || r.q.Stats.Queued.Load() != 1 {
		t.Fatalf("holding %d, queued %d", r.q.Stats.Holding.Load(), r.q.Stats.Queued.Load())
	}
	r.q.Drop([]string{"ann", "bob"})
	if r.q.Stats.Holding.Load() != 0 || r.q.Stats.Queued.Load() != 0 {
		t.Fatalf("after Drop: holding %d, queued %d", r.q.Stats.Holding.Load(), r.q.Stats.Queued.Load())
	}
	r.advance(10 * time.Second)
	if got := r.statuses("bob"); len(got) != 0 {
		t.Errorf("bob shown after a drop: %v", got)
	}
	if got := r.statuses("ann"); len(got) != 1 {
		t.Errorf("ann shown %v after a drop, want only the first online", got)
	}
}

// TestPacerCoalescingCarriesEnded: a waiting change replaced by a newer
// one hands on the sessions it ended.
func TestPacerCoalescingCarriesEnded(t *testing.T) {
	r := newPacerRig(t, presence.Pacing{}, 1, 1)
	r.offer("u0", presence.Online, presence.Cause{}) // the burst's one token
	e := func(id string) presence.EndedView {
		return presence.EndedView{SessionView: presence.SessionView{ID: id, Epoch: 1}, Reason: presence.EndClean}
	}
	r.ver["u1"]++
	r.q.Offer(presence.Aggregate{User: "u1", Status: presence.Online, Version: r.ver["u1"], Since: r.now, Ended: []presence.EndedView{e("a")}}, presence.Cause{}, r.now)
	r.ver["u1"]++
	r.q.Offer(presence.Aggregate{User: "u1", Status: presence.Busy, Version: r.ver["u1"], Since: r.now, Ended: []presence.EndedView{e("b")}}, presence.Cause{}, r.now)
	r.advance(2 * time.Second)
	last := r.shown[len(r.shown)-1]
	if last.User != "u1" || len(last.Ended) != 2 || last.Ended[0].ID != "a" || last.Ended[1].ID != "b" {
		t.Fatalf("published %+v, want u1 carrying the ends of a then b", last)
	}
}
