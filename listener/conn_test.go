package listener

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"

	"github.com/presenced/presenced/internal/testkit"
)

// wrap registers the server end of a pair with a tracker for cfg, as a
// listener would. The caller ends with closeTracker.
func wrap(t testing.TB, nc net.Conn, cfg Config) (*Conn, *tracker) {
	t.Helper()
	tr := newTracker(cfg.withDefaults())
	c, ok := tr.add(nc)
	if !ok {
		t.Fatal("tracker refused the connection")
	}
	return c, tr
}

// closeTracker closes every connection of tr and waits for its goroutines,
// as a listener's Close does.
func closeTracker(t testing.TB, tr *tracker) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		tr.shutdown()
		tr.closeAll()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("closing the connections did not end")
	}
}

// pattern returns n bytes that differ from one offset to the next, so that
// lost, repeated or reordered bytes show.
func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i/251)
	}
	return p
}

// readAll reads from peer in the background until EOF or error.
func readAll(peer net.Conn) <-chan []byte {
	out := make(chan []byte, 1)
	go func() {
		var buf bytes.Buffer
		_, _ = io.Copy(&buf, peer)
		out <- buf.Bytes()
	}()
	return out
}

func waitBytes(t testing.TB, ch <-chan []byte) []byte {
	t.Helper()
	select {
	case b := <-ch:
		return b
	case <-time.After(waitTimeout):
		t.Fatal("the peer did not reach the end of the stream")
		return nil
	}
}

// The struct is all an idle connection costs; the goroutine and the buffer
// exist only while bytes wait.
func TestIdleConnCost(t *testing.T) {
	defer goleak.VerifyNone(t)
	size := unsafe.Sizeof(Conn{})
	t.Logf("sizeof(Conn) = %d bytes", size)
	if size > 96 {
		t.Errorf("Conn is %d bytes", size)
	}
	base := goleak.IgnoreCurrent()
	server, peer := tcpPair(t, 4096)
	c, tr := wrap(t, server, Config{})
	got := readAll(peer)
	data := pattern(4 << 20) // more than the socket takes at once
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	if tr.stats().Backlogged != 1 {
		t.Log("the socket took 4 MiB at once; the backlog was not exercised")
	}
	testkit.Wait(t, waitTimeout, "backlog drained", func() error { return testkit.Why(tr.stats() == Stats{Open: 1}, "not yet") })
	c.mu.Lock()
	idle := c.out == nil
	c.mu.Unlock()
	if !idle {
		t.Fatal("the backlog is still allocated after draining")
	}
	// The only goroutine left besides the test's is the peer's reader.
	testkit.Wait(t, waitTimeout, "flusher ended", func() error {
		return goleak.Find(base, goleak.IgnoreAnyFunction("github.com/presenced/presenced/listener.readAll.func1"))
	})
	closeTracker(t, tr)
	if b := waitBytes(t, got); !bytes.Equal(b, data) {
		t.Fatalf("peer got %d bytes, differing from the %d written", len(b), len(data))
	}
}

// Writes of random sizes through a small receive buffer and a reader that
// takes small bites arrive complete and in order, through fast path and
// backlog alike.
func TestConnKeepsOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	server, peer := tcpPair(t, 4096)
	// The close lets the backlog drain for as long as the test waits for
	// the bytes: through a 4 KiB receive buffer and 1,500-byte reads, MiBs
	// take longer than the default second on a busy machine (under -race).
	c, tr := wrap(t, server, Config{MaxBacklog: 64 << 20, CloseDrain: waitTimeout, WriteTimeout: waitTimeout})
	got := make(chan []byte, 1)
	go func() {
		var buf bytes.Buffer
		p := make([]byte, 1500)
		for {
			n, err := peer.Read(p)
			buf.Write(p[:n])
			if err != nil {
				got <- buf.Bytes()
				return
			}
		}
	}()
	data := pattern(8 << 20)
	rng := rand.New(rand.NewPCG(1, 2))
	backlogged := false
	for off := 0; off < len(data); {
		n := min(1+rng.IntN(32<<10), len(data)-off)
		if k, err := c.Write(data[off : off+n]); err != nil || k != n {
			t.Fatalf("write %d at %d: %d, %v", n, off, k, err)
		}
		off += n
		backlogged = backlogged || tr.stats().Backlogged == 1
	}
	if !backlogged {
		t.Log("no write went to the backlog")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if b := waitBytes(t, got); !bytes.Equal(b, data) {
		t.Fatalf("peer got %d bytes, differing from the %d written", len(b), len(data))
	}
	closeTracker(t, tr)
}

