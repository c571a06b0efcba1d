package main

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/presenced/presenced/bench/result"
)

// forever marks a connection still live when the run ended.
const forever = time.Duration(math.MaxInt64)

// graceUp is how long after a user came up an observer may still show it
// offline without it counting as a wrong offline.
const graceUp = time.Second

// cleanWindow is the detection window of a clean disconnect.
const cleanWindow = time.Second

// detectWindow is the detection window of an unclean death at keep-alive k.
func detectWindow(k time.Duration) time.Duration { return k*3/2 + time.Second }

// Interval is the ground truth of one device connection: live from Up (its
// CONNACK) to Down (its death as the bench caused it: DISCONNECT written,
// socket closed, silence began, broker killed, taken over), and how long the
// system may take to show its death (Window).
type Interval struct {
	User   string
	Up     time.Duration
	Down   time.Duration // forever: still live
	Window time.Duration
}

// truth records the ground truth of a run.
type truth struct {
	mu  sync.Mutex
	ivs []*Interval
}

// up records a device connection live from at; the returned interval is
// ended with down.
func (t *truth) up(user string, at time.Duration) *Interval {
	iv := &Interval{User: user, Up: at, Down: forever}
	t.mu.Lock()
	t.ivs = append(t.ivs, iv)
	t.mu.Unlock()
	return iv
}

// down ends iv at at with the detection window w (a no-op when already ended).
func (t *truth) down(iv *Interval, at, w time.Duration) {
	if iv == nil {
		return
	}
	t.mu.Lock()
	if iv.Down == forever {
		iv.Down, iv.Window = at, w
	}
	t.mu.Unlock()
}

func (t *truth) intervals() []Interval {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Interval, len(t.ivs))
	for i, iv := range t.ivs {
		out[i] = *iv
	}
	return out
}

// Timeline is what one observer received, per user, in receive order.
type Timeline map[string][]Obs

// span is a stretch of time during which a user had at least one live
// device; window is that of the device that died last.
type span struct {
	up, down, window time.Duration
}

// spans merges a user's intervals into live spans. Touching intervals (a
// takeover: the old one ends when the new one is up) are one span.
func spans(ivs []Interval) []span {
	sorted := append([]Interval(nil), ivs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Up < sorted[j].Up })
	var out []span
	for _, iv := range sorted {
		if n := len(out); n > 0 && iv.Up <= out[n-1].down {
			if iv.Down > out[n-1].down {
				out[n-1].down, out[n-1].window = iv.Down, iv.Window
			}
			continue
		}
		out = append(out, span{iv.Up, iv.Down, iv.Window})
	}
	return out
}

// Evaluation holds the correctness counts plus what the checks saw.
type Evaluation struct {
	result.Correctness
	Duplicates int // identical redeliveries (same version and payload): not counted as backward
	NeverShown int // (observer, user) pairs covered but never given a state while the user was live
}

// ObserverView is one observer as evaluate sees it: what it received, when
// it subscribed, and which users its subscription covers.
type ObserverView struct {
	TL     Timeline
	Since  time.Duration
	Covers func(user string) bool
	Batch  time.Duration // the batch window of a group watcher: a change may wait that long
}

// evaluate counts, for every observer and every user of the ground truth
// that the observer covers, what the observer was shown wrongly up to end
// (when observation stopped):
//
//   - BackwardVersion: a version lower than one already seen, or equal with
//     a different payload. Such a message is then ignored, as the contract
//     tells observers to.
//   - StaleOverwrites: a state showing a connection generation lower than
//     one already shown for the same client id.
//   - Ghosts: at a user's death (its last device's) + the window, with no
//     device live again by then, the shown state is online.
//   - WrongOffline: an offline state shown, for any time, while the user had
//     been continuously live for more than graceUp (plus the batch window
//     of an observer that gets batches: a change may wait that long). An observer that was
//     never sent any state of a user it covers shows the user offline for
//     good: that counts too (NeverShown) when the user was live for more
//     than graceUp after the observer subscribed. (How late a first state
//     arrives is measured as convergence, not counted here.)
func evaluate(ivs []Interval, observers []ObserverView, end time.Duration) Evaluation {
	byUser := make(map[string][]Interval)
	for _, iv := range ivs {
		byUser[iv.User] = append(byUser[iv.User], iv)
	}
	var ev Evaluation
	for user, l := range byUser {
		userSpans := spans(l)
		for _, v := range observers {
			if v.Covers != nil && !v.Covers(user) {
				continue
			}
			obs, got := v.TL[user]
			if v.Covers == nil && !got {
				continue
			}
			shown := checkSequence(obs, &ev)
			ev.Ghosts += ghosts(userSpans, shown, end)
			// Never given any state of a user that was live: the observer
			// shows it offline for good.
			grace := graceUp + v.Batch
			if v.Covers != nil && len(shown) == 0 && overlapsLive(userSpans, v.Since+grace, end, grace) {
				ev.WrongOffline++
				ev.NeverShown++
			}
			ev.WrongOffline += wrongOffline(userSpans, shown, end, grace)
		}
	}
	return ev
}

// checkSequence counts version and generation faults of one user's messages
// to one observer and returns the states the observer shows, in order.
func checkSequence(obs []Obs, ev *Evaluation) []Obs {
	shown := make([]Obs, 0, len(obs))
	var maxV uint64
	var lastHash uint64
	maxGen := make(map[string]uint64)
	for _, ob := range obs {
		if ob.Version != 0 {
			if ob.Version < maxV || (ob.Version == maxV && ob.Hash != lastHash) {
				ev.BackwardVersion++
				continue
			}
			if ob.Version == maxV {
				ev.Duplicates++
				continue
			}
			maxV, lastHash = ob.Version, ob.Hash
		}
		stale := false
		for _, g := range ob.Gens {
			if g.Gen < maxGen[g.ID] {
				stale = true
			}
		}
		if stale {
			ev.StaleOverwrites++
		}
		for _, g := range ob.Gens {
			if g.Gen > maxGen[g.ID] {
				maxGen[g.ID] = g.Gen
			}
		}
		shown = append(shown, ob)
	}
	return shown
}

// shownAt is the state shown at t: the last one received at or before t.
func shownAt(shown []Obs, t time.Duration) (Obs, bool) {
	i := sort.Search(len(shown), func(i int) bool { return shown[i].At > t })
	if i == 0 {
		return Obs{}, false
	}
	return shown[i-1], true
}

func ghosts(sp []span, shown []Obs, end time.Duration) int {
	n := 0
	for i, s := range sp {
		if s.down == forever {
			continue
		}
		check := s.down + s.window
		if check > end {
			continue // the run ended before the window: cannot judge
		}
		if i+1 < len(sp) && sp[i+1].up <= check {
			continue // live again within the window
		}
		if ob, ok := shownAt(shown, check); ok && ob.Online {
			n++
		}
	}
	return n
}

func wrongOffline(sp []span, shown []Obs, end, grace time.Duration) int {
	n := 0
	for i, ob := range shown {
		if ob.Online {
			continue
		}
		to := end
		if i+1 < len(shown) {
			to = shown[i+1].At
		}
		if overlapsLive(sp, ob.At, to, grace) {
			n++
		}
	}
	return n
}

// overlapsLive tells whether [from, to) meets a time at which the user had
// been live for more than grace.
func overlapsLive(sp []span, from, to, grace time.Duration) bool {
	for _, s := range sp {
		if max(s.up+grace, from) < min(s.down, to) {
			return true
		}
	}
	return false
}
