package listener

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/loglimit"
)

// Defaults for the zero values of Config.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultMaxBacklog     = 4 << 20
	DefaultWriteTimeout   = 30 * time.Second
	DefaultCloseDrain     = time.Second
)

// Config configures a TCP or WebSocket listener. Only ID and Address are
// required.
type Config struct {
	// ID names the listener for mochi: it is Client.Net.Listener of the
	// clients that connect through it, and it must be unique in the server.
	ID string

	// Address is the address to listen on, as for net.Listen("tcp", ...).
	// With port 0 the system picks one, which Address() then reports.
	Address string

	// ConnectTimeout bounds the time from accepting a connection to reading
	// its CONNECT packet (the TLS handshake included, and for WebSocket the
	// HTTP upgrade); after CONNECT, mochi's keep-alive takes over. Default
	// 10 s.
	ConnectTimeout time.Duration

	// MaxBacklog is how many bytes may wait for a client that does not read
	// as fast as it is sent to. The write that would bring its backlog over
	// this closes the connection as a slow consumer. The bytes the kernel
	// buffers for the socket come on top. It must be well above the largest
	// packet the broker sends (see mochi's Capabilities.MaximumPacketSize),
	// or a client that receives one such packet while its socket buffer is
	// full is disconnected. Default 4 MiB.
	MaxBacklog int

	// WriteTimeout closes a connection as a slow consumer when its client
	// takes none of the bytes waiting for it for this long. Default 30 s.
	WriteTimeout time.Duration

	// CloseDrain bounds how long closing a connection lets its backlog
	// drain before it resets the socket (never longer than WriteTimeout).
	// mochi writes a DISCONNECT and then closes at once, on a takeover and
	// on shutdown; the drain is what lets that last packet reach a client
	// whose socket was momentarily full. Default 1 s.
	CloseDrain time.Duration

	// Server, when set, is the server the listener is added to; Close then
	// disconnects the listener's clients itself, going through
	// Server.Clients.GetAll. When nil, Close calls the CloseFn mochi passes
	// it, which in mochi v2.7.9 (Server.closeListenerClients) calls
	// Clients.GetByListener: that takes the clients' read lock twice, so it
	// deadlocks if a client connects or disconnects in between. Set it.
	Server *mqtt.Server

	// TLS, when set, makes the listener serve TLS with this configuration:
	// MQTT over TLS for TCP, wss (WebSocket over HTTPS) for WebSocket. The
	// handshake counts in ConnectTimeout. LoadTLS makes one from PEM files
	// that can be reloaded. For WebSocket the listener removes "h2" from
	// its ALPN protocols, as an upgrade needs HTTP/1.1.
	TLS *tls.Config

	// CheckOrigin decides, for the WebSocket listener, whether a browser's
	// upgrade request may come from its Origin (see gorilla/websocket's
	// Upgrader.CheckOrigin). nil accepts every origin, as mochi's listener
	// does. The TCP listener ignores it.
	CheckOrigin func(r *http.Request) bool
}

