package listener

import (
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

// WebSocket is an MQTT listener on WebSocket: MQTT bytes travel in binary
// messages, with the subprotocol "mqtt". It implements mochi's
// listeners.Listener; add it with Server.AddListener.
//
// Its connections are wrapped as they are accepted, before HTTP, so the
// socket gorilla/websocket writes its frames to after the upgrade is a
// *Conn, whose writes never block.
//
// With Config.TLS it serves wss: the TLS layer sits on the *Conn, under
// HTTP. The handshake runs as net/http first reads the connection, within
// ConnectTimeout; net/http does not know the connection is TLS (it cannot
// see a *tls.Conn), so it serves HTTP/1.1 only and its Request.TLS is nil.
type WebSocket struct {
	base      // ln is the bound socket, wrapped by acceptor
	srv       *http.Server
	upgrader  websocket.Upgrader
	establish listeners.EstablishFn
	closeOnce sync.Once
}

// NewWebSocket returns a WebSocket listener for c. It binds its address when
// the server initialises it (Server.AddListener).
func NewWebSocket(c Config) *WebSocket {
	c = c.withDefaults()
	check := c.CheckOrigin
	if check == nil {
		check = func(*http.Request) bool { return true }
	}
	return &WebSocket{
		base:     newBase(c, withoutH2(c.TLS)),
		upgrader: websocket.Upgrader{Subprotocols: []string{"mqtt"}, CheckOrigin: check},
	}
}

// Protocol returns "ws", or "wss" with TLS.
func (l *WebSocket) Protocol() string {
	if l.tls != nil {
		return "wss"
	}
	return "ws"
}

// Init binds the listener's address. mochi calls it from AddListener, which
// returns its error. (mochi's own WebSocket listener binds in Serve and can
// only log a failure there.)
func (l *WebSocket) Init(log *slog.Logger) error {
	if err := l.bind(log); err != nil {
		return err
	}
	l.srv = &http.Server{
		Handler: http.HandlerFunc(l.handle),
		// A connection that never completes its upgrade request, or idles
		// between plain HTTP requests, is closed like one that never sends
		// CONNECT.
		ReadHeaderTimeout: l.cfg.ConnectTimeout,
		IdleTimeout:       l.cfg.ConnectTimeout,
		ErrorLog:          slog.NewLogLogger(l.log.Handler(), slog.LevelDebug),
		ConnState:         l.connState,
	}
	return nil
}

// connState counts net/http's goroutine of each connection, so that Close
// waits for it too: from StateNew, which net/http reports from Serve's
// goroutine (counted) before it starts the connection's, to StateClosed or
// StateHijacked, after which net/http does nothing more with the
// connection (an upgraded one is counted by handle meanwhile).
func (l *WebSocket) connState(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		l.t.wg.Add(1)
	case http.StateClosed, http.StateHijacked:
		l.t.wg.Done()
	}
}

// Serve serves HTTP until Close, and hands each upgraded connection to mochi
// (establish).
func (l *WebSocket) Serve(establish listeners.EstablishFn) {
	if l.ln == nil || !l.t.enter() {
		return
	}
	defer l.t.wg.Done()
	l.establish = establish
	err := l.srv.Serve(&acceptor{Listener: l.ln, l: l})
	if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		l.log.Error("websocket listener stopped", "error", err, "listener", l.cfg.ID)
	}
}

// acceptor wraps every accepted socket in a *Conn and registers it, and
// puts the TLS layer on it if the listener serves TLS.
type acceptor struct {
	net.Listener
	l *WebSocket
}

func (a *acceptor) Accept() (net.Conn, error) {
	nc, err := a.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c, ok := a.l.t.add(nc)
	if !ok {
		_ = nc.Close()
		return nil, net.ErrClosed
	}
	// Until the request header is read; net/http then takes over, and after
	// the upgrade handle sets the CONNECT deadline.
	_ = c.SetDeadline(time.Now().Add(a.l.cfg.ConnectTimeout))
	if a.l.tls != nil {
		return newTLSConn(c, a.l.tls), nil
	}
	return c, nil
}

