package hooks

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/wire"
)

// ErrDrained is the stop cause of a connection that a drain moved away:
// OnDisconnect maps it to the end reason drain.
var ErrDrained = errors.New("presence: the node is draining: the client was asked to move")

// DrainOptions configure the Drain hook.
type DrainOptions struct {
	// Server is the broker the hook is added to: it answers a refused
	// CONNECT through it, and Run moves its clients.
	Server *mqtt.Server
	Log    *slog.Logger
	// Now is Run's clock (default time.Now).
	Now func() time.Time
}

// DrainStats are the drain's counts, read with atomic loads.
type DrainStats struct {
	Refused atomic.Int64 // CONNECTs refused while draining
	Moved   atomic.Int64 // connections asked to move (DISCONNECT 0x9C / 0x8B, or closed)
}

// DrainResult says what Run did.
type DrainResult struct {
	Moved int // connections asked to move
	Left  int // connections still open when it ended (ctx ended first)
}

// drainState is what the hook knows of a drain in progress.
type drainState struct {
	reference string // the MQTT 5 Server Reference to give, "" for none
}

// Drain is the mochi hook that moves a node's clients to other nodes: once
// Begin is called it refuses every CONNECT, and Run asks every connected
// client to move, at a rate. Presence's hook asks it (Moved) whether a
// connection that ended was moved, so that its session ends as drain even
// when the client closed the socket on reading the DISCONNECT, before the
// stop cause was set.
//
// It must be the first of presenced's hooks, so that a CONNECT it refuses
// is counted by no other (see package hooks).
type Drain struct {
	mqtt.HookBase
	o     DrainOptions
	state atomic.Pointer[drainState] // set by Begin: CONNECTs are refused
	moved sync.Map                   // *mqtt.Client -> struct{}: asked to move, until mochi is done with it
	// sleep waits d, or until ctx ends (false); tests replace it.
	sleep func(ctx context.Context, d time.Duration) bool

	Stats DrainStats
}

// NewDrain returns the hook.
func NewDrain(o DrainOptions) *Drain {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Drain{o: o, sleep: sleep}
}

// sleep waits d, and reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ID implements mqtt.Hook.
func (d *Drain) ID() string { return "presence-drain" }

// Provides implements mqtt.Hook.
func (d *Drain) Provides(b byte) bool { return b == mqtt.OnConnect }

// Begin makes the hook refuse every CONNECT from now on: MQTT 5 gets
// CONNACK 0x9C (use another server) with the Server Reference reference, or
// 0x8B (server shutting down) without one; MQTT 3.1.1 gets 0x03 (server
// unavailable). It cannot be undone: a drained node stops. A second call
// changes nothing.
func (d *Drain) Begin(reference string) {
	d.state.CompareAndSwap(nil, &drainState{reference: reference})
}

// Draining reports whether Begin was called.
func (d *Drain) Draining() bool { return d.state.Load() != nil }

// OnConnect refuses every CONNECT once Begin was called.
func (d *Drain) OnConnect(cl *mqtt.Client, _ packets.Packet) error {
	s := d.state.Load()
	if s == nil {
		return nil
	}
	d.Stats.Refused.Add(1)
	if cl.Properties.ProtocolVersion < 5 {
		_ = cl.WritePacket(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack}, ReasonCode: packets.Err3ServerUnavailable.Code})
		return ErrDrained
	}
	if d.o.Server != nil {
		code, props := drainCode(s)
		_ = d.o.Server.SendConnack(cl, code, false, &props)
	}
	return ErrDrained
}

// drainCode is the MQTT 5 reason code of a drain, with its properties.
func drainCode(s *drainState) (packets.Code, packets.Properties) {
	if s.reference != "" {
		return packets.ErrUseAnotherServer, packets.Properties{ServerReference: s.reference}
	}
	return packets.ErrServerShuttingDown, packets.Properties{}
}

