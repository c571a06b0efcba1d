// Package delivery is the last stage of presence, where it meets mochi's
// subscribers: the Outlet, through which the publisher, the group topics
// and the node topics reach them (the publish path ends here, at the
// broker), and the mochi hooks that stand between mochi and each
// subscriber.
//
// Delivery makes a user's presence reach a subscriber in order, makes good
// what mochi dropped for a full queue, and disconnects a subscriber that
// cannot take it as a slow consumer. Its fence orders every publish and
// retain of presence against each SUBSCRIBE that reads retained presence
// (see Delivery). It also serves the retained presence/users/{user}: mochi
// holds none of it (the publisher publishes each change live), and on
// SUBSCRIBE the hook delivers the publisher's current views (Snapshots)
// as mochi delivers retained messages (snapshots.go).
//
// Guard is the server's one OnACLCheck when presence is its access
// authority: the program's decision first, then presence's, so that what is
// sent again reaches only the subscribers that missed it and no subscriber
// receives a version twice. It also decides the application topics of
// connections that are not service accounts (Topics: DefaultTopics, or an
// acl.File): it judges a shared subscription's filter as mochi matches it,
// without $share/<group>/ in any case. Add Delivery after presence's hooks
// (package hooks), and Guard last.
//
// Privacy (issue 22) gives the user themself and service accounts the
// true presence of a user with a privacy setting, per delivery, retained
// deliveries included: mochi only ever holds the public view
// (presence.Aggregate.Public), and Privacy chooses, at OnPacketEncode, the
// payload each connection is entitled to. Add it after Delivery.
//
// Lock order: the fence, then Delivery's mu, then a subscription's mu. No
// socket write of a client that might not read happens inside the fence.
package delivery
