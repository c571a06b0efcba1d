// Package hooks turns mochi-mqtt's connection events into presence events.
// A hook runs on the client's goroutine: it translates, hands the event to the
// Tracker and returns at once. It never publishes presence itself and never
// does I/O; retained presence comes only from committed changes on the feed.
package hooks

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"

	"github.com/presenced/presenced/presence"
)

// Tracker is what the hook hands presence events to (the node implements it).
// Every method must return at once: no I/O on the packet path.
type Tracker interface {
	// Connect is called when a connection with a user is about to be
	// established (before CONNACK). It replaces any earlier connection with
	// the same client id.
	Connect(cl *mqtt.Client, id Identity)
	// Established is called once CONNACK has been sent.
	Established(cl *mqtt.Client)
	// Set applies a presence/set from cl.
	Set(cl *mqtt.Client, user string, req presence.SetRequest)
	// LastWords records the text of cl's will on presence/set, applied when
	// the session ends uncleanly.
	LastWords(cl *mqtt.Client, text string)
	// Disconnect is called when the connection has ended.
	Disconnect(cl *mqtt.Client, reason presence.EndReason)
}

// DiscardedWillTopic is where a will under the presence prefix is sent
// instead of its own topic: mochi cannot suppress a will, only rewrite it.
// $SYS topics match no wildcard filter, and OnACLCheck denies reading this
// one to every client, so the rewritten will reaches nobody.
const DiscardedWillTopic = "$SYS/presenced/discarded-will"

// Options configure the hook.
type Options struct {
	Prefix          string        // topic prefix, e.g. "presence"
	Identity        IdentityRule  // where users come from
	ServerKeepAlive time.Duration // given to clients that connect with keep-alive 0
	Clients         *mqtt.Clients // the server's clients, to clear a taken-over will
	Tracker         Tracker
	// Retained, when set, is held for reading from a SUBSCRIBE that can
	// match presence/users/... until mochi has queued its retained messages,
	// and held for writing by the publisher around each retained publish.
	// See OnSubscribe.
	Retained *sync.RWMutex
	// Dropped, when set, is told the user of a presence message mochi
	// dropped for a subscriber whose outbound queue was full, so that the
	// current state is sent again (see OnPublishDropped).
	Dropped func(user string)
	Log     zerolog.Logger
}

// Counters are the hook's counts, read with atomic loads.
type Counters struct {
	SetAccepted     atomic.Int64
	SetRejected     atomic.Int64
	WritesDenied    atomic.Int64 // publishes refused under the read-only prefix
	WillsDiscarded  atomic.Int64 // wills under the prefix rewritten away
	WillsSuppressed atomic.Int64 // wills of taken-over connections cleared
	BadIdentity     atomic.Int64 // connections refused for a bad user or device
	Dropped         atomic.Int64 // messages mochi dropped for a full subscriber queue
}

// Presence is the mochi hook.
type Presence struct {
	mqtt.HookBase
	o        Options
	set      string // prefix/set
	readOnly []string
	gate     gate
	holding  sync.Map // *mqtt.Client -> struct{}: holds o.Retained for reading
	Counters Counters
}

// New returns the hook.
func New(o Options) *Presence {
	return &Presence{
		o:        o,
		set:      o.Prefix + "/set",
		readOnly: []string{o.Prefix + "/"},
	}
}

// ID implements mqtt.Hook.
func (h *Presence) ID() string { return "presence" }

// Provides implements mqtt.Hook. It does not provide OnPacketRead; it does
// provide OnPacketProcessed (for SUBSCRIBE), which returns at once for every
// other packet, PINGREQ included: BenchmarkHookPINGREQ measures that cost.
func (h *Presence) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnect, mqtt.OnConnectAuthenticate, mqtt.OnACLCheck,
		mqtt.OnSessionEstablish, mqtt.OnSessionEstablished, mqtt.OnDisconnect,
		mqtt.OnPublish, mqtt.OnWill, mqtt.OnSubscribe, mqtt.OnPacketProcessed,
		mqtt.OnPublishDropped:
		return true
	}
	return false
}

func (h *Presence) identify(cl *mqtt.Client) (Identity, error) {
	return h.o.Identity.Identify(string(cl.Properties.Username), cl.ID)
}

// OnConnect gives a client that asked for keep-alive 0 the server keep-alive,
// so that no session can live forever on a half-open socket.
func (h *Presence) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	if pk.Connect.Keepalive == 0 && h.o.ServerKeepAlive > 0 {
		cl.State.Keepalive = uint16(h.o.ServerKeepAlive / time.Second)
		cl.State.ServerKeepalive = true
	}
	return nil
}

