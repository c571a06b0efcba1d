package admin

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/presenced/presenced/presence"
)

// eventsServer serves an events stream over a real HTTP server (the
// stream needs a flushing connection), following users with follow.
func eventsServer(t *testing.T, ev *Events, heartbeat time.Duration, follow func([]string) func()) *httptest.Server {
	t.Helper()
	src, _ := fakeSource(false)
	src.Events, src.Heartbeat, src.Follow = ev, heartbeat, follow
	srv := httptest.NewServer(Handler(src))
	t.Cleanup(srv.Close)
	return srv
}

// sseReader reads a stream's messages (event name, data), comments as
// event ":".
type sseReader struct {
	body io.ReadCloser
	r    *bufio.Reader
}

func openEvents(t *testing.T, url string) *sseReader {
	t.Helper()
	// A stream that hangs fails the test instead of holding it until the
	// suite's timeout: the test streams last seconds.
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &sseReader{body: resp.Body, r: bufio.NewReader(resp.Body)}
}

// next returns the next message, or an error (EOF when the server ended
// the stream).
func (s *sseReader) next() (event, data string, err error) {
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if event != "" || data != "" {
				return event, data, nil
			}
		case strings.HasPrefix(line, ":"):
			event = ":"
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data += line[6:]
		}
	}
}

// waitReaders polls until ev has n readers.
func waitReaders(t *testing.T, ev *Events, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ev.Readers() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d readers, want %d", ev.Readers(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEventsStream: a reader gets every change published after it came,
// in order, in text/event-stream framing; a stream naming users with
// only=1 gets theirs alone; node states come as node events; the users
// named are followed while the stream lasts, and unfollowed after.
func TestEventsStream(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ev := NewEvents()
	var mu sync.Mutex
	following := map[string]int{}
	follow := func(users []string) func() {
		mu.Lock()
		defer mu.Unlock()
		for _, u := range users {
			following[u]++
		}
		return func() {
			mu.Lock()
			defer mu.Unlock()
			for _, u := range users {
				following[u]--
			}
		}
	}
	srv := eventsServer(t, ev, time.Hour, follow)
	all := openEvents(t, srv.URL+"/api/v1/events")
	if e, _, err := all.next(); err != nil || e != ":" {
		t.Fatalf("first message %q %v, want the opening comment", e, err)
	}
	only := openEvents(t, srv.URL+"/api/v1/events?user=bob&only=1")
	only.next()
	waitReaders(t, ev, 2)
	mu.Lock()
	if following["bob"] != 1 {
		t.Fatalf("bob followed %d times, want 1", following["bob"])
	}
	mu.Unlock()
	ev.User("alice", []byte(`{"user":"alice","version":1}`))
	ev.User("bob", []byte(`{"user":"bob","version":2}`))
	ev.Node(presence.NodeStatus{Node: "n1", State: presence.NodeDraining, Incarnation: "i1", At: time.Unix(0, 0)})
	for _, want := range []string{`user {"user":"alice","version":1}`, `user {"user":"bob","version":2}`, `node {"node":"n1","state":"draining","sessions":0,"incarnation":"i1","at":"1970-01-01T00:00:00.000Z"}`} {
		e, d, err := all.next()
		if err != nil || e+" "+d != want {
			t.Fatalf("got %q %q %v, want %s", e, d, err, want)
		}
	}
	if e, d, err := only.next(); err != nil || e != "user" || d != `{"user":"bob","version":2}` {
		t.Fatalf("the stream of bob only got %q %q %v", e, d, err)
	}
	all.body.Close()
	only.body.Close()
	http.DefaultClient.CloseIdleConnections()
	waitReaders(t, ev, 0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := following["bob"]
		mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("bob still followed after the stream ended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv.Close()
	http.DefaultClient.CloseIdleConnections()
}

// TestEventsSlowReaderDropped: a reader that takes nothing while more
// than EventQueue events come is dropped and counted; Publish never
// waits for it, and the others keep their stream.
func TestEventsSlowReaderDropped(t *testing.T) {
	ev := NewEvents()
	slow := ev.subscribe(nil)
	fast := ev.subscribe(nil)
	done := make(chan int)
	var read atomic.Int64 // what the fast reader has taken
	go func() {
		n := 0
		for {
			select {
			case <-fast.ch:
				n++
				read.Store(int64(n))
				if n == 3*EventQueue {
					done <- n
					return
				}
			case <-fast.gone:
				done <- -1
				return
			}
		}
	}()
	start := time.Now()
	for i := range 3 * EventQueue {
		ev.User("u", fmt.Appendf(nil, `{"v":%d}`, i))
		if (i+1)%(EventQueue/2) == 0 {
			// The fast reader keeps up: at most half a queue behind,
			// waited for rather than slept on (a busy machine).
			deadline := time.Now().Add(10 * time.Second)
			for read.Load() < int64(i+1) && time.Now().Before(deadline) {
				select {
				case <-fast.gone:
					deadline = time.Now()
				case <-time.After(time.Millisecond):
				}
			}
		}
	}
	if n := <-done; n != 3*EventQueue {
		t.Fatalf("the fast reader got %d events, was dropped", n)
	}
	select {
	case <-slow.gone:
	default:
		t.Fatal("a reader EventQueue events behind was not dropped")
	}
	if ev.Dropped.Load() != 1 || ev.Readers() != 1 {
		t.Fatalf("dropped %d, readers %d; want 1, 1", ev.Dropped.Load(), ev.Readers())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("publishing took %s", d)
	}
	ev.unsubscribe(fast)
}

// TestEventsDroppedStreamSaysSo: over HTTP, a stream whose reader stops
// reading is ended with an "event: dropped" once its queue overflows; the
// request's goroutine returns.
func TestEventsDroppedStreamSaysSo(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ev := NewEvents()
	srv := eventsServer(t, ev, time.Hour, nil)
	s := openEvents(t, srv.URL+"/api/v1/events")
	s.next()
	waitReaders(t, ev, 1)
	// One big burst without reading: more than the queue, faster than the
	// handler takes them (they are handed over under one lock).
	ev.mu.Lock()
	for sub := range ev.subs {
		for len(sub.ch) < cap(sub.ch) {
			sub.ch <- Event{Kind: "user", User: "u", Data: []byte(`{}`)}
		}
	}
	ev.mu.Unlock()
	// The queue is full, unless the handler took some meanwhile (it reads
	// the queue without the lock, and a busy machine lets it): publish
	// until the reader, which reads nothing, is dropped.
	deadline := time.Now().Add(10 * time.Second)
	for ev.Dropped.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a reader that reads nothing was never dropped")
		}
		ev.User("u", []byte(`{}`))
	}
	for {
		e, _, err := s.next()
		if err != nil {
			t.Fatalf("the stream ended without saying it was dropped: %v", err)
		}
		if e == "dropped" {
			break
		}
	}
	if _, _, err := s.next(); err != io.EOF {
		t.Fatalf("after dropped: %v, want EOF", err)
	}
	if ev.Dropped.Load() != 1 {
		t.Fatalf("dropped %d, want 1", ev.Dropped.Load())
	}
	s.body.Close()
	srv.Close()
	http.DefaultClient.CloseIdleConnections()
}

// TestEventsHeartbeatAndClose: an idle stream writes heartbeats; Close
// ends every stream (the admin server's shutdown does not wait for them)
// and refuses new ones.
func TestEventsHeartbeatAndClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ev := NewEvents()
	srv := eventsServer(t, ev, 20*time.Millisecond, nil)
	s := openEvents(t, srv.URL+"/api/v1/events")
	s.next()
	for range 2 {
		if e, _, err := s.next(); err != nil || e != ":" {
			t.Fatalf("want a heartbeat comment, got %q %v", e, err)
		}
	}
	ev.Close()
	for {
		e, _, err := s.next()
		if err != nil {
			t.Fatalf("the stream ended without a bye: %v", err)
		}
		if e == "bye" {
			break
		}
	}
	if _, _, err := s.next(); err != io.EOF {
		t.Fatalf("after bye: %v, want EOF", err)
	}
	waitReaders(t, ev, 0)
	resp, err := http.Get(srv.URL + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stream after Close: %d, want 503", resp.StatusCode)
	}
	s.body.Close()
	srv.Close()
	http.DefaultClient.CloseIdleConnections()
}

