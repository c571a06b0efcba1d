package delivery

import (
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Outlet is the broker's end of the publish path: the publisher's
// (publisher.Broker), the group topics' and the node topics' one way to
// reach mochi's subscribers. Every publish and retain of presence runs
// inside the Delivery hook's fence, apart from any SUBSCRIBE reading
// retained presence. mochi only queues each delivery (a full queue drops
// it, which the Delivery hook notes); with presenced's listener no delivery
// waits on a socket.
type Outlet struct {
	srv *mqtt.Server
	d   *Delivery
}

// NewOutlet returns the outlet of srv, whose Delivery hook is d.
func NewOutlet(srv *mqtt.Server, d *Delivery) *Outlet { return &Outlet{srv: srv, d: d} }

// Publish publishes version of user's presence from the server's inline
// client, QoS 1, live: not retained, so mochi keeps nothing of it (the
// publisher's views are the retained store of presence/users/{user},
// delivered on SUBSCRIBE by the Delivery hook: Snapshots). commit, which
// stores the publisher's view, runs after a successful publish in the same
// step of the fence, so a SUBSCRIBE reads either the view before the live
// message or the new one after it (publisher.Broker).
func (o *Outlet) Publish(user string, version uint64, topic string, payload []byte, commit func()) (err error) {
	o.d.Publish(user, version, nil, func() {
		if err = o.srv.Publish(topic, payload, false, 1); err == nil && commit != nil {
			commit()
		}
	})
	return err
}

// SendTo returns what publishes a version of user's presence again, not
// retained, for the subscribers in to that missed it (the only ones to
// receive it with a Guard): publisher.Publisher.Resend's send.
func (o *Outlet) SendTo(user string, to []*mqtt.Client) func(version uint64, topic string, payload []byte) error {
	return func(version uint64, topic string, payload []byte) (err error) {
		o.d.Publish(user, version, to, func() { err = o.srv.Publish(topic, payload, false, 1) })
		return err
	}
}

// Subscribers returns the connections on this node subscribed to topic for
// which keep holds.
func (o *Outlet) Subscribers(topic string, keep func(cl *mqtt.Client) bool) []*mqtt.Client {
	var out []*mqtt.Client
	for id := range o.srv.Topics.Subscribers(topic).Subscriptions {
		if cl, ok := o.srv.Clients.Get(id); ok && keep(cl) {
			out = append(out, cl)
		}
	}
	return out
}

// Subscribed reports whether any subscription on this node matches topic
// (a "+" level of topic matches only the filters with a wildcard there):
// the node topics read the other nodes' states only while one does.
func (o *Outlet) Subscribed(topic string) bool {
	s := o.srv.Topics.Subscribers(topic)
	return len(s.Subscriptions) > 0 || len(s.Shared) > 0 || len(s.InlineSubscriptions) > 0
}

// Announce publishes payload as topic's retained message, QoS 1 (the node
// topics, which no subscription reads under the fence).
func (o *Outlet) Announce(topic string, payload []byte) error {
	return o.srv.Publish(topic, payload, true, 1)
}

// Send publishes payload on topic, not retained, QoS 1, outside the fence
// (the lifecycle outputs: no retained presence to order against).
func (o *Outlet) Send(topic string, payload []byte) error {
	return o.srv.Publish(topic, payload, false, 1)
}

// Retain stores payload as topic's retained message with a fresh creation
// time, delivering nothing, so mochi's purge of retained messages older than
// Capabilities.MaximumMessageExpiryInterval never removes a node topic's
// (users' retained presence is not mochi's: Snapshots).
func (o *Outlet) Retain(topic string, payload []byte) {
	o.d.Exclusive(func() { o.srv.Topics.RetainMessage(retained(topic, payload)) })
}

// Clear removes topic's retained message, delivering nothing.
func (o *Outlet) Clear(topic string) {
	o.d.Exclusive(func() { o.srv.Topics.RetainMessage(cleared(topic)) })
}

// Step runs fn inside the fence, exclusively, as one step: what fn
// advances, retains and clears through f is ordered as a whole against
// every SUBSCRIBE's reading of retained presence. A caller with a lock of
// its own (the group topics') takes it inside fn: the fence comes first,
// since a SUBSCRIBE holds it for reading while the hooks take theirs.
func (o *Outlet) Step(fn func(f Fenced)) { o.d.Exclusive(func() { fn(Fenced{o}) }) }

// Fenced is the Outlet inside one step of the fence (Step).
type Fenced struct{ o *Outlet }

// Advance stores snapshot as topic's retained message and publishes live
// on topic (Delivery.advance): the group topics'.
func (f Fenced) Advance(topic string, to []*mqtt.Client, snapshot, live []byte) (err error) {
	f.o.d.advance(topic, to, func() { f.o.srv.Topics.RetainMessage(retained(topic, snapshot)) },
		func() { err = f.o.srv.Publish(topic, live, false, 1) })
	return err
}

// Send publishes payload live on topic (QoS 1, not retained) with the
// MQTT 5 properties props for the subscribers in to only (with a Guard;
// without one, every subscriber of topic gets it), retaining nothing: a
// group topic's reply to a resume (Delivery.send), compressed with its
// content encoding in props when the subscriber asked for it. mochi passes
// a PUBLISH's properties on to each subscriber (an MQTT 3.1.1 one gets
// none).
func (f Fenced) Send(topic string, to []*mqtt.Client, payload []byte, props packets.Properties) (err error) {
	f.o.d.send(topic, to, func() { err = f.o.publish(topic, payload, props) })
	return err
}

// publish is mochi's Server.Publish (QoS 1, not retained, from the
// server's inline client) with the properties props.
func (o *Outlet) publish(topic string, payload []byte, props packets.Properties) error {
	inline, ok := o.srv.Clients.Get(mqtt.InlineClientId)
	if !ok {
		return mqtt.ErrInlineClientNotEnabled
	}
	return o.srv.InjectPacket(inline, packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1},
		TopicName:   topic,
		Payload:     payload,
		Properties:  props,
		PacketID:    1, // as Server.Publish's: never used, valid for QoS 1
	})
}

// Retain stores payload as topic's retained message, delivering nothing.
func (f Fenced) Retain(topic string, payload []byte) {
	f.o.srv.Topics.RetainMessage(retained(topic, payload))
}

// Clear removes topic's retained message, delivering nothing.
func (f Fenced) Clear(topic string) { f.o.srv.Topics.RetainMessage(cleared(topic)) }

// retained is payload as topic's retained message, created now.
func retained(topic string, payload []byte) packets.Packet {
	return packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: true},
		TopicName:   topic,
		Payload:     payload,
		Created:     time.Now().Unix(),
	}
}

// cleared is the packet that removes topic's retained message.
func cleared(topic string) packets.Packet {
	return packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Retain: true}, TopicName: topic}
}

// Beat publishes payload on topic, not retained, QoS 0, outside the fence
// (the presence clock: a heartbeat is worth nothing late, so it is never
// held for a subscriber nor sent again; mochi only queues it).
func (o *Outlet) Beat(topic string, payload []byte) error {
	return o.srv.Publish(topic, payload, false, 0)
}
