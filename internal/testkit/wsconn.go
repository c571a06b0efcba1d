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
