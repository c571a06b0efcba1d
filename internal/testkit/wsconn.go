package testkit

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// WSConn is the client side of a WebSocket as a net.Conn, for MQTT over
// WebSocket: each Write is one binary message, and Read reads the binary
// messages one after the other as one stream of bytes. Writes may come from
// several goroutines. Close closes the connection without a close message.
type WSConn struct {
	WS *websocket.Conn // the WebSocket, for its subprotocol, pings or the socket under it

	wmu sync.Mutex
	r   io.Reader // the message being read, if any
}

var _ net.Conn = (*WSConn)(nil)

// NewWSConn wraps ws.
func NewWSConn(ws *websocket.Conn) *WSConn { return &WSConn{WS: ws} }

// ErrNotBinary is what Read returns for a message that is not binary.
var ErrNotBinary = errors.New("testkit: websocket message is not binary")

func (w *WSConn) Read(p []byte) (int, error) {
	for {
		if w.r == nil {
			op, r, err := w.WS.NextReader()
			if err != nil {
				return 0, err
			}
			if op != websocket.BinaryMessage {
				return 0, ErrNotBinary
			}
			w.r = r
		}
		n, err := w.r.Read(p)
		if errors.Is(err, io.EOF) {
			w.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func (w *WSConn) Write(p []byte) (int, error) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if err := w.WS.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *WSConn) Close() error                       { return w.WS.Close() }
func (w *WSConn) LocalAddr() net.Addr                { return w.WS.LocalAddr() }
func (w *WSConn) RemoteAddr() net.Addr               { return w.WS.RemoteAddr() }
func (w *WSConn) SetReadDeadline(t time.Time) error  { return w.WS.SetReadDeadline(t) }
func (w *WSConn) SetWriteDeadline(t time.Time) error { return w.WS.SetWriteDeadline(t) }
func (w *WSConn) SetDeadline(t time.Time) error {
	return errors.Join(w.WS.SetReadDeadline(t), w.WS.SetWriteDeadline(t))
}

// Streamed returns w as a loopback TCP connection whose bytes are carried
// to and from w by two goroutines, for a client that writes one packet in
// several Writes from several goroutines, as paho.golang does: it writes a
// packet with net.Buffers.WriteTo, which is one writev on a socket (Go
// serialises whole writes on one socket) but one Write per buffer on any
// other net.Conn (a WSConn, a *tls.Conn), so its keep-alive PINGREQ (sent
// as soon as it connects) or a PUBACK could land between a SUBSCRIBE's
// fixed header and its body, which the broker rightly refuses as
// malformed. Closing either end closes the other; both goroutines end
// then.
func Streamed(w net.Conn) (net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, err
	}
	server, err := ln.Accept()
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	go func() { // the client's bytes, in order (over a WSConn, as WebSocket messages)
		_, _ = io.Copy(w, server)
		_ = w.Close()
		_ = server.Close()
	}()
	go func() { // the broker's messages, as the client's stream
		_, _ = io.Copy(server, w)
		_ = server.Close()
		_ = w.Close()
	}()
	return client, nil
}
