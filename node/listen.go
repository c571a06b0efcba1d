package node

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/mochi-mqtt/server/v2/listeners"
)

// connectTimeout bounds the time between accepting a connection and its
// CONNECT. mochi sets no deadline until CONNECT is read, so without this a
// socket that never speaks would be held forever, and would also hang mochi's
// Close, which waits for every connection but only closes registered clients.
const connectTimeout = 10 * time.Second

// pending tracks raw connections of a listener until they end, so that Close
// can close the ones mochi does not know about yet.
type pending struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	shut  bool
}

func (p *pending) add(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shut {
		return false
	}
	if p.conns == nil {
		p.conns = make(map[net.Conn]struct{})
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *pending) remove(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *pending) closeAll() {
	p.mu.Lock()
	p.shut = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// tcpListener is MQTT over TCP: mochi's TCP listener plus the connect timeout
// and the closing of connections that have not sent CONNECT yet.
type tcpListener struct {
	id, address string
	closer      listeners.CloseFn // closes mochi's clients of this listener
	ln          net.Listener
	log         *slog.Logger
	conns       pending
	wg          sync.WaitGroup
}

func newTCPListener(id, address string, closer listeners.CloseFn) *tcpListener {
	return &tcpListener{id: id, address: address, closer: closer}
}

func (l *tcpListener) ID() string       { return l.id }
func (l *tcpListener) Protocol() string { return "tcp" }
func (l *tcpListener) Address() string {
	if l.ln != nil {
		return l.ln.Addr().String()
	}
	return l.address
}

func (l *tcpListener) Init(log *slog.Logger) error {
	l.log = log
	ln, err := net.Listen("tcp", l.address)
	if err != nil {
		return err
	}
	l.ln = ln
	return nil
}

func (l *tcpListener) Serve(establish listeners.EstablishFn) {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				l.log.Error("tcp listener stopped", "error", err, "listener", l.id)
			}
			return
		}
		if !l.conns.add(conn) {
			_ = conn.Close()
			return
		}
		_ = conn.SetDeadline(time.Now().Add(connectTimeout))
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer l.conns.remove(conn)
			if err := establish(l.id, conn); err != nil {
				l.log.Debug("client ended", "error", err, "listener", l.id)
			}
		}()
	}
}

// Close stops accepting, disconnects mochi's clients of this listener, and
// closes the connections still waiting for their CONNECT. It uses the
// node's closer, not the one mochi passes: mochi's (closeListenerClients)
// calls Clients.GetByListener, which takes the clients' read lock twice and
// deadlocks when a client is deleted between the two (a writer waiting).
func (l *tcpListener) Close(listeners.CloseFn) {
	_ = l.ln.Close()
	l.closer(l.id)
	l.conns.closeAll()
	l.wg.Wait()
}