// A connection without a descriptor (net.Pipe) has no fast path: every write
// goes through the backlog, and arrives in order.
func TestConnWithoutDescriptor(t *testing.T) {
	defer goleak.VerifyNone(t)
	server, peer := net.Pipe()
	defer peer.Close()
	c, tr := wrap(t, server, Config{})
	got := readAll(peer)
	data := pattern(1 << 20)
	for off := 0; off < len(data); off += 1000 {
		if _, err := c.Write(data[off:min(off+1000, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Wait(t, waitTimeout, "backlog drained", func() error { return testkit.Why(tr.stats().Backlogged == 0, "not yet") })
	closeTracker(t, tr)
	if b := waitBytes(t, got); !bytes.Equal(b, data) {
		t.Fatalf("peer got %d bytes, differing from the %d written", len(b), len(data))
	}
}

// A write that would bring the backlog over MaxBacklog fails with
// ErrSlowConsumer, resets the connection, and so do later reads and writes.
func TestConnSlowConsumerOverBacklog(t *testing.T) {
	defer goleak.VerifyNone(t)
	server, peer := tcpPair(t, 4096)
	c, tr := wrap(t, server, Config{MaxBacklog: 256 << 10})
	chunk := pattern(1 << 10)
	var err error
	for i := 0; i < 1<<16 && err == nil; i++ {
		_, err = c.Write(chunk)
	}
	if !errors.Is(err, ErrSlowConsumer) || !c.SlowConsumer() {
		t.Fatalf("write: %v; slow consumer %v", err, c.SlowConsumer())
	}
	if _, err := c.Write(chunk); !errors.Is(err, ErrSlowConsumer) {
		t.Fatalf("write after: %v", err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, ErrSlowConsumer) {
		t.Fatalf("read after: %v", err)
	}
	// The flusher drops the backlog as its write fails.
	testkit.Wait(t, waitTimeout, "backlog dropped", func() error { return testkit.Why(tr.stats() == Stats{SlowConsumers: 1}, "not yet") })
	if err := closedByPeer(peer, waitTimeout); err != nil {
		t.Fatalf("peer: %v", err)
	}
	closeTracker(t, tr)
}

// A client that takes nothing for WriteTimeout is a slow consumer.
func TestConnSlowConsumerNoProgress(t *testing.T) {
	defer goleak.VerifyNone(t)
	const timeout = 200 * time.Millisecond
	server, peer := tcpPair(t, 4096)
	c, tr := wrap(t, server, Config{MaxBacklog: 64 << 20, WriteTimeout: timeout})
	start := time.Now()
	if _, err := c.Write(pattern(8 << 20)); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, waitTimeout, "slow consumer", func() error { return testkit.Why(c.SlowConsumer(), "not yet") })
	if d := time.Since(start); d < timeout {
		t.Fatalf("slow consumer after %v, before WriteTimeout %v", d, timeout)
	}
	testkit.Wait(t, waitTimeout, "connection released", func() error { return testkit.Why(tr.stats() == Stats{SlowConsumers: 1}, "not yet") })
	if err := closedByPeer(peer, waitTimeout); err != nil {
		t.Fatalf("peer: %v", err)
	}
	closeTracker(t, tr)
}

// The connection's own write deadline applies to the bytes waiting: when it
// passes, the connection is closed as a blocking write would have failed,
// with an error that is a deadline error, and it is not a slow consumer.
func TestConnWriteDeadline(t *testing.T) {
	defer goleak.VerifyNone(t)
	server, peer := tcpPair(t, 4096)
	c, tr := wrap(t, server, Config{MaxBacklog: 64 << 20})
	_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Write(pattern(8 << 20)); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, waitTimeout, "connection released", func() error { return testkit.Why(tr.stats().Open == 0, "not yet") })
	if _, err := c.Write([]byte{1}); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write after: %v", err)
	}
	if c.SlowConsumer() || tr.stats().SlowConsumers != 0 {
		t.Fatal("counted as a slow consumer")
	}
	if err := closedByPeer(peer, waitTimeout); err != nil {
		t.Fatalf("peer: %v", err)
	}
	closeTracker(t, tr)
}

// A write deadline moved later while the flusher waits does not fail the
// connection at the old one (mochi moves it at every packet it reads).
func TestConnWriteDeadlineMoved(t *testing.T) {
	defer goleak.VerifyNone(t)
	server, peer := tcpPair(t, 4096)
	c, tr := wrap(t, server, Config{MaxBacklog: 64 << 20})
	old := time.Now().Add(100 * time.Millisecond)
	_ = c.SetWriteDeadline(old)
	data := pattern(8 << 20)
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	_ = c.SetWriteDeadline(time.Time{})
	// Open until well past the old deadline.
	testkit.During(t, time.Until(old.Add(100*time.Millisecond)), "the connection open past a deadline that had been removed", func() error {
		return testkit.Why(tr.stats().Open == 1, "it failed")
	})
	got := readAll(peer)
	testkit.Wait(t, waitTimeout, "backlog drained", func() error { return testkit.Why(tr.stats().Backlogged == 0, "not yet") })
	closeTracker(t, tr)
	if b := waitBytes(t, got); !bytes.Equal(b, data) {
		t.Fatalf("peer got %d bytes, differing from the %d written", len(b), len(data))
	}
}

// Close returns at once and lets the bytes waiting reach a client that
// reads; the stream then ends in order (EOF, not a reset).
func TestConnCloseDrains(t *testing.T) {
	defer goleak.VerifyNone(t)
	server, peer := tcpPair(t, 4096)
	// The drain's bound is the configuration's, not this machine's speed:
	// 8 MiB through loopback on a loaded machine may take more than the
	// default second.
	c, tr := wrap(t, server, Config{MaxBacklog: 64 << 20, CloseDrain: waitTimeout})
	data := pattern(8 << 20)
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("Close took %v", d)
	}
	if _, err := c.Write([]byte{1}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
	got := readAll(peer)
	if b := waitBytes(t, got); !bytes.Equal(b, data) {
		t.Fatalf("peer got %d bytes, differing from the %d written", len(b), len(data))
	}
	closeTracker(t, tr)
}

// Close stops reading at once, so a reader blocked on the connection returns
// while the backlog drains.
func TestConnCloseStopsReading(t *testing.T) {
	defer goleak.VerifyNone(t)
	server, peer := tcpPair(t, 4096)
	c, tr := wrap(t, server, Config{MaxBacklog: 64 << 20})
	if _, err := c.Write(pattern(8 << 20)); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		read <- err
	}()
	_ = c.Close()
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("read returned no error after Close")
		}
	case <-time.After(waitTimeout):
		t.Fatal("a blocked read did not return after Close")
	}
	_ = peer.Close()
	closeTracker(t, tr)
}

