package presenced

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/presenced/presenced/store"
)

// Pacing of the pump.
const (
	// resendEvery and resendBatch pace the messages sent again for
	// subscribers that missed them: a full queue holds
	// mqtt.max_writes_pending messages, so a batch at a time lets it drain.
	resendEvery = 20 * time.Millisecond
	resendBatch = 128
	// tidyEvery is how often slow subscribers, and connections mochi never
	// reported the end of, are looked for.
	tidyEvery = time.Second
	// forgetEvery is the most time between two looks for offline users to
	// forget.
	forgetEvery = time.Hour
	// repairEvery is how often the group topics' occupancy counts, kept
	// incrementally, are checked against their members.
	repairEvery = time.Minute
)

// pump is the one goroutine that acts on the store's feed: it publishes
// every change (the publisher is only ever called from here), opens every
// session again after a reset, and paces what is sent again for
// subscribers that missed it. It owns nothing that blocks on a client.
func (p *Plugin) pump() {
	defer p.wg.Done()
	// The resend ticker runs only while a subscriber misses presence: an
	// idle node's threads do not wake 50 times a second for nothing.
	resend := time.NewTicker(resendEvery)
	defer resend.Stop()
	resend.Stop()
	var resendC <-chan time.Time
	tidy := time.NewTicker(tidyEvery)
	defer tidy.Stop()
	retention := p.store.Retention()
	forget := time.NewTicker(min(forgetEvery, retention/4))
	defer forget.Stop()
	repair := time.NewTicker(repairEvery)
	defer repair.Stop()
	pace := time.NewTimer(time.Hour) // when the pacer has work again
	pace.Stop()
	defer pace.Stop()
	// paced runs the pacer and sets the timer for its next work.
	paced := func() {
		next := p.pacer.Run(p.now())
		pace.Stop()
		if !next.IsZero() {
			pace.Reset(max(next.Sub(p.now()), 0))
		}
	}
	// The group and node topics' retained messages are mochi's, which
	// purges those older than MaximumMessageExpiryInterval: they are stored
	// again every quarter of it. (Users' retained presence is presence's
	// own, delivery.Snapshots: nothing to refresh.)
	var refresh <-chan time.Time
	if max := p.srv.Options.Capabilities.MaximumMessageExpiryInterval; max > 0 {
		t := time.NewTicker(time.Duration(max) * time.Second / 4)
		defer t.Stop()
		refresh = t.C
	}
	for {
		select {
		case <-p.stop:
			p.handle(p.feed.Take()) // the last ends the tracker wrote
			p.pacer.Run(p.now())
			return
		case <-p.feed.Ready():
			evs := p.feed.Take()
			p.handle(evs)
			p.feed.Recycle(evs) // handle keeps no reference into evs
			paced()
		case <-pace.C:
			paced()
		case <-p.delivery.Lagged():
			if resendC == nil {
				resend.Reset(resendEvery)
				resendC = resend.C
			}
		case now := <-resendC:
			for user, to := range p.delivery.TakeMissing(resendBatch, now) {
				p.publisher.Resend(user, p.outlet.SendTo(user, to))
			}
			if p.delivery.Stats.Lagging.Load() == 0 {
				resend.Stop()
				resendC = nil
			}
		case now := <-tidy.C:
			p.delivery.Tidy(now)
			p.hook.Tidy()
			p.limits.Tidy()
			p.drain.Tidy()
		case <-forget.C:
			p.forget(p.now().Add(-retention))
		case <-refresh:
			p.groups.Refresh()
			p.nodes.Refresh()
		case changes := <-p.groups.Joins():
			p.groups.Joined(changes)
			p.interest.Regroup()
		case users := <-p.drops:
			p.pacer.Drop(users)
			p.publisher.Drop(users)
		case <-repair.C:
			if n := p.groups.Repair(); n > 0 {
				p.log.Warn("group occupancy counts were wrong: rebuilt", "groups", n)
			}
		}
	}
}

// forget drops the users offline since before: from the memory store, and
// the publisher's views, their retained presence (every node forgets by the
// same rule).
func (p *Plugin) forget(before time.Time) {
	p.store.Forget(before)
	p.lifecycleForget(before)
	p.webhookForget(before)
	if n := p.publisher.Forget(before); n > 0 {
		p.log.Debug("offline users forgotten", "users", n)
	}
}

