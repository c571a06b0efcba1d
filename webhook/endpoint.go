package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// EndpointOptions configure one endpoint. Zero values take the defaults
// named.
type EndpointOptions struct {
	// Name labels the endpoint in the figures and the logs (default: the
	// URL's host). Neither the URL's path and query nor the secret is ever
	// logged.
	Name   string
	URL    string
	Secret []byte
	// Events are the types the endpoint receives (default UserTypes).
	Events   []string
	MaxBatch int           // events per request at most (default 100)
	MaxWait  time.Duration // how long the oldest waiting event waits for more at most (default 1s)
	Timeout  time.Duration // one request's timeout (default 10s)
	Queue    int           // events waiting at most (default 10,000); the oldest make room
	Backoff  Backoff       // default 500 ms doubling to 1 min
	// BreakerThreshold failed attempts in a row open the breaker for
	// BreakerCooldown (default 5 and 30 s).
	BreakerThreshold int
	BreakerCooldown  time.Duration

	Client *http.Client     // default: a client of its own (the shared transport) that follows no redirect
	Now    func() time.Time // default time.Now
	Rand   func() float64   // the jitter, in [0, 1) (default math/rand)
	Log    *slog.Logger
}

// Defaults.
const (
	DefaultMaxBatch         = 100
	DefaultMaxWait          = time.Second
	DefaultTimeout          = 10 * time.Second
	DefaultQueue            = 10_000
	DefaultBackoffBase      = 500 * time.Millisecond
	DefaultBackoffMax       = time.Minute
	DefaultBreakerThreshold = 5
	DefaultBreakerCooldown  = 30 * time.Second
)

func (o *EndpointOptions) defaults() {
	if o.Name == "" {
		if u, err := url.Parse(o.URL); err == nil {
			o.Name = u.Host
		}
	}
	if len(o.Events) == 0 {
		o.Events = UserTypes
	}
	setDefault(&o.MaxBatch, DefaultMaxBatch)
	setDefault(&o.MaxWait, DefaultMaxWait)
	setDefault(&o.Timeout, DefaultTimeout)
	setDefault(&o.Queue, DefaultQueue)
	setDefault(&o.Backoff.Base, DefaultBackoffBase)
	setDefault(&o.Backoff.Max, max(DefaultBackoffMax, o.Backoff.Base))
	setDefault(&o.BreakerThreshold, DefaultBreakerThreshold)
	setDefault(&o.BreakerCooldown, DefaultBreakerCooldown)
	if o.Client == nil {
		o.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = mrand.Float64
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

func setDefault[T int | time.Duration](p *T, v T) {
	if *p <= 0 {
		*p = v
	}
}

// EndpointStats are an endpoint's counters.
type EndpointStats struct {
	Sent     atomic.Int64 // events delivered (a 2xx)
	Batches  atomic.Int64 // requests delivered
	Retries  atomic.Int64 // attempts after a failed one
	Failures atomic.Int64 // attempts failed (5xx, 408, 429, timeout, connection)
	Rejected atomic.Int64 // events of batches answered with another 4xx (not retried)
	Dropped  atomic.Int64 // events dropped: the queue was full (its oldest), or left unsent at a stop
}

// Endpoint is one URL's queue, batcher and sender (one goroutine).
type Endpoint struct {
	o     EndpointOptions
	wants map[string]bool
	Stats EndpointStats

	mu          sync.Mutex
	q           []queued
	flushing    bool // Stop: send what waits at once, then end
	closed      bool // no more events
	overflowing bool // in an overflow episode (logged once)
	episode     int64

	breaker Breaker      // the goroutine's
	state   atomic.Int32 // the breaker's state, for the figures

	signal chan struct{}
	kill   chan struct{}
	killed context.Context
	cancel context.CancelFunc
	done   chan struct{}
	start  sync.Once
	stop   sync.Once
}

type queued struct {
	ev Event
	at time.Time
}

// NewEndpoint returns an endpoint, not started.
func NewEndpoint(o EndpointOptions) *Endpoint {
	o.defaults()
	e := &Endpoint{o: o, wants: make(map[string]bool, len(o.Events)),
		breaker: Breaker{Threshold: o.BreakerThreshold, Cooldown: o.BreakerCooldown},
		signal:  make(chan struct{}, 1), kill: make(chan struct{}), done: make(chan struct{})}
	for _, t := range o.Events {
		e.wants[t] = true
	}
	e.killed, e.cancel = context.WithCancel(context.Background())
	return e
}

// Name is the endpoint's label.
func (e *Endpoint) Name() string { return e.o.Name }

// Wants reports whether the endpoint receives events of type typ.
func (e *Endpoint) Wants(typ string) bool { return e.wants[typ] }

// Depth is how many events wait (the batch in flight not included).
func (e *Endpoint) Depth() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.q)
}