// OnConnectAuthenticate accepts every connection whose identity is valid.
// (Authentication proper comes later.) A bad user name or device is refused
// with CONNACK "bad user name or password".
func (h *Presence) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	if _, err := h.identify(cl); err != nil {
		h.Counters.BadIdentity.Add(1)
		h.o.Log.Info().Str("client", cl.ID).Str("remote", cl.Net.Remote).Err(err).Msg("connection refused: bad identity")
		return false
	}
	if d := device(pk); d != "" {
		if err := presence.ValidDevice(d); err != nil {
			h.Counters.BadIdentity.Add(1)
			h.o.Log.Info().Str("client", cl.ID).Err(err).Msg("connection refused: bad device property")
			return false
		}
	}
	return true
}

// device returns the MQTT 5 CONNECT user property "device".
func device(pk packets.Packet) string {
	for _, p := range pk.Properties.User {
		if p.Key == "device" {
			return p.Val
		}
	}
	return ""
}

// underPrefix reports whether topic is in the broker's namespace.
func (h *Presence) underPrefix(topic string) bool {
	return topic == h.o.Prefix || strings.HasPrefix(topic, h.readOnly[0])
}

// OnACLCheck keeps the presence namespace read-only: only the broker's inline
// client writes there, except presence/set, which a connection with a user
// may write. Nobody reads the discarded-will topic.
func (h *Presence) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	if cl.Net.Inline {
		return true
	}
	if !write {
		return topic != DiscardedWillTopic
	}
	if !h.underPrefix(topic) {
		return true
	}
	if topic == h.set {
		if id, err := h.identify(cl); err == nil && !id.Observer() {
			return true
		}
	}
	h.Counters.WritesDenied.Add(1)
	h.o.Log.Debug().Str("client", cl.ID).Str("topic", topic).Msg("publish refused: presence topics are read-only")
	return false
}

// OnSubscribe makes a subscription to presence atomic with the publisher.
// mochi adds the subscription to its index and only later reads and queues
// the retained messages; a presence change published in between reaches the
// subscriber twice, or live first and then as an older retained message,
// which would show a version going backwards. So a SUBSCRIBE whose filters
// can match presence/users/... holds Retained for reading until mochi has
// processed it (OnPacketProcessed), and the publisher holds it for writing.
func (h *Presence) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if h.o.Retained == nil || cl.Net.Inline {
		return pk
	}
	for _, f := range pk.Filters {
		if h.canMatchUsers(f.Filter) {
			h.o.Retained.RLock()
			h.holding.Store(cl, struct{}{})
			break
		}
	}
	return pk
}

// OnPacketProcessed releases what OnSubscribe took. It is called for every
// packet, so it returns at once for everything but a held SUBSCRIBE.
func (h *Presence) OnPacketProcessed(cl *mqtt.Client, pk packets.Packet, _ error) {
	if pk.FixedHeader.Type != packets.Subscribe {
		return
	}
	if _, ok := h.holding.LoadAndDelete(cl); ok {
		h.o.Retained.RUnlock()
	}
}

// OnPublishDropped is called by mochi when a message could not be queued
// for a subscriber (its outbound queue, mqtt.max_writes_pending, was full):
// mochi drops it for good. A dropped presence message would leave that
// observer with an old state, so the user is handed to Dropped, which sends
// the current state again once the queue has had time to drain.
func (h *Presence) OnPublishDropped(cl *mqtt.Client, pk packets.Packet) {
	h.Counters.Dropped.Add(1)
	if h.o.Dropped == nil {
		return
	}
	if user, ok := strings.CutPrefix(pk.TopicName, h.o.Prefix+"/users/"); ok && user != "" {
		h.o.Dropped(user)
	}
}

// canMatchUsers reports whether a filter can match prefix/users/{user}.
func (h *Presence) canMatchUsers(filter string) bool {
	if strings.HasPrefix(filter, "$share/") {
		return false // shared subscriptions get no retained messages
	}
	want := strings.Split(h.o.Prefix+"/users/x", "/")
	got := strings.Split(filter, "/")
	for i, level := range got {
		if level == "#" {
			return true
		}
		if i >= len(want) {
			return false
		}
		if level != "+" && level != want[i] && i != len(want)-1 {
			return false
		}
	}
	return len(got) == len(want)
}

