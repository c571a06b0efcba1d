// Package presenced adds presence to a mochi-mqtt v2 broker: who is online,
// on which devices, with which status, on which node, published as a
// retained message on presence/users/{user} and kept right across
// reconnects, takeovers, silent deaths and, with Redis, many nodes.
//
// A program that runs its own broker adds presence in a few lines:
//
//	srv := mqtt.New(&mqtt.Options{InlineClient: true})
//	_ = srv.AddHook(new(auth.Hook), &auth.Options{Ledger: ledger})
//	p, err := presenced.Attach(srv, presenced.Config{NodeID: "node-1"})
//	...
//	_ = p.Start(ctx)         // loads presence; before Serve
//	_ = srv.Serve()
//	...
//	_ = srv.Close()          // every connection ends as "shutdown"
//	_ = p.Stop(ctx)          // writes those ends, stops and waits
//
// The data flows one way, one package per stage:
//
//	mochi event ─> hooks.Presence ─> tracker ─> store ─> feed ─> publisher ─> retained presence/users/{user}
//	                                                                 ╰─> hooks.Delivery: in order, once, per subscriber
//
// hooks.Presence translates connection events and returns at once; the
// tracker turns each connection's wanted state into store writes
// (presence.Plan decides which); the store (memory or Redis) commits them
// atomically, epoch-checked, and reports every change on its feed; the
// pump, here, hands changes to the publisher and acts on the store's other
// reports (a reset, a node lost); the publisher retains each new version;
// hooks.Delivery makes each subscriber receive a user's versions in order
// (and, with WithACL, each once), and makes good what mochi dropped for a
// full queue. presence, the
// pure core, holds the types and every rule, and imports nothing of these.
//
// What presence needs from the server: Options.InlineClient (presence is
// published by the broker itself; Attach fails without it) and an
// authentication hook of the program's (mochi refuses every connection
// without one). Attach adds its hooks and sets no capability. When
// Capabilities.MaximumMessageExpiryInterval is above 0, mochi purges
// retained messages older than that; presence stores its own retained
// messages again every quarter of it, so they never expire while true.
//
// mochi grants an access that any hook allows, so presence can refuse a
// delivery only where it is the server's only OnACLCheck: WithACL makes it
// so, taking the program's access decision and adding presence's (then
// authenticate with hooks.Authenticator, which answers no OnACLCheck).
// Without it, presence still keeps its namespace read-only (in OnPublish,
// which every publish passes) and each subscriber's versions in order, but
// what is sent again for a subscriber that missed it reaches every
// subscriber of that user.
//
// mochi's own listeners write to a socket while holding the client's lock,
// which every QoS 1 publish to that client also takes, so one client that
// stops reading stalls every publisher to it: use package listener, whose
// writes never block.
package presenced
