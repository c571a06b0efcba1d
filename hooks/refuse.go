package hooks

import (
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"
)

// Err3BadUsernameOrPassword is MQTT 3.1.1's CONNACK return code 0x04. mochi
// maps 0x86 to 3.1.1's 0x05 (not authorized); a wrong password is 0x04.
var err3BadUsernameOrPassword = packets.Code{Code: 0x04, Reason: "bad user name or password"}

// refuseConnect answers a CONNECT that will not be accepted with a CONNACK
// carrying code (MQTT 5), or 3.1.1's nearest return code, before the hook
// returns an error from OnConnect (mochi then closes the connection without
// a CONNACK of its own). v3, when not zero, is the 3.1.1 code to use
// instead of mochi's mapping.
func refuseConnect(srv *mqtt.Server, cl *mqtt.Client, code, v3 packets.Code) {
	if cl.Properties.ProtocolVersion < 5 && v3.Code != 0 {
		_ = cl.WritePacket(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack}, ReasonCode: v3.Code})
		return
	}
	if srv != nil {
		_ = srv.SendConnack(cl, code, false, nil)
	}
}

// logLimiter lets through one log line per interval and counts the rest,
// so that a flood of refusals cannot flood the log.
type logLimiter struct {
	every      time.Duration
	mu         sync.Mutex
	last       time.Time
	suppressed atomic.Int64
}

// event returns the event to log to, with the number of lines suppressed
// since the last one, or nil when this one is suppressed.
func (l *logLimiter) event(log zerolog.Logger, now time.Time) *zerolog.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed.Add(1)
		return nil
	}
	l.last = now
	return log.Info().Int64("suppressed_since_last", l.suppressed.Swap(0))
}
