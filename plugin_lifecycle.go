package presenced

import (
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/lifecycle"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/stats"
)

// The lifecycle outputs (package lifecycle, docs/events.md): the stage is
// fed by the pump (every committed change, before the interest filter: raw)
// and by the publisher (what it published: shown), and by the Refusals hook
// (connect_failed); it publishes from a goroutine of its own through the
// outlet. While an output is enabled the node holds the firehose.

// sequencerMargin is how much earlier than the node's start a session's
// open must be to be taken as there before (base state, no event): a
// session's times are the store's clock (Redis's), the start the node's.
// A session opened within the margin before the start is told once more
// on this node, where nobody can have heard it yet.
const sequencerMargin = time.Second

// buildLifecycle makes the stage of the enabled outputs (nil: none).
func (p *Plugin) buildLifecycle() {
	l := p.cfg.Lifecycle
	mode := func(m string) lifecycle.Mode {
		if m == configs.LifecycleShown {
			return lifecycle.Shown
		}
		return lifecycle.Raw
	}
	var outs []lifecycle.Output
	if l.AWS.Enabled {
		outs = append(outs, lifecycle.Output{Name: "aws", Dialect: lifecycle.AWS{Prefix: l.AWS.Prefix}, Mode: mode(l.AWS.Mode)})
	}
	if l.EMQX.Enabled {
		outs = append(outs, lifecycle.Output{Name: "emqx", Dialect: lifecycle.EMQX{Prefix: l.EMQX.Prefix}, Mode: mode(l.EMQX.Mode)})
	}
	if len(outs) == 0 {
		return
	}
	p.lifecycle = lifecycle.New(lifecycle.Options{Outputs: outs, Broker: p.outlet,
		NewSequencer: func(start time.Time) lifecycle.Sequencer { return presence.NewSequencer(start.Add(-sequencerMargin)) },
		Depth:        l.QueueDepth, Now: p.now, Log: p.logFor("lifecycle")})
}

// lifecyclePrivate reports whether a topic or filter reaches an enabled
// output's topics (delivery.GuardOptions.Private); nil without outputs.
func (p *Plugin) lifecyclePrivate() func(string) bool {
	if p.lifecycle == nil {
		return nil
	}
	var prefixes []string
	for _, o := range []LifecycleOutput{p.cfg.Lifecycle.AWS, p.cfg.Lifecycle.EMQX} {
		if o.Enabled {
			prefixes = append(prefixes, o.Prefix)
		}
	}
	return func(f string) bool {
		for _, prefix := range prefixes {
			if lifecycle.Reaches(f, prefix) {
				return true
			}
		}
		return false
	}
}

// lifecycleHooks are the hooks of the outputs: the refusals'.
func (p *Plugin) lifecycleHooks() []mqtt.Hook {
	if p.lifecycle == nil {
		return nil
	}
	return []mqtt.Hook{&lifecycle.Refusals{Stage: p.lifecycle, Now: p.now}}
}

// startLifecycle holds the firehose and starts the stage's goroutine.
func (p *Plugin) startLifecycle() {
	if p.lifecycle != nil {
		p.interest.HoldFirehose()
		p.lifecycle.Start()
	}
}

// stopLifecycle publishes what is queued and stops (after the pump).
func (p *Plugin) stopLifecycle() {
	if p.lifecycle != nil {
		p.lifecycle.Stop()
		p.interest.ReleaseFirehose()
	}
}

// lifecycleCommitted hands the stage a committed change (the pump).
func (p *Plugin) lifecycleCommitted(a presence.Aggregate) {
	if p.lifecycle != nil {
		p.lifecycle.Committed(a)
	}
}

// lifecycleShown hands the stage what the publisher published (the pump).
func (p *Plugin) lifecycleShown(a presence.Aggregate) {
	if p.lifecycle != nil {
		p.lifecycle.Shown(a)
	}
}

// lifecycleForget drops what the sequencers keep of users offline since
// before.
func (p *Plugin) lifecycleForget(before time.Time) {
	if p.lifecycle != nil {
		p.lifecycle.Forget(before)
	}
}

// lifecycleStats are the outputs' figures.
func (p *Plugin) lifecycleStats() []stats.Stat {
	var s lifecycle.Stats
	st := &s
	if p.lifecycle != nil {
		st = &p.lifecycle.Stats
	}
	d := &p.delivery.Stats
	return []stats.Stat{
		counter("lifecycle_events_total", "Lifecycle events derived (raw and shown; lifecycle section).", st.Events.Load),
		counter("lifecycle_published_total", "Lifecycle messages published (one per output).", st.Published.Load),
		counter("lifecycle_failed_total", "Lifecycle messages the broker refused.", st.Failed.Load),
		gauge("lifecycle_queue_depth", "Lifecycle events waiting to be published.", st.Queued.Load),
		counter("lifecycle_overflow_total", "Lifecycle events dropped: the queue (lifecycle.queue_depth) was full.", st.Overflow.Load),
		counter("lifecycle_refusals_total", "CONNECTs this node refused, told to the lifecycle outputs (connect_failed).", st.Refusals.Load),
		counter("lifecycle_reads_refused_total", "Subscriptions and deliveries of lifecycle topics refused to connections that are not service accounts.", d.PrivateReadsRefused.Load),
		counter("lifecycle_writes_refused_total", "Publishes to lifecycle topics refused.", d.PrivateWritesRefused.Load),
	}
}
