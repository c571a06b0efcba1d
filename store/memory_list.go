package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/btree"

	"github.com/presenced/presenced/presence"
)

// The memory store's list of users walks an ordered index of the names (a
// B-tree, kept by commit and Forget): a page costs O(log N + examined), a
// prefix is a range of the index, a whole walk O(N). The lock is held for
// one page. The index costs O(log N) on the first commit of each user and
// about 20 bytes a user.

// newIndex returns an empty index of names.
func newIndex() *btree.BTreeG[string] { return btree.NewOrderedG[string](32) }

// indexAdd records a user new to the store in the index (under mu):
// O(log N), on the first commit of a user only.
func (m *Memory) indexAdd(name string) { m.names.ReplaceOrInsert(name) }

// indexDelete drops a forgotten user from the index (under mu).
func (m *Memory) indexDelete(name string) { m.names.Delete(name) }

// List implements Store: a page of users in name order (see
// presence.ListQuery). With a group it walks the group's members.
func (m *Memory) List(ctx context.Context, q presence.ListQuery) (presence.ListPage, error) {
	if err := q.Validate(); err != nil {
		return presence.ListPage{}, err
	}
	if q.Group != "" {
		members, ok, err := m.Members(ctx, q.Group)
		if err != nil {
			return presence.ListPage{}, err
		}
		if !ok {
			return presence.ListPage{}, fmt.Errorf("%w: %s", presence.ErrNoGroup, q.Group)
		}
		return listMembers(ctx, q, members, func(_ context.Context, users []string) ([]presence.Aggregate, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			out := make([]presence.Aggregate, len(users))
			for i, u := range users {
				out[i] = m.get(u).Current
			}
			return out, nil
		})
	}
	after, err := decodeCursor(q.Cursor, 'm')
	if err != nil {
		return presence.ListPage{}, err
	}
	w := presence.ListWindow{Q: q}
	m.mu.Lock()
	defer m.mu.Unlock()
	last := ""
	m.names.AscendGreaterOrEqual(max(after, q.Prefix), func(name string) bool {
		if name == after {
			return true
		}
		if !strings.HasPrefix(name, q.Prefix) {
			return false
		}
		if w.Full() || w.Spent() {
			w.Page.Next = encodeCursor('m', last)
			return false
		}
		last = name
		w.Look(m.get(name).Current)
		return true
	})
	return w.Page, nil
}
