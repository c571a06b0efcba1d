package tracker

import (
	"sync"
	"sync/atomic"
)

// item is a unit of work that knows how to write itself to the store.
type item interface {
	// sync writes the item's pending state; it reports whether the item must
	// be tried again later (the store failed).
	sync(t *Tracker) (retry bool)
}

// queue is a FIFO of dirty items with a wake-up signal, after nats-server's
// ipqueue: a mutex-protected slice and a channel of one. Items deduplicate
// themselves (each has a queued flag), so its length is bounded by the number
// of live connections and users with pending writes; it never blocks a hook.
type queue struct {
	mu     sync.Mutex
	items  []item
	signal chan struct{}
	depth  *atomic.Int64
}

func newQueue(depth *atomic.Int64) *queue {
	return &queue{signal: make(chan struct{}, 1), depth: depth}
}

func (q *queue) push(it item) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
	q.depth.Add(1)
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// take returns every queued item, oldest first.
func (q *queue) take() []item {
	q.mu.Lock()
	defer q.mu.Unlock()
	its := q.items
	q.items = nil
	return its
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}
