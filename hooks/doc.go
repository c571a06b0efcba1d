// Package hooks is where MQTT meets presence: the mochi hooks that
// presenced adds to a broker.
//
// Presence turns a connection's events into presence events and hands them
// to the tracker, returning at once: nothing on the packet path waits on the
// store, and a hook never publishes presence itself. It also applies
// presenced's identity rules, keeps the presence namespace read-only and
// rewrites wills under it.
//
// Delivery stands between mochi and each subscriber: a user's presence
// reaches a subscriber in order, what mochi drops for a full queue is made
// good, and a subscriber that cannot take it is disconnected as a slow
// consumer.
//
// Guard is the server's one OnACLCheck when presence is its access
// authority: the program's decision first, then presence's, so that what is
// sent again reaches only the subscribers that missed it and no subscriber
// receives a version twice. Authenticator is an authentication hook without
// an OnACLCheck, to go with it.
package hooks
