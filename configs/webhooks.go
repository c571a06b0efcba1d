package configs

import (
	"fmt"
	"net/url"
	"slices"
	"time"
)

// WebhooksConfig is the webhooks section: HTTP endpoints that receive the
// presence transitions observers were shown (docs/webhooks.md). With no
// endpoint (the default) nothing is sent and nothing is held.
type WebhooksConfig struct {
	// Endpoints are the URLs to POST to, each with its own secret, events,
	// batching, queue, retries and breaker.
	Endpoints []WebhookEndpoint `yaml:"endpoints"`
	// Replay is how many recent events a node that is not the cluster's
	// sender keeps (those of the last two lease TTLs at most), to send
	// first if it becomes the sender. Default 10,000.
	Replay int `yaml:"replay"`
}

// WebhookEndpoint is one endpoint of webhooks.endpoints.
type WebhookEndpoint struct {
	// Name labels the endpoint in the figures and logs; default: the
	// URL's host (names must differ).
	Name string `yaml:"name"`
	URL  string `yaml:"url"` // http:// or https://
	// Secret signs every request (Presenced-Signature); or SecretFile, a
	// file holding it (one of the two, not both).
	Secret     Secret `yaml:"secret"`
	SecretFile string `yaml:"secret_file"`
	// Events are the types sent; default [user.online, user.offline,
	// user.status]; session.opened and session.ended are opt-in.
	Events           []string `yaml:"events"`
	MaxBatch         int      `yaml:"max_batch"`         // events per request; default 100
	MaxWait          Duration `yaml:"max_wait"`          // the oldest waiting event waits at most this for a batch; default 1s
	Timeout          Duration `yaml:"timeout"`           // one request's timeout; default 10s
	Queue            int      `yaml:"queue"`             // events waiting at most; default 10,000
	RetryBackoff     Duration `yaml:"retry_backoff"`     // the first retry's wait, doubling; default 500ms
	RetryMaxBackoff  Duration `yaml:"retry_max_backoff"` // the longest wait between retries; default 1m
	BreakerThreshold int      `yaml:"breaker_threshold"` // failed attempts in a row that open the breaker; default 5
	BreakerCooldown  Duration `yaml:"breaker_cooldown"`  // how long it stays open; default 30s
}

// WebhookEvents are the event types an endpoint may ask for.
var WebhookEvents = []string{"user.online", "user.offline", "user.status", "session.opened", "session.ended", "notify"}

// Webhook defaults.
const (
	defaultWebhookReplay           = 10_000
	defaultWebhookMaxBatch         = 100
	defaultWebhookMaxWait          = Duration(time.Second)
	defaultWebhookTimeout          = Duration(10 * time.Second)
	defaultWebhookQueue            = 10_000
	defaultWebhookRetryBackoff     = Duration(500 * time.Millisecond)
	defaultWebhookRetryMaxBackoff  = Duration(time.Minute)
	defaultWebhookBreakerThreshold = 5
	defaultWebhookBreakerCooldown  = Duration(30 * time.Second)
)

// applyWebhookDefaults is ApplyDefaults' part for the webhooks section.
func (c *Config) applyWebhookDefaults() {
	w := &c.Webhooks
	setInt(&w.Replay, defaultWebhookReplay)
	for i := range w.Endpoints {
		e := &w.Endpoints[i]
		if e.Name == "" {
			if u, err := url.Parse(e.URL); err == nil && u.Host != "" {
				e.Name = u.Host
			} else {
				e.Name = fmt.Sprint(i)
			}
		}
		if e.Events == nil {
			e.Events = []string{"user.online", "user.offline", "user.status"}
		}
		setInt(&e.MaxBatch, defaultWebhookMaxBatch)
		setDuration(&e.MaxWait, defaultWebhookMaxWait)
		setDuration(&e.Timeout, defaultWebhookTimeout)
		setInt(&e.Queue, defaultWebhookQueue)
		setDuration(&e.RetryBackoff, defaultWebhookRetryBackoff)
		setDuration(&e.RetryMaxBackoff, max(defaultWebhookRetryMaxBackoff, e.RetryBackoff))
		setInt(&e.BreakerThreshold, defaultWebhookBreakerThreshold)
		setDuration(&e.BreakerCooldown, defaultWebhookBreakerCooldown)
	}
}

// validateWebhooks checks the webhooks section.
func (c Config) validateWebhooks(v *validator) {
	w := c.Webhooks
	v.check("webhooks.replay", intBetween(w.Replay, 1, 10_000_000))
	var names []string
	for i, e := range w.Endpoints {
		key := func(k string) string { return fmt.Sprintf("webhooks.endpoints[%d].%s", i, k) }
		if u, err := url.Parse(e.URL); e.URL == "" {
			v.add(key("url"), "must be set")
		} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(key("url"), "must be an http:// or https:// URL with a host") // the URL is not repeated: it may hold a token
		}
		switch {
		case e.Secret == "" && e.SecretFile == "":
			v.add(key("secret"), "must be set, or secret_file: every request is signed")
		case e.Secret != "" && e.SecretFile != "":
			v.add(key("secret"), "and secret_file are both set; set one")
		}
		if slices.Contains(names, e.Name) {
			v.add(key("name"), "%q names another endpoint too; names must differ", e.Name)
		}
		names = append(names, e.Name)
		if len(e.Events) == 0 {
			v.add(key("events"), "must name at least one of %v", WebhookEvents)
		}
		for _, t := range e.Events {
			if !slices.Contains(WebhookEvents, t) {
				v.add(key("events"), "%q is not one of %v", t, WebhookEvents)
			}
		}
		v.check(key("max_batch"), intBetween(e.MaxBatch, 1, 10_000))
		v.check(key("max_wait"), durationBetween(e.MaxWait, Duration(time.Millisecond), Duration(10*time.Minute)))
		v.check(key("timeout"), durationBetween(e.Timeout, Duration(100*time.Millisecond), Duration(5*time.Minute)))
		v.check(key("queue"), intBetween(e.Queue, 1, 10_000_000))
		v.check(key("retry_backoff"), durationBetween(e.RetryBackoff, Duration(time.Millisecond), Duration(time.Hour)))
		v.check(key("retry_max_backoff"), durationBetween(e.RetryMaxBackoff, max(e.RetryBackoff, Duration(time.Millisecond)), Duration(24*time.Hour)))
		v.check(key("breaker_threshold"), intBetween(e.BreakerThreshold, 1, 1_000_000))
		v.check(key("breaker_cooldown"), durationBetween(e.BreakerCooldown, Duration(10*time.Millisecond), Duration(24*time.Hour)))
	}
}
