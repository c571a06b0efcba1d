package publisher

import (
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	"github.com/presenced/presenced/presence"
)

// Broker is how the publisher reaches subscribers.
type Broker interface {
	// Publish publishes payload, version of user's presence, as the
	// retained QoS 1 message of topic, from the broker itself.
	Publish(user string, version uint64, topic string, payload []byte) error
	// Retain stores payload as topic's retained message again, without
	// delivering it, so that the broker's purge of old retained messages
	// never removes presence that is still true.
	Retain(topic string, payload []byte)
	// Clear removes topic's retained message, delivering nothing.
	Clear(topic string)
}

// Publisher publishes presence. Its methods are called from one goroutine;
// the read-only ones (Get, Shown, Users, Versions) from any.
type Publisher struct {
	broker    Broker
	prefix    string
	log       *slog.Logger
	published func(a presence.Aggregate, before presence.Shown)
	public    func(a presence.Aggregate)
	privy     Privy

	mu       sync.Mutex
	views    map[string]view         // what is published now, per user
	byStatus map[presence.Status]int // users in views per status, kept with views
	buf      []byte

	Stats Stats
}

// Stats are counts read with atomic loads.
type Stats struct {
	Published atomic.Int64
	Old       atomic.Int64 // aggregates dropped for a version not above the published one
	Errors    atomic.Int64
	Resent    atomic.Int64 // current states sent again for subscribers that missed them
	Forgotten atomic.Int64 // offline users forgotten after the retention
	Dropped   atomic.Int64 // users dropped: nobody on this node shows them any more
	// Private counts the changes of users with a privacy setting that left
	// their public view as it was: not published to everyone, only sent
	// to the user's own and service accounts' subscriptions (privacy.go).
	Private atomic.Int64
}

type view struct {
	version  uint64
	payload  []byte
	status   presence.Status
	since    time.Time
	text     string
	lastSeen time.Time
	gone     time.Time // last seen, while offline; zero while online
	// What everyone else is shown (presence.Aggregate.Public): the
	// retained payload and its aggregate; the same as the truth above for
	// a user without a privacy setting (privacy.go).
	public    []byte
	publicAgg presence.Aggregate
	private   bool // the user has a privacy setting (Privy keeps the truth)
}

// Options configure a publisher.
type Options struct {
	Prefix string // the topic prefix, e.g. "presence"
	Broker Broker
	Log    *slog.Logger
	// Published, when set, is told of every aggregate published, with what
	// observers were shown of its user before (the group topics and the
	// metrics follow the published presence through it). It is called on
	// the publishing goroutine, after the publish, and must return at once.
	Published func(a presence.Aggregate, before presence.Shown)
	// Public, when set, is told of every public view published (what
	// everyone but the user and service accounts is shown: the group
	// topics follow it), on the publishing goroutine, after the publish.
	Public func(a presence.Aggregate)
	// Privy keeps the true presence of users with a privacy setting and
	// delivers it to those entitled to it (delivery.Privacy); nil: they
	// are shown their public view like everyone else (privacy.go).
	Privy Privy
}

// New returns a publisher.
func New(o Options) *Publisher {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{broker: o.Broker, prefix: o.Prefix, log: o.Log, published: o.Published, public: o.Public, privy: o.Privy,
		views: make(map[string]view), byStatus: make(map[presence.Status]int)}
}

// Topic returns the retained topic of user.
func (p *Publisher) Topic(user string) string { return p.prefix + "/users/" + user }

// Publish publishes a as user's retained presence, unless a version at or
// above a's is already published. What is retained and delivered to
// everyone is a's public view (presence.Aggregate.Public, privacy.go); a
// change that leaves the public view as it was is sent to the user's own
// and service accounts' subscriptions only.
func (p *Publisher) Publish(a presence.Aggregate) {
	p.mu.Lock()
	old, had := p.views[a.User]
	if had && old.version >= a.Version {
		p.mu.Unlock()
		p.Stats.Old.Add(1)
		return
	}
	before := old.shown()
	p.buf = a.AppendJSON(p.buf[:0])
	payload := append([]byte(nil), p.buf...)
	pv := p.privateView(a, old, had, payload)
	p.mu.Unlock()
	if err := p.show(a, pv); err != nil {
		p.Stats.Errors.Add(1)
		p.log.Error("retained publish failed", "err", err, "user", a.User)
		return
	}
	p.mu.Lock()
	v := view{version: a.Version, payload: payload, status: a.Status, since: a.Since, text: a.Text, lastSeen: a.LastSeen,
		public: pv.public, publicAgg: pv.agg, private: pv.private}
	if a.Status == presence.Offline {
		v.gone = a.LastSeen
	}
	if old, ok := p.views[a.User]; ok {
		p.byStatus[old.status]--
	}
	p.byStatus[v.status]++
	p.views[a.User] = v
	p.mu.Unlock()
	p.Stats.Published.Add(1)
	if pv.changed && p.public != nil {
		p.public(pv.agg)
	}
	if p.published != nil {
		p.published(a, before)
	}
}

