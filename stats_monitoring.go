package presenced

import "github.com/presenced/presenced/stats"

// monitoringStats are the figures the alerts of deploy/prometheus read that
// no counter answers: whether Redis is unreachable now (an outage is one
// increment of redis_outages_total however long it lasts), and how many
// users flap now.
func (p *Plugin) monitoringStats() []stats.Stat {
	unreachable := func() int64 {
		if p.store.Ready() {
			return 0
		}
		return 1
	}
	return []stats.Stat{
		gauge("redis_unreachable", "1 while Redis is unreachable (an outage: connections are served, presence changes held), else 0; always 0 with the memory store.", unreachable),
		gauge("users_flapping", "Users flapping now: presence.flap.ends ends within presence.flap.window (their ends are held presence.flap.grace).",
			func() int64 { return int64(p.pacer.FlappingCount(p.now())) }),
	}
}
