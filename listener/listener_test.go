package listener

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
	"go.uber.org/goleak"

	"github.com/presenced/presenced/internal/testkit"
)

var kinds = []string{"tcp", "ws"}

// A plain MQTT 3.1.1 client connects, subscribes and receives a publish,
// over TCP and over WebSocket; mochi holds a connection of this package;
// Close leaves no goroutine and no open connection.
func TestPubSub(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			b := startBroker(t, kind, Config{})
			defer b.close(t)
			c := b.dial(t, 0)
			c.connect("sub")
			c.subscribe(1, "a/b", 1)

			if err := b.srv.Publish("a/b", []byte("from the broker"), false, 1); err != nil {
				t.Fatal(err)
			}
			pk := c.expect(packets.Publish)
			if pk.TopicName != "a/b" || string(pk.Payload) != "from the broker" || pk.FixedHeader.Qos != 1 {
				t.Fatalf("got %s %q QoS %d", pk.TopicName, pk.Payload, pk.FixedHeader.Qos)
			}
			c.puback(pk.PacketID)

			c.publish("a/b", []byte("from the client"))
			if pk := c.expect(packets.Publish); string(pk.Payload) != "from the client" {
				t.Fatalf("got %q", pk.Payload)
			}

			cl, ok := b.srv.Clients.Get("sub")
			if !ok {
				t.Fatal("client sub not known to mochi")
			}
			lc, ok := From(cl.Net.Conn)
			if !ok || lc.SlowConsumer() {
				t.Fatalf("From(%T): %v, slow consumer %v", cl.Net.Conn, ok, ok && lc.SlowConsumer())
			}
			if nb, ok := cl.Net.Conn.(interface{ WritesNeverBlock() bool }); !ok || !nb.WritesNeverBlock() {
				t.Fatalf("%T does not say its writes never block", cl.Net.Conn)
			}
			if s := b.l.Stats(); s.Open != 1 {
				t.Fatalf("stats with one client: %+v", s)
			}

			b.close(t)
			if s := b.l.Stats(); s != (Stats{}) {
				t.Fatalf("stats after Close: %+v", s)
			}
			if err := closedByPeer(c.sock, waitTimeout); err != nil {
				t.Fatalf("client socket after Close: %v", err)
			}
		})
	}
}

// A socket that never sends CONNECT is closed after ConnectTimeout. For
// WebSocket, both a socket that never sends its upgrade request and an
// upgraded one that never sends CONNECT.
func TestConnectTimeout(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			const timeout = 300 * time.Millisecond
			b := startBroker(t, kind, Config{ConnectTimeout: timeout})
			defer b.close(t)
			socks := []net.Conn{dialTCP(t, b.l.Address(), 0).sock}
			if kind == "ws" {
				socks = append(socks, dialWS(t, b.l.Address(), 0).sock)
			}
			start := time.Now()
			for i, s := range socks {
				if err := closedByPeer(s, waitTimeout); err != nil {
					t.Fatalf("silent socket %d: %v", i, err)
				}
			}
			if d := time.Since(start); d < timeout/2 {
				t.Fatalf("closed after %v, before the timeout of %v", d, timeout)
			}
			testkit.Wait(t, waitTimeout, "no connection left open", func() error { return testkit.Why(b.l.Stats().Open == 0, "not yet") })
		})
	}
}

// Server.Close returns while sockets that have not sent CONNECT are open,
// and closes them. (With mochi's own listeners Close waits for them.)
func TestCloseWithSilentSockets(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			b := startBroker(t, kind, Config{ConnectTimeout: time.Hour})
			defer b.close(t)
			socks := []net.Conn{dialTCP(t, b.l.Address(), 0).sock}
			if kind == "ws" {
				socks = append(socks, dialWS(t, b.l.Address(), 0).sock)
			}
			connected := b.dial(t, 0)
			connected.connect("connected")
			testkit.Wait(t, waitTimeout, "every socket accepted", func() error { return testkit.Why(b.l.Stats().Open == int64(len(socks)+1), "not yet") })

			took := b.close(t)
			if took > 5*time.Second {
				t.Fatalf("Server.Close took %v", took)
			}
			t.Logf("Server.Close took %v with %d silent sockets and a client", took, len(socks))
			for i, s := range append(socks, connected.sock) {
				if err := closedByPeer(s, waitTimeout); err != nil {
					t.Fatalf("socket %d after Close: %v", i, err)
				}
			}
		})
	}
}

