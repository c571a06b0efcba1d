package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// The bench's monotonic clock: every timestamp is a duration since clock0,
// which time.Since computes from the monotonic reading.
var clock0 = time.Now()

func mono() time.Duration { return time.Since(clock0) }

// Fixed packets, encoded once with mochi's encoders.
var (
	pingreqBytes    = mustEncode(func(b *bytes.Buffer) error { return pingPacket().PingreqEncode(b) })
	disconnectBytes = mustEncode(func(b *bytes.Buffer) error { return discPacket().DisconnectEncode(b) })
)

func pingPacket() *packets.Packet {
	return &packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingreq}, ProtocolVersion: 4}
}

func discPacket() *packets.Packet {
	return &packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}, ProtocolVersion: 4}
}

func mustEncode(f func(*bytes.Buffer) error) []byte {
	var b bytes.Buffer
	if err := f(&b); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// srcAddrs spreads client sockets over 127.0.0.2 … 127.0.0.254 so that the
// ephemeral ports of one source address never run out.
var srcNext atomic.Uint32

func nextSrcIP() net.IP {
	n := srcNext.Add(1)
	return net.IPv4(127, 0, 0, byte(2+n%253))
}

// dialTCP connects to addr from the next loopback source address.
func dialTCP(addr string, timeout time.Duration) (net.Conn, error) {
	var err error
	for try := 0; try < 3; try++ {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: nextSrcIP()}, Timeout: timeout}
		var c net.Conn
		if c, err = d.Dial("tcp", addr); err == nil {
			return c, nil
		}
	}
	return nil, err
}

// connectOpts describes one MQTT 3.1.1 connection.
type connectOpts struct {
	ClientID    string
	Username    string // empty: no user name (an observer)
	Password    string // empty: no password
	Keepalive   uint16
	WillTopic   string // empty: no will
	WillPayload []byte
	WillQos     byte
	WillRetain  bool
	ReadBuffer  int // bufio size; default 256
	// OnPublish is called from the reader goroutine for every PUBLISH
	// received, with the monotonic time its last byte was read.
	OnPublish func(topic string, payload []byte, at time.Duration)
}

// pingLoop makes a connection answer every PINGRESP with the next PINGREQ
// until the deadline: a ping–pong driven from the reader goroutine.
type pingLoop struct {
	from, until time.Duration // the measured window, monotonic
	count       *atomic.Int64 // PINGRESPs received within the window
}

// client is a minimal MQTT 3.1.1 client on a raw TCP socket: one reader
// goroutine, writes under a mutex.
type client struct {
	nc   net.Conn
	br   *bufio.Reader
	opts connectOpts

	wmu    sync.Mutex
	nextID uint16 // under wmu

	connack  chan byte
	suback   chan []byte   // each SUBACK's return codes
	done     chan struct{} // closed when the reader exits
	errMu    sync.Mutex
	err      error
	pings    atomic.Int64 // PINGRESPs received
	pubacks  atomic.Int64
	lastSent atomic.Int64 // monotonic ns of the last packet written
	subackAt atomic.Int64 // monotonic ns at which the last SUBACK was read
	loop     atomic.Pointer[pingLoop]
	closed   atomic.Bool

	// Times, monotonic.
	DialStart, ConnectAt, ConnackAt time.Duration
}

var errConnackTimeout = errors.New("no CONNACK in time")

// connackError is a CONNACK that refused the connection.
type connackError struct{ code byte }

func (e *connackError) Error() string { return fmt.Sprintf("CONNACK code %#x", e.code) }

// connect dials addr, sends CONNECT and waits for CONNACK.
func connect(addr string, o connectOpts, timeout time.Duration) (*client, error) {
	c := &client{opts: o, connack: make(chan byte, 1), suback: make(chan []byte, 16), done: make(chan struct{})}
	c.DialStart = mono()
	nc, err := dialTCP(addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c.nc = nc
	size := o.ReadBuffer
	if size <= 0 {
		size = 256
	}
	c.br = bufio.NewReaderSize(nc, size)
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 4,
		Connect: packets.ConnectParams{
			ProtocolName: []byte("MQTT"), Clean: true, Keepalive: o.Keepalive,
			ClientIdentifier: o.ClientID,
		},
	}
	if o.Username != "" {
		pk.Connect.UsernameFlag = true
		pk.Connect.Username = []byte(o.Username)
	}
	if o.Password != "" {
		pk.Connect.PasswordFlag = true
		pk.Connect.Password = []byte(o.Password)
	}
	if o.WillTopic != "" {
		pk.Connect.WillFlag = true
		pk.Connect.WillTopic = o.WillTopic
		pk.Connect.WillPayload = o.WillPayload
		pk.Connect.WillQos = o.WillQos
		pk.Connect.WillRetain = o.WillRetain
	}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		_ = nc.Close()
		return nil, err
	}
	go c.readLoop()
	c.ConnectAt = mono()
	if err := c.write(buf.Bytes()); err != nil {
		c.Close()
		return nil, fmt.Errorf("write CONNECT: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case code := <-c.connack:
		c.ConnackAt = mono()
		if code != 0 {
			c.Close()
			return nil, &connackError{code}
		}
		return c, nil
	case <-c.done:
		c.Close()
		return nil, fmt.Errorf("connection closed before CONNACK: %w", c.Err())
	case <-t.C:
		c.Close()
		return nil, errConnackTimeout
	}
}

func (c *client) setErr(err error) {
	c.errMu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.errMu.Unlock()
}

// Err is why the reader stopped (nil while it runs).
func (c *client) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// Done is closed when the connection's reader has stopped.
func (c *client) Done() <-chan struct{} { return c.done }