// Move asks one connection to go to another node, as a drain does: its will
// is not sent (presence's OnWill asks Moved: the device is expected to
// reconnect elsewhere, not to have died), an MQTT 5 client gets DISCONNECT 0x9C with the Server Reference (or
// 0x8B without one), a 3.1.1 client (which has no server DISCONNECT) is
// closed, and the connection stops with ErrDrained, so that its session
// ends as drain. The DISCONNECT is written only when that cannot block
// (presenced's listener, or a writer idle now); otherwise the socket is
// just closed. It reports false for a connection already closed. Call
// Begin first.
func (d *Drain) Move(cl *mqtt.Client) bool {
	if cl.Closed() {
		return false
	}
	s := d.state.Load()
	if s == nil {
		s = &drainState{}
	}
	// The will is not touched here: mochi writes cl.Properties.Will on the
	// connection's own goroutine without a lock when it ends, so a write
	// from this one would race it. Presence's OnWill, on that goroutine,
	// sends the will of a moved connection nowhere (Moved).
	d.moved.Store(cl, struct{}{}) // before the DISCONNECT, which the client may answer by closing
	if cl.Properties.ProtocolVersion >= 5 && (wire.NeverBlocks(cl) || wire.Idle(cl)) {
		code, props := drainCode(s)
		props.ReasonString = code.Reason
		_ = cl.WritePacket(packets.Packet{
			FixedHeader: packets.FixedHeader{Type: packets.Disconnect},
			ReasonCode:  code.Code,
			Properties:  props,
		})
	}
	cl.Stop(ErrDrained)
	d.Stats.Moved.Add(1)
	return true
}

// Moved reports whether Move asked cl to move. It answers for as long as
// mochi may run cl's OnDisconnect hooks (see Tidy); presence's hook asks it
// there.
func (d *Drain) Moved(cl *mqtt.Client) bool {
	_, ok := d.moved.Load(cl)
	return ok
}

// Tidy forgets the moved connections that mochi is done with: closed and no
// longer in the server's list. mochi removes a connection with a clean
// session from the list only after every hook's OnDisconnect, so Moved
// answers through them all; a persistent session stays listed, and
// remembered, until it expires. The plugin's pump calls it every second.
func (d *Drain) Tidy() {
	d.moved.Range(func(k, _ any) bool {
		cl := k.(*mqtt.Client)
		if !cl.Closed() {
			return true
		}
		if d.o.Server != nil {
			if cur, ok := d.o.Server.Clients.Get(cl.ID); ok && cur == cl {
				return true
			}
		}
		d.moved.Delete(cl)
		return true
	})
}

// Run moves every open client of the server (see Move), rate a second (at
// least 1): the first at once, the n-th (n-1)/rate seconds after. It
// returns when no client is left, or when ctx ends (the drain's timeout).
// Call Begin first, so that no new client comes meanwhile.
func (d *Drain) Run(ctx context.Context, rate int) DrainResult {
	rate = max(rate, 1)
	start := d.o.Now()
	d.o.Log.Info("draining: clients are asked to move", "rate", rate, "connections", len(d.open()))
	var res DrainResult
	for {
		list := d.open()
		if len(list) == 0 {
			break
		}
		for _, cl := range list {
			due := start.Add(time.Duration(res.Moved) * time.Second / time.Duration(rate))
			if wait := due.Sub(d.o.Now()); wait > 0 && !d.sleep(ctx, wait) {
				res.Left = len(d.open())
				d.o.Log.Warn("drain timed out", "moved", res.Moved, "left", res.Left, "took_ms", d.o.Now().Sub(start).Milliseconds())
				return res
			}
			if d.Move(cl) {
				res.Moved++
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	res.Left = len(d.open())
	d.o.Log.Info("drained", "moved", res.Moved, "left", res.Left, "took_ms", d.o.Now().Sub(start).Milliseconds())
	return res
}

// open returns the server's open client connections (not the inline
// client, nor the persisted sessions of clients gone).
func (d *Drain) open() []*mqtt.Client {
	if d.o.Server == nil {
		return nil
	}
	var out []*mqtt.Client
	for _, cl := range d.o.Server.Clients.GetAll() {
		if !cl.Net.Inline && !cl.Closed() {
			out = append(out, cl)
		}
	}
	return out
}
