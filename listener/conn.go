package listener

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrSlowConsumer is what a connection's reads and writes return after it
// was closed because its client did not read what it was sent: its backlog
// would have grown over Config.MaxBacklog, or it took nothing for
// Config.WriteTimeout.
var ErrSlowConsumer = errors.New("listener: slow consumer: the client did not read what it was sent")

// errWriteDeadline is what a connection's reads and writes return after its
// own write deadline (SetWriteDeadline, SetDeadline) passed with bytes still
// waiting. It wraps os.ErrDeadlineExceeded, as a blocking write's error
// would, so code that treats a deadline as a timeout keeps doing so.
var errWriteDeadline = fmt.Errorf("listener: write deadline passed with bytes still waiting: %w", os.ErrDeadlineExceeded)

// flushChunk is the most the flusher hands the socket in one call. A write
// returns only when done or at its deadline; smaller calls let the counters
// follow the drain and the backlog be compacted as it goes.
const flushChunk = 64 << 10

// State bits of a Conn.
const (
	closed   uint32 = 1 << iota // Close was called or the connection failed: Write refuses
	released                    // the socket is closed and the listener no longer counts the Conn
	slow                        // it was closed as a slow consumer
	timedOut                    // it was closed because its own write deadline passed with bytes waiting
	closing                     // the TLS layer above is closing: write deadlines are ignored
	rm0                         // the CONNECT's Receive Maximum is 0 (connect.go)
)

// Conn is a connection accepted by one of this package's listeners. It is
// what mochi sees as Client.Net.Conn on plain TCP; for WebSocket and TLS it
// sits under the WebSocket or TLS layer, and From finds it. Its Write never
// waits for the network, see the package comment.
//
// Deadlines: a read deadline works as usual. A write deadline cannot make
// Write wait, so it applies to the bytes waiting in the backlog instead:
// if it passes before they are written, the connection is closed and its
// reads and writes fail with an error that wraps os.ErrDeadlineExceeded.
type Conn struct {
	nc  net.Conn        // the socket
	raw syscall.RawConn // the socket's descriptor, for the non-blocking first attempt; nil: no first attempt
	t   *tracker        // the listener's connections, settings and counters

	prev, next *Conn // the listener's list of connections, under t.mu

	mu    sync.Mutex    // guards out and wdl, and orders Write, the flusher and Close
	out   *backlog      // bytes Write accepted that the socket has not taken yet; nil when none
	wdl   int64         // write deadline in Unix nanoseconds, 0 for none
	state atomic.Uint32 // closed, released, slow, timedOut; read without mu by Read

	// The CONNECT sniffer (connect.go), fed on the connection's own
	// goroutine, by the reader of MQTT's bytes, until it knows; then nil.
	sniffer *connectSniffer
}

// Who feeds the CONNECT sniffer: the layer that reads MQTT's bytes.
const (
	sniffRaw uint8 = 1 + iota // Conn.Read: plain TCP
	sniffTLS                  // tlsConn.Read: MQTT over TLS
	sniffWS                   // wsConn.Read: MQTT over WebSocket (ws or wss)
)

// sniff arms the CONNECT sniffer, fed by the layer by.
func (c *Conn) sniff(by uint8) { c.sniffer = &connectSniffer{by: by} }

// sniffing reports whether the layer by feeds the CONNECT sniffer now.
func (c *Conn) sniffing(by uint8) bool { return c.sniffer != nil && c.sniffer.by == by }

// sniffed feeds the plaintext read to the CONNECT sniffer, if armed.
func (c *Conn) sniffed(p []byte) {
	if c.sniffer == nil || len(p) == 0 {
		return
	}
	switch c.sniffer.feed(p) {
	case sniffMore:
		return
	case sniffZero:
		c.state.Or(rm0)
	}
	c.sniffer = nil
}

// ReceiveMaximumZero reports whether the connection's MQTT 5 CONNECT set
// Receive Maximum to 0, a protocol error mochi cannot see (connect.go).
func (c *Conn) ReceiveMaximumZero() bool { return c.state.Load()&rm0 != 0 }

