package hooks

import (
	"errors"
	"fmt"
	"strings"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/connack"
)

// What Limits checks of single packets: PUBLISH topic names, topic aliases,
// wills and the session expiry of a DISCONNECT.
//
// Topic aliases: mochi refuses an alias above Capabilities.TopicAliasMaximum
// (DISCONNECT 0x94, topic alias invalid) but never tells the client that
// maximum, so OnPacketEncode puts it in every successful MQTT 5 CONNACK.
// A topic name longer than MaxTopicLength is refused in OnPacketRead,
// before mochi stores it as an alias or routes it: a clean way to hold up
// to TopicAliasMaximum names of a packet's size each per connection.

// errTopicTooLong stops a PUBLISH whose topic name is over MaxTopicLength;
// the hook has already sent the DISCONNECT. mochi stops only for
// ErrRejectPacket (then closes the connection); any other error would be
// ignored.
var errTopicTooLong = fmt.Errorf("presence: topic name too long: %w", packets.ErrRejectPacket)

// OnPacketRead refuses a PUBLISH whose topic name is longer than
// MaxTopicLength (MQTT 5: DISCONNECT 0x90, topic name invalid; 3.1.1: the
// connection is closed), and holds the session expiry an MQTT 5 DISCONNECT
// sets to the server's MaximumSessionExpiryInterval (mochi applies only the
// CONNECT's to it).
func (l *Limits) OnPacketRead(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	switch pk.FixedHeader.Type {
	case packets.Publish:
		if l.o.MaxTopicLength > 0 && len(pk.TopicName) > l.o.MaxTopicLength {
			l.Stats.TopicsRefused.Add(1)
			l.o.Log.Debug("publish refused: topic name too long", "client", ClientID(cl), "bytes", len(pk.TopicName))
			if l.o.Server != nil && cl.Properties.ProtocolVersion == 5 {
				_ = l.o.Server.DisconnectClient(cl, packets.ErrTopicNameInvalid)
			}
			return pk, errTopicTooLong
		}
	case packets.Disconnect:
		if l.o.Server == nil || !pk.Properties.SessionExpiryIntervalFlag {
			break
		}
		if ceiling := l.o.Server.Options.Capabilities.MaximumSessionExpiryInterval; pk.Properties.SessionExpiryInterval > ceiling {
			pk.Properties.SessionExpiryInterval = ceiling
			l.Stats.ExpiryCapped.Add(1)
		}
	}
	return pk, nil
}

// OnPacketEncode tells an MQTT 5 client, in a successful CONNACK, the
// topic alias maximum mochi holds it to.
func (l *Limits) OnPacketEncode(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if pk.FixedHeader.Type != packets.Connack || pk.ReasonCode != packets.CodeSuccess.Code ||
		cl.Properties.ProtocolVersion != 5 || l.o.Server == nil {
		return pk
	}
	pk.Properties.TopicAliasMaximum = l.o.Server.Options.Capabilities.TopicAliasMaximum
	return pk
}

// errBadWill stops a CONNECT whose will topic is refused; the hook has
// already answered it.
var errBadWill = errors.New("presence: will topic refused")

// checkWill refuses a will on a $ topic ($SYS/...), with a wildcard, or
// longer than MaxTopicLength (MQTT 5 CONNACK 0x90, topic name invalid;
// 3.1.1: 0x05, not authorized), and holds a will's delay
// to MaxWillDelay. mochi publishes and retains wills without the ACL check.
func (l *Limits) checkWill(cl *mqtt.Client, pk packets.Packet) error {
	if !pk.Connect.WillFlag {
		return nil
	}
	t := pk.Connect.WillTopic
	if strings.HasPrefix(t, "$") || strings.ContainsAny(t, "+#") || (l.o.MaxTopicLength > 0 && len(t) > l.o.MaxTopicLength) {
		l.Stats.WillsRefused.Add(1)
		l.o.Log.Debug("connection refused: will topic", "client", ClientID(cl), "remote", cl.Net.Remote)
		connack.Refuse(l.o.Server, cl, packets.ErrTopicNameInvalid, packets.Err3NotAuthorized)
		return errBadWill
	}
	if ceiling := uint32(l.o.MaxWillDelay.Seconds()); ceiling > 0 && cl.Properties.Will.WillDelayInterval > ceiling {
		cl.Properties.Will.WillDelayInterval = ceiling
		l.Stats.WillDelayCapped.Add(1)
	}
	return nil
}
