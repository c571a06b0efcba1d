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
	// Publish publishes payload, version of user's presence, live (not
	// retained: the broker keeps nothing of it) as a QoS 1 message of
	// topic, from the broker itself, and runs commit, when the publish
	// succeeded, in the same step of the delivery fence: a SUBSCRIBE
	// reading the publisher's views (Snapshots) reads either the view
	// before the live message, or the new one after it.
	Publish(user string, version uint64, topic string, payload []byte, commit func()) error
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

// view is what is published of one user: the publisher's state, and the
// retained store of presence/users/{user} (Snapshots: mochi keeps no
// retained message of it). It is kept compact (about 120 bytes beside the
// payload): the payload, and the few values the pacer, the group topics,
// the figures and Forget read.
type view struct {
	payload  []byte // the true payload (the admin API's, byte for byte)
	version  uint64
	status   presence.Status
	since    time.Time
	text     string
	lastSeen time.Time // while offline: when Forget may forget the user
	// pub is what everyone else is shown (presence.Aggregate.Public) of a
	// user with a privacy setting (privacy.go), whose truth the Privy
	// keeps; nil without one: everyone is shown the truth above.
	pub *publicView
}

// publicView is the public view of a user with a privacy setting.
type publicView struct {
	payload []byte
	agg     presence.Aggregate
}

// public returns the payload everyone but the user and service accounts
// is shown, and its version.
func (v *view) public() ([]byte, uint64) {
	if v.pub != nil {
		return v.pub.payload, v.pub.agg.Version
	}
	return v.payload, v.version
}

// offline reports whether v shows its user offline, and since when it was
// last seen.
func (v *view) offline() (time.Time, bool) {
	return v.lastSeen, v.status == presence.Offline
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
	v := view{version: a.Version, payload: payload, status: a.Status, since: a.Since, text: a.Text, lastSeen: a.LastSeen}
	if pv.private {
		v.pub = &publicView{payload: pv.public, agg: pv.agg}
	}
	if err := p.show(a, pv, func() { p.store(a.User, v) }); err != nil {
		p.Stats.Errors.Add(1)
		p.log.Error("publish failed", "err", err, "user", a.User)
		return
	}
	p.Stats.Published.Add(1)
	if pv.changed && p.public != nil {
		p.public(pv.agg)
	}
	if p.published != nil {
		p.published(a, before)
	}
}

// store records v as user's view.
func (p *Publisher) store(user string, v view) {
	p.mu.Lock()
	if old, ok := p.views[user]; ok {
		p.byStatus[old.status]--
	}
	p.byStatus[v.status]++
	p.views[user] = v
	p.mu.Unlock()
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
	payload, version := v.public()
	if err := send(version, p.Topic(user), payload); err != nil { // the entitled get the truth (delivery.Privacy)
		p.Stats.Errors.Add(1)
		return false
	}
	p.Stats.Resent.Add(1)
	return true
}

// Snapshots calls fn with the public payload and its version of user
// (all false), or of every user (all), as its retained message on topic
// Topic(user): what a SUBSCRIBE is delivered with the retain flag
// (delivery.Delivery). The views are read under the publisher's lock and
// fn is called outside it, in no particular order.
func (p *Publisher) Snapshots(user string, all bool, fn func(user string, version uint64, payload []byte)) {
	type snap struct {
		user    string
		version uint64
		payload []byte
	}
	var out []snap
	p.mu.Lock()
	if all {
		out = make([]snap, 0, len(p.views))
		for u, v := range p.views {
			payload, version := v.public()
			out = append(out, snap{u, version, payload})
		}
	} else if v, ok := p.views[user]; ok {
		payload, version := v.public()
		out = append(out, snap{user, version, payload})
	}
	p.mu.Unlock()
	for _, s := range out {
		fn(s.user, s.version, s.payload)
	}
}

// Online returns the version of every user whose published presence is
// not offline.
func (p *Publisher) Online() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]uint64)
	for u, v := range p.views {
		if _, off := v.offline(); !off {
			m[u] = v.version
		}
	}
	return m
}

// Forget forgets every user who is offline and was last seen before
// before (its retained presence with it: Snapshots), so that presence held for
// users who never come back cannot grow without bound. The store forgets
// them by the same rule (store.Memory.Forget; Redis expires their keys),
// and versions are stamps of the clock, so a user who comes back later
// still gets versions above every one published before. It returns how
// many it forgot.
func (p *Publisher) Forget(before time.Time) int {
	n := 0
	p.mu.Lock()
	for u, v := range p.views {
		if seen, off := v.offline(); off && seen.Before(before) {
			p.unkeep(u, v)
			delete(p.views, u)
			p.byStatus[v.status]--
			n++
		}
	}
	p.mu.Unlock()
	p.Stats.Forgotten.Add(int64(n))
	return n
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
	if v.pub != nil {
		return v.pub.agg.Shown(), true
	}
	return v.shown(), true
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

// Drop forgets users (nobody on this node shows them any more): what was
// published of them (their retained presence with it: Snapshots) is
// forgotten, so that a later publish of any version shows them again.
func (p *Publisher) Drop(users []string) {
	n := 0
	p.mu.Lock()
	for _, u := range users {
		if v, ok := p.views[u]; ok {
			p.unkeep(u, v)
			delete(p.views, u)
			p.byStatus[v.status]--
			n++
		}
	}
	p.mu.Unlock()
	p.Stats.Dropped.Add(int64(n))
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
