package lifecycle

import (
	"net"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/presence"
)

// Refusals is the mochi hook that sees every CONNECT this node refused,
// whoever refused it (the drain, the limits, presence's identity rules,
// the authentication hook, or mochi itself), by the CONNACK with a failure
// code it wrote, and tells the stage (Stage.Refused, which never blocks):
// one place instead of a call in each hook that refuses.
type Refusals struct {
	mqtt.HookBase
	Stage *Stage
	Now   func() time.Time
}

// ID implements mqtt.Hook.
func (r *Refusals) ID() string { return "presence-lifecycle-refusals" }

// Provides implements mqtt.Hook.
func (r *Refusals) Provides(b byte) bool { return b == mqtt.OnPacketSent }

// OnPacketSent implements mqtt.Hook: a CONNACK with a failure code is a
// refused CONNECT.
func (r *Refusals) OnPacketSent(cl *mqtt.Client, pk packets.Packet, _ []byte) {
	if pk.FixedHeader.Type != packets.Connack || pk.ReasonCode == 0 || cl.Net.Inline {
		return
	}
	ip := cl.Net.Remote
	if h, _, err := net.SplitHostPort(ip); err == nil {
		ip = h
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	user := string(cl.Properties.Username)
	r.Stage.Refused(presence.LifecycleEvent{
		Kind: presence.LifecycleConnectFailed, User: user,
		Session: presence.SessionView{ID: presence.ClientIDOf(cl.ID), Conn: presence.Conn{Username: user, IP: ip, Listener: cl.Net.Listener,
			ProtoVer: cl.Properties.ProtocolVersion}},
		Reason: RefusalReason(cl.Properties.ProtocolVersion, pk.ReasonCode),
		At:     now(),
	})
}

// RefusalReason classifies a CONNACK failure code of a client of protocol
// version v (3.1.1's return codes below 0x80, MQTT 5's reason codes).
func RefusalReason(v byte, code byte) presence.EndReason {
	if v < 5 {
		switch code {
		case 0x04, 0x05: // bad user name or password, not authorized
			return RefusedAuth
		case 0x01, 0x02: // unacceptable protocol version, identifier rejected
			return RefusedProtocol
		}
		return RefusedThrottle // 0x03: server unavailable (limits, rates, drain)
	}
	switch code {
	case 0x86, 0x87, 0x8A, 0x8C: // bad credentials, not authorized, banned, bad authentication method
		return RefusedAuth
	case 0x89, 0x97, 0x9F: // server busy, quota exceeded, connection rate exceeded
		return RefusedThrottle
	case 0x88, 0x8B, 0x9C, 0x9D: // server unavailable, shutting down, use another server, server moved
		return RefusedServer
	}
	return RefusedProtocol
}
