// Package hooks is where MQTT meets presence: two mochi hooks.
//
// Presence turns a connection's events into presence events and hands them
// to the tracker, returning at once: nothing on the packet path waits on the
// store, and a hook never publishes presence itself. It also applies
// presenced's identity rules, keeps the presence namespace read-only and
// rewrites wills under it.
//
// Delivery stands between mochi and each subscriber: a user's presence
// reaches a subscriber in order, what mochi drops for a full queue is made
// good, and a subscriber that cannot take it is disconnected as a slow
// consumer.
//
// Guard is the server's one OnACLCheck when presence is its access
// authority: the program's decision first, then presence's, so that what is
// sent again reaches only the subscribers that missed it and no subscriber
// receives a version twice. Authenticator is an authentication hook without
// an OnACLCheck, to go with it.
package hooks

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"

	"github.com/presenced/presenced/presence"
)

// Tracker is what the hook hands presence events to (the tracker package
// implements it). Every method must return at once: no I/O on the packet
// path. conn names the connection; id is its client id, the session id.
type Tracker interface {
	// Connect is called when a connection with a user is about to be
	// established (before CONNACK). It replaces any earlier connection with
	// the same client id.
	Connect(conn presence.ConnID, id, user, device string)
	// Established is called once CONNACK has been sent.
	Established(conn presence.ConnID, id string)
	// Set applies a presence/set from the connection.
	Set(conn presence.ConnID, id, user string, req presence.SetRequest)
	// LastWords records the text of the connection's will on presence/set,
	// applied when the session ends uncleanly.
	LastWords(conn presence.ConnID, id, text string)
	// Disconnect is called when the connection has ended.
	Disconnect(conn presence.ConnID, id string, reason presence.EndReason)
}

// DiscardedWillTopic is where a will under the presence prefix is sent
// instead of its own topic: mochi cannot suppress a will, only rewrite it.
// $SYS topics match no wildcard filter, and the Delivery hook drops every
// message on this topic before it is written, so it reaches nobody.
const DiscardedWillTopic = "$SYS/presenced/discarded-will"

// Options configure the hook.
type Options struct {
	Prefix          string        // topic prefix, e.g. "presence"
	Identity        IdentityRule  // where users come from
	ServerKeepAlive time.Duration // given to clients that connect with keep-alive 0
	// Server is the broker the hook is added to: the hook clears the will
	// of a connection taken over, and answers a refused CONNECT itself.
	Server  *mqtt.Server
	Tracker Tracker
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
}

// Presence is the mochi hook that turns connection events into presence
// events. It decides nothing about who may connect (the program's
// authentication hook does) beyond presenced's identity rules, and it keeps
// the presence namespace read-only through OnPublish, not OnACLCheck: mochi
// lets a connection do what any one hook allows, so a deny in OnACLCheck
// would not hold beside an allow-all authentication hook.
type Presence struct {
	mqtt.HookBase
	o      Options
	set    string // prefix/set
	under  string // prefix/
	gate   gate
	conns  sync.Map // *mqtt.Client -> link, for connections with a user
	nextID atomic.Uint64

	Counters Counters
}

// link is what the hook keeps of a connection with a user.
type link struct {
	conn presence.ConnID
	user string
}

// New returns the hook.
func New(o Options) *Presence {
	return &Presence{o: o, set: o.Prefix + "/set", under: o.Prefix + "/"}
}

// ID implements mqtt.Hook.
func (h *Presence) ID() string { return "presence" }

// Provides implements mqtt.Hook. Nothing on the path of an established
// connection's packets but OnPublish, which returns at once for every topic
// outside the prefix: BenchmarkHookPINGREQ measures that PINGREQ costs
// nothing more.
func (h *Presence) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnect, mqtt.OnSessionEstablish, mqtt.OnSessionEstablished,
		mqtt.OnDisconnect, mqtt.OnPublish, mqtt.OnWill:
		return true
	}
	return false
}

func (h *Presence) identify(cl *mqtt.Client) (Identity, error) {
	return h.o.Identity.Identify(string(cl.Properties.Username), cl.ID)
}

// errBadIdentity stops a CONNECT whose identity cannot be used; the hook
// has already answered it with CONNACK "bad user name or password".
var errBadIdentity = errors.New("presence: bad identity")

// OnConnect refuses a connection whose user, client id or device cannot
// be used (CONNACK "bad user name or password"), and gives a client that
// asked for keep-alive 0 the server keep-alive, so that no session can live
// forever on a half-open socket.
func (h *Presence) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	_, err := h.identify(cl)
	if err == nil {
		if d := device(pk); d != "" {
			err = presence.ValidDevice(d)
		}
	}
	if err != nil {
		h.Counters.BadIdentity.Add(1)
		h.o.Log.Info().Str("client", cl.ID).Str("remote", cl.Net.Remote).Err(err).Msg("connection refused: bad identity")
		if h.o.Server != nil {
			_ = h.o.Server.SendConnack(cl, packets.ErrBadUsernameOrPassword, false, nil)
		}
		return errBadIdentity
	}
	if pk.Connect.Keepalive == 0 && h.o.ServerKeepAlive > 0 {
		cl.State.Keepalive = uint16(h.o.ServerKeepAlive / time.Second)
		cl.State.ServerKeepalive = true
	}
	return nil
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
	return topic == h.o.Prefix || strings.HasPrefix(topic, h.under)
}

