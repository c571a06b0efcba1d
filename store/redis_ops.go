package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/presence"
)

// Open starts a session with the user's next epoch, taking over a live
// session with the same id in the same step.
func (r *Redis) Open(ctx context.Context, a presence.OpenArgs) (presence.Session, error) {
	if err := a.Validate(); err != nil {
		return presence.Session{}, fmt.Errorf("open %s/%s: %w", a.User, a.ID, err)
	}
	inc := r.Incarnation()
	at := time.Now()
	// The script adds the user to this incarnation's set of its slot in the
	// same step, so that a crash right after leaves nothing the sweep
	// cannot find.
	call := r.openCall(a, inc)
	var res []string
	var err error
	if r.registersNew([]presence.Write{{Kind: presence.WriteOpen, Open: a}}, inc) {
		// A user new to this incarnation: the incarnation goes into the
		// registry in the same round trip (see Batch).
		var cmd *redis.Cmd
		_, _ = r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			r.registerIn(ctx, p, member(r.node, inc))
			cmd = call.s.EvalSha(ctx, p, call.keys, call.args...)
			return nil
		})
		if isNoScript(cmd.Err()) {
			cmd = call.s.Run(ctx, r.c, call.keys, call.args...)
		}
		res, err = cmd.StringSlice()
	} else {
		res, err = call.s.Run(ctx, r.c, call.keys, call.args...).StringSlice()
	}
	if err != nil {
		return presence.Session{}, r.fail("open", err)
	}
	r.up()
	r.mu.Lock()
	first := false
	if r.inc == inc {
		if _, ok := r.registered[a.User]; !ok {
			r.registered[a.User], first = at, true
		}
	}
	r.mu.Unlock()
	if first {
		// The registry went with the open; should that SADD have failed,
		// the registrar puts the incarnation back, and retries every second.
		select {
		case r.registerNow <- struct{}{}:
		default:
		}
	}
	if len(res) != 3 {
		return presence.Session{}, fmt.Errorf("open %s/%s: unexpected reply %q", a.User, a.ID, res)
	}
	epoch, err := strconv.ParseUint(res[0], 10, 64)
	if err != nil {
		return presence.Session{}, fmt.Errorf("open: epoch %q: %w", res[0], err)
	}
	c, _ := msString(res[1])
	x, _ := msString(res[2])
	st := a.Status
	if st == "" {
		st = presence.Online
	}
	return presence.Session{User: a.User, ID: a.ID, Epoch: epoch, Node: r.node, Device: a.Device, Status: st, Text: a.Text,
		State: presence.Active, ConnectedAt: c, RenewedAt: c, ExpiresAt: x, Conn: a.Conn.Bounded(), Expect: a.Expect, Margin: a.Margin}, nil
}

func staleOr(op string, ref presence.SessionRef, n int) error {
	if n == 1 {
		return nil
	}
	return fmt.Errorf("%s %s/%s: %w: epoch %d is not the live one", op, ref.User, ref.ID, presence.ErrStaleEpoch, ref.Epoch)
}

// End ends a live session when the epoch is its current one.
func (r *Redis) End(ctx context.Context, a presence.EndArgs) error {
	if !a.Reason.Valid() {
		return fmt.Errorf("end %s/%s: %w: reason %q", a.User, a.ID, presence.ErrBadTransition, a.Reason)
	}
	c := r.endCall(a)
	n, err := c.s.Run(ctx, r.c, c.keys, c.args...).Int()
	if err != nil {
		return r.fail("end", err)
	}
	r.up()
	return staleOr("end", presence.SessionRef{User: a.User, ID: a.ID, Epoch: a.Epoch}, n)
}

// Update changes a live session's own status, text or device.
func (r *Redis) Update(ctx context.Context, ref presence.SessionRef, upd presence.Update) error {
	probe := presence.Session{User: ref.User, ID: ref.ID, Epoch: 1, State: presence.Active}
	if _, err := probe.Update(1, upd); err != nil { // the same checks as the memory store
		return fmt.Errorf("update %s/%s: %w", ref.User, ref.ID, err)
	}
	c := r.updateCall(ref, upd)
	n, err := c.s.Run(ctx, r.c, c.keys, c.args...).Int()
	if err != nil {
		return r.fail("update", err)
	}
	r.up()
	return staleOr("update", ref, n)
}

