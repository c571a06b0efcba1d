package presence

import "fmt"

// LastSeenMode is how exactly others see a user's last_seen.
type LastSeenMode string

// The last_seen modes. The empty mode is LastSeenExact.
const (
	LastSeenExact   LastSeenMode = "exact"
	LastSeenQuarter LastSeenMode = "quarter" // rounded down to the quarter hour
	LastSeenHidden  LastSeenMode = "hidden"  // always null
)

// ParseLastSeenMode parses a last_seen mode.
func ParseLastSeenMode(v string) (LastSeenMode, error) {
	switch m := LastSeenMode(v); m {
	case LastSeenExact, LastSeenQuarter, LastSeenHidden:
		return m, nil
	}
	return "", fmt.Errorf("%w: last_seen %q (want exact, quarter or hidden)", ErrBadPayload, v)
}

// Privacy is a user's account-level privacy setting: Invisible shows the
// user offline to everyone but themselves and service accounts; LastSeen
// says how exactly the others see last_seen. The zero Privacy hides
// nothing.
type Privacy struct {
	Invisible bool         `json:"invisible,omitempty"`
	LastSeen  LastSeenMode `json:"last_seen,omitempty"`
}

// IsZero reports whether p hides nothing.
func (p Privacy) IsZero() bool {
	return !p.Invisible && (p.LastSeen == "" || p.LastSeen == LastSeenExact)
}
