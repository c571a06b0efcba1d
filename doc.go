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
// The binary's whole broker (listeners, authentication, the admin port),
// configured from presenced.yaml, is NewBroker; cmd/presenced is a short
// main over it.
//
// # The floor plan
//
// This package is a façade: it builds the stages and wires each to the
// small interfaces of the next (Attach), runs the pump, and holds no stage
// logic of its own. The data flows one way, one package per stage:
//
//	mochi event ─> hooks ─> tracker ─> store ─> feed ─> pump ─> publisher (pacer, publisher) ─> delivery (outlet) ─> mochi
//	                                       │                     ├─> groups (membership, group topics) ─┘
//	                                       │                     └─> nodes (node topics) ──────────────┘
//	                                       └─ the pure core, presence (and roster), holds the types and every rule
//
// The stages:
//
//   - hooks: presence's mochi hooks (Drain, Limits, Presence): translate a
//     connection's events and return at once; nothing on the packet path
//     waits on the store, and no hook publishes presence.
//   - tracker: each connection's wanted state turned into store writes
//     (presence.Plan decides which), batched; after a failover it audits
//     the store (Audit).
//   - store: memory or Redis (one Lua script per operation, epoch-checked);
//     the one store.Store interface, lifecycle included; every committed
//     change is reported on the feed.
//   - the pump (pump.go): the one goroutine that hands the feed's events to
//     the stages that act on them, in order, and runs their timers.
//   - publisher: the Pacer decides when a change is shown (grace,
//     debounce, dwell, flap control, the publish rate) and the Publisher
//     publishes it, through one port.
//   - groups and nodes: the group topics and the node topics, stages of
//     their own that reach the broker through the same outlet.
//   - delivery: where the publish path ends, at the broker: the Outlet, and
//     the Delivery and Guard hooks that make each subscriber receive a
//     user's versions in order, once.
//   - stats: one table of figures, for /api/v1/stats and /metrics alike.
//   - sparkplug: the Sparkplug B aware server (opt-in, plugin_sparkplug.go),
//     a hook beside the flow: births retained under $sparkplug/certificates/,
//     stale NDEATHs flagged or dropped.
//   - lifecycle: the lifecycle outputs (AWS IoT Core and EMQX 5 dialects),
//     fed by the pump (raw), the publisher (shown) and a hook that sees
//     every refused CONNECT; they publish through the outlet.
//   - clock: the presence clock (presence/clock every
//     presence.clock_interval, to this node's subscribers, through the
//     outlet), so that an observer knows when its view is stale.
//
// # Goroutines
//
// Every goroutine has an owner and a way to stop; Stop (and Broker.Stop)
// stops them all and waits: here, the pump, one per periodic task (renew,
// the store's Tasks, idle) and a short-lived one per audit and per
// tombstone wait; the tracker's workers; the store's (Redis: the classic
// feed's listener, the sharded listener's subscriber and one reader per
// connection, the refresher, the registrar); the groups stage's reader,
// claims writer and leader loop; the nodes stage's announcer and reader;
// the interest stage's worker; the lifecycle stage's publisher (stopped
// after the pump, once it has published what is queued); with notify, its
// shards' workers (stopped after the pump, before the webhooks they push
// through); with webhooks, the hub's lease loop and one sender per
// endpoint (stopped after the pump, each flushing what waits within its
// budget); unless presence.clock_interval is off, the clock's ticker
// (package clock, stopped before the nodes stage). The binary's canary
// (Broker, broker_canary.go; package canary) runs one goroutine per
// synthetic user and the observer's: Broker.Start starts them once the
// listeners serve, and Broker.Stop stops them first, before the admin port
// and the listeners close.
//
// # Lock order
//
// Each lock is listed before the locks that may be taken while it is held;
// no lock that many clients share is held across a socket write.
//
//   - delivery: the fence (a publish or retain of presence holds it for
//     writing, a SUBSCRIBE reading retained presence for reading), then
//     Delivery.mu, then a subscription's mu.
//   - groups: the delivery fence, then topicMu (Outlet.Step: a snapshot
//     retained and its delta published as one step; a SUBSCRIBE holds the
//     fence for reading while the interest hook has the stage note the
//     group watched under topicMu); readMu, fileMu and claimsMu are each
//     held alone, and no lock of the stage across a store call.
//   - interest: Stage.mu, taken by the hook inside the fence, is a leaf:
//     never held across a store call or a callback.
//   - hooks: Presence.mu, then a link's rate bucket; Limits.mu, the gate's
//     and the battles' mu are held alone.
//   - tracker: Tracker.mu, then a slot's or an account's mu; no lock
//     while the store is called.
//   - publisher: Pacer.mu and Publisher.mu are never held while
//     publishing (never with the delivery fence); Publisher.mu, then the
//     privacy hook's mu (delivery.Privacy: Forget of a dropped user), a
//     leaf that OnPacketEncode holds for a map read only.
//   - store: Memory.mu while a change is reported to the feed (then the
//     Feed's mu, a leaf); the Redis store's mu and outage lock are held
//     alone, never across a call to Redis.
//   - nodes: send, then mu.
//   - roster: each structure's mu is a leaf.
//   - sparkplug: Hook.mu is a leaf, never held across a publish.
//   - lifecycle: Stage.mu (the queue) is a leaf, never held while
//     publishing; the sequencers are the pump's alone.
//   - webhook: Hub.mu, then an Endpoint's mu (a leaf); neither is held
//     across a request or a lease call.
//
// # What presence needs from the server
//
// Options.InlineClient (presence is published by the broker itself;
// Attach fails without it) and an authentication hook of the program's
// (mochi refuses every connection without one). Attach adds its hooks and
// sets no capability. When Capabilities.MaximumMessageExpiryInterval is
// above 0, mochi purges retained messages older than that; presence stores
// its own retained messages again every quarter of it, so they never
// expire while true.
//
// mochi grants an access that any hook allows, so presence can refuse a
// delivery only where it is the server's only OnACLCheck: WithACL makes it
// so, taking the program's access decision and adding presence's (then
// authenticate with hooks.Authenticator, which answers no OnACLCheck).
// Without it, presence still keeps its namespace read-only (in OnPublish,
// which every publish passes) and each subscriber's versions in order, but
// what is sent again for a subscriber that missed it reaches every
// subscriber of that user, and a change of a private user's truth alone
// (docs/presence.md, Privacy) reaches nobody.
//
// mochi's own listeners write to a socket while holding the client's lock,
// which every QoS 1 publish to that client also takes, so one client that
// stops reading stalls every publisher to it: use package listener, whose
// writes never block.
package presenced
