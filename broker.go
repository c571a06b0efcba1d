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
	pk := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: true},
		TopicName:   topic,
		Payload:     payload,
		Created:     time.Now().Unix(),
	}
	b.d.Exclusive(func() { b.srv.Topics.RetainMessage(pk) })
}

// Clear removes topic's retained message, delivering nothing.
func (b broker) Clear(topic string) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Retain: true}, TopicName: topic}
	b.d.Exclusive(func() { b.srv.Topics.RetainMessage(pk) })
}
