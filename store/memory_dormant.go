package store

import (
	"time"

	"github.com/presenced/presenced/presence"
)

// reapDormant ends, as missed, the dormant sessions whose check-in did not
// come by their due time (presence.User.Miss): the reaper's second pass,
// under mu. A missed check-in is shown at most one reap interval after its
// due time (next_expected + margin).
func (m *Memory) reapDormant(now time.Time) {
	for _, u := range m.users {
		u, missed, ok := u.Miss(now)
		if !ok {
			continue
		}
		m.missed.Add(1)
		m.commit(u, now, presence.Cause{Ended: presence.EndMissed}, missed)
	}
}
