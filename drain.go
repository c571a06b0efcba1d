package presenced

import (
	"context"

	"github.com/presenced/presenced/presence"
)

// DrainOptions pace a drain (the binary's drain section).
type DrainOptions struct {
	// Rate is how many connections are asked to move per second (at
	// least 1).
	Rate int
	// ServerReference is the MQTT 5 Server Reference sent with DISCONNECT
	// and CONNACK 0x9C; empty: 0x8B (server shutting down), no reference.
	ServerReference string
}

// DrainResult says what a drain did.
type DrainResult struct {
	Moved int // connections asked to move
	Left  int // connections still open when it ended (ctx ended first)
}

// Drain moves this node's clients to other nodes, so that a rolling deploy
// is invisible to observers: it announces the node draining on
// presence/nodes/{node}, refuses every new CONNECT (MQTT 5: CONNACK 0x9C
// with the Server Reference, or 0x8B; 3.1.1: 0x03), and asks the connected
// clients to move, Rate a second: MQTT 5 clients get DISCONNECT 0x9C with
// the Server Reference (or 0x8B), 3.1.1 clients are closed. Their wills are
// not sent (the devices are expected back elsewhere) and their sessions end
// as drain, which observers see only once the offline grace has passed
// without the device coming back.
//
// It returns when no client is left, or when ctx ends (the drain's
// timeout); then close the server (what is left ends as shutdown) and Stop
// (which announces the node down). The first client is moved at once, the
// n-th (n-1)/Rate seconds after.
func (p *Plugin) Drain(ctx context.Context, o DrainOptions) DrainResult {
	p.drain.Begin(o.ServerReference)
	if err := p.nodes.Announce(ctx, presence.NodeDraining); err != nil {
		p.log.Warn("node state draining not announced", "err", err)
	}
	r := p.drain.Run(ctx, o.Rate)
	return DrainResult{Moved: r.Moved, Left: r.Left}
}
