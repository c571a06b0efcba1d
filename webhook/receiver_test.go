package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// receiver is a real HTTP server on a fixed port that can answer, fail
// (500), stall (answer nothing until the client gives up) and restart
// (close, and listen again on the same port later). It verifies each
// request's signature and records what it accepted.
type receiver struct {
	t      *testing.T
	secret []byte
	addr   string

	mu       sync.Mutex
	mode     string // "ok", "fail", "stall", "reject", "redirect"
	srv      *http.Server
	requests int                  // requests that reached the handler
	attempts map[string]int       // "<delivery>#<attempt>" -> times seen
	accepted []Event              // every event of every accepted request, in order
	batches  []int                // sizes of the accepted requests
	firstAt  map[string]time.Time // event id -> when first accepted
	badSigs  int
	dupes    int // a delivery attempt seen twice
	block    chan struct{}
	got      chan struct{} // a request arrived (buffered 1)
}

func newReceiver(t *testing.T, secret []byte) *receiver {
	r := &receiver{t: t, secret: secret, mode: "ok", attempts: map[string]int{}, firstAt: map[string]time.Time{},
		got: make(chan struct{}, 1)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = l.Addr().String()
	r.serve(l)
	t.Cleanup(r.down)
	return r
}

func (r *receiver) url() string { return "http://" + r.addr + "/hook" }

func (r *receiver) serve(l net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
}

// down closes the server and its connections (a crash, as the client
// sees it).
func (r *receiver) down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// up listens again on the same port.
func (r *receiver) up() {
	var l net.Listener
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		if l, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("listen again on %s: %v", r.addr, err)
		}
		time.Sleep(10 * time.Millisecond) // the port frees as the old sockets close
	}
	r.serve(l)
}

func (r *receiver) setMode(m string) {
	r.mu.Lock()
	r.mode = m
	r.mu.Unlock()
}

func (r *receiver) handle(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	select {
	case r.got <- struct{}{}:
	default:
	}
	r.mu.Lock()
	r.requests++
	key := req.Header.Get(HeaderDelivery) + "#" + req.Header.Get(HeaderAttempt)
	r.attempts[key]++
	if r.attempts[key] > 1 {
		r.dupes++
	}
	if verify(r.secret, req.Header.Get(HeaderSignature), b, time.Now(), 5*time.Minute) != nil {
		r.badSigs++
	}
	mode, block := r.mode, r.block
	r.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-req.Context().Done():
			return
		}
	}
	switch mode {
	case "fail":
		w.WriteHeader(http.StatusInternalServerError)
		return
	case "reject":
		w.WriteHeader(http.StatusBadRequest)
		return
	case "redirect":
		http.Redirect(w, req, "/elsewhere", http.StatusTemporaryRedirect)
		return
	case "stall":
		<-req.Context().Done() // the client's timeout ends it
		return
	}
	var body struct{ Events []Event }
	if err := json.Unmarshal(b, &body); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	now := time.Now()
	r.accepted = append(r.accepted, body.Events...)
	r.batches = append(r.batches, len(body.Events))
	for _, ev := range body.Events {
		if _, ok := r.firstAt[ev.ID]; !ok {
			r.firstAt[ev.ID] = now
		}
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// unique is the accepted events, each ID once, in the order first accepted.
func (r *receiver) unique() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	var out []Event
	for _, ev := range r.accepted {
		if !seen[ev.ID] {
			seen[ev.ID] = true
			out = append(out, ev)
		}
	}
	return out
}

// check: every signature verified, no delivery attempt seen twice.
func (r *receiver) check() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.badSigs > 0 {
		r.t.Errorf("%d requests with a bad signature", r.badSigs)
	}
	if r.dupes > 0 {
		r.t.Errorf("%d delivery attempts received twice", r.dupes)
	}
}

// inOrder checks that each user's versions were first accepted in
// increasing order.
func inOrder(evs []Event) error {
	last := map[string]uint64{}
	var errs []error
	for _, ev := range evs {
		if ev.Version <= last[ev.User] {
			errs = append(errs, fmt.Errorf("%s: version %d after %d", ev.User, ev.Version, last[ev.User]))
		}
		last[ev.User] = ev.Version
	}
	return errors.Join(errs...)
}