// TestEventsRefusesBadUsers: a bad user name, or too many, is refused.
func TestEventsRefusesBadUsers(t *testing.T) {
	ev := NewEvents()
	src, _ := fakeSource(false)
	src.Events = ev
	h := Handler(src)
	if w := do(h, "GET", "/api/v1/events?user=a/b", ""); w.Code != http.StatusBadRequest {
		t.Fatalf("a bad user name: %d", w.Code)
	}
	q := strings.Repeat("user=u&", MaxBatch+1)
	if w := do(h, "GET", "/api/v1/events?"+q, ""); w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d users: %d", MaxBatch+1, w.Code)
	}
	if ev.Readers() != 0 {
		t.Fatal("a refused stream is still a reader")
	}
}

// TestEventsStreamsBounded: at most MaxEventStreams read at once; one more
// is refused with 503 and counted, and a place freed is taken again.
func TestEventsStreamsBounded(t *testing.T) {
	ev := NewEvents()
	var subs []*eventSub
	for range MaxEventStreams {
		s := ev.subscribe(nil)
		if s == nil {
			t.Fatalf("stream %d refused", len(subs)+1)
		}
		subs = append(subs, s)
	}
	src, _ := fakeSource(false)
	src.Events = ev
	if w := do(Handler(src), "GET", "/api/v1/events", ""); w.Code != http.StatusServiceUnavailable || ev.Refused.Load() != 1 {
		t.Fatalf("stream %d: %d, refused %d; want 503, 1", MaxEventStreams+1, w.Code, ev.Refused.Load())
	}
	ev.unsubscribe(subs[0])
	if ev.subscribe(nil) == nil {
		t.Fatal("a freed place is not taken again")
	}
}
