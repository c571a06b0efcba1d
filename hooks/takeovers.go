package hooks

import (
	"container/list"
	"sort"
	"sync"
	"time"

	"github.com/presenced/presenced/presence"
)

// BattleOptions configure takeover battle damping: two devices sharing one
// client id that take the session from each other in a loop.
type BattleOptions struct {
	// Takeovers within Window of one client id on this node make a battle
	// (at least 2: one takeover is a device reconnecting). 0: off.
	Takeovers  int
	Window     time.Duration
	Backoff    time.Duration // the first refusal lasts this long
	MaxBackoff time.Duration // each further battle of the episode doubles it, up to this
	// MaxTracked bounds the client ids tracked at once; one more evicts the
	// least recently active (counted). 0: DefaultBattleMaxTracked.
	MaxTracked int
}

// DefaultBattleMaxTracked bounds the client ids the battle detector keeps:
// an entry is a few hundred bytes, so this is a few MiB at most.
const DefaultBattleMaxTracked = 10_000

// Battle is one takeover battle going on, as the admin API shows it.
type Battle struct {
	ClientID  string    `json:"client_id"`
	User      string    `json:"user"`
	Since     time.Time `json:"since"`               // the episode's first detection
	InWindow  int       `json:"takeovers_in_window"` // takeovers within the window, now
	Takeovers int64     `json:"takeovers"`           // takeovers since the episode began
	Refused   int64     `json:"refused"`             // newcomers refused in this episode
	Backoff   string    `json:"backoff"`             // the current back-off
	Until     time.Time `json:"refused_until"`       // newcomers are refused until then
}

// battles detects takeover battles and says which newcomers to refuse. It
// is pure: no I/O, and time is always an argument.
//
// An id is in battle once it has been taken over Takeovers times within
// Window. Newcomers that would take it over are then refused for the
// back-off; the first takeover after the back-off ran out, while the
// episode lasts, is a further battle and starts a refusal twice as long (up
// to MaxBackoff). The episode ends, and the back-off resets, after one
// Window without a takeover or a refusal once the last back-off ran out.
// Entries expire then (or, outside a battle, when their takeovers leave the
// window); at most MaxTracked ids are kept, the least recently active
// evicted first.
type battles struct {
	o       BattleOptions
	mu      sync.Mutex
	ids     map[string]*battleEntry
	lru     list.List // of *battleEntry, most recently active first
	evicted int64
}

type battleEntry struct {
	id, user  string
	times     []time.Time // the last Takeovers takeovers, oldest first
	last      time.Time   // the last takeover or refusal
	on        bool        // an episode is going on
	since     time.Time
	takeovers int64
	refused   int64
	backoff   time.Duration
	until     time.Time
	elem      *list.Element
}

// battleVerdict is what a takeover brings.
type battleVerdict struct {
	Detected bool // a battle begins (or resumes): refuse newcomers until Until
	Episode  bool // and it is a new episode (log it)
	InWindow int
	Until    time.Time
	Evicted  int // ids evicted to make room for this one
}

func newBattles(o BattleOptions) *battles {
	if o.MaxTracked <= 0 {
		o.MaxTracked = DefaultBattleMaxTracked
	}
	return &battles{o: o, ids: make(map[string]*battleEntry)}
}

func (b *battles) enabled() bool { return b != nil && b.o.Takeovers > 0 }

// quiet reports whether e's episode is over at now.
func (b *battles) quiet(e *battleEntry, now time.Time) bool {
	end := e.last
	if e.until.After(end) {
		end = e.until
	}
	return !now.Before(end.Add(b.o.Window))
}

// expired reports whether e can be forgotten at now.
func (b *battles) expired(e *battleEntry, now time.Time) bool {
	if e.on {
		return b.quiet(e, now)
	}
	return len(e.times) == 0 || !now.Before(e.times[len(e.times)-1].Add(b.o.Window))
}

// refuse reports whether a newcomer taking over id at now is to be
// refused, and counts it.
func (b *battles) refuse(id string, now time.Time) bool {
	if !b.enabled() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.ids[id]
	if e == nil || !e.on || !now.Before(e.until) {
		return false
	}
	e.refused++
	e.last = now
	b.lru.MoveToFront(e.elem)
	return true
}

// takeover records that user's newcomer took id over at now.
func (b *battles) takeover(id, user string, now time.Time) battleVerdict {
	if !b.enabled() {
		return battleVerdict{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	evicted := 0
	e := b.ids[id]
	if e != nil && b.expired(e, now) {
		b.remove(e)
		e = nil
	}
	if e == nil {
		for len(b.ids) >= b.o.MaxTracked {
			b.remove(b.lru.Back().Value.(*battleEntry))
			b.evicted++
			evicted++
		}
		e = &battleEntry{id: id}
		e.elem = b.lru.PushFront(e)
		b.ids[id] = e
	} else {
		b.lru.MoveToFront(e.elem)
	}
	e.user, e.last = user, now
	e.times = append(inWindow(e.times, now.Add(-b.o.Window)), now)
	if len(e.times) > b.o.Takeovers {
		e.times = append(e.times[:0], e.times[len(e.times)-b.o.Takeovers:]...)
	}
	v := battleVerdict{InWindow: len(e.times), Evicted: evicted}
	switch {
	case e.on:
		e.takeovers++
		e.backoff = min(2*e.backoff, b.o.MaxBackoff)
	case len(e.times) >= b.o.Takeovers:
		v.Episode = true
		e.on, e.since, e.takeovers, e.refused = true, now, int64(len(e.times)), 0
		e.backoff = b.o.Backoff
	default:
		return v
	}
	e.until = now.Add(e.backoff)
	v.Detected, v.Until = true, e.until
	return v
}

// inWindow drops the times before from.
func inWindow(times []time.Time, from time.Time) []time.Time {
	i := 0
	for i < len(times) && times[i].Before(from) {
		i++
	}
	return append(times[:0], times[i:]...)
}

func (b *battles) remove(e *battleEntry) {
	b.lru.Remove(e.elem)
	delete(b.ids, e.id)
}

// expire forgets every entry that has expired at now, and returns how many
// ids are still tracked.
func (b *battles) expire(now time.Time) int {
	if !b.enabled() {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.ids {
		if b.expired(e, now) {
			b.remove(e)
		}
	}
	return len(b.ids)
}

// list returns the battles going on at now, by client id.
func (b *battles) list(now time.Time) []Battle {
	if !b.enabled() {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Battle
	for _, e := range b.ids {
		if !e.on || b.quiet(e, now) {
			continue
		}
		out = append(out, Battle{
			ClientID: presence.ClientIDOf(e.id), User: e.user, Since: e.since,
			InWindow: len(inWindow(append([]time.Time(nil), e.times...), now.Add(-b.o.Window))), Takeovers: e.takeovers,
			Refused: e.refused, Backoff: e.backoff.String(), Until: e.until,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClientID < out[j].ClientID })
	return out
}

// tracked returns how many ids are tracked, and how many were evicted.
func (b *battles) tracked() (int, int64) {
	if b == nil {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.ids), b.evicted
}
