package presenced

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/stats"
	"github.com/presenced/presenced/webhook"
)

// The webhooks (package webhook): the shown transitions, from what the
// publisher publishes, to the configured endpoints, from the one node of
// the cluster that holds the store's webhook lease. While an endpoint is
// configured the node holds the firehose, so that it sees every user.

// webhookStopBudget bounds how long a stop waits for the endpoints to send
// what waits.
const webhookStopBudget = 5 * time.Second

// buildWebhooks builds the webhook hub of the configuration (nil with no
// endpoint), reading each secret_file, and adds its figures.
func (p *Plugin) buildWebhooks() error {
	w := p.cfg.Webhooks
	if len(w.Endpoints) == 0 {
		return nil
	}
	eps := make([]webhook.EndpointOptions, len(w.Endpoints))
	for i, e := range w.Endpoints {
		secret := e.Secret
		if e.SecretFile != "" {
			b, err := os.ReadFile(e.SecretFile)
			if err != nil {
				return fmt.Errorf("presenced: webhooks.endpoints[%d].secret_file: %w", i, err)
			}
			secret = strings.TrimSpace(string(b))
			if secret == "" {
				return fmt.Errorf("presenced: webhooks.endpoints[%d].secret_file %s is empty", i, e.SecretFile)
			}
		}
		eps[i] = webhook.EndpointOptions{
			Name: e.Name, URL: e.URL, Secret: []byte(secret), Events: e.Events,
			MaxBatch: e.MaxBatch, MaxWait: e.MaxWait, Timeout: e.Timeout, Queue: e.Queue,
			Backoff:          webhook.Backoff{Base: e.RetryBackoff, Max: e.RetryMaxBackoff},
			BreakerThreshold: e.BreakerThreshold, BreakerCooldown: e.BreakerCooldown,
		}
	}
	p.webhooks = webhook.New(webhook.Options{
		Endpoints: eps, Lease: p.store, LeaseTTL: p.store.LeaseTTL(), Replay: w.Replay,
		Log: p.logFor("webhook"),
	})
	for _, e := range w.Endpoints {
		for _, t := range e.Events {
			if strings.HasPrefix(t, "session.") && p.webhookSeq == nil {
				// Session events are the opens and ends observers were
				// shown: a sequencer of its own over what is published.
				p.webhookSeq = presence.NewSequencer(p.now().Add(-sequencerMargin))
			}
		}
	}
	p.table.Add(p.webhookStats()...)
	return nil
}

// startWebhooks starts the hub and holds the firehose for it.
func (p *Plugin) startWebhooks() {
	if p.webhooks == nil {
		return
	}
	p.interest.HoldFirehose()
	p.webhooks.Start()
}

// stopWebhooks has the endpoints send what waits (at most
// webhookStopBudget, within ctx), gives the lease up and releases the
// firehose: after the pump has stopped, so nothing is sent after.
func (p *Plugin) stopWebhooks(ctx context.Context) {
	if p.webhooks == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, webhookStopBudget)
	defer cancel()
	if err := p.webhooks.Stop(ctx); err != nil {
		p.log.Warn("webhook events left unsent at the stop", "err", err)
	}
	p.interest.ReleaseFirehose()
}

// webhookShown hands what the publisher published to the hub (on the
// pump's goroutine; it never waits).
func (p *Plugin) webhookShown(a presence.Aggregate, before presence.Shown) {
	if p.webhooks != nil {
		p.webhooks.Shown(a, before)
		if p.webhookSeq != nil {
			for _, ev := range p.webhookSeq.Apply(a) {
				p.webhooks.Session(ev)
			}
		}
	}
}

// webhookForget drops what the session events' sequencer keeps of users
// offline since before.
func (p *Plugin) webhookForget(before time.Time) {
	if p.webhookSeq != nil {
		p.webhookSeq.Forget(before)
	}
}

// webhookStats are the figures of the webhooks, per endpoint by name.
func (p *Plugin) webhookStats() []stats.Stat {
	h := p.webhooks
	byName := make(map[string]*webhook.Endpoint, len(h.Endpoints()))
	var names []string
	for _, e := range h.Endpoints() {
		byName[e.Name()] = e
		names = append(names, e.Name())
	}
	per := func(kind stats.Kind, name, help string, read func(e *webhook.Endpoint) int64) stats.Stat {
		return byLabel(kind, name, help, "endpoint", names, func(n string) int64 { return read(byName[n]) }, nil)
	}
	held := func() int64 {
		if h.Held() {
			return 1
		}
		return 0
	}
	return []stats.Stat{
		per(stats.Counter, "webhook_sent_total", "Webhook events delivered (a 2xx), by endpoint.", func(e *webhook.Endpoint) int64 { return e.Stats.Sent.Load() }),
		per(stats.Counter, "webhook_batches_total", "Webhook requests delivered, by endpoint.", func(e *webhook.Endpoint) int64 { return e.Stats.Batches.Load() }),
		per(stats.Counter, "webhook_retries_total", "Webhook attempts made again after a failed one (5xx, 408, 429, timeout, connection), by endpoint.", func(e *webhook.Endpoint) int64 { return e.Stats.Retries.Load() }),
		per(stats.Counter, "webhook_failures_total", "Webhook attempts that failed (5xx, 408, 429, timeout, connection), by endpoint.", func(e *webhook.Endpoint) int64 { return e.Stats.Failures.Load() }),
		per(stats.Counter, "webhook_rejected_total", "Webhook events in requests answered with another 4xx (not retried), by endpoint.", func(e *webhook.Endpoint) int64 { return e.Stats.Rejected.Load() }),
		per(stats.Counter, "webhook_dropped_total", "Webhook events dropped: the endpoint's queue was full (its oldest), or left unsent at a stop, by endpoint.", func(e *webhook.Endpoint) int64 { return e.Stats.Dropped.Load() }),
		per(stats.Gauge, "webhook_queue_depth", "Webhook events waiting, by endpoint (the batch in flight not included).", func(e *webhook.Endpoint) int64 { return int64(e.Depth()) }),
		per(stats.Gauge, "webhook_breaker_state", "The endpoint's circuit breaker: 0 closed, 1 open, 2 half-open.", func(e *webhook.Endpoint) int64 { return int64(e.BreakerState()) }),
		gauge("webhook_lease_held", "1 while this node holds the webhook lease: it sends the shown transitions of the cluster.", held),
		counter("webhook_lease_takeovers_total", "Times this node took the webhook lease (and sent its replay buffer).", h.Stats.Takeovers.Load),
		counter("webhook_replayed_total", "Webhook events sent from the replay buffer on taking the lease.", h.Stats.Replayed.Load),
		gauge("webhook_replay_buffered", "Webhook events kept for a takeover while another node sends.", func() int64 { return int64(h.Buffered()) }),
		counter("webhook_replay_expired_total", "Webhook events that left the replay buffer unsent (older than two lease TTLs, or the buffer was full).", h.Stats.Expired.Load),
		counter("webhook_lease_errors_total", "Webhook lease calls that failed (the node stops sending until one succeeds).", h.Stats.LeaseErrors.Load),
	}
}
