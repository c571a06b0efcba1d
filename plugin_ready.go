package presenced

import "time"

// DownSince returns when the store became unreachable (the outage going on
// began), or the zero time while it answers: always with the memory store.
func (p *Plugin) DownSince() time.Time {
	if d, ok := p.store.(interface{ DownSince() time.Time }); ok {
		return d.DownSince()
	}
	if !p.store.Ready() { // a store that cannot say since when: since now
		return p.now()
	}
	return time.Time{}
}