// BreakerState is the breaker's state as last seen by the sender.
func (e *Endpoint) BreakerState() BreakerState { return BreakerState(e.state.Load()) }

// Start starts the sender.
func (e *Endpoint) Start() { e.start.Do(func() { go e.run() }) }

// Enqueue queues ev; it never waits. A full queue drops its oldest event.
func (e *Endpoint) Enqueue(ev Event) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		e.Stats.Dropped.Add(1)
		return
	}
	if len(e.q) >= e.o.Queue {
		e.q[0] = queued{}
		e.q = e.q[1:]
		e.Stats.Dropped.Add(1)
		e.episode++
		if !e.overflowing {
			e.overflowing = true
			e.o.Log.Warn("webhook queue full: dropping its oldest events until it drains", "endpoint", e.o.Name, "queue", e.o.Queue)
		}
	}
	e.q = append(e.q, queued{ev: ev, at: e.o.Now()})
	e.mu.Unlock()
	e.wake()
}

func (e *Endpoint) wake() {
	select {
	case e.signal <- struct{}{}:
	default:
	}
}

// Stop sends what waits and ends the sender, waiting at most until ctx
// ends; then the batch in flight is abandoned and what still waits is
// dropped (counted). Stop returns once the sender has ended.
func (e *Endpoint) Stop(ctx context.Context) error {
	var err error
	e.stop.Do(func() { err = e.stopNow(ctx) })
	return err
}

func (e *Endpoint) stopNow(ctx context.Context) error {
	e.mu.Lock()
	e.flushing, e.closed = true, true
	e.mu.Unlock()
	e.Start() // a sender that never started still drains (or drops) its queue
	e.wake()
	var err error
	select {
	case <-e.done:
	case <-ctx.Done():
		err = ctx.Err()
		close(e.kill)
		e.cancel()
		<-e.done
	}
	e.cancel()
	e.mu.Lock()
	if n := len(e.q); n > 0 {
		e.Stats.Dropped.Add(int64(n))
		e.q = nil
	}
	e.mu.Unlock()
	return err
}

func (e *Endpoint) run() {
	defer close(e.done)
	for {
		batch, ok := e.next()
		if !ok {
			return
		}
		e.deliver(batch)
	}
}

// next waits for a batch to be due (Due) and takes it off the queue;
// false once stopped and drained, or killed.
func (e *Endpoint) next() ([]Event, bool) {
	for {
		e.mu.Lock()
		var oldest time.Time
		if len(e.q) > 0 {
			oldest = e.q[0].at
		}
		due, wait := Due(len(e.q), oldest, e.o.Now(), e.o.MaxBatch, e.o.MaxWait, e.flushing)
		if due {
			k := min(len(e.q), e.o.MaxBatch)
			batch := make([]Event, k)
			for i := range k {
				batch[i] = e.q[i].ev
			}
			n := copy(e.q, e.q[k:])
			clear(e.q[n:])
			e.q = e.q[:n]
			if n == 0 && e.overflowing {
				e.overflowing = false
				e.o.Log.Info("webhook queue drained after an overflow", "endpoint", e.o.Name, "dropped", e.episode)
				e.episode = 0
			}
			e.mu.Unlock()
			return batch, true
		}
		if e.flushing && len(e.q) == 0 {
			e.mu.Unlock()
			return nil, false
		}
		e.mu.Unlock()
		if !e.sleep(wait) {
			return nil, false
		}
	}
}

