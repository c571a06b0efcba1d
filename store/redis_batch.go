package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/presence"
)

// scriptCall is one epoch-checked script with its keys and arguments, built
// by a pure function apart from the call.
type scriptCall struct {
	s    *redis.Script
	keys []string
	args []any
}

// openCall builds open.lua's call for incarnation inc.
func (r *Redis) openCall(a presence.OpenArgs, inc string) scriptCall {
	if a.Expect > 0 {
		r.dormantArmed.Store(true) // it may sleep: reap at the reaper's pace (redis_dormant.go)
	}
	return scriptCall{scriptOpen, append(r.k.commitKeys(a.User), r.k.nodeUsers(member(r.node, inc), a.User)),
		append([]any{a.User, a.ID, r.node, inc, a.Device, string(a.Status), a.Text, ms(a.TTL),
			r.auth, ms(r.retention)}, append(connArgs(a.Conn), ms(a.Expect), ms(a.Margin))...)}
}

// connArgs are open.lua's ARGV[11..18]: the connection's facts, bounded
// (ARGV[19..20], the declared check-in period and margin, follow them).
func connArgs(c presence.Conn) []any {
	c = c.Bounded()
	return []any{c.Username, c.IP, strconv.Itoa(c.Port), c.Listener, strconv.Itoa(int(c.ProtoVer)),
		strconv.Itoa(int(c.KeepAlive)), flag(c.CleanStart), strconv.FormatUint(uint64(c.Expiry), 10)}
}

// endCall builds end.lua's call.
func (r *Redis) endCall(a presence.EndArgs) scriptCall {
	return scriptCall{scriptEnd, append(r.k.commitKeys(a.User), r.k.dormantIndex(a.User)),
		[]any{a.ID, strconv.FormatUint(a.Epoch, 10), string(a.Reason), flag(a.LastWords != nil), deref(a.LastWords),
			r.auth, ms(r.retention), ms(a.WillDelay), ms(silence(a.LastSign, r.now()))}}
}

// silence is how long before now the session's last sign of life was
// (zero when unknown): end.lua records last_seen that long before the
// Redis server's own time, so that no clock but the server's is written.
func silence(sign, now time.Time) time.Duration {
	if sign.IsZero() || !now.After(sign) {
		return 0
	}
	return now.Sub(sign)
}

// updateCall builds update.lua's call.
func (r *Redis) updateCall(ref presence.SessionRef, upd presence.Update) scriptCall {
	args := append([]any{ref.ID, strconv.FormatUint(ref.Epoch, 10)}, updateArgs(upd)...)
	args = append(args, r.auth, ms(r.retention))
	return scriptCall{scriptUpdate, r.k.commitKeys(ref.User), args}
}

// validateWrite makes the checks the single operations make before calling
// Redis.
func validateWrite(w presence.Write) error {
	switch w.Kind {
	case presence.WriteOpen:
		if err := w.Open.Validate(); err != nil {
			return fmt.Errorf("open %s/%s: %w", w.Open.User, w.Open.ID, err)
		}
	case presence.WriteEnd:
		if !w.End.Reason.Valid() {
			return fmt.Errorf("end %s/%s: %w: reason %q", w.End.User, w.End.ID, presence.ErrBadTransition, w.End.Reason)
		}
	case presence.WriteUpdate:
		probe := presence.Session{User: w.Ref.User, ID: w.Ref.ID, Epoch: 1, State: presence.Active}
		if _, err := probe.Update(1, w.Update); err != nil {
			return fmt.Errorf("update %s/%s: %w", w.Ref.User, w.Ref.ID, err)
		}
	default:
		return fmt.Errorf("batch: %w: write kind %d", presence.ErrBadTransition, w.Kind)
	}
	return nil
}

// Batch makes writes (opens, ends and updates) in one pipelined round trip
// of the same epoch-checked scripts Open, End and Update run, and returns,
// for each, the epoch an open was given and the error the single operation
// would have returned. The scripts run in the order given; the tracker puts
// at most one write of a session in a batch, so each session's writes stay
// in order across batches. A write that fails to reach Redis fails alone
// (ErrUnavailable) and is tried again by its caller; one the scripts refuse
// as stale changes nothing, as alone.
func (r *Redis) Batch(ctx context.Context, ws []presence.Write) ([]uint64, []error) {
	epochs := make([]uint64, len(ws))
	errs := make([]error, len(ws))
	calls := make([]scriptCall, len(ws))
	cmds := make([]*redis.Cmd, len(ws))
	inc := r.Incarnation()
	at := time.Now()
	some := false
	for i, w := range ws {
		if errs[i] = validateWrite(w); errs[i] != nil {
			continue
		}
		switch w.Kind {
		case presence.WriteOpen:
			calls[i] = r.openCall(w.Open, inc)
		case presence.WriteEnd:
			calls[i] = r.endCall(w.End)
		case presence.WriteUpdate:
			calls[i] = r.updateCall(w.Ref, w.Update)
		}
		some = true
	}
	if !some {
		return epochs, errs
	}
	// An open of a user new to this incarnation registers the incarnation
	// in the same round trip, before the scripts: Redis may have lost the
	// registry (an empty restart not yet noticed), and a crash right after
	// must still leave a sweeper the incarnation to find.
	register := r.registersNew(ws, inc)
	_, _ = r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		if register {
			r.registerIn(ctx, p, member(r.node, inc))
		}
		for i, c := range calls {
			if c.s != nil {
				cmds[i] = c.s.EvalSha(ctx, p, c.keys, c.args...)
			}
		}
		return nil
	})
	registered := false
	for i, c := range cmds {
		if c == nil {
			continue
		}
		if isNoScript(c.Err()) { // Redis restarted since the scripts were loaded: the slow way, once
			c = calls[i].s.Run(ctx, r.c, calls[i].keys, calls[i].args...)
		}
		w := ws[i]
		switch w.Kind {
		case presence.WriteOpen:
			res, err := c.StringSlice()
			if err != nil {
				errs[i] = r.fail("open", err)
				continue
			}
			if len(res) != 3 {
				errs[i] = fmt.Errorf("open %s/%s: unexpected reply %q", w.Open.User, w.Open.ID, res)
				continue
			}
			if epochs[i], err = strconv.ParseUint(res[0], 10, 64); err != nil {
				errs[i] = fmt.Errorf("open: epoch %q: %w", res[0], err)
				continue
			}
			r.mu.Lock()
			if r.inc == inc {
				if _, ok := r.registered[w.Open.User]; !ok {
					r.registered[w.Open.User], registered = at, true
				}
			}
			r.mu.Unlock()
		case presence.WriteEnd:
			n, err := c.Int()
			if err != nil {
				errs[i] = r.fail("end", err)
				continue
			}
			errs[i] = staleOr("end", presence.SessionRef{User: w.End.User, ID: w.End.ID, Epoch: w.End.Epoch}, n)
		case presence.WriteUpdate:
			n, err := c.Int()
			if err != nil {
				errs[i] = r.fail("update", err)
				continue
			}
			errs[i] = staleOr("update", w.Ref, n)
		}
		r.up()
	}
	if registered { // as Open: the registry again, off this path
		select {
		case r.registerNow <- struct{}{}:
		default:
		}
	}
	return epochs, errs
}

// registersNew reports whether ws opens a session of a user this
// incarnation has not registered yet.
func (r *Redis) registersNew(ws []presence.Write, inc string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inc != inc {
		return false
	}
	for _, w := range ws {
		if w.Kind == presence.WriteOpen {
			if _, ok := r.registered[w.Open.User]; !ok {
				return true
			}
		}
	}
	return false
}
