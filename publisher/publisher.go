package node

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/presenced/presenced/presence"
)

// Publisher turns committed aggregates into retained presence/users/{user}
// messages. Offer is the one entry point, for the live feed and the initial
// load alike. Pending aggregates coalesce per user (the newest version wins),
// so the queue is bounded by the number of users, and a late or duplicated
// aggregate whose version is not above the one already published is dropped:
// observers never see a version go backwards.
type Publisher struct {
	publish func(topic string, payload []byte) error
	prefix  string
	log     zerolog.Logger

	mu      sync.Mutex
	pending map[string]presence.Presence
	order   []string
	views   map[string]view // what is retained now, per user
	signal  chan struct{}
	resend  map[string]struct{} // users whose message a subscriber missed

	stop chan struct{}
	done chan struct{}

	Stats PublisherStats
}

// PublisherStats are counts read with atomic loads.
type PublisherStats struct {
	Depth     atomic.Int64 // users with an aggregate waiting
	Published atomic.Int64
	Coalesced atomic.Int64 // aggregates replaced by a newer one before publishing
	Old       atomic.Int64 // aggregates dropped for a version not above the published one
	Errors    atomic.Int64
	Resent    atomic.Int64 // current states sent again after a subscriber's queue overflowed
}

// Resend asks for user's current state to be published again: a subscriber
// missed it (mochi dropped it for a full queue). The same version is sent,
// paced, so that the queue can drain; observers ignore the repeat.
func (p *Publisher) Resend(user string) {
	p.mu.Lock()
	p.resend[user] = struct{}{}
	p.mu.Unlock()
}

// resendBatch and resendEvery pace the resends: a slow subscriber's queue
// holds mqtt.max_writes_pending messages.
const (
	resendBatch = 128
	resendEvery = 20 * time.Millisecond
)

func (p *Publisher) resendSome() {
	p.mu.Lock()
	users := make([]string, 0, resendBatch)
	payloads := make([][]byte, 0, resendBatch)
	for u := range p.resend {
		if len(users) == resendBatch {
			break
		}
		delete(p.resend, u)
		if v, ok := p.views[u]; ok {
			users = append(users, u)
			payloads = append(payloads, v.payload)
		}
	}
	p.mu.Unlock()
	for i, u := range users {
		if err := p.publish(p.Topic(u), payloads[i]); err != nil {
			p.Stats.Errors.Add(1)
			continue
		}
		p.Stats.Resent.Add(1)
	}
}

type view struct {
	version uint64
	payload []byte
}

// NewPublisher returns a publisher that retains payloads through publish.
func NewPublisher(prefix string, publish func(topic string, payload []byte) error, log zerolog.Logger) *Publisher {
	return &Publisher{
		publish: publish, prefix: prefix, log: log,
		pending: make(map[string]presence.Presence),
		views:   make(map[string]view),
		resend:  make(map[string]struct{}),
		signal:  make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// Topic returns the retained topic of user.
func (p *Publisher) Topic(user string) string { return p.prefix + "/users/" + user }

// Offer queues an aggregate. It never blocks: stores call it under their lock.
func (p *Publisher) Offer(pr presence.Presence) {
	p.mu.Lock()
	if v, ok := p.views[pr.User]; ok && v.version >= pr.Version {
		p.mu.Unlock()
		p.Stats.Old.Add(1)
		return
	}
	if q, ok := p.pending[pr.User]; ok {
		if q.Version >= pr.Version {
			p.mu.Unlock()
			p.Stats.Old.Add(1)
			return
		}
		p.Stats.Coalesced.Add(1)
	} else {
		p.order = append(p.order, pr.User)
		p.Stats.Depth.Add(1)
	}
	p.pending[pr.User] = pr
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

// Start starts the publishing goroutine.
func (p *Publisher) Start() { go p.run() }

// Stop publishes what is pending, stops and waits.
func (p *Publisher) Stop() {
	close(p.stop)
	<-p.done
}

func (p *Publisher) run() {
	defer close(p.done)
	tick := time.NewTicker(resendEvery)
	defer tick.Stop()
	for {
		select {
		case <-p.signal:
			p.flush()
		case <-tick.C:
			p.resendSome()
		case <-p.stop:
			p.flush()
			return
		}
	}
}

func (p *Publisher) flush() {
	p.mu.Lock()
	order, pending := p.order, p.pending
	p.order, p.pending = nil, make(map[string]presence.Presence, len(pending))
	p.mu.Unlock()
	var buf []byte
	for _, user := range order {
		pr := pending[user]
		p.Stats.Depth.Add(-1)
		p.mu.Lock()
		if v, ok := p.views[user]; ok && v.version >= pr.Version {
			p.mu.Unlock()
			p.Stats.Old.Add(1)
			continue
		}
		p.mu.Unlock()
		buf = pr.AppendJSON(buf[:0])
		payload := append([]byte(nil), buf...)
		if err := p.publish(p.Topic(user), payload); err != nil {
			p.Stats.Errors.Add(1)
			p.log.Error().Err(err).Str("user", user).Msg("retained publish failed")
			continue
		}
		p.mu.Lock()
		if v, ok := p.views[user]; !ok || v.version < pr.Version {
			p.views[user] = view{version: pr.Version, payload: payload}
		}
		p.mu.Unlock()
		p.Stats.Published.Add(1)
	}
}

// Get returns the payload retained for user.
func (p *Publisher) Get(user string) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.views[user]
	return v.payload, ok
}

// Users returns how many users have a retained presence.
func (p *Publisher) Users() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.views)
}

// Versions returns the version of every user's retained presence.
func (p *Publisher) Versions() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]uint64, len(p.views))
	for u, v := range p.views {
		m[u] = v.version
	}
	return m
}
