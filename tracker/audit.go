package tracker

import (
	"context"
	"errors"

	"github.com/presenced/presenced/presence"
)

// AuditResult says what an Audit made good.
type AuditResult struct {
	Reopened    int // users whose sessions were opened again: the store lost their latest writes
	GhostsEnded int // sessions the store held of this node that it no longer holds: their end was lost
}

// Audit checks this node's sessions against the store after a failover
// (the store reported Recovered): writes acknowledged by a Redis master
// that died before its replica had them are lost, and are made good,
// scoped to what was lost:
//
//  1. every session held is renewed (the store reopens any it lost);
//  2. the sessions of users whose version in the store is below the one
//     published (published: what this node showed) are opened again: an
//     update was lost;
//  3. the sessions the store holds of this node that the tracker no longer
//     holds (Ghosts) are ended, epoch-checked, as timeout: an end was lost.
//
// It stops at the first store failure (the next recovery audits again).
// What else the recovery needs (reading every user again, recording as
// offline the users the store lost altogether) is the store's; whoever
// runs the node does it after.
func (t *Tracker) Audit(ctx context.Context, published map[string]uint64) (AuditResult, error) {
	var res AuditResult
	if err := t.Renew(ctx); err != nil {
		return res, err
	}
	users := t.Users()
	list := make([]string, 0, len(users))
	for u := range users {
		list = append(list, u)
	}
	held, err := t.store.Versions(ctx, list)
	if err != nil {
		return res, err
	}
	lost := make(map[string]struct{})
	for u, v := range held {
		if v < published[u] {
			lost[u] = struct{}{}
		}
	}
	if len(lost) > 0 {
		t.log.Warn("audit: the store lost the latest writes of some users: their sessions are opened again", "users", len(lost))
		t.ReassertUsers(lost)
	}
	res.Reopened = len(lost)
	own, err := t.store.Own(ctx)
	if err != nil {
		return res, err
	}
	for _, g := range t.Ghosts(own) {
		err := t.store.End(ctx, presence.EndArgs{User: g.User, ID: g.ID, Epoch: g.Epoch, Reason: presence.EndTimeout})
		switch {
		case err == nil:
			res.GhostsEnded++
			t.ended(presence.EndTimeout)
		case errors.Is(err, presence.ErrStaleEpoch), errors.Is(err, presence.ErrNotLive):
			// ended or taken over since it was read
		default:
			return res, err
		}
	}
	return res, nil
}
