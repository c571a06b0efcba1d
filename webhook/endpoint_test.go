package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/presenced/presenced/internal/testkit"
)

var secret = []byte("whsec_3f1c")

func ev(user string, v uint64) Event {
	return Event{ID: UserID(user, v), Type: UserStatus, User: user, Version: v, At: time.Now()}
}

func newTestEndpoint(t *testing.T, r *receiver, o EndpointOptions) *Endpoint {
	t.Helper()
	o.URL, o.Secret = r.url(), secret
	e := NewEndpoint(o)
	e.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = e.Stop(ctx)
	})
	return e
}

// A batch goes when max_batch events wait; the rest wait for max_wait, or
// go at once on a stop.
func TestEndpointBatches(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r := newReceiver(t, secret)
	e := newTestEndpoint(t, r, EndpointOptions{MaxBatch: 10, MaxWait: time.Hour, Timeout: 5 * time.Second})
	for i := range 25 {
		e.Enqueue(ev("alice", uint64(i+1)))
	}
	testkit.Wait(t, 10*time.Second, "two full batches", func() error {
		return testkit.Why(len(r.unique()) == 20, fmt.Sprintf("%d accepted", len(r.unique())))
	})
	if e.Depth() != 5 {
		t.Fatalf("depth %d, want 5 waiting for max_wait", e.Depth())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	batches := fmt.Sprint(r.batches)
	r.mu.Unlock()
	if batches != "[10 10 5]" {
		t.Fatalf("batches %s, want [10 10 5]", batches)
	}
	if err := inOrder(r.unique()); err != nil {
		t.Fatal(err)
	}
	r.check()
	if e.Stats.Sent.Load() != 25 || e.Stats.Batches.Load() != 3 || e.Stats.Dropped.Load() != 0 {
		t.Fatalf("stats: sent %d batches %d dropped %d", e.Stats.Sent.Load(), e.Stats.Batches.Load(), e.Stats.Dropped.Load())
	}
	r.down()
}

// max_wait sends a lone event.
func TestEndpointMaxWait(t *testing.T) {
	r := newReceiver(t, secret)
	e := newTestEndpoint(t, r, EndpointOptions{MaxBatch: 100, MaxWait: 50 * time.Millisecond})
	start := time.Now()
	e.Enqueue(ev("alice", 1))
	testkit.Wait(t, 10*time.Second, "the lone event sent", func() error {
		return testkit.Why(len(r.unique()) == 1, "not yet")
	})
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("sent after %v, before max_wait", d)
	}
}

