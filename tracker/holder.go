package tracker

import "github.com/presenced/presenced/presence"

// Holder returns the connection of this node that holds user's session id
// at epoch: the session the store holds at that epoch is the one this node
// opened for a connection that has not ended. A newer session with the
// same id (another epoch), a session whose open is not written yet, or one
// that ended, holds nothing: an operator's kick, epoch-checked, never ends
// a session it did not name.
func (t *Tracker) Holder(user, id string, epoch uint64) (presence.ConnID, bool) {
	if epoch == 0 {
		return 0, false
	}
	t.mu.Lock()
	s := t.slotOf(user, id)
	t.mu.Unlock()
	if s == nil {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.live || !s.open || s.have.epoch != epoch || s.have.conn != s.want.conn || s.have.user != user {
		return 0, false
	}
	return s.have.conn, true
}
