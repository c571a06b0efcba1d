// Package groups is the stage of the groups: who belongs to which group
// (membership, kept in the store so that every node agrees) and the group
// topics, presence/groups/{group}, the same on every node. It is impure
// (goroutines, the store, the broker); the pure data structures it runs on
// are package roster's (Index, Board, Mirror).
//
// Membership: each node holds the roster in memory (roster.Index), read
// whole at start and a group again whenever the store reports it changed
// (a GroupChanged event, which the pump hands to Changed). The groups file
// (presence.groups_file) is written to the store at start and by
// ReloadFile (SIGHUP in the binary); the admin API writes single groups
// through Store; a token's groups claim is written by Claim. A change of
// membership goes to the pump (Joins), which applies it (Joined) on its own
// goroutine: under presence.visibility groups, each new pair of mates gets
// the other's current presence on the subscriptions that now may read it.
//
// The group topics:
//
//   - One node, the leader (a lease in the store; with the memory store, the
//     node itself), keeps every group on its Board and cuts the batches, at
//     most one per window per group. It commits each to the group log
//     (store.GroupLog), which holds every group's snapshot at its latest
//     version and refuses a batch that does not follow it, so two leaders
//     can never fork a group's history; a refused leader reads the group
//     back and goes on from there.
//   - The log announces each batch to every node (a GroupBatch event, which
//     the pump hands to Apply). Each node applies it to its Mirror, for the
//     groups watched there, and, under topicMu, retains the new snapshot as
//     the topic's retained message, then publishes the delta. A subscriber
//     therefore gets the snapshot at some version, then every delta after
//     it, with consecutive versions.
//   - A node that misses a batch (a gap) reads the group's snapshot from the
//     log, retains it and publishes it live: a message with "members" is a
//     snapshot, and replaces what the subscriber holds.
//   - A group is watched on a node from its first subscription there
//     (Watch, from the Hook's OnSubscribe). Watch never waits on the store:
//     it marks the group watched at version 0 and has the reader fetch its
//     snapshot from the log (opening the log from this node's view when the
//     log does not hold it yet); the snapshot is then retained and
//     published live, so the subscriber that asked gets it whichever comes
//     first, mochi's reading of the retained messages for its subscription
//     or the live publish.
//
// Resume: a SUBSCRIBE to a group topic with the MQTT 5 user property
// "version" (the group version the client holds) gets no retained snapshot
// (the Hook sets its retain handling to 2 in OnSubscribe), and is sent, to
// that subscriber only (Topics.Send), nothing, one delta merging every
// batch since that version (from this node's roster.DeltaLog of the
// batches it applied, which a node that begins to watch a group starts
// from the batches the store's group log keeps: GroupHistory), or the
// snapshot. The Hook records the resume in OnSubscribed, while the
// delivery holds its fence for reading (it is added before the delivery's
// hook), so no batch is published between mochi's indexing of the
// subscription and the record; the reply is sent in one step (the resume
// worker's, or that of the group's next batch, which serves the resumes
// waiting first): the subscriber gets it before the batch after it.
//
// A new leader takes over when the lease of the old one runs out (at most
// redis.node_ttl after it died); meanwhile the user topics go on, and the
// group topics pause. Without any group nobody leads, and the lease costs
// the store nothing.
//
// Goroutines (Start; Stop stops and waits for them): the reader (groups and
// snapshots to read from the store), the claims writer, the resume worker
// (the resumes recorded, served), and the leader loop. Locks: topicMu (a
// group's snapshot retained, then its delta published, as one step; it
// guards the resumes waiting too) is taken inside the delivery's fence (Outlet.Step:
// a SUBSCRIBE holds the fence for reading while Watch takes topicMu), and
// is never held across a store call; readMu guards
// what the reader is to read, claimsMu the claims to write, fileMu the
// groups last written from the file. None is held with another.
package groups
