package hooks

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// While draining, every CONNECT is refused, and Move stops a connection
// with ErrDrained (so it ends as drain) after clearing its will.
func TestDrainRefusesAndMoves(t *testing.T) {
	srv := mqtt.New(&mqtt.Options{InlineClient: true})
	h := NewDrain(DrainOptions{Server: srv, Log: nil})
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	go func() { // the client's side: read and drop whatever the broker writes
		buf := make([]byte, 512)
		for {
			if _, err := b.Read(buf); err != nil {
				return
			}
		}
	}()
	cl := srv.NewClient(a, "t", "c1", false)
	cl.Properties.ProtocolVersion = 5
	cl.Properties.Will.Flag = 1
	if err := h.OnConnect(cl, packets.Packet{}); err != nil {
		t.Fatalf("before the drain: %v", err)
	}
	h.Begin("other:1883")
	if !h.Draining() {
		t.Fatal("not draining")
	}
	late := srv.NewClient(nil, "t", "c2", false)
	late.Properties.ProtocolVersion = 4
	if err := h.OnConnect(late, packets.Packet{}); err != ErrDrained || h.Stats.Refused.Load() != 1 {
		t.Fatalf("CONNECT while draining: %v, refused %d", err, h.Stats.Refused.Load())
	}
	if !h.Move(cl) || !cl.Closed() || cl.StopCause() != ErrDrained {
		t.Fatalf("moved: closed %v, cause %v", cl.Closed(), cl.StopCause())
	}
	if h.Move(cl) || h.Stats.Moved.Load() != 1 {
		t.Fatalf("a closed connection moved again (moved %d)", h.Stats.Moved.Load())
	}
	if !h.Moved(cl) || h.Moved(late) {
		t.Fatalf("Moved: %v for the moved, %v for the refused", h.Moved(cl), h.Moved(late))
	}
}

// The drain refuses a CONNECT before Limits counts it against its address,
// and before presence records it: mochi stops at the first OnConnect error.
func TestDrainRefusesBeforeLimitsCount(t *testing.T) {
	srv := mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler)})
	d := NewDrain(DrainOptions{Server: srv, Log: nil})
	l := NewLimits(LimitsOptions{Server: srv, MaxPerAddress: 1, Log: nil})
	p := New(Options{Prefix: "presence", Server: srv, Tracker: testkit.NopTracker{}, Log: nil})
	for _, h := range []mqtt.Hook{d, l, p, &Authenticator{}} {
		if err := srv.AddHook(h, nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = srv.Close() })
	d.Begin("")
	for i := range 3 {
		if rc := pipeConnect(t, srv, "c", false); rc != int(packets.Err3ServerUnavailable.Code) {
			t.Fatalf("connection %d: CONNACK %#x, want %#x", i, rc, packets.Err3ServerUnavailable.Code)
		}
	}
	if got := d.Stats.Refused.Load(); got != 3 {
		t.Fatalf("drain refused %d, want 3", got)
	}
	// No Tidy: nothing was counted in the first place.
	p.mu.RLock()
	links := len(p.links)
	p.mu.RUnlock()
	if got := l.counted("pipe"); got != 0 || l.Stats.PerAddress.Load() != 0 || links != 0 {
		t.Fatalf("after the drain's refusals: limits counted %d (refused %d), presence holds %d connections",
			got, l.Stats.PerAddress.Load(), links)
	}
}

// fakeTime is Run's clock: sleeping advances it, and ends early once its
// context has.
type fakeTime struct {
	mu     sync.Mutex
	now    time.Time
	sleeps int
	// onSleep runs before each sleep (the n-th, from 1).
	onSleep func(n int)
}

func (f *fakeTime) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeTime) sleep(ctx context.Context, d time.Duration) bool {
	f.mu.Lock()
	f.sleeps++
	n := f.sleeps
	f.mu.Unlock()
	if f.onSleep != nil {
		f.onSleep(n)
	}
	if ctx.Err() != nil {
		return false
	}
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
	return true
}

// drainServer returns a server with n open MQTT 3.1.1 clients (no
// sockets) and the inline client, and a Drain on a fake clock.
func drainServer(t *testing.T, n int) (*mqtt.Server, *Drain, *fakeTime, []*mqtt.Client) {
	t.Helper()
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { _ = srv.Close() })
	var cls []*mqtt.Client
	for i := range n {
		cl := clientFrom(srv, string(rune('a'+i)), "10.0.0.1:1")
		srv.Clients.Add(cl)
		cls = append(cls, cl)
	}
	clk := &fakeTime{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := NewDrain(DrainOptions{Server: srv, Log: nil, Now: clk.Now})
	d.sleep = clk.sleep
	return srv, d, clk, cls
}

