package hooks

import (
	"errors"
	"sync/atomic"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// ErrDrained is the stop cause of a connection that a drain moved away:
// OnDisconnect maps it to the end reason drain.
var ErrDrained = errors.New("presence: the node is draining: the client was asked to move")

// drainState is what the hook knows of a drain in progress.
type drainState struct {
	reference string // the MQTT 5 Server Reference to give, "" for none
}

// DrainCounters are the drain's counts, read with atomic loads.
type DrainCounters struct {
	Refused atomic.Int64 // CONNECTs refused while draining
	Moved   atomic.Int64 // connections asked to move (DISCONNECT 0x9C / 0x8B, or closed)
}

// Drain makes the hook refuse every CONNECT from now on: MQTT 5 gets
// CONNACK 0x9C (use another server) with the Server Reference reference, or
// 0x8B (server shutting down) without one; MQTT 3.1.1 gets 0x03 (server
// unavailable). It cannot be undone: a drained node stops.
func (h *Presence) Drain(reference string) {
	h.drain.CompareAndSwap(nil, &drainState{reference: reference})
}

// Draining reports whether Drain was called.
func (h *Presence) Draining() bool { return h.drain.Load() != nil }

// drainCode is the MQTT 5 reason code of a drain, with its properties.
func drainCode(d *drainState) (packets.Code, packets.Properties) {
	if d.reference != "" {
		return packets.ErrUseAnotherServer, packets.Properties{ServerReference: d.reference}
	}
	return packets.ErrServerShuttingDown, packets.Properties{}
}

// refuseDraining answers a CONNECT that comes while draining.
func (h *Presence) refuseDraining(cl *mqtt.Client, d *drainState) {
	h.Drained.Refused.Add(1)
	if cl.Properties.ProtocolVersion < 5 {
		_ = cl.WritePacket(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack}, ReasonCode: packets.Err3ServerUnavailable.Code})
		return
	}
	if h.o.Server == nil {
		return
	}
	code, props := drainCode(d)
	_ = h.o.Server.SendConnack(cl, code, false, &props)
}

// Move asks one connection to go to another node, as a drain does: its will
// is cleared (the device is expected to reconnect elsewhere, not to have
// died), an MQTT 5 client gets DISCONNECT 0x9C with the Server Reference (or
// 0x8B without one), a 3.1.1 client (which has no server DISCONNECT) is
// closed, and the connection stops with ErrDrained, so that its session
// ends as drain. The DISCONNECT is written only when that cannot block
// (presenced's listener, or a writer idle now); otherwise the socket is
// just closed. It reports false for a connection already closed. Call
// Drain first.
func (h *Presence) Move(cl *mqtt.Client) bool {
	if cl.Closed() {
		return false
	}
	d := h.drain.Load()
	if d == nil {
		d = &drainState{}
	}
	if atomic.SwapUint32(&cl.Properties.Will.Flag, 0) == 1 {
		h.Stats.WillsSuppressed.Add(1)
	}
	h.mu.Lock() // before the DISCONNECT, which the client may answer by closing
	if l := h.links[cl]; l != nil {
		l.drained = true
	}
	h.mu.Unlock()
	if cl.Properties.ProtocolVersion >= 5 && (writesNeverBlock(cl) || writerIdle(cl)) {
		code, props := drainCode(d)
		props.ReasonString = code.Reason
		_ = cl.WritePacket(packets.Packet{
			FixedHeader: packets.FixedHeader{Type: packets.Disconnect},
			ReasonCode:  code.Code,
			Properties:  props,
		})
	}
	cl.Stop(ErrDrained)
	h.Drained.Moved.Add(1)
	return true
}

// Sessions returns how many connections with a user (presence sessions)
// this hook holds.
func (h *Presence) Sessions() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for _, l := range h.links {
		if l.conn != 0 {
			n++
		}
	}
	return n
}