// push is the store's Report: it stamps a change with when it reached
// the node (for presenced_commit_to_publish_seconds) and queues it.
func (p *Plugin) push(e store.Event) {
	if e.Kind == store.Changed {
		e.At = time.Now()
	}
	if e.Kind == store.CommandReceived && e.Command.Op == store.CommandNotify {
		// Straight to the notify stage's queue (it never waits): a message
		// for a subscriber here does not wait behind the feed's changes.
		p.notifyCommand(e.Command)
		return
	}
	p.feed.Push(e)
}

// handle acts on events of the feed, in order.
func (p *Plugin) handle(events []store.Event) {
	for _, e := range events {
		switch e.Kind {
		case store.Changed:
			a := e.Aggregate
			p.lifecycleCommitted(a) // every user's, before the interest filter
			if p.notify != nil {
				p.notify.Changed(a) // a map lookup, unless a message waits for the user
			}
			if !p.interest.Shows(a.User) {
				continue // nobody here watches the user
			}
			p.meters.committed(e, p.publisher.Shown(a.User).Version)
			p.pacer.Offer(a, e.Cause, p.now())
		case store.Reset:
			p.tracker.Reassert()
			p.tombstoneAfter(e.Settle, p.publisher.Versions)
		case store.Recovered:
			p.audit(e.Settle)
		case store.GroupChanged:
			p.groups.Changed(e.Group)
		case store.GroupBatch:
			p.groups.Apply(e.Delta)
		case store.NodeLost:
			p.log.Info("node lost: its sessions ended", "node", e.Node, "incarnation", e.Incarnation, "sessions", e.Sessions)
			p.nodes.Lost(e.Node, e.Incarnation)
		case store.NodeAnnounced:
			p.nodes.Announced(e.NodeStatus)
		case store.CommandReceived:
			p.command(e.Command)
		}
	}
}

// tombstoneAfter records as offline, once settle has passed, every user of
// known (read then) whom the store lost (after a reset, or an audit): by
// then every live node has opened its sessions again, so a user still
// missing has none.
func (p *Plugin) tombstoneAfter(settle time.Duration, known func() map[string]uint64) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTimer(settle)
		defer t.Stop()
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := p.store.Tombstone(ctx, known()); err != nil {
			p.log.Debug("tombstones not written", "err", err)
		}
	}()
}

// audit checks this node's sessions against the store after a failover (a
// Recovered event; see tracker.Audit), reads every user again (Redis
// pub/sub does not deliver again: a change published while a master failed
// over, the audit's own ends and the other nodes', may never have reached
// this node, whose subscription may have stayed up on a surviving node;
// what was shown already is dropped by version), and, once the other nodes
// have had time to do the same (settle), records as offline the users shown
// online that the store lost altogether. One runs at a time; a Recovered
// during one runs it again after.
func (p *Plugin) audit(settle time.Duration) {
	if p.auditing.Swap(true) {
		p.auditAgain.Store(true)
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			p.auditOnce(settle)
			if !p.auditAgain.Swap(false) {
				break
			}
		}
		p.auditing.Store(false)
	}()
}

func (p *Plugin) auditOnce(settle time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := p.tracker.Audit(ctx)
	if err != nil {
		p.log.Debug("audit failed; the next recovery audits", "err", err)
		return
	}
	if err := p.store.Load(ctx); err != nil {
		p.log.Debug("audit: reading every user again failed; the next recovery audits", "err", err)
	}
	p.log.Info("audit after a Redis failover done", "rewritten_sessions", res.Rewritten, "ghosts_ended", res.GhostsEnded)
	p.tombstoneAfter(settle, p.publisher.Online)
}

// every runs fn every interval until Stop; each run gets budget as its
// deadline (a run that outlasts the interval delays the next one).
func (p *Plugin) every(name string, interval, budget time.Duration, fn func(context.Context) error) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), budget)
				if err := fn(ctx); err != nil {
					level := slog.LevelWarn
					if errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
						level = slog.LevelDebug // the store logs an outage once
					}
					p.log.Log(ctx, level, "periodic task failed", "err", err, "loop", name)
				}
				cancel()
			}
		}
	}()
}