// The stall: a client with a 4 KiB receive buffer makes the broker send it
// 8 MiB and never reads again. It is subscribed to "news" with QoS 1, as is
// a well-behaved client. 200 srv.Publish("news", ..., QoS 1) calls must not
// block on the stalled client, the well-behaved one receives all 200
// promptly, and the stalled one ends as a slow consumer: once its backlog
// would exceed MaxBacklog (1 MiB: at once, on the 8 MiB), or, with room for
// the 8 MiB, after WriteTimeout without progress, the news included.
func TestStalledClientDoesNotBlockPublisher(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
	}{
		// Explicit rather than the default 4 MiB: how much of the 8 MiB the
		// kernel takes first depends on the system (about 2.7 MB here).
		{"over MaxBacklog", Config{MaxBacklog: 1 << 20}},
		{"no progress for WriteTimeout", Config{MaxBacklog: 64 << 20, WriteTimeout: time.Second}},
	}
	for _, kind := range kinds {
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				defer goleak.VerifyNone(t)
				b := startBroker(t, kind, tc.cfg)
				defer b.close(t)
				stalledScenario(t, b, func(s Stats) bool { return s.SlowConsumers == 1 })
				if s := b.l.Stats(); s.SlowConsumers != 1 {
					t.Fatalf("stats: %+v", s)
				}
				testkit.Wait(t, waitTimeout, "no bytes left waiting", func() error {
					s := b.l.Stats()
					return testkit.Why(s.Backlogged == 0 && s.BacklogBytes == 0 && s.Open == 1, fmt.Sprintf("stats %+v", s))
				})
			})
		}
	}
}

