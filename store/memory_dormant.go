package store

import (
	"time"

	"github.com/presenced/presenced/presence"
)

// reapDormant ends u's dormant session as missed when its check-in did not
// come by its due time (presence.User.Miss): the reaper's second look at a
// user it found due, under mu. A missed check-in is shown at most one reap interval after its
// due time (next_expected + margin).
func (m *Memory) reapDormant(u presence.User, now time.Time) {
	u, missed, ok := u.Miss(now)
	if !ok {
		return
	}
	m.missed.Add(1)
	m.commit(u, now, presence.Cause{Ended: presence.EndMissed}, missed)
}
