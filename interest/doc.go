// Package interest is the stage that makes the subscriptions the interest
// graph: it decides which users (and groups) this node needs, from what its
// clients subscribe to and who has a session here, so that a node holds and
// hears only those, not the whole cluster.
//
// For each user the stage knows two things:
//
//   - watched: a subscription on this node may read the user's presence
//     (presence/users/{user}; a wildcard filter under visibility groups
//     reads the viewer's group mates; under self, the viewer's own), or
//     this node leads the group topics and the user is a member of a group:
//     the node shows the user (publishes and retains it);
//   - a session here: the node hears the user's changes (the audit after a
//     failover needs the versions of its own users) but shows nothing of
//     them unless someone here watches them.
//
// A node with an unrestricted wildcard subscriber (presence/users/+,
// presence/#, # ...: visibility open, or a service account) is a firehose:
// it hears and shows every user of the cluster, as every node did before
// interest routing.
//
// Interest appears at once (a subscription, a session): the worker asks the
// store to listen to the user (hear first), which then reports its current
// aggregate (load second); what the node held drops every version at or
// below it, so no change falls between the two. Interest disappears after
// Options.Linger: a user that nobody here watches and that has no session
// here is forgotten (its retained message, the publisher's and the pacer's
// state, and the store's subscription) a linger after it was last needed,
// so that memory follows interest over time, not history. A user that
// nobody here watches any more but that keeps a session here stays heard,
// and what the node shows of it (its retained message, which the node no
// longer updates) goes a linger after its last watcher left: a later
// subscriber is not given a presence gone stale meanwhile.
//
// The hook (Hook) follows the subscriptions as mochi grants them
// (OnSubscribed, with the reason codes), their removal (OnUnsubscribed, a
// clean session's disconnect, a persistent session's expiry) and the
// sessions; a session taken over keeps its subscriptions (keyed by client
// id). Nothing on the packet path waits on the store: the hook changes the
// stage's state and wakes the worker.
//
// Goroutines: the worker (Start; Stop stops and waits for it). Locks: mu
// guards the state and is never held across a store call or a callback.
package interest
