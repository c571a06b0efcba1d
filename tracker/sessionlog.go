package tracker

import (
	"context"
	"log/slog"
	"time"

	"github.com/presenced/presenced/presence"
)

// The session log (Options.Sessions, the binary's log.sessions): one info
// line per session this node opens in the store and one per session it
// ends, written by the worker that made the write, after the store
// answered: never on a connection's goroutine. A session the store ended
// for this node (taken over from another node, reaped, swept as
// node_lost) is counted in presenced_session_ends_total, not logged here.

// sessionLog is what a slot remembers for its lines: the connection it
// last logged opened, and when (under the slot's mu).
type sessionLog struct {
	conn   presence.ConnID
	opened time.Time
}

// logWrite logs the write x made, which the store applied (Done) with
// epoch (an open's), at now.
func (t *Tracker) logWrite(x *syncing, epoch uint64, now time.Time) {
	s := x.s
	switch x.wr.Kind {
	case presence.WriteOpen:
		a := x.wr.Open
		s.mu.Lock()
		prev := s.log
		again := prev.conn == x.w.Conn && !prev.opened.IsZero() // the store lost it: opened again, same connection
		if !again {
			s.log = sessionLog{conn: x.w.Conn, opened: now}
		}
		s.mu.Unlock()
		if x.h.Open && x.h.Conn != x.w.Conn && !prev.opened.IsZero() {
			// A new connection with the same client id: the open ended the
			// old session in the store (a takeover).
			t.logEnded(x.h.User, s.clientID(), x.h.Device, x.h.Epoch, presence.EndTakeover, now.Sub(prev.opened))
		}
		t.sessions.LogAttrs(context.Background(), slog.LevelInfo, "session opened",
			slog.String("user", a.User), slog.String("client_id", s.clientID()), slog.String("device", a.Device),
			slog.String("node", t.plan.Node), slog.Uint64("epoch", epoch), slog.Bool("again", again))
	case presence.WriteEnd:
		e := x.wr.End
		s.mu.Lock()
		opened := s.log.opened
		s.log = sessionLog{}
		s.mu.Unlock()
		lasted := time.Duration(-1)
		if !opened.IsZero() {
			lasted = now.Sub(opened)
		}
		t.logEnded(e.User, e.ID, x.h.Device, e.Epoch, e.Reason, lasted)
	}
}

// logEnded logs a session's end; lasted < 0: not known (opened before this
// process logged it), left out.
func (t *Tracker) logEnded(user, id, device string, epoch uint64, reason presence.EndReason, lasted time.Duration) {
	attrs := []slog.Attr{slog.String("user", user), slog.String("client_id", id), slog.String("device", device),
		slog.String("node", t.plan.Node), slog.Uint64("epoch", epoch), slog.String("reason", string(reason))}
	if lasted >= 0 {
		attrs = append(attrs, slog.Int64("lasted_ms", lasted.Milliseconds()))
	}
	t.sessions.LogAttrs(context.Background(), slog.LevelInfo, "session ended", attrs...)
}
