package presenced

import (
	"context"
	"errors"
	"fmt"

	"github.com/presenced/presenced/admin"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/store"
)

// The operator's actions (admin.Actions, the admin API's): a kick, an
// account setting, a forget. A kick is carried out by the node that holds
// the session: this one at once, another through the store's commands
// (store.Commander, Redis), which that node's pump acts on (command).

var _ admin.Actions = (*Plugin)(nil)

// Kick ends user's live session clientID, or every live session of user
// when clientID is "" (see admin.Actions): the sessions are read from the
// store, with their nodes and epochs; this node's own are ended here, each
// other node is sent a command naming the session's epoch, so that it
// never ends a newer session with the same client id. It returns how many
// sessions were asked to end: a command that no node heard (its node is
// gone; the sweep ends its sessions as node_lost) does not count.
func (p *Plugin) Kick(ctx context.Context, user, clientID string, code byte, by string) (int, error) {
	if _, ok := hooks.KickCode(code); !ok {
		return 0, fmt.Errorf("%w: reason code 0x%02X", presence.ErrBadStatus, code)
	}
	u, ok, err := p.store.User(ctx, user)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("user %s: %w", user, admin.ErrNotFound)
	}
	n, found := 0, false
	for _, s := range u.Sessions {
		if (clientID != "" && s.ID != clientID) || !s.Live() {
			continue
		}
		found = true
		c := store.Command{Op: store.CommandKick, Node: s.Node, User: user, ID: s.ID, Epoch: s.Epoch, Code: code, By: by}
		if s.Node == p.cfg.NodeID {
			if p.kick(c) {
				n++
			}
			continue
		}
		cmd, ok := p.store.(store.Commander)
		if !ok {
			continue // a record of another node in a store only this node uses: none is live
		}
		heard, err := cmd.SendCommand(ctx, c)
		if err != nil {
			return n, err
		}
		if heard {
			n++
		}
	}
	if !found {
		if clientID != "" {
			return 0, fmt.Errorf("session %s/%s: no live session: %w", user, clientID, admin.ErrNotFound)
		}
		return 0, fmt.Errorf("user %s: no live session: %w", user, admin.ErrNotFound)
	}
	return n, nil
}

// kick ends this node's session c names, if its connection still holds it
// at c's epoch.
func (p *Plugin) kick(c store.Command) bool {
	code, ok := hooks.KickCode(c.Code)
	if !ok {
		return false
	}
	conn, ok := p.tracker.Holder(c.User, c.ID, c.Epoch)
	if !ok {
		return false
	}
	return p.hook.Kick(presence.ClientKey(c.User, c.ID), conn, code)
}

// SetAccount sets or clears user's account setting, as presence/set with
// scope account does (the store's SetAccount), and returns the user's
// presence JSON as the store has it after.
func (p *Plugin) SetAccount(ctx context.Context, user string, upd presence.AccountUpdate, _ string) ([]byte, error) {
	if _, ok, err := p.store.User(ctx, user); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("user %s: %w", user, admin.ErrNotFound)
	}
	if err := p.store.SetAccount(ctx, user, upd); err != nil {
		return nil, err
	}
	u, ok, err := p.store.User(ctx, user)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("user %s: %w", user, admin.ErrNotFound)
	}
	return u.Current.AppendJSON(nil), nil
}

// Forget deletes an offline user's record from the store (refused while a
// session is live), then has every node drop its retained presence of the
// user: this one through its pump, the others by a command.
func (p *Plugin) Forget(ctx context.Context, user, by string) error {
	f, ok := p.store.(store.UserForgetter)
	if !ok {
		return errors.New("this store cannot forget a user")
	}
	found, err := f.ForgetUser(ctx, user)
	if errors.Is(err, store.ErrLive) {
		return fmt.Errorf("%w: %w", admin.ErrLive, err)
	}
	if err != nil {
		return err
	}
	_, shown := p.publisher.Current(user)
	if !found && !shown {
		return fmt.Errorf("user %s: %w", user, admin.ErrNotFound)
	}
	p.forgetShown([]string{user})
	if cmd, ok := p.store.(store.Commander); ok {
		if _, err := cmd.SendCommand(ctx, store.Command{Op: store.CommandForget, User: user, By: by}); err != nil {
			return fmt.Errorf("the record is gone, but the other nodes were not told to drop its retained presence: %w", err)
		}
	}
	return nil
}

// command acts on a command another node sent (on the pump's goroutine).
func (p *Plugin) command(c *store.Command) {
	switch c.Op {
	case store.CommandKick:
		if c.Node != p.cfg.NodeID {
			return
		}
		kicked := p.kick(*c)
		p.log.Info("kick asked by another node", "user", c.User, "client", c.ID, "epoch", c.Epoch, "by", c.By, "kicked", kicked)
	case store.CommandForget:
		p.pacer.Drop([]string{c.User})
		p.publisher.Drop([]string{c.User})
	case store.CommandNotify: // handed to the notify stage by push, never queued
	}
}
