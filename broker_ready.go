package presenced

import "time"

// readiness is GET /readyz's answer to "is the store reachable enough"
// (admin.Source.Ready): false once the store has been unreachable for
// after (admin.unready_after); after 0: at once. The brokers keep serving
// through an outage, and every pod shares one Redis: a short outage that
// took every pod out of its Service at once would stop MQTT, not presence.
func readiness(downSince func() time.Time, after time.Duration, now func() time.Time) func() bool {
	return func() bool {
		since := downSince()
		return since.IsZero() || (after > 0 && now().Sub(since) < after)
	}
}

// unreadyAfter is the configured admin.unready_after (its default when
// unset, as an embedding program's config may be).
func (b *Broker) unreadyAfter() time.Duration {
	if b.cfg.Admin.UnreadyAfter == nil {
		return 30 * time.Second
	}
	return b.cfg.Admin.UnreadyAfter.D()
}