// sleep waits d (0: until woken), or until woken, or killed (false).
func (e *Endpoint) sleep(d time.Duration) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-e.signal:
	case <-timer:
	case <-e.kill:
		return false
	}
	return true
}

// pause waits d whatever wakes the queue; false when killed.
func (e *Endpoint) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-e.kill:
		return false
	}
}

// Outcome is what an attempt came to.
type Outcome int

// The outcomes.
const (
	Delivered Outcome = iota // 2xx
	Retry                    // 5xx, 408, 429, a timeout or a connection error
	Rejected                 // any other 4xx, or a redirect (not followed)
)

// Classify says what an attempt came to, from its status or its error.
func Classify(status int, err error) Outcome {
	switch {
	case err != nil:
		return Retry
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		return Retry
	case status >= 300 || status < 200:
		return Rejected
	}
	return Delivered
}

type body struct {
	Events []Event `json:"events"`
}

// deliver sends one batch until it is delivered or rejected, or the
// endpoint is killed.
func (e *Endpoint) deliver(batch []Event) {
	id := newDeliveryID()
	payload, err := json.Marshal(body{Events: batch})
	if err != nil { // an event's Data is not JSON: the sender's bug
		e.Stats.Rejected.Add(int64(len(batch)))
		e.o.Log.Error("webhook batch not encodable", "endpoint", e.o.Name, "err", err)
		return
	}
	n := int64(len(batch))
	for attempt := 1; ; attempt++ {
		for {
			ok, wait := e.breaker.Allow(e.o.Now())
			e.state.Store(int32(e.breaker.State(e.o.Now())))
			if ok {
				break
			}
			if !e.pause(wait) {
				e.Stats.Dropped.Add(n)
				return
			}
		}
		status, err := e.post(id, attempt, payload)
		switch Classify(status, err) {
		case Delivered:
			e.breaker.Success()
			e.state.Store(int32(Closed))
			e.Stats.Sent.Add(n)
			e.Stats.Batches.Add(1)
			return
		case Rejected:
			e.breaker.Success() // it answered
			e.state.Store(int32(Closed))
			e.Stats.Rejected.Add(n)
			e.o.Log.Warn("webhook batch rejected; not retried", "endpoint", e.o.Name, "status", status, "events", n, "delivery", id)
			return
		}
		e.Stats.Failures.Add(1)
		if e.breaker.Failure(e.o.Now()) {
			e.state.Store(int32(Open))
			e.o.Log.Warn("webhook endpoint failing: breaker open", "endpoint", e.o.Name, "cooldown", e.o.BreakerCooldown,
				"status", status, "err", errText(err))
		}
		if !e.pause(e.o.Backoff.Delay(attempt, e.o.Rand())) {
			e.Stats.Dropped.Add(n)
			return
		}
		e.Stats.Retries.Add(1)
	}
}

// post makes one attempt; it returns the status, or the error of a
// request that got none (a timeout, a refused connection).
func (e *Endpoint) post(id string, attempt int, payload []byte) (int, error) {
	ctx, cancel := context.WithTimeout(e.killed, e.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.o.URL, bytes.NewReader(payload))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "presenced-webhook")
	req.Header.Set(HeaderSignature, Signature(e.o.Secret, e.o.Now(), payload))
	req.Header.Set(HeaderDelivery, id)
	req.Header.Set(HeaderAttempt, strconv.Itoa(attempt))
	resp, err := e.o.Client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// errText is err without the URL (its query may hold a token).
func errText(err error) string {
	if err == nil {
		return ""
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

func newDeliveryID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
