package listener

import "bytes"

// The CONNECT sniffer. mochi decodes an MQTT 5 CONNECT whose Receive
// Maximum is 0 (a protocol error: MQTT 5 §3.1.2.11.3) exactly as one
// without the property, so a hook cannot tell them apart. The listener
// therefore reads the start of each connection's first packet as it
// passes (the plaintext: over TLS and WebSocket, the bytes the layer
// gives mochi), up to the end of the CONNECT's properties, and notes a
// Receive Maximum of 0 (ReceiveMaximumZero). It costs nothing after the
// CONNECT, copies nothing when the first read holds the properties (it
// nearly always does), and keeps at most sniffLimit bytes otherwise.

// sniffLimit bounds the bytes kept for a CONNECT whose properties span
// reads: past it the sniffer gives up (mochi takes the CONNECT as it is).
const sniffLimit = 4096

// sniff is what a look at the start of a CONNECT found.
type sniff int

const (
	sniffMore sniff = iota // the properties are not all there yet
	sniffDone              // no Receive Maximum of 0 (or not an MQTT 5 CONNECT)
	sniffZero              // an MQTT 5 CONNECT with Receive Maximum 0
)

// connectSniffer follows the first bytes of one connection.
type connectSniffer struct {
	by  uint8  // the layer that feeds it (sniffRaw, sniffTLS, sniffWS)
	buf []byte // the bytes so far, when one read did not hold the properties
}

// feed takes the next bytes read and reports what is known.
func (s *connectSniffer) feed(p []byte) sniff {
	if len(s.buf) == 0 {
		if r := sniffConnect(p); r != sniffMore {
			return r
		}
	}
	if len(s.buf)+len(p) > sniffLimit {
		s.buf = nil
		return sniffDone
	}
	s.buf = append(s.buf, p...)
	return sniffConnect(s.buf)
}

// sniffConnect looks for a Receive Maximum of 0 in the start of an MQTT 5
// CONNECT: fixed header, protocol name and level, flags, keep-alive and
// properties. Anything else, or a malformed property, is sniffDone (mochi
// judges it).
func sniffConnect(b []byte) sniff {
	if len(b) == 0 {
		return sniffMore
	}
	if b[0] != 0x10 {
		return sniffDone
	}
	_, n, r := varint(b[1:])
	if r != sniffWhole {
		return r
	}
	b = b[1+n:]
	// Protocol name "MQTT", level 5, connect flags, keep-alive.
	const head = 2 + 4 + 1 + 1 + 2
	if len(b) < head {
		if len(b) >= 6 && !bytes.Equal(b[:6], []byte{0, 4, 'M', 'Q', 'T', 'T'}) {
			return sniffDone
		}
		return sniffMore
	}
	if !bytes.Equal(b[:6], []byte{0, 4, 'M', 'Q', 'T', 'T'}) || b[6] != 5 {
		return sniffDone
	}
	b = b[head:]
	size, n, r := varint(b)
	if r != sniffWhole {
		return r
	}
	props := b[n:]
	for size > 0 {
		if len(props) == 0 {
			return sniffMore
		}
		id := props[0]
		var want int // the property's bytes after its id
		switch id {
		case 0x17, 0x19: // request problem / response information
			want = 1
		case 0x21, 0x22: // receive maximum, topic alias maximum
			want = 2
		case 0x11, 0x27: // session expiry interval, maximum packet size
			want = 4
		case 0x15, 0x16: // authentication method (string), data (binary)
			if len(props) < 3 {
				return sniffMore
			}
			want = 2 + u16(props[1:])
		case 0x26: // user property: two strings
			if len(props) < 3 {
				return sniffMore
			}
			k := 2 + u16(props[1:])
			if len(props) < 1+k+2 {
				return sniffMore
			}
			want = k + 2 + u16(props[1+k:])
		default:
			return sniffDone // not a CONNECT property: malformed, mochi refuses it
		}
		if 1+want > size {
			return sniffDone
		}
		if len(props) < 1+want {
			return sniffMore
		}
		if id == 0x21 && props[1] == 0 && props[2] == 0 {
			return sniffZero
		}
		props, size = props[1+want:], size-1-want
	}
	return sniffDone
}

// sniffWhole is varint's answer for a whole integer.
const sniffWhole sniff = -1

// varint decodes an MQTT variable byte integer at the start of b: its
// value and length, with sniffWhole (sniffMore: cut short; sniffDone:
// malformed).
func varint(b []byte) (v, n int, r sniff) {
	mul := 1
	for i := 0; i < 4; i++ {
		if i >= len(b) {
			return 0, 0, sniffMore
		}
		v += int(b[i]&0x7F) * mul
		if b[i]&0x80 == 0 {
			return v, i + 1, sniffWhole
		}
		mul *= 128
	}
	return 0, 0, sniffDone
}

// u16 is the big-endian two-byte integer at the start of b.
func u16(b []byte) int { return int(b[0])<<8 | int(b[1]) }
