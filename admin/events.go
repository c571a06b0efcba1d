package admin

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presenced/presenced/presence"
)

// Limits of the events stream.
const (
	// MaxEventStreams is how many events streams a node serves at once; one
	// more is refused (503) and counted.
	MaxEventStreams = 64
	// EventQueue is how many events one stream may have waiting to be
	// written; a reader that falls further behind is dropped (it is told,
	// and reads the state again when it comes back).
	EventQueue = 256
	// Heartbeat is how often a stream with nothing to say writes a comment,
	// so that proxies and the reader know it is alive.
	Heartbeat = 15 * time.Second
	// eventWrite bounds one write to a stream: a reader that takes no
	// bytes for that long is dropped.
	eventWrite = 10 * time.Second
)

// Event is one message of the events stream: Kind "user" (Data: the
// user's retained presence JSON) or "node" (a node's state,
// presence.NodeStatus JSON).
type Event struct {
	Kind string
	User string // the user of a "user" event
	Data []byte // never changed once published
}

// Events fans out the changes a node publishes to the readers of GET
// /api/v1/events. Publish never blocks: each reader has a queue of
// EventQueue events, and a reader whose queue is full is dropped and
// counted (it reconnects and reads the state again). Readers are served by
// their own request's goroutine; Close ends every stream (the admin
// server's shutdown, the plugin's Stop) and later ones at once. The zero
// value is not usable: NewEvents.
//
// Locks: mu guards the readers; it is held while an event is put in the
// queues (never across a write to a socket).
type Events struct {
	mu     sync.Mutex
	subs   map[*eventSub]struct{}
	closed bool
	done   chan struct{}
	active atomic.Int32

	Published atomic.Int64 // events handed to at least one reader
	Dropped   atomic.Int64 // readers dropped for a full queue (slow)
	Streams   atomic.Int64 // streams served, in all
	Refused   atomic.Int64 // streams refused: MaxEventStreams were open
}

type eventSub struct {
	ch    chan Event
	users map[string]struct{} // nil: every user
	gone  chan struct{}       // closed when dropped
}

// NewEvents returns a fan-out with no reader.
func NewEvents() *Events {
	return &Events{subs: make(map[*eventSub]struct{}), done: make(chan struct{})}
}

// Active reports whether any stream reads: a publisher can skip building
// an event nobody reads.
func (e *Events) Active() bool { return e != nil && e.active.Load() > 0 }

// Readers returns how many streams read now.
func (e *Events) Readers() int { return int(e.active.Load()) }

// Publish hands ev to every reader without waiting; a reader whose queue
// is full is dropped.
func (e *Events) Publish(ev Event) {
	if !e.Active() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	sent := false
	for s := range e.subs {
		if ev.Kind == "user" && s.users != nil {
			if _, ok := s.users[ev.User]; !ok {
				continue
			}
		}
		select {
		case s.ch <- ev:
			sent = true
		default:
			e.dropLocked(s)
			e.Dropped.Add(1)
		}
	}
	if sent {
		e.Published.Add(1)
	}
}

// User publishes a user's retained presence.
func (e *Events) User(user string, payload []byte) {
	e.Publish(Event{Kind: "user", User: user, Data: payload})
}

// Node publishes a node's state.
func (e *Events) Node(st presence.NodeStatus) {
	if !e.Active() {
		return
	}
	if b, err := st.MarshalJSON(); err == nil {
		e.Publish(Event{Kind: "node", Data: b})
	}
}

// Close ends every stream, and refuses new ones. It may be called more
// than once.
func (e *Events) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	close(e.done)
	for s := range e.subs {
		e.dropLocked(s)
	}
}

// subscribe adds a reader of users' events (nil: everyone's); nil when
// closed, or MaxEventStreams read already (counted).
func (e *Events) subscribe(users map[string]struct{}) *eventSub {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	if len(e.subs) >= MaxEventStreams {
		e.Refused.Add(1)
		return nil
	}
	s := &eventSub{ch: make(chan Event, EventQueue), users: users, gone: make(chan struct{})}
	e.subs[s] = struct{}{}
	e.active.Add(1)
	e.Streams.Add(1)
	return s
}

