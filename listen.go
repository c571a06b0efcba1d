package presenced

import (
	"context"

	"github.com/presenced/presenced/store"
)

// hearing is the interest stage's store until the store hears users one
// by one: every change already reaches this node, so listening to a user
// only reports its current aggregate (hear first, load second), and the
// firehose loads every user.
type hearing struct{ p *Plugin }

func (l hearing) Listen(ctx context.Context, users []string) error {
	for _, user := range users {
		u, ok, err := l.p.store.User(ctx, user)
		if err != nil {
			return err
		}
		if ok && u.Current.Version != 0 {
			l.p.push(store.Event{Kind: store.Changed, Aggregate: u.Current})
		}
	}
	return nil
}

func (l hearing) Unlisten(context.Context, []string) error { return nil }
func (l hearing) ListenAll(ctx context.Context) error      { return l.p.store.Load(ctx) }
func (l hearing) UnlistenAll(context.Context) error        { return nil }
