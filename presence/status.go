package presence

import "fmt"

// Status is a presence status. Sessions carry one of the settable statuses;
// the aggregate may also be Offline.
type Status string

// The statuses, from the most available to the least.
const (
	Online Status = "online"
	Idle   Status = "idle"
	Away   Status = "away"
	Busy   Status = "busy"
	DND    Status = "dnd"
	// Dormant: no session is connected, but a device that sleeps by design
	// (it declared its check-in period) is expected back by NextExpected.
	// Derived only, never set.
	Dormant Status = "dormant"
	Offline Status = "offline"
)

// availability orders statuses: a lower rank is more available.
func (s Status) availability() int {
	switch s {
	case Online:
		return 0
	case Idle:
		return 1
	case Away:
		return 2
	case Busy:
		return 3
	case DND:
		return 4
	case Dormant:
		return 5
	}
	return 6
}

// SessionStatus reports whether s may be set on a session.
func (s Status) SessionStatus() bool {
	switch s {
	case Online, Idle, Away, Busy, DND:
		return true
	}
	return false
}

// AccountStatus reports whether s may be held as the account-level override.
// Online is not held: setting it at account scope clears the override.
func (s Status) AccountStatus() bool {
	switch s {
	case Away, Busy, DND:
		return true
	}
	return false
}

// ParseStatus parses a settable status (everything but offline).
func ParseStatus(v string) (Status, error) {
	s := Status(v)
	if !s.SessionStatus() {
		return "", fmt.Errorf("%w: %q (want online, idle, away, busy or dnd)", ErrBadStatus, v)
	}
	return s, nil
}