// Subscribe adds a reader of every event, as a stream is one (a program
// may follow the changes this node publishes so): read events until gone
// is closed (the reader fell EventQueue events behind, or Close), and call
// stop when done. ok is false when refused (closed, or MaxEventStreams
// read).
func (e *Events) Subscribe() (events <-chan Event, gone <-chan struct{}, stop func(), ok bool) {
	s := e.subscribe(nil)
	if s == nil {
		return nil, nil, func() {}, false
	}
	return s.ch, s.gone, func() { e.unsubscribe(s) }, true
}

// unsubscribe removes a reader (it may have been dropped already).
func (e *Events) unsubscribe(s *eventSub) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dropLocked(s)
}

func (e *Events) dropLocked(s *eventSub) {
	if _, ok := e.subs[s]; !ok {
		return
	}
	delete(e.subs, s)
	e.active.Add(-1)
	close(s.gone)
}

// eventRoutes serves GET /api/v1/events (with Source.Events).
func eventRoutes(mux *http.ServeMux, src Source) {
	heartbeat := src.Heartbeat
	if heartbeat <= 0 {
		heartbeat = Heartbeat
	}
	mux.HandleFunc("GET /api/v1/events", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var users map[string]struct{}
		if list := q["user"]; len(list) > 0 {
			if len(list) > MaxBatch {
				httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%d users, at most %d", len(list), MaxBatch))
				return
			}
			users = make(map[string]struct{}, len(list))
			for _, u := range list {
				if err := presence.ValidUser(u); err != nil {
					httpError(w, http.StatusBadRequest, err.Error())
					return
				}
				users[u] = struct{}{}
			}
		}
		only := q.Get("only") == "1" // only the users named, not every change
		var filter map[string]struct{}
		if only {
			filter = users
		}
		s := src.Events.subscribe(filter)
		if s == nil {
			httpError(w, http.StatusServiceUnavailable, fmt.Sprintf("no events stream: shutting down, or %d open already", MaxEventStreams))
			return
		}
		defer src.Events.unsubscribe(s)
		if src.Follow != nil && len(users) > 0 {
			// The users named are heard here while the stream lasts, so
			// that a change made on another node is published here too.
			names := make([]string, 0, len(users))
			for u := range users {
				names = append(names, u)
			}
			defer src.Follow(names)()
		}
		streamEvents(w, r, s, src.Events.done, heartbeat)
	})
}

// streamEvents writes s's events to w until the request ends, the reader
// is dropped or the fan-out closes.
func streamEvents(w http.ResponseWriter, r *http.Request, s *eventSub, closed <-chan struct{}, heartbeat time.Duration) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventWrite))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write([]byte(": presenced events\nretry: 1000\n\n")) {
		return
	}
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	var buf []byte
	for {
		select {
		case <-r.Context().Done():
			return
		case <-closed:
			_ = write([]byte("event: bye\ndata: {}\n\n"))
			return
		case <-s.gone:
			select {
			case <-closed: // Close drops every reader
				_ = write([]byte("event: bye\ndata: {}\n\n"))
			default: // behind by more than EventQueue events
				_ = write([]byte("event: dropped\ndata: {}\n\n"))
			}
			return
		case ev := <-s.ch:
			buf = appendEvent(buf[:0], ev)
			// What else is queued goes in the same write.
			for more := true; more && len(buf) < 64<<10; {
				select {
				case ev := <-s.ch:
					buf = appendEvent(buf, ev)
				default:
					more = false
				}
			}
			if !write(buf) {
				return
			}
		case <-t.C:
			if !write([]byte(": heartbeat\n\n")) {
				return
			}
		}
	}
}

// appendEvent appends ev in text/event-stream framing (its data is one line
// of JSON).
func appendEvent(b []byte, ev Event) []byte {
	b = append(b, "event: "...)
	b = append(b, ev.Kind...)
	b = append(b, "\ndata: "...)
	b = append(b, ev.Data...)
	return append(b, "\n\n"...)
}
