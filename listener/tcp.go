package listener

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/mochi-mqtt/server/v2/listeners"
)

// TCP is an MQTT listener on TCP, with TLS when Config.TLS is set. It
// implements mochi's listeners.Listener; add it with Server.AddListener.
//
// With TLS, mochi gets a connection that embeds the *tls.Conn (so a hook
// can call ConnectionState, or PeerCertificate) over the *Conn, and that
// has the WritesNeverBlock method too.
type TCP struct {
	base
	closeOnce sync.Once
}

// NewTCP returns a TCP listener for c. It binds its address when the server
// initialises it (Server.AddListener).
func NewTCP(c Config) *TCP {
	c = c.withDefaults()
	return &TCP{base: newBase(c, c.TLS)}
}

// Protocol returns "tcp", or "tcp+tls" with TLS.
func (l *TCP) Protocol() string {
	if l.tls != nil {
		return "tcp+tls"
	}
	return "tcp"
}

// Init binds the listener's address. mochi calls it from AddListener, which
// returns its error.
func (l *TCP) Init(log *slog.Logger) error { return l.bind(log) }

// Serve accepts connections until Close, and hands each to mochi (establish)
// in a goroutine of its own.
func (l *TCP) Serve(establish listeners.EstablishFn) {
	if l.ln == nil || !l.t.enter() {
		return
	}
	defer l.t.wg.Done()
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, for example: mochi's listener stops for
			// good here; wait a little and go on, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.log.Warn("accept failed", "error", err, "listener", l.cfg.ID, "retry_in_ms", backoff.Milliseconds())
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		c, ok := l.t.add(nc)
		if !ok {
			_ = nc.Close()
			return
		}
		// mochi sets no deadline until it has read CONNECT; the TLS
		// handshake comes within it.
		_ = c.SetDeadline(time.Now().Add(l.cfg.ConnectTimeout))
		l.t.wg.Add(1) // safe: c is counted until it is closed, below at the latest
		go l.serveConn(c, establish)
	}
}

// serveConn runs the TLS handshake if the listener serves TLS, and hands
// the connection to mochi, in a goroutine of the connection.
func (l *TCP) serveConn(c *Conn, establish listeners.EstablishFn) {
	defer l.t.wg.Done()
	var nc net.Conn = c
	if l.tls != nil {
		c.sniff(sniffTLS)
	} else {
		c.sniff(sniffRaw)
	}
	if l.tls != nil {
		tc := newTLSConn(c, l.tls)
		if err := tc.handshake(); err != nil {
			_ = tc.Close()
			return
		}
		nc = tc
	}
	err := establish(l.cfg.ID, nc)
	_ = nc.Close() // mochi has closed it already, except on a panic in a hook
	l.t.ended(err)
	if err != nil {
		l.log.Debug("client ended", "error", err, "listener", l.cfg.ID, "remote", c.RemoteAddr().String())
	}
}

// Close stops accepting, disconnects the listener's MQTT clients (see
// Config.Server), closes the connections that have not sent CONNECT yet,
// and returns when every connection is closed and every goroutine of the
// listener has ended. That takes at most about a second (the time the last
// bytes of a connection get to drain, see Conn.Close) plus the time mochi's
// hooks take as the clients end. It ignores closeClients when Config.Server
// is set.
func (l *TCP) Close(closeClients listeners.CloseFn) {
	l.closeOnce.Do(func() {
		l.t.shutdown()
		if l.ln != nil {
			_ = l.ln.Close()
		}
		disconnectClients(l.cfg, closeClients)
		l.t.closeAll()
	})
}
