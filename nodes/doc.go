// Package nodes is the stage of the node topics, retained
// presence/nodes/{node}, which say which nodes are up, draining or down
// (presence.NodeStatus), the same on every node that shows them:
//
//   - A node announces itself (Announce): up when it starts and every
//     Options.Every after, with its session count; draining when a drain
//     begins; down when it stops. Its state only moves forward. It shows
//     its own word on this node at once, and records it in the store
//     (store.AnnounceNode: with Redis, one script on the hash P:nodestate,
//     which keeps each node's history: its current incarnation's latest
//     word in each state, presence.NodeHistory).
//   - Nothing is broadcast. A node reads every node's history (one
//     store.NodeStates, with Redis one HGETALL) every Options.Every, and
//     only while someone on it watches the node topics (watch.go): a
//     deployment of N nodes costs N writes and at most N reads per
//     interval, not N² deliveries. What the reader has not shown yet it
//     retains, in order (presence.NodeHistory.Since: a drain shorter than a
//     read still shows up, draining, down); a word that changes nothing but
//     its time is not published again (presence.NodeStatus.Advances).
//   - A node that dies without a word (SIGKILL, a crash) is swept by a
//     survivor (NodeLost), which records it down, reported_by itself, for
//     the incarnation it swept (Lost); the store refuses such a report
//     about a restarted node, and a reader never lets one bury it.
//   - A node down for longer than presence.NodeRetention (an hour) is
//     forgotten: by the store, then by the readers, which clear its topic.
//   - Announced shows a word heard on the store's feed: nodes of an older
//     version still broadcast theirs, during a rolling upgrade.
//
// Reading them: everyone under presence.visibility open; service accounts
// only under self and groups (a node's session count says how many people
// are online): the Guard's business (package delivery).
//
// Goroutines (Start; Stop stops and waits for them): the announcer and
// reader, and one short-lived per lost node recorded down. Locks, never
// nested: mu (this node's state), shown (what is retained here; held
// across a local publish, never across a store call), watch (the
// subscriptions noted).
package nodes
