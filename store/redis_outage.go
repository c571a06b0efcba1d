package store

import "time"

// DownSince returns when the outage going on began (its first failed call),
// or the zero time while Redis answers. The admin port's readiness reads it
// (admin.unready_after).
func (r *Redis) DownSince() time.Time {
	if !r.down.Load() {
		return time.Time{}
	}
	r.out.Lock()
	defer r.out.Unlock()
	if !r.out.down {
		return time.Time{}
	}
	return r.out.since
}
