// Package puback answers an MQTT 5 QoS 1 or 2 publish that a hook refuses,
// with the refusal's reason code, before the hook has mochi drop the packet
// quietly (returning packets.ErrRejectPacket): mochi would answer a
// returned code itself, but logs it at error with the whole packet,
// payload included.
package puback
