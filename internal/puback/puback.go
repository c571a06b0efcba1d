package puback

import (
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Refuse writes the PUBACK (QoS 1) or PUBREC (QoS 2, which with a failure
// code ends the exchange) of pk carrying code and its reason string.
func Refuse(cl *mqtt.Client, pk packets.Packet, code packets.Code) {
	ack := packets.Pubrec
	if pk.FixedHeader.Qos == 1 {
		ack = packets.Puback
	}
	_ = cl.WritePacket(packets.Packet{
		FixedHeader: packets.FixedHeader{Type: ack},
		PacketID:    pk.PacketID,
		ReasonCode:  code.Code,
		Properties:  packets.Properties{ReasonString: code.Reason},
	})
}
