// Package roster is who belongs together, and what a group's watchers see.
//
//   - Index is group membership, in memory: name -> members, and each
//     user's groups. Visibility "groups" asks it on every delivery
//     (Index.Mates: do two users share a group).
//   - Board keeps the groups someone watches on presence/groups/{group}:
//     each one's members as last published, the member changes since, and
//     its occupancy (online, total, per status), kept incrementally and
//     checked against the truth by Repair. It cuts the changes into
//     batches (Delta), at most one per window per group, the latest change
//     per member, with consecutive group versions; a Snapshot is a group's
//     whole state at one version.
//   - DeltaLog keeps, per group, the latest batches applied, bounded by
//     time, count and bytes (LogLimits); Resume decides what a subscriber
//     coming back with the version it holds is sent: nothing, one delta
//     (Merge of the batches since), or the snapshot, with the cause.
//   - ParseFile and LoadFile read a groups file (YAML).
//
// The package is pure: no MQTT, no Redis. The clock and the members'
// current presence are injected.
package roster
