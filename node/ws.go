package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// wsListener is MQTT over WebSocket. mochi's own listener binds its port only
// inside Serve and only logs a failure there; this one binds in Init, so a
// port in use stops the start with an error and ":0" reports its real port.
type wsListener struct {
	id, address string
	ln          net.Listener
	srv         *http.Server
	upgrader    websocket.Upgrader
	establish   listeners.EstablishFn
	closeOnce   sync.Once
	log         *slog.Logger
	conns       pending
	closer      listeners.CloseFn // see tcpListener.Close
}

func newWSListener(id, address string, closer listeners.CloseFn) *wsListener {
	return &wsListener{
		id: id, address: address, closer: closer,
		upgrader: websocket.Upgrader{
			Subprotocols: []string{"mqtt"},
			CheckOrigin:  func(*http.Request) bool { return true },
		},
	}
}

func (l *wsListener) ID() string       { return l.id }
func (l *wsListener) Protocol() string { return "ws" }
func (l *wsListener) Address() string {
	if l.ln != nil {
		return l.ln.Addr().String()
	}
	return l.address
}

func (l *wsListener) Init(log *slog.Logger) error {
	l.log = log
	ln, err := net.Listen("tcp", l.address)
	if err != nil {
		return err
	}
	l.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("/", l.handle)
	l.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return nil
}

func (l *wsListener) Serve(establish listeners.EstablishFn) {
	l.establish = establish
	if err := l.srv.Serve(l.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		l.log.Error("websocket listener stopped", "error", err, "listener", l.id)
	}
}

func (l *wsListener) handle(w http.ResponseWriter, r *http.Request) {
	c, err := l.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	raw := c.UnderlyingConn()
	if !l.conns.add(raw) {
		return
	}
	defer l.conns.remove(raw)
	_ = raw.SetDeadline(time.Now().Add(connectTimeout))
	if err := l.establish(l.id, &wsConn{Conn: raw, c: c}); err != nil {
		l.log.Debug("websocket client ended", "error", err)
	}
}

func (l *wsListener) Close(listeners.CloseFn) {
	l.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// Shutdown does not wait for hijacked (upgraded) connections:
		// closeClients below ends those.
		_ = l.srv.Shutdown(ctx)
	})
	l.closer(l.id)
	l.conns.closeAll()
}

// wsConn carries MQTT bytes in binary WebSocket messages.
type wsConn struct {
	net.Conn
	c *websocket.Conn
	r io.Reader // the message being read, if any
}

var errNotBinary = errors.New("websocket message is not binary")

func (ws *wsConn) Read(p []byte) (int, error) {
	for {
		if ws.r == nil {
			op, r, err := ws.c.NextReader()
			if err != nil {
				return 0, err
			}
			if op != websocket.BinaryMessage {
				return 0, errNotBinary
			}
			ws.r = r
		}
		n, err := ws.r.Read(p)
		if errors.Is(err, io.EOF) {
			ws.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func (ws *wsConn) Write(p []byte) (int, error) {
	if err := ws.c.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