// SetAccount changes a user's account setting.
func (r *Redis) SetAccount(ctx context.Context, user string, upd presence.AccountUpdate) error {
	if err := presence.ValidUser(user); err != nil {
		return fmt.Errorf("set account: %w", err)
	}
	if _, err := (presence.User{Name: user}).SetAccount(upd); err != nil {
		return fmt.Errorf("set account %s: %w", user, err)
	}
	err := scriptAccount.Run(ctx, r.c, r.k.commitKeys(user),
		user, flag(upd.Status != nil), deref(upd.Status), flag(upd.Text != nil), deref(upd.Text),
		r.auth, ms(r.retention), flag(upd.Invisible != nil), flag(upd.Invisible != nil && *upd.Invisible),
		flag(upd.LastSeen != nil), lastSeenArg(upd.LastSeen)).Err()
	if err != nil {
		return r.fail("set account", err)
	}
	r.up()
	return nil
}

// Renew extends the store-side expiry of the named sessions in one
// pipelined round of epoch-checked scripts, and returns those the store no
// longer has live at that epoch.
func (r *Redis) Renew(ctx context.Context, refs []presence.SessionRef, ttl time.Duration) ([]presence.SessionRef, error) {
	started := time.Now()
	held := make(map[string]struct{}, len(refs))
	cmds := make([]*redis.Cmd, len(refs))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, ref := range refs {
			held[ref.User] = struct{}{}
			cmds[i] = scriptRenew.EvalSha(ctx, p, []string{r.k.user(ref.User)}, ref.ID, strconv.FormatUint(ref.Epoch, 10), ms(ttl))
		}
		return nil
	})
	if err != nil && !isNoScript(err) {
		return nil, r.fail("renew", err)
	}
	var stale []presence.SessionRef
	for i, c := range cmds {
		n, err := c.Int()
		if isNoScript(err) { // first use on this server: run it once the slow way
			n, err = scriptRenew.Run(ctx, r.c, []string{r.k.user(refs[i].User)}, refs[i].ID, strconv.FormatUint(refs[i].Epoch, 10), ms(ttl)).Int()
		}
		if err != nil {
			return nil, r.fail("renew", err)
		}
		if n == 0 {
			stale = append(stale, refs[i])
		}
	}
	r.up()
	r.mu.Lock()
	r.renewed, r.renewedAt = held, started
	r.mu.Unlock()
	return stale, nil
}

// Reap ends, as timeouts, the sessions whose store-side expiry has passed,
// among the users this incarnation opened sessions for, and drops from this
// incarnation's set the users it no longer has a session of, so the set does
// not grow without bound. The users whose sessions the last Renew renewed
// are skipped: none of their sessions on this node can have expired since,
// and each node reaps its own. A user registered again after that Renew
// began is kept in the set (an open may be on its way). It is the backstop
// against a session this node lost track of, so it runs rarely (after each
// renewal).
func (r *Redis) Reap(ctx context.Context) (int, error) {
	n, err := r.reap(ctx)
	r.stats.reaped.Add(int64(n))
	return n, err
}

// reapAfterRenew reaps once after each Renew (a Task); it does nothing
// when no Renew came since its last run.
func (r *Redis) reapAfterRenew(ctx context.Context) error {
	r.mu.Lock()
	due := r.renewedAt.After(r.reapedAt)
	if due {
		r.reapedAt = r.renewedAt
	}
	r.mu.Unlock()
	if !due {
		return nil
	}
	_, err := r.Reap(ctx)
	return err
}

func (r *Redis) reap(ctx context.Context) (int, error) {
	r.mu.Lock()
	inc, renewed, since := r.inc, r.renewed, r.renewedAt
	users := make([]string, 0, len(r.registered))
	for u := range r.registered {
		users = append(users, u)
	}
	r.mu.Unlock()
	m := member(r.node, inc)
	reaped := 0
	for _, u := range users {
		if _, ok := renewed[u]; ok {
			continue
		}
		res, err := scriptReap.Run(ctx, r.c, r.k.commitKeys(u), r.auth, ms(r.retention), r.node, inc).Int64Slice()
		if err != nil {
			return reaped, r.fail("reap", err)
		}
		if len(res) != 2 {
			return reaped, fmt.Errorf("reap %s: unexpected reply %v", u, res)
		}
		reaped += int(res[0])
		if res[1] > 0 {
			continue
		}
		r.mu.Lock()
		at, registered := r.registered[u]
		drop := r.inc == inc && (!registered || at.Before(since))
		if drop {
			delete(r.registered, u)
		}
		r.mu.Unlock()
		if drop {
			if err := r.c.SRem(ctx, r.k.nodeUsers(m, u), u).Err(); err != nil {
				return reaped, r.fail("reap", err)
			}
		}
	}
	return reaped, nil
}