// withDefaults returns c with the defaults filled in.
func (c Config) withDefaults() Config {
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.MaxBacklog <= 0 {
		c.MaxBacklog = DefaultMaxBacklog
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.CloseDrain <= 0 {
		c.CloseDrain = DefaultCloseDrain
	}
	return c
}

// Stats counts a listener's connections and the bytes waiting for them.
// The counts of closed connections run from the listener's creation.
//
// TooLarge and TLSFailures count refusals that hooks do not see, because
// no MQTT session exists yet. TooLarge counts every connection that mochi
// ended because a packet's length was over its
// Capabilities.MaximumPacketSize (mochi refuses it before reading or
// allocating the packet): a CONNECT mostly, but a later packet counts too.
// TLSFailures counts the TLS handshakes that failed or did not complete
// within ConnectTimeout; not a socket closed before it sent anything (a TCP
// health check), nor one that the listener's Close ended. TLSPlaintext
// counts those of them whose first bytes were no TLS record: a client that
// spoke plain MQTT (or any plaintext) to the TLS port; the listener logs
// them at info, one line a minute (with the number not logged).
type Stats struct {
	Open          int64 `json:"open"`           // connections accepted and not yet closed
	Backlogged    int64 `json:"backlogged"`     // connections with bytes waiting for their client now
	BacklogBytes  int64 `json:"backlog_bytes"`  // bytes waiting for clients now, over all connections
	SlowConsumers int64 `json:"slow_consumers"` // connections closed as slow consumers
	TooLarge      int64 `json:"too_large"`      // connections ended for a packet over mochi's MaximumPacketSize
	TLSFailures   int64 `json:"tls_failures"`   // TLS handshakes that failed or timed out
	TLSPlaintext  int64 `json:"tls_plaintext"`  // of TLSFailures, those whose client spoke plaintext (plain MQTT, say)
}

// tracker is what a listener shares with its connections: their settings,
// the list of the open ones, the counters, and the wait group that Close
// waits on.
//
// The wait group counts every open connection (until its socket is closed)
// and every goroutine the listener starts. A goroutine is added either by
// enter, under mu and refused after shutdown, or while something already
// counted is known to be alive; so no Add ever races with Close's Wait from
// zero.
type tracker struct {
	maxBacklog   int
	writeTimeout time.Duration
	closeDrain   time.Duration
	log          *slog.Logger // mochi's, once the listener is initialised

	mu   sync.Mutex
	head *Conn // open connections, linked through Conn.prev/next
	shut bool  // Close has begun: no new connection or goroutine
	wg   sync.WaitGroup

	open, backlogged, pending, slowConsumers atomic.Int64
	tooLarge, tlsFailures                    atomic.Int64
	tlsPlaintext                             atomic.Int64
	plaintextLog                             loglimit.Limiter // the log lines of tlsPlaintext
}

func newTracker(c Config) *tracker {
	return &tracker{maxBacklog: c.MaxBacklog, writeTimeout: c.WriteTimeout, closeDrain: c.CloseDrain, log: discard}
}

// add wraps and registers a newly accepted socket. It fails once Close has
// begun; the caller then closes the socket.
func (t *tracker) add(nc net.Conn) (*Conn, bool) {
	c := &Conn{nc: nc, t: t}
	if sc, ok := nc.(syscall.Conn); ok && fastPath {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shut {
		return nil, false
	}
	c.next = t.head
	if t.head != nil {
		t.head.prev = c
	}
	t.head = c
	t.open.Add(1)
	t.wg.Add(1)
	return c, true
}

// remove unregisters a connection whose socket was closed.
func (t *tracker) remove(c *Conn) {
	t.mu.Lock()
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		t.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
	t.mu.Unlock()
	t.open.Add(-1)
	t.wg.Done()
}

// enter counts a goroutine that is about to run, unless Close has begun.
// The goroutine calls t.wg.Done when it ends.
func (t *tracker) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shut {
		return false
	}
	t.wg.Add(1)
	return true
}

// shutdown refuses new connections and goroutines from now on.
func (t *tracker) shutdown() {
	t.mu.Lock()
	t.shut = true
	t.mu.Unlock()
}

// closeAll closes every open connection (letting each drain, see
// Conn.Close) and waits until they and every goroutine of the listener
// have ended. It is called after shutdown.
func (t *tracker) closeAll() {
	t.mu.Lock()
	var all []*Conn
	for c := t.head; c != nil; c = c.next {
		all = append(all, c)
	}
	t.mu.Unlock()
	for _, c := range all {
		_ = c.Close()
	}
	t.wg.Wait()
}

func (t *tracker) stats() Stats {
	return Stats{
		Open:          t.open.Load(),
		Backlogged:    t.backlogged.Load(),
		BacklogBytes:  t.pending.Load(),
		SlowConsumers: t.slowConsumers.Load(),
		TooLarge:      t.tooLarge.Load(),
		TLSFailures:   t.tlsFailures.Load(),
		TLSPlaintext:  t.tlsPlaintext.Load(),
	}
}

// ended counts what the error mochi's establish function returned says
// about a connection that ended.
func (t *tracker) ended(err error) {
	if errors.Is(err, packets.ErrPacketTooLarge) {
		t.tooLarge.Add(1)
	}
}

// disconnectClients ends the MQTT sessions of the listener's clients as the
// listener closes: each is written a DISCONNECT (reason "server shutting
// down" for MQTT 5; mochi sends MQTT 3 clients a bare DISCONNECT too) and
// its connection is closed, which lets that packet drain (see Conn.Close).
func disconnectClients(c Config, closeClients listeners.CloseFn) {
	if c.Server == nil {
		if closeClients != nil {
			closeClients(c.ID)
		}
		return
	}
	for _, cl := range c.Server.Clients.GetAll() {
		if cl.Net.Listener == c.ID && !cl.Closed() {
			_ = c.Server.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
}

// discard is the logger of a listener that mochi has not initialised.
var discard = slog.New(slog.DiscardHandler)

// base is what both listeners share: their settings, their connections and
// counters, and the bound socket.
type base struct {
	cfg Config
	tls *tls.Config // the TLS configuration served, nil for none
	t   *tracker
	ln  net.Listener
	log *slog.Logger
}

func newBase(c Config, tlsCfg *tls.Config) base {
	return base{cfg: c, tls: tlsCfg, t: newTracker(c), log: discard}
}

// ID returns the listener's ID.
func (b *base) ID() string { return b.cfg.ID }

// Address returns the address the listener is bound to, once it is, and the
// configured address before.
func (b *base) Address() string {
	if b.ln != nil {
		return b.ln.Addr().String()
	}
	return b.cfg.Address
}

// Stats returns the listener's counters.
func (b *base) Stats() Stats { return b.t.stats() }

// bind binds the configured address and takes mochi's logger.
func (b *base) bind(log *slog.Logger) error {
	if log != nil {
		b.log = log
		b.t.log = log.With("listener", b.cfg.ID)
	}
	ln, err := net.Listen("tcp", b.cfg.Address)
	if err != nil {
		return err
	}
	b.ln = ln
	return nil
}
