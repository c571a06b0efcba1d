package notify

import (
	"strings"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/filter"
)

// Viewer says who reads through a connection: its user ("" for an
// observer) and whether it is a service account (the presence hook's).
type Viewer func(cl *mqtt.Client) (user string, service bool)

// Hook tells the stage when a connection of a user subscribes to its
// notify topic on this node: what waits for the user here is delivered.
// Add it after presence's hook.
type Hook struct {
	mqtt.HookBase
	Stage  *Stage
	Viewer Viewer
}

// ID implements mqtt.Hook.
func (h *Hook) ID() string { return "presence-notify" }

// Provides implements mqtt.Hook.
func (h *Hook) Provides(b byte) bool {
	return b == mqtt.OnSubscribed || b == mqtt.OnSessionEstablished
}

// OnSubscribed looks for a granted filter that matches the connection's
// user's notify topic; it costs a prefix comparison per filter otherwise.
func (h *Hook) OnSubscribed(cl *mqtt.Client, pk packets.Packet, codes []byte) {
	if cl.Net.Inline {
		return
	}
	base := h.Stage.o.Prefix + "/notify/"
	for i, sub := range pk.Filters {
		if i < len(codes) && codes[i] >= 0x80 {
			continue
		}
		f := filter.Unshared(sub.Filter)
		if !strings.HasPrefix(f, base) && !strings.HasPrefix(f, "#") && !strings.HasPrefix(f, "+") {
			continue
		}
		if user, _ := h.Viewer(cl); user != "" {
			h.Stage.Subscribed(user)
		}
		return
	}
}

// OnSessionEstablished: a persistent session resumed has its
// subscriptions back without a SUBSCRIBE.
func (h *Hook) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	if cl.Net.Inline || cl.State.Subscriptions.Len() == 0 {
		return
	}
	if user, _ := h.Viewer(cl); user != "" {
		h.Stage.Subscribed(user)
	}
}

// Broker is Local over a mochi server: the subscribers of a topic here that
// are connections of the user, and the server's inline publish.
type Broker struct {
	Server *mqtt.Server
	Viewer Viewer
}

// Subscribed implements Local.
func (b Broker) Subscribed(user, topic string) bool {
	subs := b.Server.Topics.Subscribers(topic)
	for id := range subs.Subscriptions {
		cl, ok := b.Server.Clients.Get(id)
		if !ok || cl.Closed() {
			continue
		}
		if u, _ := b.Viewer(cl); u == user {
			return true
		}
	}
	return false
}

// Publish implements Local.
func (b Broker) Publish(topic string, payload []byte, qos byte) error {
	return b.Server.Publish(topic, payload, false, qos)
}
