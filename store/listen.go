package store

import "context"

// Listener is what a node hears of the users' changes. A store reports the
// changes (Changed events) of the users it listens to, and only those: with
// Redis each change travels, through the shard that owns the user, only to
// the nodes that listen to it (redis_listen.go). Which users a node needs
// is decided above the store (by its interest); the memory store, one node
// that holds everything, reports every change whatever it is told.
//
// Hear first, load second: Listen and ListenAll return once the
// subscription is confirmed and the current aggregates read and reported,
// so nothing committed after the call is missed, and a change that races
// the read is harmless (the node drops versions at or below what it holds).
type Listener interface {
	// Listen has the store report the changes of users from now on, then
	// reports each one's current aggregate as a Changed event. Idempotent.
	Listen(ctx context.Context, users []string) error
	// Unlisten stops reporting the changes of users (listened to one by
	// one: a firehose still hears them). It returns once they stopped.
	Unlisten(ctx context.Context, users []string) error
	// ListenAll is the firehose: every user's changes from now on, then
	// every current aggregate (Load). A node with an unrestricted
	// subscriber of every user is one.
	ListenAll(ctx context.Context) error
	// UnlistenAll ends the firehose; the users given to Listen are still
	// heard, without a gap.
	UnlistenAll(ctx context.Context) error
}

var (
	_ Listener = (*Memory)(nil)
	_ Listener = (*Redis)(nil)
)

// Listen implements Listener: the memory store reports every change; it
// reports the current aggregates of users (those it has), sorted by name.
func (m *Memory) Listen(_ context.Context, users []string) error {
	if len(users) > 0 {
		m.reportCurrent(users)
	}
	return nil
}

// Unlisten implements Listener: a no-op (the node filters by its interest).
func (m *Memory) Unlisten(context.Context, []string) error { return nil }

// ListenAll implements Listener: every current aggregate (Load).
func (m *Memory) ListenAll(ctx context.Context) error { return m.Load(ctx) }

// UnlistenAll implements Listener: a no-op.
func (m *Memory) UnlistenAll(context.Context) error { return nil }

// ListenGroups implements GroupLog: one node hears every batch.
func (m *Memory) ListenGroups(context.Context, []string) error { return nil }

// UnlistenGroups implements GroupLog: a no-op.
func (m *Memory) UnlistenGroups(context.Context, []string) error { return nil }
