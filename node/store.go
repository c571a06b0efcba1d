// Package node runs one presenced node: the embedded mochi broker with the
// presence hook, the tracker that writes sessions to the store, the publisher
// that turns the store's change feed into retained messages, the renewal and
// reaper loops, and the admin HTTP port.
//
// Data flows one way:
//
//	mochi hook -> Tracker (per-connection desired state, coalesced)
//	  -> Store (atomic, epoch-checked) -> change feed
//	  -> Publisher -> retained presence/users/{user}
//
// Goroutines and their owner (Node.Stop stops and waits for all of them):
//   - tracker workers, one per shard: drain dirty slots into the store;
//   - publisher: drains the coalesced feed into retained messages;
//   - renew loop and reap loop: tickers;
//   - admin HTTP server and mochi's own listeners.
//
// Lock order: Tracker.mu before slot.mu; the store's lock is never held while
// calling into the tracker, and the publisher's lock is taken under the
// store's lock (the feed callback) but never the other way round.
package node

import (
	"context"
	"time"

	"github.com/presenced/presenced/presence"
)

// Store is what the node needs of a presence store. Every operation is atomic
// and epoch-checked: a write naming a session at an epoch that is not its
// current live one returns an error wrapping presence.ErrStaleEpoch and
// changes nothing.
type Store interface {
	Open(ctx context.Context, a presence.OpenArgs) (presence.Session, error)
	End(ctx context.Context, a presence.EndArgs) error
	Update(ctx context.Context, ref presence.SessionRef, upd presence.Update) error
	SetAccount(ctx context.Context, user string, upd presence.AccountUpdate) error
	// Renew extends the named sessions' expiry and returns those it no longer has.
	Renew(ctx context.Context, node string, refs []presence.SessionRef, ttl time.Duration) ([]presence.SessionRef, error)
	// Reap expires the sessions whose expiry has passed.
	Reap(ctx context.Context) (int, error)
	User(ctx context.Context, user string) (presence.User, bool, error)
	// Watch sets the change feed; Load hands every current aggregate to fn.
	// The node gives both the same function: one code path.
	Watch(fn func(presence.Presence))
	Load(ctx context.Context, fn func(presence.Presence)) error
}
