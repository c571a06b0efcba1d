// Package hooks is where MQTT meets presence: the mochi hooks that
// presenced adds to a broker.
//
// Drain moves a node's clients to other nodes: once begun, it refuses
// every CONNECT, and it asks the connected clients to move at a rate.
//
// Limits holds each connection to the broker's limits, which know nothing
// of presence: connections per IP address, the keep-alive, and the number,
// length and depth of topic filters (limits.go); PUBLISH topic names, the
// topic alias maximum told in CONNACK, a DISCONNECT's session expiry and
// will topics (limits_packets.go); the bytes and age of a session's
// unacknowledged QoS 1/2 messages (limits_inflight.go); delayed wills
// waiting on the node (limits_wills.go); and the retained messages outside
// the presence prefix, per user and in total (limits_retained.go).
//
// Presence turns a connection's events into presence events and hands them
// to the tracker, returning at once: nothing on the packet path waits on the
// store, and a hook never publishes presence itself. It also applies
// presenced's identity rules, keeps the presence namespace read-only and
// rewrites wills under it.
//
// Authenticator is an authentication hook without an OnACLCheck, for a
// program that makes presence its access authority (package delivery's
// Guard must then be the server's only OnACLCheck).
//
// The last stage's hooks, Delivery and Guard, are package delivery's.
//
// # Order
//
// mochi runs a hook's event in the order the hooks were added, stops a
// CONNECT at the first OnConnect that returns an error, and passes each
// OnSubscribe the packet the one before returned. The program's
// authentication hook comes first, so that the others see the authenticated
// user as the username. Then:
//
//  1. Drain, first of these: a CONNECT it refuses while draining reaches
//     none of the hooks after it, so none counts it or keeps anything of
//     it. Of a connection it keeps only whether it moved it, until mochi is
//     done with the connection, for presence's OnDisconnect to ask
//     (Options.Moved): presence's hook never shares its records with it.
//  2. Limits, before every hook that keeps anything of a connection: a
//     connection over a limit is refused before presence identifies it or
//     records it, and the filters it refuses (replaced by "") are skipped
//     by Groups and Delivery. A later hook's refusal is no concern of it:
//     it stops counting connections that mochi never tells it ended (see
//     Limits).
//  3. Presence. Its OnConnect makes cl.ID the broker's key of the client
//     id, scoped by the connection's user (presence.ClientKey): the hooks
//     after it, and mochi, see that key; ClientID returns the id as sent.
//  4. delivery.Delivery.
//  5. delivery.Guard, with presence as the access authority: no other hook
//     may answer OnACLCheck.
//
// The groups stage's hook (package groups) may come anywhere: it never
// waits on the store nor on the delivery fence.
package hooks