// stalledScenario runs the stall against b and checks what must hold with
// this package's listeners and fails with mochi's (see
// TestMochiListenerBlocksPublisher). slowEnded tells when the stalled client
// is over.
func stalledScenario(t *testing.T, b *broker, slowEnded func(Stats) bool) {
	t.Helper()
	const messages = 200

	good := b.dial(t, 0)
	good.connect("good")
	good.subscribe(1, "news", 1)
	received := make(chan int, messages)
	readerDone := make(chan error, 1)
	go func() {
		defer close(received)
		readerDone <- func() error {
			for n := 0; n < messages; {
				pk, err := good.next(waitTimeout)
				if err != nil {
					return err
				}
				if pk.FixedHeader.Type != packets.Publish || pk.TopicName != "news" {
					continue
				}
				if pk.FixedHeader.Qos == 1 {
					if err := ackRaw(good, pk.PacketID); err != nil {
						return err
					}
				}
				i, _ := strconv.Atoi(string(bytes.TrimRight(pk.Payload, " ")))
				received <- i
				n++
			}
			return nil
		}()
	}()

	stalled := b.dial(t, 4096)
	stalled.connect("stalled")
	stalled.subscribe(1, "junk/x", 0)
	stalled.subscribe(2, "news", 1)
	stalled.publish("junk/x", bytes.Repeat([]byte{'x'}, 8<<20))
	// The broker has begun sending the 8 MiB back once its first byte
	// arrives; nothing more is read from here on.
	stalled.firstByteOfPublish()

	start := time.Now()
	published := make(chan error, 1)
	go func() {
		for i := range messages {
			payload := fmt.Sprintf("%-64d", i)
			if err := b.srv.Publish("news", []byte(payload), false, 1); err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()
	select {
	case err := <-published:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("%d srv.Publish calls have not returned after 2 s: the publisher is blocked", messages)
	}
	publishing := time.Since(start)

	for want := range messages {
		select {
		case got, ok := <-received:
			if !ok {
				t.Fatalf("well-behaved client stopped after %d messages: %v", want, <-readerDone)
			}
			if got != want {
				t.Fatalf("well-behaved client: message %d, want %d", got, want)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("well-behaved client: message %d not received", want)
		}
	}
	delivered := time.Since(start)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d publishes returned in %v; all delivered to the well-behaved client in %v", messages, publishing.Round(time.Microsecond), delivered.Round(time.Microsecond))

	testkit.Wait(t, waitTimeout, "stalled client ended as a slow consumer", func() error { return testkit.Why(slowEnded(b.l.Stats()), "not yet") })
	t.Logf("slow consumer after %v", time.Since(start).Round(time.Millisecond))
	if err := closedByPeer(stalled.sock, waitTimeout); err != nil {
		t.Fatalf("stalled client's socket was not closed by the broker: %v", err)
	}
	testkit.Wait(t, waitTimeout, "mochi forgot the stalled client", func() error {
		_, ok := b.srv.Clients.Get("stalled")
		return testkit.Why(!ok, "still listed")
	})
}

// ackRaw sends a PUBACK from the reader goroutine, reporting an error
// instead of failing the test from outside its goroutine.
func ackRaw(c *client, id uint16) error {
	var buf bytes.Buffer
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: id, ProtocolVersion: 4}
	if err := pk.PubackEncode(&buf); err != nil {
		return err
	}
	_, err := c.tr.Write(buf.Bytes())
	return err
}

// The same stall against mochi's own TCP listener: srv.Publish blocks for as
// long as the stalled client does not read. This documents the problem the
// package solves; it takes a few seconds, so it runs only when
// LISTENER_MOCHI_BASELINE=1.
func TestMochiListenerBlocksPublisher(t *testing.T) {
	if os.Getenv("LISTENER_MOCHI_BASELINE") == "" {
		t.Skip("set LISTENER_MOCHI_BASELINE=1 to run the stall against mochi's listeners.TCP")
	}
	srv := newServer(t)
	l := listeners.NewTCP(listeners.Config{ID: "tcp", Address: "127.0.0.1:0"})
	if err := srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	addr := l.Address()

	stalled := dialTCP(t, addr, 4096)
	stalled.connect("stalled")
	stalled.subscribe(1, "junk/x", 0)
	stalled.subscribe(2, "news", 1)
	stalled.publish("junk/x", bytes.Repeat([]byte{'x'}, 8<<20))
	stalled.firstByteOfPublish()

	var done atomic.Int64
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range 200 {
			_ = srv.Publish("news", []byte(strconv.Itoa(i)), false, 1)
			done.Add(1)
		}
	}()
	select {
	case <-published:
		t.Fatalf("all 200 publishes returned: mochi's listener did not block")
	case <-time.After(3 * time.Second):
		t.Logf("with mochi's listeners.TCP: %d of 200 srv.Publish calls returned in 3 s; the publisher is blocked on the stalled client", done.Load())
	}
	// Unblock: the stalled client goes away (its unread bytes make the
	// close a reset, which fails the broker's blocked write).
	_ = stalled.sock.Close()
	select {
	case <-published:
	case <-time.After(waitTimeout):
		t.Fatal("the publisher stayed blocked after the stalled client left")
	}
	closeWithin(t, srv, waitTimeout)
}

// Init binds: a port in use is an error from AddListener, and ":0" reports
// the port it got.
func TestInitBinds(t *testing.T) {
	defer goleak.VerifyNone(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, kind := range kinds {
		srv := newServer(t)
		var l listeners.Listener
		cfg := Config{ID: kind, Address: taken.Addr().String(), Server: srv}
		if kind == "tcp" {
			l = NewTCP(cfg)
		} else {
			l = NewWebSocket(cfg)
		}
		if err := srv.AddListener(l); err == nil {
			t.Errorf("%s: AddListener on a port in use succeeded", kind)
		}
		closeWithin(t, srv, waitTimeout)

		b := startBroker(t, kind, Config{})
		if a := b.l.Address(); a == "127.0.0.1:0" || a == "" {
			t.Errorf("%s: Address() = %q after Init", kind, a)
		}
		b.close(t)
	}
}

// Without Config.Server, Close disconnects the listener's clients through
// the CloseFn mochi passes.
func TestCloseWithMochiCloser(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := newServer(t)
	l := NewTCP(Config{ID: "tcp", Address: "127.0.0.1:0"})
	if err := srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	c := dialTCP(t, l.Address(), 0)
	c.connect("one")
	closeWithin(t, srv, waitTimeout)
	// mochi's closer sends a DISCONNECT before closing.
	pk, err := c.next(waitTimeout)
	if err != nil || pk.FixedHeader.Type != packets.Disconnect {
		t.Fatalf("want DISCONNECT, got type %d: %v", pk.FixedHeader.Type, err)
	}
	if _, err := c.next(waitTimeout); !errors.Is(err, io.EOF) {
		t.Fatalf("after DISCONNECT: %v, want EOF", err)
	}
}

// On shutdown every client gets its DISCONNECT even when its socket buffer
// is full at that moment: Close lets the backlog drain for up to a second.
func TestShutdownDisconnectReachesBusyClient(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := startBroker(t, "tcp", Config{MaxBacklog: 64 << 20})
	defer b.close(t)
	c := b.dial(t, 4096)
	c.connect("busy")
	c.subscribe(1, "big", 0)
	// More than the kernel takes at once, so that part of it waits.
	payload := bytes.Repeat([]byte{'y'}, 8<<20)
	if err := b.srv.Publish("big", payload, false, 0); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, waitTimeout, "bytes waiting for the client", func() error { return testkit.Why(b.l.Stats().Backlogged == 1, "not yet") })

	closed := make(chan struct{})
	b.closeOnce.Do(func() {})
	go func() { _ = b.srv.Close(); close(closed) }()
	// The client reads now, within the drain time.
	pk := c.expect(packets.Publish)
	if !bytes.Equal(pk.Payload, payload) {
		t.Fatalf("payload of %d bytes, want %d", len(pk.Payload), len(payload))
	}
	if pk, err := c.next(waitTimeout); err != nil || pk.FixedHeader.Type != packets.Disconnect {
		t.Fatalf("want DISCONNECT after the backlog, got type %d: %v", pk.FixedHeader.Type, err)
	}
	<-closed
	if s := b.l.Stats(); s.SlowConsumers != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

// A WebSocket ping is answered with a pong, in order with the MQTT data.
func TestWebSocketPing(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := startBroker(t, "ws", Config{})
	defer b.close(t)
	c := b.dial(t, 0)
	c.connect("pinger")
	ws := c.tr.(*testkit.WSConn).WS
	pong := make(chan string, 1)
	ws.SetPongHandler(func(s string) error { pong <- s; return nil })
	if err := ws.WriteControl(websocket.PingMessage, []byte("hi"), time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	// The broker reads the ping before the SUBSCRIBE, so the pong comes
	// before the SUBACK, which reading the SUBACK processes.
	c.subscribe(1, "p", 0)
	select {
	case s := <-pong:
		if s != "hi" {
			t.Fatalf("pong %q", s)
		}
	default:
		t.Fatal("no pong before the SUBACK")
	}
}
