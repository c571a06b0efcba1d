package canary

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// maxPacket bounds what the canary reads of one packet: a user's presence
// payload is a few hundred bytes.
const maxPacket = 1 << 20

// errRefused: the CONNACK refused the connection.
var errRefused = errors.New("canary: connection refused")

// conn is a minimal MQTT 5 client of the canary's own: it connects, pings,
// subscribes and reads, and it can end every way the canary exercises
// (DISCONNECT, RST, silence), which a full client library hides. One
// goroutine uses it at a time.
type conn struct {
	c  net.Conn
	r  *bufio.Reader
	id string
}

// dial connects to addr (TLS when cfg is not nil) and sends CONNECT; it
// returns once the CONNACK accepted it.
func dial(ctx context.Context, addr string, cfg *tls.Config, id, username string, password []byte, keepAlive time.Duration) (*conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	var c net.Conn
	var err error
	if cfg != nil {
		c, err = (&tls.Dialer{NetDialer: &d, Config: cfg}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	cn := &conn{c: c, r: bufio.NewReaderSize(c, 2048), id: id}
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: 5,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, ClientIdentifier: id,
			Keepalive: uint16(keepAlive / time.Second), PasswordFlag: len(password) > 0, Password: password,
			UsernameFlag: username != "", Username: []byte(username)}}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		_ = c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(buf.Bytes()); err != nil {
		_ = c.Close()
		return nil, err
	}
	ack, err := cn.read()
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	if ack.FixedHeader.Type != packets.Connack || ack.ReasonCode != 0 {
		_ = c.Close()
		return nil, fmt.Errorf("%w: packet type %d, reason code 0x%02X", errRefused, ack.FixedHeader.Type, ack.ReasonCode)
	}
	return cn, nil
}

// write sends one encoded packet, within 5 s.
func (cn *conn) write(encode func(*bytes.Buffer) error) error {
	var buf bytes.Buffer
	if err := encode(&buf); err != nil {
		return err
	}
	_ = cn.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := cn.c.Write(buf.Bytes())
	return err
}

func (cn *conn) ping() error {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingreq}}
	return cn.write(pk.PingreqEncode)
}

// disconnect sends a normal DISCONNECT and closes: the clean end.
func (cn *conn) disconnect() error {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}, ProtocolVersion: 5}
	err := cn.write(pk.DisconnectEncode)
	return errors.Join(err, cn.c.Close())
}

// reset closes the socket with SO_LINGER 0: the peer gets a TCP RST.
func (cn *conn) reset() error {
	if tc, ok := cn.c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	} else if tl, ok := cn.c.(*tls.Conn); ok {
		if tc, ok := tl.NetConn().(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	}
	return cn.c.Close()
}

func (cn *conn) close() error { return cn.c.Close() }

// subscribe subscribes to filters (QoS 0; retained messages sent).
func (cn *conn) subscribe(id uint16, filters []string) error {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, ProtocolVersion: 5, PacketID: id}
	for _, f := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f})
	}
	return cn.write(pk.SubscribeEncode)
}

// unsubscribe unsubscribes from filters.
func (cn *conn) unsubscribe(id uint16, filters []string) error {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Unsubscribe, Qos: 1}, ProtocolVersion: 5, PacketID: id}
	for _, f := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f})
	}
	return cn.write(pk.UnsubscribeEncode)
}

// readUntil reads one packet, waiting at most until deadline (an error
// that is a timeout when it passed).
func (cn *conn) readUntil(deadline time.Time) (packets.Packet, error) {
	_ = cn.c.SetReadDeadline(deadline)
	return cn.read()
}

// read reads one packet: a PUBLISH, CONNACK and DISCONNECT are decoded,
// the rest only typed.
func (cn *conn) read() (packets.Packet, error) {
	var pk packets.Packet
	b, err := cn.r.ReadByte()
	if err != nil {
		return pk, err
	}
	if err := pk.FixedHeader.Decode(b); err != nil {
		return pk, err
	}
	n, _, err := packets.DecodeLength(cn.r)
	if err != nil {
		return pk, err
	}
	if n > maxPacket {
		return pk, fmt.Errorf("canary: a packet of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(cn.r, body); err != nil {
		return pk, err
	}
	pk.ProtocolVersion = 5
	pk.FixedHeader.Remaining = n
	switch pk.FixedHeader.Type {
	case packets.Publish:
		err = pk.PublishDecode(body)
	case packets.Connack:
		err = pk.ConnackDecode(body)
	case packets.Disconnect:
		err = pk.DisconnectDecode(body)
	}
	return pk, err
}

// isTimeout reports whether err is a deadline that passed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
