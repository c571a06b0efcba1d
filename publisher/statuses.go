package publisher

import "github.com/presenced/presenced/presence"

// Statuses returns how many users are shown with each status (a scrape of
// the metrics reads it). The counts are kept as views change, so a scrape
// holds the publisher's lock for a copy of a few entries, not a pass over
// every user.
func (p *Publisher) Statuses() map[presence.Status]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[presence.Status]int, len(p.byStatus))
	for s, n := range p.byStatus {
		if n != 0 {
			m[s] = n
		}
	}
	return m
}
