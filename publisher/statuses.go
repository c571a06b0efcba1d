package publisher

import "github.com/presenced/presenced/presence"

// Statuses returns how many users are shown with each status (a scrape of
// the metrics reads it: one pass over what is published).
func (p *Publisher) Statuses() map[presence.Status]int {
	m := make(map[presence.Status]int, 6)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, v := range p.views {
		m[v.status]++
	}
	return m
}