// backlog holds the bytes waiting for a slow socket. It exists only while
// the flusher goroutine runs, and the flusher is the only one that removes
// bytes from it, so the part it is writing is never moved under it.
type backlog struct {
	buf   []byte // buf[off:] waits for the socket
	off   int
	bound int64 // when the flusher's current write times out for lack of progress (Unix ns)
}

func (b *backlog) len() int { return len(b.buf) - b.off }

// Write accepts p and returns at once. If nothing is waiting it hands p to
// the socket without blocking, and what the kernel did not take joins the
// backlog, which a goroutine writes out. Write fails only when the
// connection is closed, the socket reported an error, or p would bring the
// backlog over the listener's MaxBacklog; in that last case the connection
// is closed as a slow consumer.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.state.Load(); st&closed != 0 {
		return 0, stateErr(st)
	}
	if len(p) == 0 {
		return 0, nil
	}
	rest := p
	if c.out == nil {
		// Nothing is waiting, so the bytes may go straight to the socket
		// without overtaking anything.
		n, err := c.tryWrite(p)
		if err != nil {
			return n, err
		}
		if n == len(p) {
			return n, nil
		}
		rest = p[n:]
	}
	waiting := len(rest)
	if c.out != nil {
		waiting += c.out.len()
	}
	if waiting > c.t.maxBacklog {
		c.fail(slow)
		return len(p) - len(rest), ErrSlowConsumer
	}
	if c.out == nil {
		c.out = &backlog{
			buf:   make([]byte, 0, max(len(rest), 4<<10)),
			bound: time.Now().Add(c.t.writeTimeout).UnixNano(),
		}
		c.t.backlogged.Add(1)
		// The Conn is registered and not closed, so the listener's wait
		// group is above zero here: adding to it is safe even while Close
		// waits on it.
		c.t.wg.Add(1)
		go c.flush() // it waits for c.mu, which Write holds until it returns
	}
	// Copy: the caller may reuse p (mochi and gorilla/websocket both do).
	c.out.buf = append(c.out.buf, rest...)
	c.t.pending.Add(int64(len(rest)))
	return len(p), nil
}

// tryWrite makes one non-blocking attempt to write p, with c.mu held and no
// flusher running. It returns how much the kernel took (0 when the socket
// buffer is full) and an error only when the socket failed.
func (c *Conn) tryWrite(p []byte) (int, error) {
	if c.raw == nil {
		return 0, nil // no descriptor: the flusher writes everything
	}
	a := attempts.Get().(*attempt)
	a.p = p
	err := c.raw.Write(a.fn)
	n, werr := a.n, a.err
	a.p, a.n, a.err = nil, 0, nil
	attempts.Put(a)
	if err != nil {
		return 0, err
	}
	if werr != nil {
		return n, &net.OpError{Op: "write", Net: c.nc.LocalAddr().Network(), Source: c.nc.LocalAddr(), Addr: c.nc.RemoteAddr(), Err: os.NewSyscallError("write", werr)}
	}
	return n, nil
}

