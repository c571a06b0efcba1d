package groups

import (
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Hook is the mochi hook that tells the stage of each SUBSCRIBE's filters
// (Watch), so that a group topic is kept from its first subscription on.
// It never waits on the store, holds no lock of the delivery fence, and so
// may be added in any order.
type Hook struct {
	mqtt.HookBase
	Stage *Stage
}

// ID implements mqtt.Hook.
func (h *Hook) ID() string { return "presence-groups" }

// Provides implements mqtt.Hook.
func (h *Hook) Provides(b byte) bool { return b == mqtt.OnSubscribe }

// OnSubscribe implements mqtt.Hook.
func (h *Hook) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if cl.Net.Inline {
		return pk
	}
	for _, f := range pk.Filters {
		if f.Filter != "" {
			h.Stage.Watch(cl, f.Filter)
		}
	}
	return pk
}
