package hooks

import (
	"errors"
	"os"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/listener"

	"github.com/presenced/presenced/presence"
)

// mochi's reason codes are struct values: boxed once here, not on every
// end (issue 23: two allocations of each connection's end).
var (
	errTakenOver      error = packets.ErrSessionTakenOver
	errShuttingDown   error = packets.ErrServerShuttingDown
	errDisconnectWill error = packets.CodeDisconnectWillMessage
)

// EndReason maps what mochi says about a finished connection to a presence
// end reason:
//
//   - the stop cause ErrSessionTakenOver: takeover; ErrServerShuttingDown:
//     shutdown; ErrDrained (a drain moved it): drain;
//   - no read error (the client sent DISCONNECT): clean;
//   - a read deadline (mochi's 1.5 × keep-alive): timeout;
//   - any other stop cause that is an MQTT reason code, or a connection that
//     presenced's listener closed as a slow consumer (the broker closed it): kicked;
//   - anything else (EOF, reset, a broken packet): network.
func EndReason(readErr, stopCause error) presence.EndReason {
	switch {
	case errors.Is(stopCause, errTakenOver):
		return presence.EndTakeover
	case errors.Is(stopCause, errShuttingDown):
		return presence.EndShutdown
	case errors.Is(stopCause, ErrDrained):
		return presence.EndDrain
	case readErr == nil:
		return presence.EndClean
	case errors.Is(readErr, errDisconnectWill):
		return presence.EndClean
	case errors.Is(readErr, os.ErrDeadlineExceeded):
		return presence.EndTimeout
	case errors.Is(readErr, listener.ErrSlowConsumer):
		return presence.EndKicked
	}
	var code packets.Code
	if errors.As(stopCause, &code) && code != packets.CodeDisconnect && code.Code >= packets.ErrUnspecifiedError.Code {
		return presence.EndKicked
	}
	return presence.EndNetwork
}

// ReadDeadline is how long mochi (v2.7.9) waits for the next packet of a
// connection with keep-alive keepalive seconds: its read loop sets the
// deadline afresh, before reading each packet, to keepalive + keepalive/2
// whole seconds (integer arithmetic on a uint16: 3 s at 2 s, 7 s at 5 s),
// none when keepalive is 0 (Client.refreshDeadline).
func ReadDeadline(keepalive uint16) time.Duration {
	if keepalive == 0 {
		return 0
	}
	return time.Duration(keepalive+keepalive/2) * time.Second
}

// LastSign is when a connection that mochi ended for its keep-alive at now
// last gave a sign of life: the deadline is set right after the previous
// packet is handled, so the last packet came ReadDeadline before the end
// (a little earlier still, by the time it took to handle it). Zero when
// keepalive is 0 (no deadline, so no timeout).
func LastSign(now time.Time, keepalive uint16) time.Time {
	d := ReadDeadline(keepalive)
	if d == 0 {
		return time.Time{}
	}
	return now.Add(-d)
}