// attempt carries one non-blocking write through RawConn.Write. Its fn is
// bound once, when the attempt is allocated, so that a write allocates no
// closure; attempts are pooled because the fast-path writes of different
// connections run side by side.
type attempt struct {
	p   []byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

var attempts = sync.Pool{New: func() any {
	a := new(attempt)
	a.fn = a.once
	return a
}}

// flush writes the backlog to the socket until it is empty, the connection
// fails, or a Close's drain time runs out. It holds c.mu except while it
// writes, so Write keeps appending meanwhile; it is the only code that
// waits for the socket, and it holds no lock while it does.
func (c *Conn) flush() {
	defer c.t.wg.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.out
	for {
		st := c.state.Load()
		if st&released != 0 || b.len() == 0 {
			c.dropBacklog()
			if st&(closed|released) == closed {
				c.release(false) // Close was waiting for the backlog
			}
			return
		}
		chunk := b.buf[b.off:]
		if len(chunk) > flushChunk {
			chunk = chunk[:flushChunk]
		}
		b.bound = time.Now().Add(c.t.writeTimeout).UnixNano()
		// Set under c.mu so that a deadline set meanwhile (SetWriteDeadline,
		// Close) is never overwritten by an older one.
		_ = c.nc.SetWriteDeadline(c.deadline())
		c.mu.Unlock()
		n, err := c.nc.Write(chunk)
		c.mu.Lock()
		b.off += n
		c.t.pending.Add(-int64(n))
		switch {
		case b.off == len(b.buf):
			b.buf, b.off = b.buf[:0], 0
		case b.off > len(b.buf)/2:
			// Only the flusher removes bytes, and it is not writing now.
			k := copy(b.buf, b.buf[b.off:])
			b.buf, b.off = b.buf[:k], 0
		}
		if err == nil || c.state.Load()&released != 0 {
			continue
		}
		c.writeFailed(n, err)
	}
}

// writeFailed decides what a failed flusher write means, with c.mu held.
func (c *Conn) writeFailed(n int, err error) {
	if c.state.Load()&closed != 0 {
		c.release(true) // Close's drain ran out of time, or the socket failed meanwhile
		return
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		c.release(true) // reset by the peer, for example
		return
	}
	if n > 0 {
		return // the client is slow but it reads: start a new WriteTimeout
	}
	if time.Now().Before(c.deadline()) {
		return // the write deadline was moved later while the write waited
	}
	if c.wdl != 0 && c.wdl <= c.out.bound {
		c.fail(timedOut) // its own deadline, which would have failed a blocking write
		return
	}
	c.fail(slow) // nothing taken for WriteTimeout
}

// deadline is the flusher's socket write deadline: the earlier of the
// Conn's write deadline and the flusher's progress bound. c.mu held, c.out set.
func (c *Conn) deadline() time.Time {
	d := c.out.bound
	if c.wdl != 0 && c.wdl < d {
		d = c.wdl
	}
	return time.Unix(0, d)
}

// dropBacklog forgets the backlog as the flusher ends, with c.mu held.
func (c *Conn) dropBacklog() {
	c.t.pending.Add(-int64(c.out.len()))
	c.t.backlogged.Add(-1)
	c.out = nil
	if c.state.Load()&released == 0 {
		// RawConn.Write fails at once once the socket's write deadline has
		// passed, so the next fast-path write must not find the flusher's.
		_ = c.nc.SetWriteDeadline(time.Time{})
	}
}

// fail closes the connection for the reason why (slow or timedOut), with
// c.mu held: the bytes waiting are dropped and the socket is reset.
func (c *Conn) fail(why uint32) {
	if c.state.Load()&released != 0 {
		return
	}
	c.state.Or(closed | why)
	if why == slow {
		c.t.slowConsumers.Add(1)
	}
	c.release(true)
}

// release closes the socket and unregisters the Conn, once, with c.mu held.
// abort resets the connection instead of closing it in order: the bytes the
// kernel still holds for the client are then dropped at once rather than
// kept until the client reads them or the kernel gives up.
func (c *Conn) release(abort bool) {
	if c.state.Load()&released != 0 {
		return
	}
	c.state.Or(closed | released)
	if abort {
		if l, ok := c.nc.(interface{ SetLinger(int) error }); ok {
			_ = l.SetLinger(0)
		}
	}
	_ = c.nc.Close()
	c.t.remove(c)
}

// Close closes the connection. It does not wait: reading stops at once (so
// the broker's reader returns), and if bytes are waiting, the connection
// stays open until they are written, for at most the earlier of one second
// and the listener's WriteTimeout, so that a last packet such as mochi's
// DISCONNECT normally reaches the client. Close may be called more than
// once; the later calls do nothing.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Load()&closed != 0 {
		return nil
	}
	c.state.Or(closed)
	if c.out == nil {
		c.release(false)
		return nil
	}
	by := time.Now().Add(min(c.t.writeTimeout, c.t.closeDrain)).UnixNano()
	if c.wdl == 0 || by < c.wdl {
		c.wdl = by
	}
	_ = c.nc.SetWriteDeadline(c.deadline()) // cuts short the write in progress
	if r, ok := c.nc.(interface{ CloseRead() error }); ok {
		_ = r.CloseRead()
	} else {
		_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	}
	return nil
}

