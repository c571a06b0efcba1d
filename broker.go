package presenced

import (
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/hooks"
)

// broker is how the publisher reaches mochi's subscribers. Every publish
// and retain of presence runs inside the delivery hook's fence, apart from
// any SUBSCRIBE reading retained presence (see hooks.Delivery).
type broker struct {
	srv *mqtt.Server
	d   *hooks.Delivery
}

// Publish publishes from the server's inline client, QoS 1, retained.
// mochi only queues each delivery (a full queue drops it, which
// hooks.Delivery notes); with presenced's listener no delivery waits on a
// socket.
func (b broker) Publish(user string, version uint64, topic string, payload []byte) (err error) {
	b.d.Publish(user, version, nil, func() { err = b.srv.Publish(topic, payload, true, 1) })
	return err
}

// resend publishes version of user's presence again, not retained, for the
// subscribers to that missed it (the only ones to receive it with a Guard).
func (b broker) resend(user string, to []*mqtt.Client) func(version uint64, topic string, payload []byte) error {
	return func(version uint64, topic string, payload []byte) (err error) {
		b.d.Publish(user, version, to, func() { err = b.srv.Publish(topic, payload, false, 1) })
		return err
	}
}

// Retain stores payload as topic's retained message with a fresh creation
// time, delivering nothing, so mochi's purge of retained messages older than
// Capabilities.MaximumMessageExpiryInterval never removes presence.
func (b broker) Retain(topic string, payload []byte) {
	b.d.Exclusive(func() { b.srv.Topics.RetainMessage(retained(topic, payload)) })
}

// Clear removes topic's retained message, delivering nothing.
func (b broker) Clear(topic string) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Retain: true}, TopicName: topic}
	b.d.Exclusive(func() { b.srv.Topics.RetainMessage(pk) })
}

// Advance stores snapshot as topic's retained message and publishes live
// on topic in one step of the delivery fence (hooks.Delivery.Advance): the
// group topics' outlet.
func (b broker) Advance(topic string, to []*mqtt.Client, snapshot, live []byte) (err error) {
	b.d.Advance(topic, to, func() { b.srv.Topics.RetainMessage(retained(topic, snapshot)) },
		func() { err = b.srv.Publish(topic, live, false, 1) })
	return err
}

// retained is payload as topic's retained message, created now.
func retained(topic string, payload []byte) packets.Packet {
	return packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: true},
		TopicName:   topic,
		Payload:     payload,
		Created:     time.Now().Unix(),
	}
}

// introduce sends user's current presence to the subscriptions to it of the
// viewers who now may read it (they could not before): the groups stage's
// Introduce, on the pump's goroutine.
func (p *Plugin) introduce(user string, may func(viewer string) bool) {
	var to []*mqtt.Client
	subs := p.srv.Topics.Subscribers(p.Publisher.Topic(user))
	for id := range subs.Subscriptions {
		cl, ok := p.srv.Clients.Get(id)
		if !ok {
			continue
		}
		if u, service := p.Hook.Viewer(cl); !service && u != "" && may(u) {
			to = append(to, cl)
		}
	}
	if len(to) > 0 {
		p.Publisher.Resend(user, p.broker.resend(user, to))
	}
}
