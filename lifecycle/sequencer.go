package lifecycle

import (
	"sort"
	"time"

	"github.com/presenced/presenced/presence"
)

// Sequencer derives lifecycle events from a user's aggregates: per client
// id in epoch order, each open and each end at most once, the end of an
// epoch before the open of the next (presence.Sequencer).
type Sequencer interface {
	Apply(a presence.Aggregate) []presence.LifecycleEvent
	Forget(before time.Time) int
}

// Interim is a minimal Sequencer for the time until presence.Sequencer
// (issue 21, part A) lands; the root then builds that one instead and this
// file goes. It keeps, per user, the last version applied and, per client
// id, the last epoch opened and ended.
type Interim struct {
	start time.Time
	users map[string]*interimUser
}

type interimUser struct {
	version  uint64
	live     map[string]presence.SessionView // client id -> live session
	opened   map[string]uint64               // client id -> last epoch opened
	ended    map[string]uint64               // client id -> last epoch ended
	offSince time.Time
}

// NewInterim returns an Interim whose sessions opened before start are
// base state (no event).
func NewInterim(start time.Time) *Interim {
	return &Interim{start: start, users: map[string]*interimUser{}}
}

// Apply implements Sequencer.
func (s *Interim) Apply(a presence.Aggregate) []presence.LifecycleEvent {
	u := s.users[a.User]
	if u == nil {
		u = &interimUser{live: map[string]presence.SessionView{}, opened: map[string]uint64{}, ended: map[string]uint64{}}
		s.users[a.User] = u
	}
	if a.Version <= u.version {
		return nil
	}
	u.version = a.Version
	var out []presence.LifecycleEvent
	end := func(v presence.SessionView, reason presence.EndReason, at time.Time) {
		if v.Epoch <= u.ended[v.ID] {
			return
		}
		if v.Epoch > u.opened[v.ID] { // never seen open: open it first
			u.opened[v.ID] = v.Epoch
			out = append(out, presence.LifecycleEvent{Kind: presence.LifecycleConnected, User: a.User, Session: v, At: v.ConnectedAt, Version: a.Version})
		}
		u.ended[v.ID] = v.Epoch
		out = append(out, presence.LifecycleEvent{Kind: presence.LifecycleDisconnected, User: a.User, Session: v, Reason: reason, At: at, Version: a.Version})
	}
	ended := append([]presence.EndedView(nil), a.Ended...)
	sort.SliceStable(ended, func(i, j int) bool { return ended[i].Epoch < ended[j].Epoch })
	for _, e := range ended {
		delete(u.live, e.ID)
		end(e.SessionView, e.Reason, e.EndedAt)
	}
	now := map[string]presence.SessionView{}
	for _, v := range a.Sessions {
		now[v.ID] = v
	}
	for id, old := range u.live {
		if v, ok := now[id]; ok && v.Epoch == old.Epoch {
			continue
		}
		delete(u.live, id)
		reason := presence.EndReason("")
		if v, ok := now[id]; ok && v.Epoch > old.Epoch {
			reason = presence.EndTakeover
		}
		end(old, reason, a.Since)
	}
	live := append([]presence.SessionView(nil), a.Sessions...)
	sort.SliceStable(live, func(i, j int) bool { return live[i].Epoch < live[j].Epoch })
	for _, v := range live {
		if v.Epoch <= u.opened[v.ID] || v.Epoch <= u.ended[v.ID] {
			u.live[v.ID] = v
			continue
		}
		u.opened[v.ID] = v.Epoch
		u.live[v.ID] = v
		if v.ConnectedAt.Before(s.start) {
			continue // base state
		}
		out = append(out, presence.LifecycleEvent{Kind: presence.LifecycleConnected, User: a.User, Session: v, At: v.ConnectedAt, Version: a.Version})
	}
	if len(u.live) == 0 {
		u.offSince = a.Since
	} else {
		u.offSince = time.Time{}
	}
	return out
}

// Forget implements Sequencer.
func (s *Interim) Forget(before time.Time) int {
	n := 0
	for user, u := range s.users {
		if len(u.live) == 0 && !u.offSince.IsZero() && u.offSince.Before(before) {
			delete(s.users, user)
			n++
		}
	}
	return n
}
