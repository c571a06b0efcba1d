package presence

import "time"

// offlineReason is why an offline user went: the end reason of their
// newest ended session, the one whose end left no session live ("" when
// they have none). A takeover never leaves a user offline (the new session
// replaces the old one in the same step), so it is never the answer.
// store/lua/common.lua's offline_reason is its twin.
func offlineReason(u User) EndReason {
	if len(u.Sessions) > 0 || len(u.Ended) == 0 {
		return ""
	}
	return u.Ended[0].EndReason
}

// SeenAt records sign, the last sign of life of ended (presence.EndArgs.LastSign),
// as the user's last_seen when ended's end left no session live: kept
// within [ended's connected_at, its end], and ignored when zero (last_seen
// stays the end). It returns u changed, leaving its receiver as it is.
// store/lua/end.lua's last_sign is its twin.
func (u User) SeenAt(ended Session, sign time.Time) User {
	if len(u.Sessions) > 0 || sign.IsZero() {
		return u
	}
	u.LastSeen = ClampSign(sign, ended.ConnectedAt, ended.EndedAt)
	return u
}

// ClampSign keeps a last sign of life within [connected, end].
func ClampSign(sign, connected, end time.Time) time.Time {
	if sign.After(end) {
		sign = end
	}
	if sign.Before(connected) {
		sign = connected
	}
	return sign
}
