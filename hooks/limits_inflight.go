package hooks

import (
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// The bounds of a session's unacknowledged outbound QoS 1 and 2 messages.
// mochi bounds their count (Capabilities.MaximumInflight, the broker's
// mqtt.max_inflight_messages) but not their bytes, and keeps them while a
// persistent session is offline and while a connected client reads but never
// acknowledges. Limits follows each session's messages from OnQosPublish to
// OnQosComplete or OnQosDropped:
//   - a message that would take its session over MaxInflightBytes (one
//     alone always passes, however large) ends the
//     connection (as mosquitto's max_queued_bytes, a slow consumer is its own
//     problem) and is dropped from the session, so that an offline persistent
//     session never holds more either;
//   - a connection whose oldest unacknowledged message is older than
//     MaxInflightAge is ended by Tidy (mochi resends on reconnect only).
//
// Ending a connection here closes its socket only: no DISCONNECT is
// written, since mochi's WritePacket can block on a client that does not
// read, and these hooks run on publishers' goroutines.

// flight is what Limits keeps of a session's unacknowledged messages.
type flight struct {
	bytes int64
	msgs  map[uint16]sent
}

// sent is one unacknowledged message: its size and when it was first kept.
type sent struct {
	size int64
	at   time.Time
}

// size is what a message costs to keep: its topic and payload.
func size(pk packets.Packet) int64 { return int64(len(pk.TopicName) + len(pk.Payload)) }

// OnQosPublish counts an outbound QoS 1 or 2 message kept for cl (a resend
// after a reconnect counts it again for the new connection).
func (l *Limits) OnQosPublish(cl *mqtt.Client, pk packets.Packet, _ int64, _ int) {
	if pk.FixedHeader.Type != packets.Publish || cl.Net.Inline || l.o.MaxInflightBytes <= 0 && l.o.MaxInflightAge <= 0 {
		return
	}
	n := size(pk)
	l.fmu.Lock()
	f := l.flights[cl]
	if f == nil {
		f = &flight{msgs: make(map[uint16]sent)}
		l.flights[cl] = f
	}
	old, had := f.msgs[pk.PacketID]
	held := f.bytes - old.size
	over := l.o.MaxInflightBytes > 0 && held > 0 && held+n > l.o.MaxInflightBytes // one message alone always passes
	if !over {
		f.bytes += n - old.size
		if !had {
			old.at = time.Now()
		}
		f.msgs[pk.PacketID] = sent{size: n, at: old.at}
	}
	l.fmu.Unlock()
	if !over {
		return
	}
	// Ended first: mochi then neither writes it nor counts the send
	// quota of an open connection (a persistent session's is reset when
	// it comes back).
	if !cl.Closed() {
		l.Stats.InflightEnded.Add(1)
		l.o.Log.Info("connection ended: unacknowledged messages over the byte limit", "client", ClientID(cl), "remote", cl.Net.Remote)
		cl.Stop(packets.ErrQuotaExceeded)
	}
	if !had {
		l.Stats.InflightDropped.Add(1)
		l.drop(cl, pk.PacketID)
		// mochi sets a message again after this hook when the client's
		// receive maximum is used up: Tidy looks again.
		l.fmu.Lock()
		l.dropped = append(l.dropped, dropped{cl, pk.PacketID})
		l.fmu.Unlock()
	}
}

// dropped is a message OnQosPublish dropped, for Tidy to look at again.
type dropped struct {
	cl *mqtt.Client
	id uint16
}

// drop deletes message id from cl's session in mochi.
func (l *Limits) drop(cl *mqtt.Client, id uint16) {
	if cl.State.Inflight.Delete(id) && l.o.Server != nil {
		atomic.AddInt64(&l.o.Server.Info.Inflight, -1)
	}
}

// OnQosComplete stops counting an acknowledged message.
func (l *Limits) OnQosComplete(cl *mqtt.Client, pk packets.Packet) { l.forget(cl, pk.PacketID) }

// OnQosDropped stops counting a message mochi dropped.
func (l *Limits) OnQosDropped(cl *mqtt.Client, pk packets.Packet) { l.forget(cl, pk.PacketID) }

// OnClientExpired forgets an expired session: its messages, and its count
// against its user.
func (l *Limits) OnClientExpired(cl *mqtt.Client) {
	l.endSession(cl)
	l.fmu.Lock()
	delete(l.flights, cl)
	l.fmu.Unlock()
}

func (l *Limits) forget(cl *mqtt.Client, id uint16) {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	f := l.flights[cl]
	if f == nil {
		return
	}
	if m, ok := f.msgs[id]; ok {
		f.bytes -= m.size
		delete(f.msgs, id)
	}
	if len(f.msgs) == 0 {
		delete(l.flights, cl)
	}
}

// tidyFlights ends every open connection whose oldest unacknowledged
// message is older than MaxInflightAge, and forgets the sessions mochi no
// longer holds (a taken-over connection, one ended without a hook).
func (l *Limits) tidyFlights(now time.Time) {
	var late []*mqtt.Client
	l.fmu.Lock()
	again := l.dropped
	l.dropped = nil
	for _, d := range again {
		if f := l.flights[d.cl]; f != nil {
			if _, ok := f.msgs[d.id]; ok {
				continue // the id holds a later message now
			}
		}
		l.drop(d.cl, d.id)
	}
	for cl, f := range l.flights {
		if cl.Closed() {
			if l.o.Server != nil {
				if held, ok := l.o.Server.Clients.Get(cl.ID); !ok || held != cl {
					delete(l.flights, cl)
				}
			}
			continue
		}
		if l.o.MaxInflightAge <= 0 {
			continue
		}
		for _, m := range f.msgs {
			if now.Sub(m.at) > l.o.MaxInflightAge {
				late = append(late, cl)
				break
			}
		}
	}
	l.fmu.Unlock()
	for _, cl := range late {
		l.Stats.InflightEnded.Add(1)
		l.o.Log.Info("connection ended: a message unacknowledged too long", "client", ClientID(cl), "remote", cl.Net.Remote)
		cl.Stop(packets.ErrQuotaExceeded)
	}
}
