package delivery

import (
	"errors"
	"strings"
	"time"
	_ "unsafe" // go:linkname: mochi's publishToClient (deliverRetained)

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Snapshots is the retained store of presence/users/{user}: presence's
// own state (publisher.Publisher.Snapshots), not mochi's. mochi keeps no
// retained message of presence/users/...; the Delivery hook delivers these
// on SUBSCRIBE instead, with the retain flag, as mochi delivers the
// retained messages of every other topic.
type Snapshots interface {
	// Snapshots calls fn with the current public payload of user, and its
	// version, when it holds one (all false), or with every user's (all).
	Snapshots(user string, all bool, fn func(user string, version uint64, payload []byte))
}

// Serve makes s the retained store of presence/users/{user} that the hook
// delivers on SUBSCRIBE. Call it before the server serves.
func (d *Delivery) Serve(s Snapshots) { d.snapshots = s }

// publishToClient is mochi's (v2.7.9) Server.publishToClient: the one
// delivery of a packet to one subscription of one client, exactly as
// mochi delivers a retained message on SUBSCRIBE (publishRetainedToClient
// calls it): NoLocal, the OnACLCheck of every hook (the Guard's decision
// per topic, the Delivery hook's retained-repeat rule), the retain flag
// kept (FwdRetainedFlag), subscription identifiers, QoS min(packet,
// subscription, server), the client's topic aliases, a packet id and the
// inflight store for QoS 1, and a non-blocking send to the client's
// outbound queue (a full queue drops it: OnPublishDropped, which the
// Delivery hook notes and the pump sends again). Nothing else exported
// reaches a client's outbound queue, and writing the packet ourselves
// (Client.WritePacket) would race with the client's writer: a live
// version still queued could be written after the snapshot that
// superseded it. go.mod pins mochi; TestPublishToClientLinked fails if the
// symbol changes.
//
//go:linkname publishToClient github.com/mochi-mqtt/server/v2.(*Server).publishToClient
func publishToClient(s *mqtt.Server, cl *mqtt.Client, sub packets.Subscription, pk packets.Packet) (packets.Packet, error)

// usersOf reports whether filter (not shared) can match a
// prefix/users/{user} topic, and which: the one user it names, or every
// user (all: a "+" or "#" at the user level or above it). Filters match as
// MQTT says: "#" matches the level above it too (presence/users/ann/#
// matches presence/users/ann), and a wildcard first level matches no
// topic beginning with "$".
func (d *Delivery) usersOf(filter string) (user string, all, ok bool) {
	if strings.HasPrefix(filter, "$share/") || strings.HasPrefix(filter, "$SHARE/") {
		return "", false, false
	}
	want := strings.Split(strings.TrimSuffix(d.users, "/"), "/") // prefix levels, then "users"
	got := strings.Split(filter, "/")
	for i, w := range want {
		if i >= len(got) {
			return "", false, false
		}
		switch level := got[i]; {
		case level == "#":
			return "", true, !(i == 0 && strings.HasPrefix(w, "$"))
		case level == "+":
			if i == 0 && strings.HasPrefix(w, "$") {
				return "", false, false
			}
		case level != w:
			return "", false, false
		}
	}
	rest := got[len(want):]
	switch {
	case len(rest) == 0:
		return "", false, false // the prefix/users level itself
	case rest[0] == "#" || rest[0] == "+" && len(rest) == 1:
		return "", true, true
	case rest[0] == "":
		return "", false, false // no user is named ""
	case len(rest) == 1 || len(rest) == 2 && rest[1] == "#":
		return rest[0], false, true
	}
	return "", false, false
}

// deliverRetained delivers to cl, for its subscription sub, the retained
// presence/users/{user} of every user sub matches (Snapshots), as mochi's
// publishRetainedToClient delivers a topic's retained message: with the
// retain flag, each through publishToClient. The caller holds the fence
// for reading (no presence is published meanwhile) and has checked the
// filter's reason code and retain handling.
func (d *Delivery) deliverRetained(cl *mqtt.Client, sub packets.Subscription) {
	if d.snapshots == nil || d.server == nil {
		return
	}
	user, all, ok := d.usersOf(sub.Filter)
	if !ok {
		return
	}
	sub.FwdRetainedFlag = true
	if sub.Identifier > 0 && len(sub.Identifiers) == 0 {
		// mochi's publishToClient reads the identifiers its index merges
		// (Identifiers); a SUBSCRIBE's filter has only its own
		// (Identifier), which MQTT 5 3.3.4 wants on the retained message
		// too (mochi's own retained delivery leaves it out).
		sub.Identifiers = map[string]int{sub.Filter: sub.Identifier}
	}
	created := time.Now().Unix()
	d.snapshots.Snapshots(user, all, func(u string, version uint64, payload []byte) {
		pk := packets.Packet{
			FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: true},
			TopicName:   d.users + u,
			Payload:     payload,
			Created:     created,
		}
		if _, err := publishToClient(d.server, cl, sub, pk); err != nil {
			if errors.Is(err, packets.ErrQuotaExceeded) {
				d.Stats.InflightFull.Add(1)
				d.miss(cl, u, version) // its inflight store is full: sent again once it acknowledges
			}
			return // refused (ACL, repeat), dropped (noted), or the client is gone
		}
		d.Stats.Retained.Add(1)
	})
}

// InlineRetained hands handler, an inline subscription's (the program's
// own, mochi's Server.Subscribe) to filter, the retained
// presence/users/{user} of every user filter matches, as mochi's
// Server.Subscribe hands it every other topic's retained messages: call it
// once the subscription is made. It holds the fence for reading, as a
// client's SUBSCRIBE does: no presence is published meanwhile.
func (d *Delivery) InlineRetained(filter string, id int, handler mqtt.InlineSubFn) {
	if d.snapshots == nil || d.server == nil {
		return
	}
	user, all, ok := d.usersOf(filter)
	if !ok {
		return
	}
	inline, ok := d.server.Clients.Get(mqtt.InlineClientId)
	if !ok {
		return
	}
	sub := packets.Subscription{Identifier: id, Filter: filter}
	d.fence.RLock()
	defer d.fence.RUnlock()
	d.snapshots.Snapshots(user, all, func(u string, _ uint64, payload []byte) {
		handler(inline, sub, packets.Packet{
			FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: true},
			TopicName:   d.users + u,
			Payload:     payload,
		})
	})
}
