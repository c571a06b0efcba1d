// Package presence is the pure core of presenced: session records and their
// state machine, the per-user record and its operations, the aggregation rule
// that derives a user's status (Derive), the tracker's decision of which
// store write comes next (Plan), the liveness rule of nodes (SweepDecision),
// and the payload codecs. Each rule has its home here.
//
// Nothing here does I/O or reads the wall clock: every function that needs the
// time takes it as an argument, so the whole package is tested with plain
// values. Stores (memory, Redis) call these functions inside their atomic
// operations; the hooks, the tracker and the publisher only exchange the
// types defined here. It imports neither mochi nor go-redis.
package presence
