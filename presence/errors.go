package presence

import "errors"

// Sentinel errors. Stores and the node wrap them with %w; callers test with errors.Is.
var (
	// ErrStaleEpoch: the write names a session epoch that is not the current
	// live one for that session id. It changed nothing.
	ErrStaleEpoch = errors.New("stale epoch")
	// ErrNotLive: the session has already ended.
	ErrNotLive = errors.New("session not live")
	// ErrBadTransition: the state machine has no such transition.
	ErrBadTransition = errors.New("invalid session transition")
	// ErrBadStatus: an unknown status, or one not allowed in that place.
	ErrBadStatus = errors.New("invalid status")
	// ErrBadPayload: a presence/set payload that is not acceptable.
	ErrBadPayload = errors.New("invalid presence payload")
	// ErrBadName: a user, session id or device label that cannot be used.
	ErrBadName = errors.New("invalid name")
)
