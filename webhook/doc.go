// Package webhook sends presence events to HTTP endpoints: signed, batched
// JSON POSTs of the transitions observers were shown (a user online,
// offline, or changing status while online; optionally a session opened or
// ended), with retries, a bounded queue and a circuit breaker per
// endpoint, and one sender per cluster.
//
// A Hub owns the endpoints. Hub.Send takes a shown transition: it is sent
// only by the node that holds the cluster's webhook lease (a Leaser, the
// store's), renewed by the Hub's own goroutine; the other nodes keep a
// bounded replay buffer of the recent events, and a node that becomes the
// holder sends its buffer first, so an event is delivered at least once
// across a change of sender (a receiver drops what it has seen by the
// event's ID, its idempotency key). Hub.SendHere takes an event that this
// node alone originates (a presence-gated notify): it is sent from here,
// whoever holds the lease.
//
// An Endpoint is one URL: a bounded queue (the oldest queued event makes
// room for a new one, counted and logged once per overflow episode), one
// goroutine that cuts a batch when max_batch events wait or the oldest has
// waited max_wait, and one batch in flight at a time, so the events of a
// user reach the endpoint in the order they were sent. A batch is retried,
// with the same Presenced-Delivery id, on a 5xx, 408 or 429 and on a
// timeout or a connection error, after an exponential backoff with jitter;
// any other 4xx, or a redirect, rejects it (counted, not retried). After Breaker.Threshold
// failed attempts in a row the endpoint's breaker opens for its cooldown,
// then lets one attempt through (half-open).
//
// Signing follows Stripe's scheme: Presenced-Signature:
// t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>.
//
// The pure parts, which take the time as an argument (batching: Due; the
// backoff: Backoff.Delay; the breaker: Breaker), are table-tested; the
// goroutines take an injected clock for the rest. docs/webhooks.md is the
// user's guide.
package webhook