// When the client does not read, Close gives the drain at most a second and
// then resets the connection.
func TestConnCloseDrainIsBounded(t *testing.T) {
	defer goleak.VerifyNone(t)
	server, peer := tcpPair(t, 4096)
	c, tr := wrap(t, server, Config{MaxBacklog: 64 << 20})
	if _, err := c.Write(pattern(8 << 20)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = c.Close()
	testkit.Wait(t, 3*time.Second, "connection released", func() error { return testkit.Why(tr.stats() == Stats{}, "not yet") })
	d := time.Since(start)
	t.Logf("released %v after Close", d.Round(time.Millisecond))
	if d < DefaultCloseDrain-50*time.Millisecond {
		t.Fatalf("released after %v, before the drain time", d)
	}
	if err := closedByPeer(peer, waitTimeout); err != nil {
		t.Fatalf("peer: %v", err)
	}
	closeTracker(t, tr)
}

// BenchmarkWrite100 compares 100-byte writes to a peer that reads as fast as
// it can: a plain *net.TCPConn, and the same socket wrapped in a *Conn.
func BenchmarkWrite100(b *testing.B) {
	for _, name := range []string{"TCPConn", "Conn"} {
		b.Run(name, func(b *testing.B) {
			server, peer := tcpPair(b, 0)
			go func() { _, _ = io.Copy(io.Discard, peer) }()
			var w io.Writer = server
			var tr *tracker
			if name == "Conn" {
				var c *Conn
				c, tr = wrap(b, server, Config{})
				w = c
			}
			p := pattern(100)
			b.SetBytes(100)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := w.Write(p); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if tr != nil {
				closeTracker(b, tr)
			}
		})
	}
}
