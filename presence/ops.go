package presence

// EndArgs names the session to end and why.
type EndArgs struct {
	User      string
	ID        string
	Epoch     uint64
	Reason    EndReason
	LastWords *string // will text, kept when the end is unclean
}

// SessionRef names one session at one epoch.
type SessionRef struct {
	User  string
	ID    string
	Epoch uint64
}
