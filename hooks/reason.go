package hooks

import (
	"errors"
	"os"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/listener"

	"github.com/presenced/presenced/presence"
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
	case errors.Is(stopCause, packets.ErrSessionTakenOver):
		return presence.EndTakeover
	case errors.Is(stopCause, packets.ErrServerShuttingDown):
		return presence.EndShutdown
	case errors.Is(stopCause, ErrDrained):
		return presence.EndDrain
	case readErr == nil:
		return presence.EndClean
	case errors.Is(readErr, packets.CodeDisconnectWillMessage):
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