// OnSessionEstablish runs before CONNACK and before mochi takes over an
// existing connection with the same client id. It clears that connection's
// will flag, so that mochi's sendLWT skips it when the old socket closes: a
// takeover is not a death.
func (h *Presence) OnSessionEstablish(cl *mqtt.Client, pk packets.Packet) {
	h.gate.enter(cl)
	if h.o.Server != nil {
		if old, ok := h.o.Server.Clients.Get(cl.ID); ok && old != cl && !old.Closed() {
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
	conn := presence.ConnID(h.nextID.Add(1))
	h.conns.Store(cl, link{conn: conn, user: id.User})
	h.o.Tracker.Connect(conn, cl.ID, id.User, id.Device)
}

// link returns what the hook keeps of the connection, if it has a user.
func (h *Presence) link(cl *mqtt.Client) (link, bool) {
	v, ok := h.conns.Load(cl)
	if !ok {
		return link{}, false
	}
	return v.(link), true
}

// OnSessionEstablished runs after CONNACK.
func (h *Presence) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	h.gate.leave(cl)
	if l, ok := h.link(cl); ok {
		h.o.Tracker.Established(l.conn, cl.ID)
	}
}

// OnDisconnect ends the connection's session with the reason mochi gives.
func (h *Presence) OnDisconnect(cl *mqtt.Client, err error, _ bool) {
	h.gate.leave(cl)
	if v, ok := h.conns.LoadAndDelete(cl); ok {
		h.o.Tracker.Disconnect(v.(link).conn, cl.ID, EndReason(err, cl.StopCause()))
	}
}

// OnPublish keeps the namespace read-only and consumes presence/set.
//
// Under the prefix, only the broker itself publishes, except presence/set by
// a connection with a user. Any other publish there is refused and changes
// nothing: MQTT 5 QoS 1 and 2 get PUBACK or PUBREC 0x87 (not authorized),
// QoS 0 is dropped, and an MQTT 3.1.1 client publishing with QoS 1 or 2 is
// disconnected (3.1.1 has no negative acknowledgement).
//
// A valid presence/set is handed to the tracker; either way no subscriber
// receives the message and nothing is retained (CodeSuccessIgnore). An
// invalid payload changes nothing: MQTT 5 QoS 1 gets PUBACK 0x99 (payload
// format invalid), QoS 2 PUBREC 0x99; QoS 0 and MQTT 3.1.1 cannot be told,
// so the message is acknowledged as usual and dropped (and counted).
//
// Only packets.Code errors and the two sentinels stop mochi from
// delivering, so no other error is ever returned.
func (h *Presence) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline || !h.underPrefix(pk.TopicName) {
		return pk, nil
	}
	l, hasUser := h.link(cl)
	if pk.TopicName != h.set || !hasUser {
		h.Counters.WritesDenied.Add(1)
		h.o.Log.Debug().Str("client", cl.ID).Str("topic", pk.TopicName).Msg("publish refused: presence topics are read-only")
		return h.refuse(cl, pk, packets.ErrNotAuthorized)
	}
	req, err := presence.ParseSetRequest(pk.Payload)
	if err != nil {
		h.Counters.SetRejected.Add(1)
		h.o.Log.Debug().Str("client", cl.ID).Err(err).Msg("presence/set refused")
		if cl.Properties.ProtocolVersion < 5 {
			return pk, packets.CodeSuccessIgnore
		}
		return h.refuse(cl, pk, packets.ErrPayloadFormatInvalid)
	}
	h.Counters.SetAccepted.Add(1)
	h.o.Tracker.Set(l.conn, cl.ID, l.user, req)
	return pk, packets.CodeSuccessIgnore
}

// refuse answers a publish that changes nothing with code, the way its
// protocol version and QoS allow.
func (h *Presence) refuse(cl *mqtt.Client, pk packets.Packet, code packets.Code) (packets.Packet, error) {
	switch {
	case pk.FixedHeader.Qos == 0:
		return pk, packets.ErrRejectPacket
	case cl.Properties.ProtocolVersion < 5:
		if h.o.Server != nil {
			_ = h.o.Server.DisconnectClient(cl, code)
		}
		return pk, packets.ErrRejectPacket
	case pk.FixedHeader.Qos == 2:
		// mochi would answer a reason code with a PUBACK; a QoS 2
		// exchange needs a PUBREC, which with a failure code ends it.
		_ = cl.WritePacket(packets.Packet{
			FixedHeader: packets.FixedHeader{Type: packets.Pubrec},
			PacketID:    pk.PacketID,
			ReasonCode:  code.Code,
		})
		return pk, packets.ErrRejectPacket
	}
	return pk, code // mochi answers PUBACK with the code
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
		if l, ok := h.link(cl); ok {
			if req, err := presence.ParseSetRequest(will.Payload); err == nil && req.Scope == presence.ScopeSession && req.Text != nil {
				h.o.Tracker.LastWords(l.conn, cl.ID, *req.Text)
			}
		}
	}
	h.Counters.WillsDiscarded.Add(1)
	will.TopicName = DiscardedWillTopic
	will.Payload = nil
	will.Retain = false
	will.Qos = 0
	will.User = nil
	return will, nil
}