func (c *client) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := c.nc.Write(b)
	c.lastSent.Store(int64(mono()))
	return err
}

// LastSent is the monotonic time the last packet was written.
func (c *client) LastSent() time.Duration { return time.Duration(c.lastSent.Load()) }

func (c *client) packetID() uint16 {
	c.nextID++
	if c.nextID == 0 {
		c.nextID = 1
	}
	return c.nextID
}

// Publish sends a PUBLISH; it does not wait for PUBACK.
func (c *client) Publish(topic string, payload []byte, qos byte, retain bool) error {
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Publish, Qos: qos, Retain: retain},
		ProtocolVersion: 4, TopicName: topic, Payload: payload,
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if qos > 0 {
		pk.PacketID = c.packetID()
	}
	var buf bytes.Buffer
	if err := pk.PublishEncode(&buf); err != nil {
		return err
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := c.nc.Write(buf.Bytes())
	c.lastSent.Store(int64(mono()))
	return err
}

// Subscribe subscribes to filters at QoS 1 and waits for SUBACK; a filter
// the broker refuses (return code 0x80) is an error.
func (c *client) Subscribe(timeout time.Duration, filters ...string) error {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, ProtocolVersion: 4}
	for _, f := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f, Qos: 1})
	}
	c.wmu.Lock()
	pk.PacketID = c.packetID()
	c.wmu.Unlock()
	var buf bytes.Buffer
	if err := pk.SubscribeEncode(&buf); err != nil {
		return err
	}
	if err := c.write(buf.Bytes()); err != nil {
		return err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case codes := <-c.suback:
		refused := 0
		for _, rc := range codes {
			if rc >= 0x80 {
				refused++
			}
		}
		if refused > 0 {
			return fmt.Errorf("SUBACK refused %d of %d filters", refused, len(filters))
		}
		return nil
	case <-c.done:
		return fmt.Errorf("connection closed before SUBACK: %w", c.Err())
	case <-t.C:
		return errors.New("no SUBACK in time")
	}
}

// Ping sends one PINGREQ.
func (c *client) Ping() error { return c.write(pingreqBytes) }

// Pings is the number of PINGRESPs received.
func (c *client) Pings() int64 { return c.pings.Load() }

// StartPingLoop sends a PINGREQ and answers every PINGRESP with the next
// one until the loop's deadline.
func (c *client) StartPingLoop(l *pingLoop) error {
	c.loop.Store(l)
	return c.Ping()
}

// Disconnect sends DISCONNECT and closes the socket.
func (c *client) Disconnect() error {
	err := c.write(disconnectBytes)
	c.Close()
	return err
}

// Close closes the socket without DISCONNECT.
func (c *client) Close() {
	if c.closed.CompareAndSwap(false, true) {
		_ = c.nc.Close()
	}
}

// appendPuback appends the PUBACK of packet id to b.
func appendPuback(b *bytes.Buffer, id uint16) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, ProtocolVersion: 4, PacketID: id}
	_ = pk.PubackEncode(b)
}

// readLoop reads packets until the connection ends. PUBACKs are written in
// one batch whenever the read buffer runs dry.
func (c *client) readLoop() {
	defer close(c.done)
	var acks bytes.Buffer
	for {
		if acks.Len() > 0 && c.br.Buffered() == 0 {
			if err := c.write(acks.Bytes()); err != nil {
				c.setErr(err)
				return
			}
			acks.Reset()
		}
		hb, err := c.br.ReadByte()
		if err != nil {
			c.setErr(err)
			return
		}
		rem, err := readRemaining(c.br)
		if err != nil {
			c.setErr(err)
			return
		}
		var body []byte
		if rem > 0 {
			body = make([]byte, rem)
			if _, err := io.ReadFull(c.br, body); err != nil {
				c.setErr(err)
				return
			}
		}
		at := mono()
		fh := packets.FixedHeader{}
		if err := fh.Decode(hb); err != nil {
			c.setErr(err)
			return
		}
		fh.Remaining = rem
		pk := packets.Packet{FixedHeader: fh, ProtocolVersion: 4}
		switch fh.Type {
		case packets.Connack:
			if err := pk.ConnackDecode(body); err != nil {
				c.setErr(err)
				return
			}
			select {
			case c.connack <- pk.ReasonCode:
			default:
			}
		case packets.Publish:
			if err := pk.PublishDecode(body); err != nil {
				c.setErr(err)
				return
			}
			if fh.Qos == 1 {
				appendPuback(&acks, pk.PacketID)
			}
			if c.opts.OnPublish != nil {
				c.opts.OnPublish(pk.TopicName, pk.Payload, at)
			}
		case packets.Suback:
			c.subackAt.Store(int64(at))
			var codes []byte
			if len(body) > 2 {
				codes = body[2:]
			}
			select {
			case c.suback <- codes:
			default:
			}
		case packets.Pingresp:
			c.pings.Add(1)
			if l := c.loop.Load(); l != nil {
				if at < l.until {
					if at >= l.from {
						l.count.Add(1)
					}
					if err := c.Ping(); err != nil {
						c.setErr(err)
						return
					}
				} else {
					c.loop.Store(nil)
				}
			}
		case packets.Puback:
			c.pubacks.Add(1)
		}
	}
}

// readRemaining reads the variable-length remaining length.
func readRemaining(r *bufio.Reader) (int, error) {
	var n, shift int
	for i := 0; i < 4; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		n |= int(b&0x7f) << shift
		if b&0x80 == 0 {
			return n, nil
		}
		shift += 7
	}
	return 0, errors.New("malformed remaining length")
}
