package hooks

import (
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/wire"
	"github.com/presenced/presenced/presence"
)

// KickCodes are the MQTT 5 DISCONNECT reason codes an operator may end a
// session with (the admin API's kick), 0x98 administrative action the
// default.
var KickCodes = []packets.Code{
	packets.ErrUnspecifiedError,            // 0x80
	packets.ErrImplementationSpecificError, // 0x83
	packets.ErrNotAuthorized,               // 0x87
	packets.ErrServerBusy,                  // 0x89
	packets.ErrServerShuttingDown,          // 0x8B
	packets.ErrQuotaExceeded,               // 0x97
	packets.ErrAdministrativeAction,        // 0x98
	packets.ErrConnectionRateExceeded,      // 0x9F
}

// KickCode returns the reason code of b, when it is one of KickCodes.
func KickCode(b byte) (packets.Code, bool) {
	for _, c := range KickCodes {
		if c.Code == b {
			return c, true
		}
	}
	return packets.Code{}, false
}

// Kick ends, on an operator's word, the connection that holds the broker's
// client key (presence.ClientKey) as conn: its session ends as kicked (the
// end goes to the tracker here, as the session limit's does, so that the
// client closing first cannot make it a network end), an MQTT 5 client
// gets DISCONNECT code when that write cannot block (presenced's listener,
// or a writer idle now), and the socket is closed; an MQTT 3.1.1 client,
// which has no server DISCONNECT, is closed. It reports false when no
// live connection holds key as conn (it ended, or a newer one took the
// client id): nothing is done then.
func (h *Presence) Kick(key string, conn presence.ConnID, code packets.Code) bool {
	if h.o.Server == nil || conn == 0 {
		return false
	}
	cl, ok := h.o.Server.Clients.Get(key)
	if !ok || cl.Closed() {
		return false
	}
	h.mu.Lock()
	l := h.links[cl]
	if l == nil || l.conn != conn {
		h.mu.Unlock()
		return false
	}
	h.forgetLocked(cl)
	h.o.Tracker.Disconnect(l.conn, cl.ID, presence.EndKicked)
	h.mu.Unlock()
	disconnect(h.o.Server, cl, code)
	return true
}

// disconnect writes DISCONNECT code to an MQTT 5 client when that cannot
// block, and closes the connection with code as its stop cause.
func disconnect(srv *mqtt.Server, cl *mqtt.Client, code packets.Code) {
	if cl.Properties.ProtocolVersion >= 5 && (wire.NeverBlocks(cl) || wire.Idle(cl)) {
		_ = srv.DisconnectClient(cl, code)
		return
	}
	cl.Stop(code)
}