// Another 4xx rejects the batch: counted, never retried.
func TestEndpointRejected(t *testing.T) {
	r := newReceiver(t, secret)
	r.setMode("reject")
	e := newTestEndpoint(t, r, EndpointOptions{MaxBatch: 2, MaxWait: time.Millisecond, Backoff: Backoff{Base: time.Millisecond, Max: time.Millisecond}})
	e.Enqueue(ev("alice", 1))
	e.Enqueue(ev("alice", 2))
	testkit.Wait(t, 10*time.Second, "rejected", func() error {
		return testkit.Why(e.Stats.Rejected.Load() == 2, "not yet")
	})
	e.Enqueue(ev("alice", 3)) // the next batch goes: the endpoint is not failing
	testkit.Wait(t, 10*time.Second, "the next batch rejected too", func() error {
		return testkit.Why(e.Stats.Rejected.Load() == 3, "not yet")
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.requests != 2 || e.Stats.Retries.Load() != 0 {
		t.Fatalf("%d requests, %d retries: a rejected batch was retried", r.requests, e.Stats.Retries.Load())
	}
}

// A redirect is not followed: the batch is rejected.
func TestEndpointRedirectRejected(t *testing.T) {
	r := newReceiver(t, secret)
	r.setMode("redirect")
	e := newTestEndpoint(t, r, EndpointOptions{MaxBatch: 1, MaxWait: time.Millisecond})
	e.Enqueue(ev("alice", 1))
	testkit.Wait(t, 10*time.Second, "rejected", func() error {
		return testkit.Why(e.Stats.Rejected.Load() == 1, "not yet")
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.requests != 1 {
		t.Fatalf("%d requests: the redirect was followed", r.requests)
	}
}

// countingHandler counts the log records at each level, by message.
type countingHandler struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs[r.Message]++
	h.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		if strings.Contains(a.Value.String(), string(secret)) {
			panic("the secret was logged")
		}
		return true
	})
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for m, c := range h.msgs {
		if strings.HasPrefix(m, prefix) {
			n += c
		}
	}
	return n
}

// A full queue drops its oldest events, counted, and says so once per
// overflow episode.
func TestEndpointOverflow(t *testing.T) {
	r := newReceiver(t, secret)
	block := make(chan struct{})
	r.mu.Lock()
	r.block = block
	r.mu.Unlock()
	logs := &countingHandler{msgs: map[string]int{}}
	e := newTestEndpoint(t, r, EndpointOptions{MaxBatch: 1, MaxWait: time.Millisecond, Queue: 5, Timeout: time.Minute, Log: slog.New(logs)})
	e.Enqueue(ev("alice", 1))
	<-r.got // in flight, held by the receiver
	for v := uint64(2); v <= 11; v++ {
		e.Enqueue(ev("alice", v))
	}
	if d, n := e.Stats.Dropped.Load(), e.Depth(); d != 5 || n != 5 {
		t.Fatalf("dropped %d, depth %d; want 5 and 5", d, n)
	}
	if n := logs.count("webhook queue full"); n != 1 {
		t.Fatalf("overflow logged %d times, want once", n)
	}
	r.mu.Lock()
	r.block = nil
	r.mu.Unlock()
	close(block)
	testkit.Wait(t, 10*time.Second, "the queue drained", func() error {
		return testkit.Why(len(r.unique()) == 6, fmt.Sprintf("%d accepted", len(r.unique())))
	})
	var got []uint64
	for _, x := range r.unique() {
		got = append(got, x.Version)
	}
	if fmt.Sprint(got) != "[1 7 8 9 10 11]" {
		t.Fatalf("accepted versions %v, want the first (in flight) and the newest five", got)
	}
	testkit.Wait(t, 5*time.Second, "the episode's end logged", func() error {
		return testkit.Why(logs.count("webhook queue drained") == 1, "not yet")
	})
	// A second episode is logged again.
	r.mu.Lock()
	block2 := make(chan struct{})
	r.block = block2
	r.mu.Unlock()
	e.Enqueue(ev("alice", 12))
	<-r.got
	for v := uint64(13); v <= 19; v++ {
		e.Enqueue(ev("alice", v))
	}
	if n := logs.count("webhook queue full"); n != 2 {
		t.Fatalf("overflow logged %d times over two episodes, want 2", n)
	}
	r.mu.Lock()
	r.block = nil
	r.mu.Unlock()
	close(block2)
	r.check()
}

// The receiver fails (500s), stalls (answers nothing until the request's
// timeout) and restarts (closed, and listening again on the same port),
// in turns, while events come: every event arrives (the queue has room),
// no delivery attempt arrives twice, and each user's events arrive in
// order.
func TestEndpointFailStallRestart(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r := newReceiver(t, secret)
	logs := &countingHandler{msgs: map[string]int{}}
	const timeout = 150 * time.Millisecond
	e := newTestEndpoint(t, r, EndpointOptions{MaxBatch: 15, MaxWait: 10 * time.Millisecond, Timeout: timeout,
		Backoff: Backoff{Base: 10 * time.Millisecond, Max: 80 * time.Millisecond}, BreakerThreshold: 4, BreakerCooldown: 100 * time.Millisecond,
		Queue: 1 << 20, Log: slog.New(logs)})

	const users = 20
	var versions atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // the events, until the rounds are over: every user's next version, 50 times a second
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for v := uint64(1); ; v++ {
			for u := range users {
				e.Enqueue(ev(fmt.Sprintf("user%02d", u), v))
			}
			versions.Store(v)
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	}()
	wait := func(what string, cond func() bool) {
		testkit.Wait(t, 20*time.Second, what, func() error { return testkit.Why(cond(), "not yet") })
	}
	requests := func() int { r.mu.Lock(); defer r.mu.Unlock(); return r.requests }
	for round := range 3 {
		r.setMode("fail")
		n := requests()
		wait("500s answered", func() bool { return requests() >= n+5 })
		wait("the breaker opened", func() bool { return e.Stats.Failures.Load() >= 4*int64(round+1) })
		r.setMode("stall")
		n = requests()
		wait("stalled requests", func() bool { return requests() >= n+2 })
		r.setMode("ok")
		r.down()
		f := e.Stats.Failures.Load()
		wait("connections refused", func() bool { return e.Stats.Failures.Load() >= f+2 })
		r.up()
		n = requests()
		wait("answered again", func() bool { return requests() >= n+1 })
	}
	close(stop)
	<-done
	total := users * int(versions.Load())
	testkit.Wait(t, 30*time.Second, "every event accepted", func() error {
		n := len(r.unique())
		return testkit.Why(n == total, fmt.Sprintf("%d of %d accepted", n, total))
	})
	got := r.unique()
	if err := inOrder(got); err != nil {
		t.Fatal(err)
	}
	r.check()
	if e.Stats.Dropped.Load() != 0 || e.Stats.Rejected.Load() != 0 {
		t.Fatalf("dropped %d, rejected %d", e.Stats.Dropped.Load(), e.Stats.Rejected.Load())
	}
	if e.Stats.Retries.Load() == 0 || logs.count("webhook endpoint failing") == 0 {
		t.Fatalf("no retry (%d) or no breaker opening logged", e.Stats.Retries.Load())
	}
	t.Logf("%d events in %d requests; %d failed attempts, %d retries", len(got), requests(), e.Stats.Failures.Load(), e.Stats.Retries.Load())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	r.down()
}

// Stop flushes what it can until its deadline, then abandons the rest
// (counted) and returns once the sender has ended.
func TestEndpointStopDeadline(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r := newReceiver(t, secret)
	r.setMode("stall")
	e := NewEndpoint(EndpointOptions{URL: r.url(), Secret: secret, MaxBatch: 2, MaxWait: time.Hour, Timeout: time.Minute})
	e.Start()
	for v := uint64(1); v <= 5; v++ {
		e.Enqueue(ev("alice", v))
	}
	<-r.got
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := e.Stop(ctx); err == nil {
		t.Fatal("Stop met its deadline with a stalled endpoint")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Stop took %v past its deadline", d)
	}
	if n := e.Stats.Dropped.Load(); n != 5 {
		t.Fatalf("dropped %d, want the 5 unsent", n)
	}
	e.Enqueue(ev("alice", 6)) // after the stop: dropped, never sent
	if e.Stats.Dropped.Load() != 6 {
		t.Fatal("an event after the stop was not counted")
	}
	r.down()
}
