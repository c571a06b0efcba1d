package connack

import (
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Err3BadUsernameOrPassword is MQTT 3.1.1's CONNACK return code 0x04. mochi
// maps 0x86 to 3.1.1's 0x05 (not authorized); a wrong password is 0x04.
var Err3BadUsernameOrPassword = packets.Code{Code: 0x04, Reason: "bad user name or password"}

// Refuse answers a CONNECT that will not be accepted with a CONNACK
// carrying code (MQTT 5), or 3.1.1's nearest return code, before the hook
// returns an error from OnConnect (mochi then closes the connection without
// a CONNACK of its own). v3, when not zero, is the 3.1.1 code to use
// instead of mochi's mapping, which needs srv: without one, only a v3 code
// is written.
func Refuse(srv *mqtt.Server, cl *mqtt.Client, code, v3 packets.Code) {
	if cl.Properties.ProtocolVersion < 5 && v3.Code != 0 {
		_ = cl.WritePacket(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack}, ReasonCode: v3.Code})
		return
	}
	if srv != nil {
		_ = srv.SendConnack(cl, code, false, nil)
	}
}
