package presence

import "time"

// EndArgs names the session to end and why.
type EndArgs struct {
	User      string
	ID        string
	Epoch     uint64
	Reason    EndReason
	LastWords *string // will text, kept when the end is unclean
	// WillDelay is the MQTT 5 will delay the session asked for (zero when
	// none, or when no will applies): observers are shown the end no
	// sooner (presence.Pacing, capped).
	WillDelay time.Duration
	// LastSign is the time of the session's last sign of life (its last
	// inbound packet) when the hook knows it, earlier than the end itself
	// (a keep-alive timeout is found 1.5 x keep-alive after it); zero: the
	// time of the end. The user's last_seen is this time.
	LastSign time.Time
}

// SessionRef names one session at one epoch.
type SessionRef struct {
	User  string
	ID    string
	Epoch uint64
}

// StoredSession is a live session as the store holds it: its own device,
// status and text, which the audit after a failover compares with what the
// node last wrote (Written).
type StoredSession struct {
	SessionRef
	Device string
	Status Status
	Text   string
}
