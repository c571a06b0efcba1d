package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/presence"
)

// ErrLive: the user has live sessions (ForgetUser).
var ErrLive = errors.New("the user has live sessions")

// UserForgetter is a store that forgets one user on an operator's word.
type UserForgetter interface {
	// ForgetUser deletes user's record (account setting, ended sessions,
	// last seen) unless a session of it is live (ErrLive); false when the
	// store has no record of it. It reports no change: whoever shows the
	// user drops it (the node's Command forget).
	ForgetUser(ctx context.Context, user string) (bool, error)
}

var (
	_ UserForgetter = (*Memory)(nil)
	_ UserForgetter = (*Redis)(nil)
)

// ForgetUser implements UserForgetter.
func (m *Memory) ForgetUser(_ context.Context, user string) (bool, error) {
	if err := presence.ValidUser(user); err != nil {
		return false, fmt.Errorf("forget: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.users[user]
	if !ok {
		return false, nil
	}
	if r.live() > 0 {
		return true, fmt.Errorf("forget %s: %w", user, ErrLive)
	}
	delete(m.users, user)
	m.indexDelete(user)
	return true, nil
}

//go:embed lua/forget.lua
var luaForget string

var scriptForget = redis.NewScript(luaForget)

// ForgetUser implements UserForgetter: one script checks that no session is
// live and deletes the record in the same step.
func (r *Redis) ForgetUser(ctx context.Context, user string) (bool, error) {
	if err := presence.ValidUser(user); err != nil {
		return false, fmt.Errorf("forget: %w", err)
	}
	n, err := scriptForget.Run(ctx, r.c, []string{r.k.user(user)}).Int()
	if err != nil {
		return false, r.fail("forget", err)
	}
	r.up()
	switch n {
	case 0:
		return false, nil
	case -1:
		return true, fmt.Errorf("forget %s: %w", user, ErrLive)
	}
	return true, nil
}
