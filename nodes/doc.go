// Package nodes is the stage of the node topics, retained
// presence/nodes/{node}, which say which nodes are up, draining or down
// (presence.NodeStatus), the same on every node:
//
//   - A node announces itself through the store (store.AnnounceNode: with
//     Redis, a PUBLISH on the change feed channel, which every node
//     receives; in memory, its own feed): up when it starts and every
//     Options.Every after, with its session count; draining when a drain
//     begins; down when it stops. Its state only moves forward.
//   - Every node's pump hands what it hears (NodeAnnounced) to Announced,
//     which retains it on presence/nodes/{node} only when it changed
//     (presence.NodeStatus.Same: the periodic announcement that changes
//     nothing costs a PUBLISH, not a retained message). A node that starts
//     learns the others within Options.Every.
//   - A node that dies without a word (SIGKILL, a crash) is swept by a
//     survivor (NodeLost), which announces it down, reported_by itself, for
//     the incarnation it swept (Lost); such a report never buries a
//     restarted node (presence.NodeStatus.Supersedes).
//
// Reading them: everyone under presence.visibility open; service accounts
// only under self and groups (a node's session count says how many people
// are online): the Guard's business (package delivery).
//
// Goroutines (Start; Stop stops and waits for them): the announcer, and one
// short-lived per lost node announced down. Locks: send, then mu (a periodic
// "up" read before a stop cannot reach the store after its "down"); known
// is the pump's alone.
package nodes
