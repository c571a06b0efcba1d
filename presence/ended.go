package presence

import "unicode/utf8"

// MaxEndedCarried bounds the ended sessions one change carries once a
// queue has coalesced many changes of a user into it (store.Feed): the
// newest are kept, and whoever drops the oldest counts them.
const MaxEndedCarried = 64

// View is the session as observers see it, with its connection.
func (s Session) View() SessionView {
	return SessionView{ID: s.ID, Epoch: s.Epoch, Node: s.Node, Device: s.Device, Status: s.Status, ConnectedAt: s.ConnectedAt, Conn: s.Conn}
}

// EndedView is the ended session as a change reports it.
func (s Session) EndedView() EndedView {
	return EndedView{SessionView: s.View(), Reason: s.EndReason, EndedAt: s.EndedAt}
}

// EndedViews returns the views of ended sessions given in order (nil when
// none).
func EndedViews(ended []Session) []EndedView {
	if len(ended) == 0 {
		return nil
	}
	out := make([]EndedView, len(ended))
	for i, s := range ended {
		out[i] = s.EndedView()
	}
	return out
}

// RecentlyEnded returns the sessions u ended last (its record keeps
// MaxEnded), oldest first: what a read of the user reports as its
// aggregate's Ended.
func (u User) RecentlyEnded() []EndedView {
	if len(u.Ended) == 0 {
		return nil
	}
	out := make([]EndedView, len(u.Ended))
	for i, s := range u.Ended { // newest first
		out[len(out)-1-i] = s.EndedView()
	}
	return out
}

// MergeEnded returns the ended sessions of a change that replaces another
// in a queue: older's then newer's, in a new array (neither is aliased),
// of which the newest limit are kept; dropped says how many were not.
func MergeEnded(older, newer []EndedView, limit int) (merged []EndedView, dropped int) {
	n := len(older) + len(newer)
	if n == 0 {
		return nil, 0
	}
	if n > limit {
		dropped = n - limit
	}
	merged = make([]EndedView, 0, n-dropped)
	skip := dropped
	for _, l := range [2][]EndedView{older, newer} {
		if skip >= len(l) {
			skip -= len(l)
			continue
		}
		merged = append(merged, l[skip:]...)
		skip = 0
	}
	return merged, dropped
}

// The longest connection facts kept (Conn.Bounded): a session's facts
// travel with every change of its user.
const (
	MaxConnUsername = 256
	MaxConnIP       = 64
	MaxConnListener = 64
)

// Bounded returns c with each text cut to its limit (on a rune boundary).
func (c Conn) Bounded() Conn {
	c.Username = cut(c.Username, MaxConnUsername)
	c.IP = cut(c.IP, MaxConnIP)
	c.Listener = cut(c.Listener, MaxConnListener)
	return c
}

// Valid reports whether c is within the limits Bounded keeps.
func (c Conn) Valid() bool {
	return len(c.Username) <= MaxConnUsername && len(c.IP) <= MaxConnIP && len(c.Listener) <= MaxConnListener &&
		c.Port >= 0 && c.Port <= 65535
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
