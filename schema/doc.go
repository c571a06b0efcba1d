// Package schema holds the JSON Schemas (draft 2020-12) of every payload
// presenced reads or writes on MQTT, embedded so that a program (the admin
// API, a test, a client generator) can serve or use them:
//
//   - user.schema.json: the retained presence/users/{user} message
//     (presence.Aggregate.AppendJSON);
//   - group_snapshot.schema.json: the retained presence/groups/{group}
//     message (roster.Snapshot);
//   - group_delta.schema.json: the batches published on
//     presence/groups/{group} after the snapshot (roster.Delta);
//   - set.schema.json: what a client publishes to presence/set
//     (presence.ParseSetRequest);
//   - node.schema.json: the retained presence/nodes/{node} message
//     (presence.NodeStatus).
//
// Each file is self-contained (no $ref to another file), has an absolute
// $id, and carries one example. A schema says everything JSON Schema can
// say about a payload; what it cannot (limits in UTF-8 bytes rather than
// characters, Unicode normalization and script rules on names, the 1 KiB
// limit of presence/set, relations between fields such as version =
// follows + 1) is written in its descriptions, and the server still
// enforces it. The package imports nothing from presenced: the tests tie
// the schemas to the code that writes and reads the payloads.
package schema
