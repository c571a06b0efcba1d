package listener

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/testkit"
)

// waitTimeout bounds every wait for something that should happen promptly.
const waitTimeout = 10 * time.Second

// statsListener is either listener of this package.
type statsListener interface {
	listeners.Listener
	Stats() Stats
}

// broker is a mochi server with one listener of this package.
type broker struct {
	srv       *mqtt.Server
	l         statsListener
	kind      string      // "tcp" or "ws"
	tls       *tls.Config // the clients' TLS configuration when the listener serves TLS
	closeOnce sync.Once
}

func newServer(t testing.TB) *mqtt.Server {
	t.Helper()
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	return srv
}

// startBroker starts a server with a listener of kind on a free port of
// 127.0.0.1. The caller defers b.close.
func startBroker(t testing.TB, kind string, cfg Config) *broker {
	t.Helper()
	return startBrokerOn(t, newServer(t), kind, cfg, nil)
}

// startBrokerOn starts srv with a listener of kind, as startBroker. With
// cfg.TLS the listener serves TLS, and clientTLS is what b.dial's clients
// use.
func startBrokerOn(t testing.TB, srv *mqtt.Server, kind string, cfg Config, clientTLS *tls.Config) *broker {
	t.Helper()
	b := &broker{srv: srv, kind: kind, tls: clientTLS}
	cfg.ID, cfg.Address, cfg.Server = kind, "127.0.0.1:0", b.srv
	if kind == "tcp" {
		b.l = NewTCP(cfg)
	} else {
		b.l = NewWebSocket(cfg)
	}
	if err := b.srv.AddListener(b.l); err != nil {
		t.Fatal(err)
	}
	if err := b.srv.Serve(); err != nil {
		t.Fatal(err)
	}
	return b
}

// close closes the server, failing the test if that takes long, and
// returns how long Close took (0 if the server was closed already).
func (b *broker) close(t testing.TB) (took time.Duration) {
	t.Helper()
	b.closeOnce.Do(func() { took = closeWithin(t, b.srv, waitTimeout) })
	return took
}

// closeWithin closes srv and fails the test if Close has not returned
// within d (the goroutine is then left behind: the test has failed anyway).
func closeWithin(t testing.TB, srv *mqtt.Server, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	done := make(chan struct{})
	go func() {
		_ = srv.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("Server.Close has not returned after %v", d)
	}
	return time.Since(start)
}

// transport is the client's byte stream: a TCP socket, or binary WebSocket
// messages.
type transport interface {
	io.ReadWriter
	SetReadDeadline(time.Time) error
	Close() error
}

// client is an MQTT 3.1.1 client written for tests: it sends the packets it
// is told to and reads only when told to.
type client struct {
	t    testing.TB
	tr   transport
	br   *bufio.Reader
	sock net.Conn // the TCP socket under either transport
}

// rcvbufDialer dials TCP with a receive buffer of rcvbuf bytes (0: the
// system's default).
func rcvbufDialer(rcvbuf int) *net.Dialer {
	d := &net.Dialer{Timeout: waitTimeout}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	return d
}

// dial opens a client connection to the broker's listener.
func (b *broker) dial(t testing.TB, rcvbuf int) *client {
	t.Helper()
	switch {
	case b.kind == "tcp" && b.tls != nil:
		return dialTLS(t, b.l.Address(), rcvbuf, b.tls)
	case b.kind == "tcp":
		return dialTCP(t, b.l.Address(), rcvbuf)
	}
	return dialWSWith(t, b.l.Address(), rcvbuf, b.tls)
}

// dialTLS opens an MQTT over TLS connection, with the handshake done.
func dialTLS(t testing.TB, addr string, rcvbuf int, cfg *tls.Config) *client {
	t.Helper()
	c, err := tryTLS(addr, rcvbuf, cfg)
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.sock.Close() })
	c.t = t
	return c
}

// tryTLS opens an MQTT over TLS connection and returns the handshake's
// error, the socket closed then.
func tryTLS(addr string, rcvbuf int, cfg *tls.Config) (*client, error) {
	conn, err := rcvbufDialer(rcvbuf).Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(conn, cfg)
	_ = tc.SetDeadline(time.Now().Add(waitTimeout))
	if err := tc.Handshake(); err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	return &client{tr: tc, br: bufio.NewReader(tc), sock: conn}, nil
}

func dialTCP(t testing.TB, addr string, rcvbuf int) *client {
	t.Helper()
	conn, err := rcvbufDialer(rcvbuf).Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &client{t: t, tr: conn, br: bufio.NewReader(conn), sock: conn}
}

func dialWS(t testing.TB, addr string, rcvbuf int) *client {
	t.Helper()
	return dialWSWith(t, addr, rcvbuf, nil)
}

// dialWSWith opens a WebSocket connection, wss if cfg is set.
func dialWSWith(t testing.TB, addr string, rcvbuf int, cfg *tls.Config) *client {
	t.Helper()
	c, err := tryWS(addr, rcvbuf, cfg)
	if err != nil {
		t.Fatalf("websocket dial %s: %v", addr, err)
	}
	c.t = t
	t.Cleanup(func() { _ = c.tr.Close() })
	if c.tr.(*testkit.WSConn).WS.Subprotocol() != "mqtt" {
		t.Fatalf("subprotocol %q, want mqtt", c.tr.(*testkit.WSConn).WS.Subprotocol())
	}
	return c
}

