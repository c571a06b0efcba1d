package webhook

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// benchReceiver is a local HTTP receiver that decodes every body and
// records each event's delay: from Event.At (set when the event was handed
// to Send) to its arrival.
type benchReceiver struct {
	mu     sync.Mutex
	delays []time.Duration
	got    chan struct{}
	want   int
}

func (r *benchReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	now := time.Now()
	var body struct{ Events []Event }
	if err := json.Unmarshal(b, &body); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, e := range body.Events {
		r.delays = append(r.delays, now.Sub(e.At))
	}
	if len(r.delays) >= r.want {
		select {
		case r.got <- struct{}{}:
		default:
		}
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// benchRun hands n events to a hub with one endpoint (o) on a local
// receiver, rate events a second (0: all at once), and returns events a
// second (from the first Send to the last arrival) and the p50 and p99
// delays.
func benchRun(b *testing.B, n, rate int, o EndpointOptions) (float64, time.Duration, time.Duration) {
	r := &benchReceiver{got: make(chan struct{}, 1), want: n}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	o.URL, o.Secret = "http://"+l.Addr().String()+"/hook", []byte("bench-secret")
	o.Queue = max(o.Queue, n)
	h := New(Options{Endpoints: []EndpointOptions{o}})
	h.Start()
	start := time.Now()
	var tick time.Duration
	if rate > 0 {
		tick = time.Second / time.Duration(rate)
	}
	for i := range n {
		if tick > 0 {
			if d := time.Until(start.Add(time.Duration(i) * tick)); d > 0 {
				time.Sleep(d) // a paced stream: the benchmark's own pacing
			}
		}
		h.Send(Event{ID: UserID("user", uint64(i+1)), Type: UserStatus, User: "user", Version: uint64(i + 1), At: time.Now(),
			Data: json.RawMessage(`{"status":"online","text":"","since":"2026-01-02T03:04:05Z","sessions":1}`)})
	}
	select {
	case <-r.got:
	case <-time.After(2 * time.Minute):
		b.Fatal("not every event arrived")
	}
	elapsed := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.Stop(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	slices.Sort(r.delays)
	q := func(p float64) time.Duration { return r.delays[int(p*float64(len(r.delays)-1))] }
	return float64(n) / elapsed.Seconds(), q(0.5), q(0.99)
}

// BenchmarkWebhook measures what one endpoint sustains to a local
// receiver (docs/webhooks.md, "Figures"): run with
//
//	go test -run '^$' -bench Webhook -benchtime 1x -count 3 ./webhook/
func BenchmarkWebhook(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
		rate int
		o    EndpointOptions
	}{
		{"burst/defaults", 200_000, 0, EndpointOptions{}},
		{"burst/batch1000", 200_000, 0, EndpointOptions{MaxBatch: 1000}},
		{"stream1000/defaults", 5_000, 1000, EndpointOptions{}},
		{"stream1000/wait10ms", 5_000, 1000, EndpointOptions{MaxWait: 10 * time.Millisecond}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				rate, p50, p99 := benchRun(b, c.n, c.rate, c.o)
				b.ReportMetric(rate, "events/s")
				b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
			}
		})
	}
}
