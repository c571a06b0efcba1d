// Package interest is the stage that makes the subscriptions the interest
// graph: it decides which users (and groups) this node needs, from what its
// clients subscribe to, so that a node holds and hears only those, not the
// whole cluster.
//
// For each user the stage knows whether it is watched: a subscription on
// this node may read the user's presence (presence/users/{user}; a
// wildcard filter under visibility groups reads the viewer's group mates;
// under self, the viewer's own), or this node leads the group topics and
// the user is a member of a group. A watched user is heard (the store
// reports its changes here) and shown (published and retained). A user
// whose only link to the node is a session here is neither: the node
// writes that session's changes itself, and the audit after a failover
// compares the store's sessions with the tracker's writes, not versions
// (tracker.Audit), so a device that nobody here watches costs the node
// its session and nothing more.
//
// A node with an unrestricted wildcard subscriber (presence/users/+,
// presence/#, # ...: visibility open, or a service account) is a firehose:
// it hears and shows every user of the cluster, as every node did before
// interest routing.
//
// Interest appears at once (a subscription): the worker asks the
// store to listen to the user (hear first), which then reports its current
// aggregate (load second); what the node held drops every version at or
// below it, so no change falls between the two. Interest disappears after
// Options.Linger: a user that nobody here watches any more is forgotten
// (its retained message, the publisher's and the pacer's state, and the
// store's subscription) a linger after it was last needed, so that memory
// follows interest over time, not history.
//
// The hook (Hook) follows the subscriptions as mochi grants them
// (OnSubscribed, with the reason codes) and their removal (OnUnsubscribed,
// a clean session's disconnect, a persistent session's expiry); a session
// taken over keeps its subscriptions (keyed by client id). Nothing on the
// packet path waits on the store: the hook changes the stage's state and
// wakes the worker.
//
// Goroutines: the worker (Start; Stop stops and waits for it). Locks: mu
// guards the state and is never held across a store call or a callback.
package interest