// OnSessionEstablish runs before CONNACK and before mochi takes over an
// existing connection with the same client id. It clears that connection's
// will flag, so that mochi's sendLWT skips it when the old socket closes: a
// takeover is not a death.
func (h *Presence) OnSessionEstablish(cl *mqtt.Client, pk packets.Packet) {
	h.gate.enter(cl)
	if h.o.Clients != nil {
		if old, ok := h.o.Clients.Get(cl.ID); ok && old != cl && !old.Closed() {
			if atomic.SwapUint32(&old.Properties.Will.Flag, 0) == 1 {
				h.Counters.WillsSuppressed.Add(1)
			}
		}
	}
	id, err := h.identify(cl)
	if err != nil || id.Observer() {
		return
	}
	if d := device(pk); d != "" {
		id.Device = d
	}
	h.o.Tracker.Connect(cl, id)
}

// OnSessionEstablished runs after CONNACK.
func (h *Presence) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	h.gate.leave(cl)
	if id, err := h.identify(cl); err == nil && !id.Observer() {
		h.o.Tracker.Established(cl)
	}
}

// OnDisconnect ends the connection's session with the reason mochi gives.
func (h *Presence) OnDisconnect(cl *mqtt.Client, err error, _ bool) {
	h.gate.leave(cl)
	if id, ierr := h.identify(cl); ierr == nil && !id.Observer() {
		h.o.Tracker.Disconnect(cl, EndReason(err, cl.StopCause()))
	}
}

// OnPublish consumes presence/set. A valid payload is handed to the tracker;
// either way no subscriber receives the message and nothing is retained
// (CodeSuccessIgnore). An invalid payload changes nothing: an MQTT 5 client
// publishing with QoS 1 gets PUBACK 0x99 (payload format invalid), with QoS 2
// PUBREC 0x99. QoS 0 and MQTT 3.1.1 cannot be told: the message is
// acknowledged as usual and dropped (and counted).
// Only packets.Code errors and the two sentinels stop mochi from delivering,
// so no other error is ever returned.
func (h *Presence) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline || pk.TopicName != h.set {
		return pk, nil
	}
	id, err := h.identify(cl)
	if err != nil || id.Observer() {
		return pk, packets.ErrRejectPacket // the ACL check already refused it
	}
	req, err := presence.ParseSetRequest(pk.Payload)
	if err != nil {
		h.Counters.SetRejected.Add(1)
		h.o.Log.Debug().Str("client", cl.ID).Err(err).Msg("presence/set refused")
		if cl.Properties.ProtocolVersion == 5 {
			switch pk.FixedHeader.Qos {
			case 1:
				return pk, packets.ErrPayloadFormatInvalid
			case 2:
				// mochi would answer a reason code with a PUBACK; a QoS 2
				// exchange needs a PUBREC, which with a failure code ends it.
				_ = cl.WritePacket(packets.Packet{
					FixedHeader: packets.FixedHeader{Type: packets.Pubrec},
					PacketID:    pk.PacketID,
					ReasonCode:  packets.ErrPayloadFormatInvalid.Code,
				})
				return pk, packets.ErrRejectPacket
			}
		}
		return pk, packets.CodeSuccessIgnore
	}
	h.Counters.SetAccepted.Add(1)
	h.o.Tracker.Set(cl, id.User, req)
	return pk, packets.CodeSuccessIgnore
}

// OnWill rewrites a will under the presence prefix so that it is never
// delivered raw (mochi sends wills without an ACL check, and cannot be told
// to drop one). A will on presence/set with a valid session-scope payload
// becomes the session's last words: its text is kept with last_seen when the
// session ends uncleanly, checked against the session's epoch by the store.
// Wills to other topics pass unchanged.
func (h *Presence) OnWill(cl *mqtt.Client, will mqtt.Will) (mqtt.Will, error) {
	if !h.underPrefix(will.TopicName) {
		return will, nil
	}
	if will.TopicName == h.set {
		if id, err := h.identify(cl); err == nil && !id.Observer() {
			if req, err := presence.ParseSetRequest(will.Payload); err == nil && req.Scope == presence.ScopeSession && req.Text != nil {
				h.o.Tracker.LastWords(cl, *req.Text)
			}
		}
	}
	h.Counters.WillsDiscarded.Add(1)
	will.TopicName = DiscardedWillTopic
	will.Payload = nil
	will.Retain = false
	will.User = nil
	return will, nil
}
