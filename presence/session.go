package presence

import (
	"fmt"
	"time"
)

// State is where a session is in its life.
//
//	Connecting --establish--> Active --end(clean|takeover|kicked)--> Disconnected
//	     |                      |
//	     +----end(any)----------+--end(timeout|network|shutdown|drain|node_lost)--> Expired
//
// A reconnect never revives an ended session: it is a new session with a new
// epoch.
type State string

// Session states.
const (
	Connecting   State = "connecting"
	Active       State = "active"
	Disconnected State = "disconnected"
	Expired      State = "expired"
)

// EndReason records why a session ended.
type EndReason string

// End reasons.
const (
	EndClean    EndReason = "clean"     // the client sent DISCONNECT
	EndTimeout  EndReason = "timeout"   // keep-alive deadline or store expiry passed
	EndNetwork  EndReason = "network"   // the connection dropped (EOF, reset)
	EndTakeover EndReason = "takeover"  // a new connection took the session id over
	EndKicked   EndReason = "kicked"    // the broker closed it (protocol error, operator)
	EndShutdown EndReason = "shutdown"  // its node shut down
	EndNodeLost EndReason = "node_lost" // its node stopped renewing (crash, partition)
	// EndDrain: its node was drained (SIGTERM, or the admin API) and told
	// the client to move to another node. It is Expired, not Disconnected:
	// like shutdown, the user did not leave, the node did, and the device
	// is expected back (elsewhere) at once; its will is not sent.
	EndDrain EndReason = "drain"
	// EndMissed: a dormant session (its device sleeps by design) whose
	// check-in did not come by its next expected time plus the margin
	// (issue 22, dormant devices).
	EndMissed EndReason = "missed"
)

// EndReasons are every end reason, in the order counters list them.
var EndReasons = [...]EndReason{EndClean, EndNetwork, EndTimeout, EndKicked, EndTakeover, EndDrain, EndShutdown, EndNodeLost, EndMissed}

// Index returns r's index in EndReasons (len(EndReasons) for an unknown one).
func (r EndReason) Index() int {
	for i, v := range EndReasons {
		if v == r {
			return i
		}
	}
	return len(EndReasons)
}

// Valid reports whether r is a known end reason.
func (r EndReason) Valid() bool {
	switch r {
	case EndClean, EndTimeout, EndNetwork, EndTakeover, EndKicked, EndShutdown, EndNodeLost, EndDrain, EndMissed:
		return true
	}
	return false
}

// State returns the final state a session ending for reason r is in: an
// explicit act (clean, takeover, kicked) disconnects it; lost liveness, or
// a node that went away (shutdown, drain, node_lost), expires it.
func (r EndReason) State() State {
	switch r {
	case EndClean, EndTakeover, EndKicked:
		return Disconnected
	}
	return Expired
}

// Clean reports whether the end was asked for, so that a will does not apply.
func (r EndReason) Clean() bool { return r == EndClean }

// Session is one MQTT connection's presence record.
type Session struct {
	User        string    `json:"user"`
	ID          string    `json:"id"` // the MQTT client id
	Epoch       uint64    `json:"epoch"`
	Node        string    `json:"node"`
	Device      string    `json:"device,omitempty"`
	Status      Status    `json:"status"`
	Text        string    `json:"text,omitempty"`
	State       State     `json:"state"`
	ConnectedAt time.Time `json:"connected_at"`
	RenewedAt   time.Time `json:"renewed_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
	EndReason   EndReason `json:"end_reason,omitempty"`
	// Expect is the check-in period the device declared (OpenArgs.Expect;
	// zero: none).
	Expect time.Duration `json:"expect,omitempty"`
	// Margin is how late past Expect its check-in may come before a
	// dormant session is missed (OpenArgs.Margin; see dormant.go).
	Margin time.Duration `json:"margin,omitempty"`
	// Conn is the session's connection as recorded at its open (lifecycle
	// outputs); not in the record's JSON.
	Conn Conn `json:"-"`
}

// Live reports whether the session counts towards its user's presence.
func (s Session) Live() bool { return s.State == Connecting || s.State == Active }

// NewSession starts a session in Connecting.
func NewSession(user, id string, epoch uint64, node string, now time.Time, ttl time.Duration) Session {
	return Session{
		User: user, ID: id, Epoch: epoch, Node: node,
		Status: Online, State: Connecting,
		ConnectedAt: now, RenewedAt: now, ExpiresAt: now.Add(ttl),
	}
}

func (s Session) check(epoch uint64) error {
	if epoch != s.Epoch {
		return fmt.Errorf("%w: session %s/%s is at epoch %d, write has %d", ErrStaleEpoch, s.User, s.ID, s.Epoch, epoch)
	}
	if !s.Live() {
		return fmt.Errorf("%w: session %s/%s is %s", ErrNotLive, s.User, s.ID, s.State)
	}
	return nil
}

// Establish moves a Connecting session to Active.
func (s Session) Establish(epoch uint64, now time.Time) (Session, error) {
	if err := s.check(epoch); err != nil {
		return s, err
	}
	if s.State != Connecting {
		return s, fmt.Errorf("%w: establish from %s", ErrBadTransition, s.State)
	}
	s.State = Active
	s.RenewedAt = now
	return s, nil
}

// Renew extends a live session's store-side expiry to now+ttl (the
// backstop; the client's heartbeat is its MQTT keep-alive, which the store
// never sees).
func (s Session) Renew(epoch uint64, now time.Time, ttl time.Duration) (Session, error) {
	if err := s.check(epoch); err != nil {
		return s, err
	}
	s.RenewedAt = now
	s.ExpiresAt = now.Add(ttl)
	return s, nil
}

// Update sets the session's own status, text or device. Nil fields stay.
func (s Session) Update(epoch uint64, u Update) (Session, error) {
	if err := s.check(epoch); err != nil {
		return s, err
	}
	if u.Status != nil {
		if !u.Status.SessionStatus() {
			return s, fmt.Errorf("%w: %q on a session", ErrBadStatus, *u.Status)
		}
		s.Status = *u.Status
	}
	if u.Text != nil {
		if err := ValidText(*u.Text); err != nil {
			return s, err
		}
		s.Text = *u.Text
	}
	if u.Device != nil {
		if *u.Device != "" {
			if err := ValidDevice(*u.Device); err != nil {
				return s, err
			}
		}
		s.Device = *u.Device
	}
	return s, nil
}

// End ends a live session for reason at now.
func (s Session) End(epoch uint64, reason EndReason, now time.Time) (Session, error) {
	if err := s.check(epoch); err != nil {
		return s, err
	}
	if !reason.Valid() {
		return s, fmt.Errorf("%w: unknown end reason %q", ErrBadTransition, reason)
	}
	s.State = reason.State()
	s.EndReason = reason
	s.EndedAt = now
	return s, nil
}

// Due reports whether a live session's expiry has passed at now.
func (s Session) Due(now time.Time) bool { return s.Live() && !now.Before(s.ExpiresAt) }

// Update is a partial change of a session's own fields. Nil means unchanged.
type Update struct {
	Status *Status
	Text   *string
	Device *string
}

// Empty reports whether u changes nothing.
func (u Update) Empty() bool { return u.Status == nil && u.Text == nil && u.Device == nil }

// Merge returns u with the fields set in later applied on top.
func (u Update) Merge(later Update) Update {
	if later.Status != nil {
		u.Status = later.Status
	}
	if later.Text != nil {
		u.Text = later.Text
	}
	if later.Device != nil {
		u.Device = later.Device
	}
	return u
}
