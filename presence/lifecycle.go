package presence

import "time"

// Lifecycle events: every open and end of a client id's sessions, told to
// the lifecycle outputs (AWS IoT, EMQX and Sparkplug dialects, webhooks).
// They are derived from a user's aggregates, committed (raw) or shown
// (after grace and pacing), by a Sequencer: per client id in epoch order,
// each open and each end at most once, and the end of an epoch always
// before the open of the next.

// Conn is what a session's connection was, recorded at its open and kept
// with the session in the store, so that any node can describe it.
//
// The small fields are ordered so that they fill one word (64 bytes in
// all, not 72 with ProtoVer, KeepAlive, CleanStart, Expiry in that order):
// a Conn is in every Session, SessionView and presence.Wanted.
type Conn struct {
	Username   string // the MQTT username ("" when none was given)
	IP         string // the client's address, without the port
	Port       int    // the local port of the listener it came in on (EMQX sockport)
	Listener   string // the listener's id ("tcp", "ws", "tls" …)
	ProtoVer   uint8  // MQTT protocol version: 3, 4 or 5
	CleanStart bool
	KeepAlive  uint16 // seconds
	Expiry     uint32 // session expiry interval, seconds (v5)
}

// EndedView is a session that ended, as a change reports it: the store
// adds to a committed aggregate the sessions that commit ended (and, when
// it reads a user, the last few it ended), so that a consumer that missed
// or coalesced changes still learns each end and its reason.
type EndedView struct {
	SessionView
	Reason  EndReason
	EndedAt time.Time
}

// LifecycleKind says what happened to a session.
type LifecycleKind uint8

// The lifecycle kinds.
const (
	LifecycleConnected     LifecycleKind = iota + 1 // a session opened (committed)
	LifecycleDisconnected                           // a session ended
	LifecycleConnectFailed                          // a CONNECT was refused on this node (never stored)
)

// String names the kind as the outputs do.
func (k LifecycleKind) String() string {
	switch k {
	case LifecycleConnected:
		return "connected"
	case LifecycleDisconnected:
		return "disconnected"
	case LifecycleConnectFailed:
		return "connect_failed"
	}
	return "unknown"
}

// LifecycleEvent is one open or end of a session (or one refused CONNECT).
type LifecycleEvent struct {
	Kind    LifecycleKind
	User    string
	Session SessionView // ID is the client id; Epoch its session's epoch
	// Reason is why the session ended (Disconnected; "" when not known:
	// the change that ended it was missed and its record aged out), or why
	// the CONNECT was refused (ConnectFailed: a RefusalReason).
	Reason EndReason
	At     time.Time // the open (ConnectedAt), the end, or the refusal
	// Version is the user's version at which the event was committed (raw)
	// or shown (shown); 0 for ConnectFailed.
	Version uint64
}