// Read reads from the socket. After the connection was closed as a slow
// consumer it fails with ErrSlowConsumer, so that mochi passes that reason
// on (hooks get it in OnDisconnect).
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.nc.Read(p)
	if c.sniffing(sniffRaw) {
		c.sniffed(p[:n])
	}
	if err != nil {
		if st := c.state.Load(); st&(slow|timedOut) != 0 {
			err = stateErr(st)
		}
	}
	return n, err
}

// SetDeadline sets the read and write deadlines (see Conn).
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the socket's read deadline. After Close it does
// nothing, so a reader refreshing its deadline (mochi does, before every
// packet) cannot undo Close's stopping of the reads.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.state.Load()&closed != 0 {
		return nil
	}
	return c.nc.SetReadDeadline(t)
}

// SetWriteDeadline sets the time by which the bytes waiting must have been
// written (see Conn). It never makes Write wait.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Load()&(closed|closing) != 0 {
		return nil
	}
	c.wdl = unixNano(t)
	if c.out != nil {
		_ = c.nc.SetWriteDeadline(c.deadline())
	}
	return nil
}

// ignoreWriteDeadlines makes SetWriteDeadline do nothing from now on. The
// TLS layer calls it as it closes: crypto/tls writes its close_notify alert
// and then sets a write deadline of now, which on a Conn would drop the
// bytes still waiting, the alert among them. Close bounds the drain anyway.
func (c *Conn) ignoreWriteDeadlines() { c.state.Or(closing) }

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// RemoteAddr returns the client's network address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// SlowConsumer reports whether the connection was closed because its client
// did not read what it was sent.
func (c *Conn) SlowConsumer() bool { return c.state.Load()&slow != 0 }

// Pending returns how many bytes are waiting for the client now.
func (c *Conn) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out == nil {
		return 0
	}
	return c.out.len()
}

// WritesNeverBlock reports true. It marks the connections of this package,
// so that code holding only a net.Conn (mochi's Client.Net.Conn) can tell
// that a write to it returns without waiting for the client:
//
//	nb, ok := cl.Net.Conn.(interface{ WritesNeverBlock() bool })
//	if ok && nb.WritesNeverBlock() { ... }
func (c *Conn) WritesNeverBlock() bool { return true }

// ListenerClosing reports whether the connection's listener is closing
// (its Close has begun): the server is shutting down, and a connection
// that ends now was ended by the shutdown, even when the client closed on
// reading the DISCONNECT before mochi recorded why it stopped it.
func (c *Conn) ListenerClosing() bool {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	return c.t.shut
}

// From returns the *Conn under a connection mochi holds (Client.Net.Conn),
// for either listener of this package, with TLS or without, and false for
// any other connection. It also sees through a *tls.Conn over a *Conn.
func From(nc net.Conn) (*Conn, bool) {
	switch c := nc.(type) {
	case *Conn:
		return c, true
	case *wsConn:
		return c.Conn, true
	case *tlsConn:
		return c.c, true
	case *tls.Conn:
		return From(c.NetConn())
	}
	return nil, false
}

// stateErr is the error for a connection that no longer takes writes.
func stateErr(st uint32) error {
	switch {
	case st&slow != 0:
		return ErrSlowConsumer
	case st&timedOut != 0:
		return errWriteDeadline
	}
	return net.ErrClosed
}

// unixNano converts a deadline to Unix nanoseconds, 0 for none. Times
// beyond what fits (year 2262) mean no deadline in practice.
func unixNano(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Year() >= 2262:
		return math.MaxInt64
	case t.UnixNano() <= 0:
		return 1 // passed long ago, and not to be taken for "none"
	}
	return t.UnixNano()
}
