package hooks

import (
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Groups is the mochi hook that tells presence of each SUBSCRIBE's filters
// before mochi reads the retained messages for them, so that a group topic
// is kept (its snapshot retained) from its first subscription on. It must be
// added before Delivery: Watch may retain, which waits for the delivery
// fence that Delivery's OnSubscribe holds for the rest of a SUBSCRIBE.
type Groups struct {
	mqtt.HookBase
	Watch func(cl *mqtt.Client, filter string)
}

// ID implements mqtt.Hook.
func (g *Groups) ID() string { return "presence-groups" }

// Provides implements mqtt.Hook.
func (g *Groups) Provides(b byte) bool { return b == mqtt.OnSubscribe }

// OnSubscribe implements mqtt.Hook.
func (g *Groups) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if cl.Net.Inline {
		return pk
	}
	for _, f := range pk.Filters {
		if f.Filter != "" {
			g.Watch(cl, f.Filter)
		}
	}
	return pk
}
