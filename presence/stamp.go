package presence

import "time"

// NextStamp returns the next epoch or version after last: a hybrid logical
// clock value max(last+1, now in ms × 1000). It strictly increases over last,
// and because it tracks wall time it stays above every value handed out before
// a restart of a store that forgot last (the memory store on a restarted node,
// or a Redis that came back empty), as long as fewer than 1000 stamps per
// millisecond are taken for one user. Values stay below 2^53, so JavaScript
// observers read them exactly.
func NextStamp(last uint64, now time.Time) uint64 {
	wall := uint64(now.UnixMilli()) * 1000
	if wall > last+1 {
		return wall
	}
	return last + 1
}
