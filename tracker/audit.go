package tracker

import (
	"context"
	"errors"

	"github.com/presenced/presenced/presence"
)

// AuditResult says what an Audit made good.
type AuditResult struct {
	Rewritten   int // sessions whose own state the store lost (an update) written again
	GhostsEnded int // sessions the store held of this node that it no longer holds: their end was lost
}

// Audit checks this node's sessions against the store after a failover
// (the store reported Recovered): writes acknowledged by a Redis master
// that died before its replica had them are lost, and are made good,
// scoped to what was lost, session by session:
//
//  1. every session held is renewed (the store reopens any it lost: an
//     open was lost);
//  2. the sessions the store holds of this node (Own) whose own device,
//     status or text is not what this node last wrote are written again:
//     an update was lost;
//  3. the sessions the store holds of this node that the tracker no longer
//     holds (Ghosts) are ended, epoch-checked, as timeout: an end was lost.
//
// It needs nothing but the store and the tracker's own record of its
// writes: not the versions of the users (which this node need not hear).
// It stops at the first store failure (the next recovery audits again).
// What else the recovery needs (reading the users this node shows again,
// recording as offline the users the store lost altogether) is the
// store's; whoever runs the node does it after.
func (t *Tracker) Audit(ctx context.Context) (AuditResult, error) {
	var res AuditResult
	if err := t.Renew(ctx); err != nil {
		return res, err
	}
	own, err := t.store.Own(ctx)
	if err != nil {
		return res, err
	}
	res.Rewritten = t.rewrite(own)
	if res.Rewritten > 0 {
		t.log.Warn("audit: the store lost the latest writes of some sessions: they are written again", "sessions", res.Rewritten)
	}
	refs := make([]presence.SessionRef, len(own))
	for i, s := range own {
		refs[i] = s.SessionRef
	}
	for _, g := range t.Ghosts(refs) {
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

// rewrite has each session of stored that this node holds open at the
// same epoch, and whose own state there is not what it last wrote, written
// again: what the tracker believes written becomes what the store holds,
// so the next write is the update that makes them equal. It returns how
// many.
func (t *Tracker) rewrite(stored []presence.StoredSession) int {
	n := 0
	for _, st := range stored {
		t.mu.Lock()
		s := t.slotOf(st.User, st.ID)
		t.mu.Unlock()
		if s == nil {
			continue
		}
		s.mu.Lock()
		h := s.written()
		status := h.Status
		if status == "" {
			status = presence.Online // what an open writes when none is given
		}
		lost := h.Open && h.Epoch == st.Epoch && h.User == st.User &&
			(h.Device != st.Device || status != st.Status || h.Text != st.Text)
		if lost {
			s.have.device, s.have.status = st.Device, st.Status
			s.setHaveText(st.Text)
		}
		s.mu.Unlock()
		if lost {
			n++
			t.enqueue(s)
		}
	}
	return n
}
