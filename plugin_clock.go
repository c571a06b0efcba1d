package presenced

import (
	"github.com/presenced/presenced/clock"
	"github.com/presenced/presenced/stats"
)

// The presence clock (package clock, docs/presence.md "Is my view stale?
// presence/clock"): every presence.clock_interval the node publishes
// presence/clock to its own subscribers through the outlet (QoS 0, not
// retained), carrying the highest version the publisher has published
// (told by the publisher's callback, one atomic step).

// buildClock builds the clock stage unless presence.clock_interval is off
// (after the stages: the store names the incarnation, the outlet carries
// it), and adds its figures.
func (p *Plugin) buildClock() {
	every := p.cfg.Presence.ClockInterval
	if every < 0 {
		return
	}
	p.clock = clock.New(clock.Options{
		Node: p.cfg.NodeID, Prefix: p.cfg.Presence.TopicPrefix, Every: every,
		Incarnation: p.store.Incarnation, HideVersion: p.cfg.Presence.Visibility != VisibilityOpen,
		Now: p.now, Outlet: p.outlet, Log: p.logFor("clock"),
	})
	p.table.Add(p.clockStats()...)
}

// startClock starts the clock's goroutine (the node is up and serving).
func (p *Plugin) startClock() {
	if p.clock != nil {
		p.clock.Start()
	}
}

// stopClock stops the clock's goroutine and waits for it.
func (p *Plugin) stopClock() {
	if p.clock != nil {
		p.clock.Stop()
	}
}

// clockPublished tells the clock a version the publisher published.
func (p *Plugin) clockPublished(version uint64) {
	if p.clock != nil {
		p.clock.Published(version)
	}
}

// clockStats are the clock's figures (none while it is off).
func (p *Plugin) clockStats() []stats.Stat {
	s := &p.clock.Stats
	return []stats.Stat{
		counter("clock_messages_total", "presence/clock messages this node published to its subscribers (one each presence.clock_interval).", s.Sent.Load),
		counter("clock_failed_total", "presence/clock messages the broker refused.", s.Failed.Load),
	}
}
