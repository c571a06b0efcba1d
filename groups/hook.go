package groups

import (
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Hook is the mochi hook of the group topics' resume: a SUBSCRIBE to
// presence/groups/{group} with the MQTT 5 user property "version" (the
// group version the client holds) gets no retained snapshot (AskResume, in
// OnSubscribe), and is sent what it missed (Resumed, in OnSubscribed; the
// interest stage's hook tells the stage of the group's first subscription,
// Watch). Add it before the delivery's hook: its OnSubscribed must run
// while that hook holds the fence for reading, so that no batch is
// published between mochi's indexing of the subscription and the resume's
// record.
type Hook struct {
	mqtt.HookBase
	Stage *Stage
}

// ID implements mqtt.Hook.
func (h *Hook) ID() string { return "presence-groups" }

// Provides implements mqtt.Hook.
func (h *Hook) Provides(b byte) bool {
	return b == mqtt.OnSubscribe || b == mqtt.OnSubscribed || b == mqtt.OnDisconnect
}

// OnSubscribe implements mqtt.Hook.
func (h *Hook) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if cl.Net.Inline {
		return pk
	}
	return h.Stage.AskResume(cl, pk)
}

// OnSubscribed implements mqtt.Hook.
func (h *Hook) OnSubscribed(cl *mqtt.Client, pk packets.Packet, codes []byte) {
	if cl.Net.Inline {
		return
	}
	h.Stage.Resumed(cl, pk, codes)
}

// OnDisconnect implements mqtt.Hook.
func (h *Hook) OnDisconnect(cl *mqtt.Client, _ error, _ bool) { h.Stage.Gone(cl) }