// tryWS opens a WebSocket connection (wss if cfg is set) as a browser
// would, with the subprotocol "mqtt", and returns the dial's error.
func tryWS(addr string, rcvbuf int, cfg *tls.Config) (*client, error) {
	var sock net.Conn
	nd := rcvbufDialer(rcvbuf)
	d := websocket.Dialer{
		Subprotocols:     []string{"mqtt"},
		HandshakeTimeout: waitTimeout,
		TLSClientConfig:  cfg,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := nd.DialContext(ctx, network, addr)
			sock = c
			return c, err
		},
	}
	scheme := "ws"
	if cfg != nil {
		scheme = "wss"
	}
	ws, resp, err := d.Dial(scheme+"://"+addr+"/mqtt", nil)
	if resp != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		if sock != nil {
			_ = sock.Close()
		}
		return nil, err
	}
	tr := testkit.NewWSConn(ws)
	return &client{tr: tr, br: bufio.NewReader(tr), sock: sock}, nil
}

// send encodes and writes one packet.
func (c *client) send(pk packets.Packet) {
	c.t.Helper()
	pk.ProtocolVersion = 4
	var buf bytes.Buffer
	var err error
	switch pk.FixedHeader.Type {
	case packets.Connect:
		err = pk.ConnectEncode(&buf)
	case packets.Subscribe:
		err = pk.SubscribeEncode(&buf)
	case packets.Publish:
		err = pk.PublishEncode(&buf)
	case packets.Puback:
		err = pk.PubackEncode(&buf)
	default:
		err = fmt.Errorf("cannot send packet type %d", pk.FixedHeader.Type)
	}
	if err != nil {
		c.t.Fatalf("encode: %v", err)
	}
	if _, err := c.tr.Write(buf.Bytes()); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// next reads one packet, waiting at most within.
func (c *client) next(within time.Duration) (packets.Packet, error) {
	_ = c.tr.SetReadDeadline(time.Now().Add(within))
	pk := packets.Packet{ProtocolVersion: 4}
	b, err := c.br.ReadByte()
	if err != nil {
		return pk, err
	}
	if err := pk.FixedHeader.Decode(b); err != nil {
		return pk, err
	}
	if pk.FixedHeader.Remaining, _, err = packets.DecodeLength(c.br); err != nil {
		return pk, err
	}
	body := make([]byte, pk.FixedHeader.Remaining)
	if _, err := io.ReadFull(c.br, body); err != nil {
		return pk, err
	}
	switch pk.FixedHeader.Type {
	case packets.Connack:
		err = pk.ConnackDecode(body)
	case packets.Suback:
		err = pk.SubackDecode(body)
	case packets.Publish:
		err = pk.PublishDecode(body)
	}
	return pk, err
}

// expect reads the next packet and fails unless it is of type typ.
func (c *client) expect(typ byte) packets.Packet {
	c.t.Helper()
	pk, err := c.next(waitTimeout)
	if err != nil {
		c.t.Fatalf("want packet type %d: %v", typ, err)
	}
	if pk.FixedHeader.Type != typ {
		c.t.Fatalf("got packet type %d, want %d", pk.FixedHeader.Type, typ)
	}
	return pk
}

// connect sends CONNECT (clean session, keep-alive 60 s) and reads the
// CONNACK.
func (c *client) connect(id string) {
	c.t.Helper()
	c.send(packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Connect},
		Connect: packets.ConnectParams{
			ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 60, ClientIdentifier: id,
		},
	})
	if pk := c.expect(packets.Connack); pk.ReasonCode != 0 {
		c.t.Fatalf("%s: CONNACK reason %#x", id, pk.ReasonCode)
	}
}

// subscribe subscribes to filter and reads the SUBACK.
func (c *client) subscribe(id uint16, filter string, qos byte) {
	c.t.Helper()
	c.send(packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1},
		PacketID:    id,
		Filters:     packets.Subscriptions{{Filter: filter, Qos: qos}},
	})
	if pk := c.expect(packets.Suback); len(pk.ReasonCodes) != 1 || pk.ReasonCodes[0] != qos {
		c.t.Fatalf("SUBACK %v for %s at QoS %d", pk.ReasonCodes, filter, qos)
	}
}

// publish sends a QoS 0 PUBLISH.
func (c *client) publish(topic string, payload []byte) {
	c.t.Helper()
	c.send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish}, TopicName: topic, Payload: payload})
}

// puback acknowledges a QoS 1 PUBLISH.
func (c *client) puback(id uint16) {
	c.t.Helper()
	c.send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: id})
}

// closedByPeer reads the socket until it fails and reports whether it was
// closed or reset by the other side within d (a read timeout is not).
func closedByPeer(sock net.Conn, d time.Duration) error {
	_ = sock.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, sock)
	if err == nil || errors.Is(err, syscall.ECONNRESET) {
		return nil // EOF or reset
	}
	return err
}

// tcpPair returns the two ends of a TCP connection on 127.0.0.1: the
// accepted one and the dialled one, whose receive buffer is rcvbuf bytes
// (0: default).
func tcpPair(t testing.TB, rcvbuf int) (server, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err = rcvbufDialer(rcvbuf).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peer.Close(); _ = server.Close() })
	return server, peer
}

// firstByteOfPublish reads until the first byte of a PUBLISH, and no more
// than the buffers hold: the client then stops reading.
func (c *client) firstByteOfPublish() {
	c.t.Helper()
	_ = c.tr.SetReadDeadline(time.Now().Add(waitTimeout))
	b, err := c.br.ReadByte()
	if err != nil || b&0xF0 != packets.Publish<<4 {
		c.t.Fatalf("want the start of a PUBLISH, got %#x: %v", b, err)
	}
}
