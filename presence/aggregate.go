package presence

import (
	"slices"
	"time"
)

// Rules are the deployment's aggregation settings.
type Rules struct {
	authoritative map[string]struct{}
}

// NewRules builds rules in which the listed device labels are authoritative:
// a busy or dnd from one of them speaks for the whole user.
func NewRules(authoritativeDevices []string) Rules {
	r := Rules{authoritative: make(map[string]struct{}, len(authoritativeDevices))}
	for _, d := range authoritativeDevices {
		r.authoritative[d] = struct{}{}
	}
	return r
}

// Authoritative reports whether device is authoritative.
func (r Rules) Authoritative(device string) bool {
	_, ok := r.authoritative[device]
	return ok && device != ""
}

// Aggregate is a user's presence as observers see it: what
// presence/users/{user} carries. It is derived (Derive), never set.
type Aggregate struct {
	User     string        `json:"user"`
	Status   Status        `json:"status"`
	Text     string        `json:"text"`
	Version  uint64        `json:"version"`
	Since    time.Time     `json:"since"`
	LastSeen time.Time     `json:"last_seen"` // zero (null in JSON) while online
	Sessions []SessionView `json:"sessions"`
	// Reason is why the user went offline: the end reason of the session
	// whose end left no session live (offline and dormant only; "" when
	// unknown or online). In the payload when not empty.
	Reason EndReason `json:"reason,omitempty"`
	// Link is LinkFlaky while the user flaps (presence.Pacing), else "".
	// In the payload when not empty; set by whoever shows the change (the
	// publisher's pacer), never by the store.
	Link string `json:"link,omitempty"`
	// NextExpected is when a dormant user's device is next expected to
	// check in (status dormant only; zero otherwise). In the payload when
	// not zero.
	NextExpected time.Time `json:"next_expected,omitzero"`
	// Privacy is the user's account privacy setting (never in the
	// payload): what Public applies for every viewer but the user and
	// service accounts.
	Privacy Privacy `json:"-"`
	// Ended are the sessions this change ended (several when changes were
	// coalesced; when the store read the user, the last few it ended),
	// oldest first, for the lifecycle outputs; never in the payload.
	Ended []EndedView `json:"-"`
}

// SessionView is a live session as observers see it.
type SessionView struct {
	ID          string    `json:"id"`
	Epoch       uint64    `json:"epoch"`
	Node        string    `json:"node"`
	Device      string    `json:"device"`
	Status      Status    `json:"status"`
	ConnectedAt time.Time `json:"connected_at"`
	// Conn is the session's connection, as recorded at its open (lifecycle
	// outputs); never in the presence payload.
	Conn Conn `json:"-"`
}

// sameAs compares everything but version and since.
func (p Aggregate) sameAs(q Aggregate) bool {
	return p.User == q.User && p.Status == q.Status && p.Text == q.Text &&
		p.LastSeen.Equal(q.LastSeen) && p.Reason == q.Reason && p.NextExpected.Equal(q.NextExpected) &&
		p.Privacy.Equal(q.Privacy) && slices.EqualFunc(p.Sessions, q.Sessions, func(a, b SessionView) bool {
		return a.ID == b.ID && a.Epoch == b.Epoch && a.Node == b.Node && a.Device == b.Device &&
			a.Status == b.Status && a.ConnectedAt.Equal(b.ConnectedAt)
	})
}

// Aggregate derives a user's status from the live sessions and the account
// setting. It is the one place the rules live:
//
//  1. offline when no session is live;
//  2. else the account setting (away, busy, dnd) when one is set;
//  3. else dnd or busy when an authoritative device says so (dnd first);
//  4. else the most available of the sessions' own statuses
//     (online > idle > away > busy > dnd).
//
// The text is the account text when set, else the text of the session that
// decided the status (rule 3 or 4; under rule 2, the most available session).
// Offline shows the will text that took the user offline, else the account text.
// Version and Since are left for Commit.
func Derive(u User, rules Rules) Aggregate {
	p := Aggregate{User: u.Name}
	p.Privacy = privacyOf(u) // issue 22 (privacy.go)
	if len(u.Sessions) == 0 {
		p.Status = Offline
		p.LastSeen = u.LastSeen
		p.Text = u.Account.Text
		if u.LastWords != "" {
			p.Text = u.LastWords
		}
		p.Reason = offlineReason(u)
		dormant(u, &p)
		return p
	}

	views := make([]SessionView, len(u.Sessions))
	lead := -1  // most available session (ties: latest connected)
	ruler := -1 // authoritative session saying busy or dnd (dnd first)
	for i, s := range u.Sessions {
		views[i] = s.View()
		if lead < 0 || better(s, u.Sessions[lead]) {
			lead = i
		}
		if (s.Status == Busy || s.Status == DND) && rules.Authoritative(s.Device) {
			if ruler < 0 || s.Status.availability() > u.Sessions[ruler].Status.availability() ||
				(s.Status == u.Sessions[ruler].Status && s.ConnectedAt.After(u.Sessions[ruler].ConnectedAt)) {
				ruler = i
			}
		}
	}
	slices.SortFunc(views, func(a, b SessionView) int {
		if c := a.ConnectedAt.Compare(b.ConnectedAt); c != 0 {
			return c
		}
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	p.Sessions = views

	decider := u.Sessions[lead]
	switch {
	case u.Account.Status.AccountStatus():
		p.Status = u.Account.Status
	case ruler >= 0:
		decider = u.Sessions[ruler]
		p.Status = decider.Status
	default:
		p.Status = decider.Status
	}
	p.Text = decider.Text
	if u.Account.Text != "" {
		p.Text = u.Account.Text
	}
	return p
}

// better reports whether a is more available than b (ties: connected later,
// then the greater id, so the choice never depends on order).
func better(a, b Session) bool {
	if x, y := a.Status.availability(), b.Status.availability(); x != y {
		return x < y
	}
	if c := a.ConnectedAt.Compare(b.ConnectedAt); c != 0 {
		return c > 0
	}
	return a.ID > b.ID
}

// LinkFlaky is Aggregate.Link while the user flaps.
const LinkFlaky = "flaky"