// handle upgrades a request and serves MQTT on it until the client ends.
// net/http runs it in the connection's goroutine, which the listener counts
// while it runs here.
func (l *WebSocket) handle(w http.ResponseWriter, r *http.Request) {
	if !l.t.enter() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	defer l.t.wg.Done()
	ws, err := l.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered with the error
	}
	c, ok := From(ws.UnderlyingConn())
	if !ok { // cannot happen: acceptor wraps every connection
		_ = ws.Close()
		return
	}
	// gorilla/websocket's default ping handler writes the pong with a write
	// deadline one second ahead. On a *Conn that deadline would bound every
	// byte waiting at that moment, not just the pong, and fail a slow but
	// reading client; the pong goes without one (the write does not block).
	ws.SetPingHandler(func(data string) error {
		err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Time{})
		var ne net.Error
		if errors.Is(err, websocket.ErrCloseSent) || errors.As(err, &ne) {
			return nil // as the default handler: the reader reports the problem
		}
		return err
	})
	// net/http and the upgrader have cleared the deadlines; mochi sets none
	// until it has read CONNECT.
	_ = c.SetDeadline(time.Now().Add(l.cfg.ConnectTimeout))
	c.sniff(sniffWS)
	wc := &wsConn{Conn: c, ws: ws}
	err = l.establish(l.cfg.ID, wc)
	_ = wc.Close()
	l.t.ended(err)
	if err != nil {
		l.log.Debug("websocket client ended", "error", err, "listener", l.cfg.ID, "remote", c.RemoteAddr().String())
	}
}

// Close stops accepting, disconnects the listener's MQTT clients (see
// Config.Server), closes every other connection (those still upgrading or
// waiting for CONNECT), and returns when every connection is closed and
// every goroutine of the listener has ended, as TCP.Close does. It ignores
// closeClients when Config.Server is set.
func (l *WebSocket) Close(closeClients listeners.CloseFn) {
	l.closeOnce.Do(func() {
		l.t.shutdown()
		if l.srv != nil {
			// Closes the listener and the connections net/http still
			// serves; it does not wait for the upgraded ones, which are
			// closed below.
			_ = l.srv.Close()
		}
		if l.ln != nil {
			_ = l.ln.Close() // in case Serve never ran
		}
		disconnectClients(l.cfg, closeClients)
		l.t.closeAll()
	})
}

// wsConn is the net.Conn mochi reads MQTT from and writes MQTT to: one
// binary message per write, any number of binary messages for the reads.
// It embeds the *Conn under the WebSocket (and under TLS, for wss), so
// deadlines, SlowConsumer and WritesNeverBlock are the socket's.
type wsConn struct {
	*Conn
	ws *websocket.Conn
	r  io.Reader // the message being read, if any
}

var errNotBinary = errors.New("listener: websocket message is not binary")

// Close closes the connection under the WebSocket: the *Conn, or for wss
// the TLS layer, which sends its close_notify alert and closes the *Conn.
// Either lets the bytes waiting drain (see Conn.Close).
func (c *wsConn) Close() error { return c.ws.UnderlyingConn().Close() }

func (c *wsConn) Read(p []byte) (int, error) {
	for {
		if c.r == nil {
			op, r, err := c.ws.NextReader()
			if err != nil {
				// gorilla/websocket may hide the socket's error behind its
				// own; the slow consumer's must reach mochi as it does on TCP.
				if st := c.state.Load(); st&(slow|timedOut) != 0 {
					err = stateErr(st)
				}
				return 0, err
			}
			if op != websocket.BinaryMessage {
				return 0, errNotBinary
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if c.sniffing(sniffWS) {
			c.sniffed(p[:n])
		}
		if errors.Is(err, io.EOF) {
			c.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

// Write sends p as one binary message. gorilla/websocket frames it and
// writes the frame to the *Conn, so it does not wait for the client either.
// mochi never writes concurrently to one client (it holds the client's
// lock), which gorilla/websocket requires.
func (c *wsConn) Write(p []byte) (int, error) {
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
