// Package presence is the pure core of presenced: session records and their
// state machine, the per-user record and its operations, the aggregation rule
// that derives a user's status, and the payload codecs.
//
// Nothing here does I/O or reads the wall clock: every function that needs the
// time takes it as an argument, so the whole package is tested with plain
// values. Stores (memory, Redis) call these functions inside their atomic
// operations; the node and the MQTT hooks only exchange the types defined here.
package presence