// Run moves every open client at the rate: the first at once, the n-th
// (n-1)/rate seconds after; the inline client stays.
func TestDrainRunAtTheRate(t *testing.T) {
	_, d, clk, cls := drainServer(t, 5)
	t0 := clk.Now()
	d.Begin("")
	res := d.Run(context.Background(), 2)
	if res.Moved != 5 || res.Left != 0 || d.Stats.Moved.Load() != 5 {
		t.Fatalf("Run: %+v, moved %d; want 5 moved, none left", res, d.Stats.Moved.Load())
	}
	if took := clk.Now().Sub(t0); took != 2*time.Second {
		t.Fatalf("5 clients at 2 a second took %v, want 2s", took)
	}
	for _, cl := range cls {
		if !cl.Closed() || cl.StopCause() != ErrDrained || !d.Moved(cl) {
			t.Fatalf("%s: closed %v, cause %v", cl.ID, cl.Closed(), cl.StopCause())
		}
	}
	// Nothing open: Run returns at once.
	if res := d.Run(context.Background(), 2); res.Moved != 0 || res.Left != 0 {
		t.Fatalf("second Run: %+v", res)
	}
}

// When ctx ends (the drain's timeout), Run returns with what is left.
func TestDrainRunTimeout(t *testing.T) {
	_, d, clk, _ := drainServer(t, 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk.onSleep = func(n int) {
		if n == 2 { // before the third client
			cancel()
		}
	}
	d.Begin("")
	if res := d.Run(ctx, 1); res.Moved != 2 || res.Left != 3 {
		t.Fatalf("Run: %+v, want 2 moved, 3 left", res)
	}
}

// Moved answers until mochi is done with the connection: Tidy forgets a
// moved connection once it is closed and out of the server's list, not
// while it is listed (its OnDisconnect hooks may not have run).
func TestDrainTidy(t *testing.T) {
	srv, d, _, cls := drainServer(t, 2)
	for _, cl := range cls {
		d.Move(cl)
	}
	d.Tidy()
	for _, cl := range cls {
		if !d.Moved(cl) {
			t.Fatalf("%s forgotten while still listed", cl.ID)
		}
	}
	srv.Clients.Delete(cls[0].ID) // mochi, after every OnDisconnect
	d.Tidy()
	if d.Moved(cls[0]) || !d.Moved(cls[1]) {
		t.Fatalf("after Tidy: moved %v (out of the list), %v (listed)", d.Moved(cls[0]), d.Moved(cls[1]))
	}
}

// endsTracker records how sessions end.
type endsTracker struct {
	testkit.NopTracker
	mu   sync.Mutex
	ends []presence.EndReason
}

func (e *endsTracker) Disconnect(_ presence.ConnID, _ string, r presence.EndReason) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ends = append(e.ends, r)
}

// A connection the drain moved ends as drain even when its stop cause says
// otherwise (the client closed on reading the DISCONNECT, and the read
// error stopped it first); one it did not move ends as its cause says.
func TestPresenceAsksTheDrain(t *testing.T) {
	srv := mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler)})
	moved := map[*mqtt.Client]bool{}
	ends := &endsTracker{}
	p := New(Options{Prefix: "presence", Server: srv, Tracker: ends, Log: nil,
		Moved: func(cl *mqtt.Client) bool { return moved[cl] }})
	var cls []*mqtt.Client
	for _, id := range []string{"alice-phone", "bob-phone"} {
		cl := clientFrom(srv, id, "10.0.0.1:1")
		cl.Properties.Username = []byte(id[:len(id)-len("-phone")])
		if err := p.OnConnect(cl, packets.Packet{}); err != nil {
			t.Fatal(err)
		}
		p.OnSessionEstablish(cl, packets.Packet{})
		p.OnSessionEstablished(cl, packets.Packet{})
		cl.Stop(io.EOF)
		cls = append(cls, cl)
	}
	moved[cls[0]] = true
	for _, cl := range cls {
		p.OnDisconnect(cl, io.EOF, true)
	}
	ends.mu.Lock()
	defer ends.mu.Unlock()
	if len(ends.ends) != 2 || ends.ends[0] != presence.EndDrain || ends.ends[1] != presence.EndNetwork {
		t.Fatalf("ends %v, want [drain network]", ends.ends)
	}
}

// The will of a connection the drain moved is sent nowhere (a move is no
// death) and counted as suppressed; the drain never touches the will itself
// (mochi writes it unlocked on the connection's goroutine). Another
// connection's will outside the prefix goes out as it is.
func TestMovedConnectionsWillSentNowhere(t *testing.T) {
	srv := mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler)})
	moved := map[*mqtt.Client]bool{}
	p := New(Options{Prefix: "presence", Server: srv, Tracker: testkit.NopTracker{}, Log: nil,
		Moved: func(cl *mqtt.Client) bool { return moved[cl] }})
	a, b := clientFrom(srv, "alice-phone", "10.0.0.1:1"), clientFrom(srv, "bob-phone", "10.0.0.1:2")
	moved[a] = true
	will := mqtt.Will{TopicName: "alarms/alice", Payload: []byte("gone"), Retain: true, Qos: 1, Flag: 1}
	if got, err := p.OnWill(a, will); err != nil || got.TopicName != DiscardedWillTopic || got.Payload != nil || got.Retain {
		t.Fatalf("moved connection's will: %+v, %v; want it sent nowhere", got, err)
	}
	if got, err := p.OnWill(b, will); err != nil || got.TopicName != "alarms/alice" || string(got.Payload) != "gone" {
		t.Fatalf("another connection's will: %+v, %v; want it unchanged", got, err)
	}
	if n := p.Stats.WillsSuppressed.Load(); n != 1 {
		t.Fatalf("wills suppressed %d, want 1", n)
	}
}
