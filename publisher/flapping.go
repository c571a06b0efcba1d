package publisher

import "time"

// FlappingCount returns how many users flap at now (presence.Pacing's flap
// control: FlapEnds ends within FlapWindow). It looks at the users the
// pacer keeps (something held, or recent ends), under its lock: a scrape's
// cost, never the packet path's.
func (q *Pacer) FlappingCount(now time.Time) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, p := range q.paces {
		if q.rules.Flapping(p, now) {
			n++
		}
	}
	return n
}
