// Package store holds the presence stores: Memory, the embedded default for
// a single node, and Redis, shared by many nodes (with lua/, one script per
// operation). Every operation is atomic and epoch-checked: a write naming a
// session at an epoch that is not its live one is refused as stale and
// changes nothing.
//
// A store never calls into the node that uses it. It reports what happened
// as Events (a committed change, a reset of this node's sessions, a node
// swept) to the function it was given, in commit order per user; a Feed is
// the queue a node gives it. The initial load reports through the same
// function, so the load and the live changes take one path.
//
// A store reports the changes of the users it listens to (Listener:
// Listen, ListenAll), and the batches of the groups it listens to
// (ListenGroups). With Redis each change is SPUBLISHed on its user's
// channels, in its user's slot, and travels through the shard that owns
// the user to the nodes that listen only (redis_listen.go); the memory
// store, one node, reports every change. Which users a node needs is
// decided above the store, by its interest; until that stage is wired, the
// node listens to every user.
//
// The words for time in a store: a session's store-side expiry is renewed
// (in bulk, rarely: the backstop; a client's heartbeat is its MQTT
// keep-alive, which never reaches the store); sessions whose expiry passed
// are reaped; the sessions of a node that is gone are swept; a node's record
// in Redis is refreshed.
//
// The Store interface is everything a node needs of its store, lifecycle
// included: Start and Stop, readiness and counters, the periodic
// maintenance the store needs (Tasks: the sweep of dead nodes, the reaper),
// the reads of the recovery after a failover (Versions, Own, Tombstone; the
// tracker's Audit drives it), the node states (AnnounceNode, NodeStates),
// the groups, the group log and the claims.
// Memory implements what does not apply to one node as no-ops. Open builds
// either from a Config; the Redis store owns the client it builds.
package store
