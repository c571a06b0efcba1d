package presenced

import "log/slog"

// WithSessionLog logs one info line per session this node opens in the
// store ("session opened": user, client_id, device, node, epoch) and per
// session it ends ("session ended": the same, reason and lasted_ms), from
// the tracker's workers after the store answered, never on a connection's
// goroutine (the binary's log.sessions). A log that blocks slows the
// store's writes, not the packets.
func WithSessionLog() Option { return func(p *Plugin) { p.sessionLog = true } }

// sessionLogger is the session log's logger, nil when it is off.
func (p *Plugin) sessionLogger() *slog.Logger {
	if !p.sessionLog {
		return nil
	}
	return p.logFor("sessions")
}
