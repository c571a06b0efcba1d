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

// sessionLog is what a slot remembers for its lines: when it last logged
// its session opened (under the slot's mu). Which connection that was is
// not kept (issue 23: 8 bytes a slot): while the log holds an open, it is
// the one of what the store was last told (Written.Conn), since an open
// the store applied is both logged and recorded (presence.Applied sets
// Written.Conn), nothing else sets Written.Conn, and an end logged clears
// the log.
type sessionLog struct {
	// opened is when, on the monotonic clock as time.Time.Sub reads it:
	// nanoseconds since monoBase, plus one; 0: not logged (stamp, since).
	opened int64
}

// monoBase is the time the session log's stamps count from.
var monoBase = time.Now()

// stamp returns now as a sessionLog's opened; never 0.
func stamp(now time.Time) int64 { return int64(now.Sub(monoBase)) + 1 }

// logged reports whether the log holds an open.
func (l sessionLog) logged() bool { return l.opened != 0 }

// since returns how long before now the session was logged opened: the
// now.Sub(opened) of the time.Time it was (both on the monotonic clock, as
// time.Now gives them: the difference of their offsets from monoBase is
// theirs).
func (l sessionLog) since(now time.Time) time.Duration {
	return now.Sub(monoBase) - time.Duration(l.opened-1)
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
		// x.h.Conn is the connection last logged opened, if any (sessionLog).
		again := x.h.Conn == x.w.Conn && prev.logged() // the store lost it: opened again, same connection
		if !again {
			s.log = sessionLog{opened: stamp(now)}
		}
		s.mu.Unlock()
		if x.h.Open && x.h.Conn != x.w.Conn && prev.logged() {
			// A new connection with the same client id: the open ended the
			// old session in the store (a takeover).
			t.logEnded(x.h.User, s.clientID(), x.h.Device, x.h.Epoch, presence.EndTakeover, prev.since(now))
		}
		t.sessions.LogAttrs(context.Background(), slog.LevelInfo, "session opened",
			slog.String("user", a.User), slog.String("client_id", s.clientID()), slog.String("device", a.Device),
			slog.String("node", t.plan.Node), slog.Uint64("epoch", epoch), slog.Bool("again", again))
	case presence.WriteEnd:
		e := x.wr.End
		s.mu.Lock()
		prev := s.log
		s.log = sessionLog{}
		s.mu.Unlock()
		lasted := time.Duration(-1)
		if prev.logged() {
			lasted = prev.since(now)
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