// shown is what v shows (a zero Shown for a zero view).
func (v view) shown() presence.Shown {
	if v.version == 0 {
		return presence.Shown{}
	}
	return presence.Shown{Version: v.version, Status: v.status, Since: v.since, Text: v.text, LastSeen: v.lastSeen}
}

// Resend hands the current presence of user, unchanged, to send, which
// delivers it to the subscribers that missed it; it reports whether there
// was one to send.
func (p *Publisher) Resend(user string, send func(version uint64, topic string, payload []byte) error) bool {
	p.mu.Lock()
	v, ok := p.views[user]
	p.mu.Unlock()
	if !ok {
		return false
	}
	if err := send(v.version, p.Topic(user), v.public); err != nil { // the entitled get the truth (delivery.Privacy)
		p.Stats.Errors.Add(1)
		return false
	}
	p.Stats.Resent.Add(1)
	return true
}

// Refresh stores every published presence as retained again (see
// Broker.Retain). It never delivers anything.
func (p *Publisher) Refresh() {
	p.mu.Lock()
	all := make(map[string][]byte, len(p.views))
	for u, v := range p.views {
		all[u] = v.public
	}
	p.mu.Unlock()
	for u, payload := range all {
		p.broker.Retain(p.Topic(u), payload)
	}
}

// Online returns the version of every user whose published presence is
// not offline.
func (p *Publisher) Online() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]uint64)
	for u, v := range p.views {
		if v.gone.IsZero() {
			m[u] = v.version
		}
	}
	return m
}

// Forget removes the retained presence of every user who is offline and
// was last seen before before, and forgets it, so that presence held for
// users who never come back cannot grow without bound. The store forgets
// them by the same rule (store.Memory.Forget; Redis expires their keys),
// and versions are stamps of the clock, so a user who comes back later
// still gets versions above every one published before. It returns how
// many it forgot.
func (p *Publisher) Forget(before time.Time) int {
	var topics []string
	p.mu.Lock()
	for u, v := range p.views {
		if !v.gone.IsZero() && v.gone.Before(before) {
			p.unkeep(u, v)
			delete(p.views, u)
			p.byStatus[v.status]--
			topics = append(topics, p.Topic(u))
		}
	}
	p.mu.Unlock()
	for _, t := range topics {
		p.broker.Clear(t)
	}
	p.Stats.Forgotten.Add(int64(len(topics)))
	return len(topics)
}

// Shown returns what is published of user (a zero Shown when nothing): its
// true presence, as its own subscriptions are shown it (the pacer's).
func (p *Publisher) Shown(user string) presence.Shown {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.views[user].shown()
}

// Current returns what everyone is shown of user (its public view, which
// the group topics carry), and whether anything is published.
func (p *Publisher) Current(user string) (presence.Shown, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.views[user]
	if !ok {
		return presence.Shown{}, false
	}
	return v.publicAgg.Shown(), true
}

// Get returns the true payload published for user (the admin API's and
// the events streams': operators see the truth).
func (p *Publisher) Get(user string) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.views[user]
	return v.payload, ok
}

// Users returns how many users have a published presence.
func (p *Publisher) Users() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.views)
}

// Versions returns the version of every user's published presence.
func (p *Publisher) Versions() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]uint64, len(p.views))
	for u, v := range p.views {
		m[u] = v.version
	}
	return m
}

// Drop forgets users (nobody on this node shows them any more): their
// retained message is removed and what was published of them is
// forgotten, so that a later publish of any version shows them again.
func (p *Publisher) Drop(users []string) {
	var topics []string
	p.mu.Lock()
	for _, u := range users {
		if v, ok := p.views[u]; ok {
			p.unkeep(u, v)
			delete(p.views, u)
			p.byStatus[v.status]--
			topics = append(topics, p.Topic(u))
		}
	}
	p.mu.Unlock()
	for _, t := range topics {
		p.broker.Clear(t)
	}
	p.Stats.Dropped.Add(int64(len(topics)))
}

// List returns every user with a published presence.
func (p *Publisher) List() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.views))
	for u := range p.views {
		out = append(out, u)
	}
	return out
}
