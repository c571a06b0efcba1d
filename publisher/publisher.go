package publisher

import (
	"math"
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

	mu sync.Mutex
	// views are what is published now, per user: a pointer each (a 24-byte
	// map slot, where a view inline made it 80, and a map holds a third or
	// more of its slots empty), read by copy under mu (view) and changed in
	// place (store).
	views    map[string]*view
	byStatus map[presence.Status]int // users in views per status, kept with views
	buf      []byte                  // scratch of Publish's, under mu: the payload
	packed   []byte                  // and its packed rest

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
// retained message of it). It is kept compact, because a node holds one
// for every user its subscribers watch (a firehose: every user of the
// cluster): 64 bytes, the times as Unix nanoseconds, the status as a code,
// the rest of the payload packed (packed.go), and what few users have (a
// status text, a privacy setting) behind one pointer that is nil for the
// rest.
type view struct {
	rest     []byte // the payload's reason, link, next_expected and sessions (packRest)
	version  uint64
	since    int64     // Unix ns (0: none)
	lastSeen int64     // Unix ns (0: none); while offline, when Forget may forget the user
	more     *viewMore // nil for a user with no status text and no privacy setting
	status   statusCode
	size     uint32 // the payload's length (what payload makes it in)
}

// viewMore is what few views carry.
type viewMore struct {
	text string
	// pub is what everyone else is shown (presence.Aggregate.Public) of a
	// user with a privacy setting (privacy.go), whose truth the Privy
	// keeps; nil without one: everyone is shown the truth.
	pub *publicView
	// status is a status without a code (none comes from the stores;
	// kept whole rather than lost).
	status presence.Status
	// payload is the true payload of a view whose times Unix nanoseconds
	// do not hold (outside the years 1678–2262; none comes from the
	// stores), kept whole with its times; nil for the rest, whose payload
	// is made from the view.
	payload         []byte
	since, lastSeen time.Time
}

// publicView is the public view of a user with a privacy setting.
type publicView struct {
	payload []byte
	agg     presence.Aggregate
}

// newView is the view of a, published as payload (a.AppendJSON), with pub
// its public view (nil: everyone is shown the truth) and rest its packed
// rest (packRest, its own bytes).
func newView(a presence.Aggregate, payload []byte, pub *publicView, rest []byte) view {
	v := view{version: a.Version, since: unixNano(a.Since), lastSeen: unixNano(a.LastSeen), size: uint32(min(len(payload), math.MaxUint32))}
	code, ok := codeOf(a.Status)
	v.status = code
	whole := !inUnixNano(a.Since) || !inUnixNano(a.LastSeen)
	if a.Text != "" || pub != nil || !ok || whole {
		v.more = &viewMore{text: a.Text, pub: pub}
		if !ok {
			v.more.status = a.Status
		}
	}
	if whole {
		v.more.payload, v.more.since, v.more.lastSeen = payload, a.Since, a.LastSeen
	} else {
		v.rest = rest
	}
	return v
}

// aggregate is what v's payload shows of user (not its privacy setting,
// nor the sessions' connections or ended sessions, which no payload has),
// its sessions in scratch when it has room (nil: new ones). Its strings may
// be views of v's packed bytes.
func (v view) aggregate(user string, scratch []presence.SessionView) presence.Aggregate {
	if v.more != nil && v.more.payload != nil {
		a, _ := presence.ParseAggregate(v.more.payload)
		return a
	}
	since, lastSeen := v.times()
	a := presence.Aggregate{User: user, Status: v.statusOf(), Version: v.version, Since: since, LastSeen: lastSeen}
	if v.more != nil {
		a.Text = v.more.text
	}
	unpackRest(v.rest, &a, scratch)
	return a
}

// times are v's since and last seen.
func (v view) times() (since, lastSeen time.Time) {
	if v.more != nil && v.more.payload != nil {
		return v.more.since, v.more.lastSeen
	}
	return fromUnixNano(v.since), fromUnixNano(v.lastSeen)
}

// payload is the true payload of v, its user's (the bytes published).
func (v view) payload(user string) []byte {
	var one [1]presence.SessionView // most users have one session at most
	return v.payloadWith(user, one[:])
}

// payloadWith is payload, the sessions unpacked into scratch when it has
// room (a loop over many views reuses one).
func (v view) payloadWith(user string, scratch []presence.SessionView) []byte {
	if v.more != nil && v.more.payload != nil {
		return v.more.payload
	}
	if v.version == 0 {
		return nil
	}
	// 8 bytes over: time.Time.AppendFormat writes a time's nanoseconds
	// before it cuts them to the milliseconds a payload has.
	return v.aggregate(user, scratch).AppendJSON(make([]byte, 0, int(v.size)+8))
}

// statusOf is the status v shows.
func (v view) statusOf() presence.Status {
	if v.status == codeOther && v.more != nil {
		return v.more.status
	}
	return v.status.status()
}

// pubView is v's public view (nil: v is shown to everyone as it is).
func (v view) pubView() *publicView {
	if v.more == nil {
		return nil
	}
	return v.more.pub
}

// public returns the payload everyone but the user and service accounts
// is shown, and its version.
func (v view) public(user string, scratch []presence.SessionView) ([]byte, uint64) {
	if pub := v.pubView(); pub != nil {
		return pub.payload, pub.agg.Version
	}
	return v.payloadWith(user, scratch), v.version
}

// offline reports whether v shows its user offline, and since when it was
// last seen.
func (v view) offline() (time.Time, bool) {
	_, lastSeen := v.times()
	return lastSeen, v.status == codeOffline
}

// statusCode is a status in one byte (view).
type statusCode uint8

const (
	codeOther statusCode = iota // kept whole in viewMore.status
	codeOnline
	codeIdle
	codeAway
	codeBusy
	codeDND
	codeDormant
	codeOffline
)

// codeStatuses are the statuses of the codes, by code.
var codeStatuses = [...]presence.Status{codeOther: "", codeOnline: presence.Online, codeIdle: presence.Idle, codeAway: presence.Away,
	codeBusy: presence.Busy, codeDND: presence.DND, codeDormant: presence.Dormant, codeOffline: presence.Offline}

// codeOf returns the code of s, and false when s has none (codeOther).
func codeOf(s presence.Status) (statusCode, bool) {
	for c := codeOnline; c <= codeOffline; c++ {
		if codeStatuses[c] == s {
			return c, true
		}
	}
	return codeOther, false
}

func (c statusCode) status() presence.Status { return codeStatuses[c] }

// unixNano is t in Unix nanoseconds, 0 for the zero time (a time
// inUnixNano does not hold reads back as another).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// inUnixNano reports whether fromUnixNano(unixNano(t)) is t: the zero time,
// and every time from 1678 to 2262 but the Unix epoch's first nanosecond.
func inUnixNano(t time.Time) bool {
	return t.IsZero() || t.UnixNano() != 0 && fromUnixNano(t.UnixNano()).Equal(t)
}

// fromUnixNano is the time of unixNano's n, in UTC (every payload writes
// UTC).
func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
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
		views: make(map[string]*view), byStatus: make(map[presence.Status]int)}
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
	old, had := p.view(a.User)
	if had && old.version >= a.Version {
		p.mu.Unlock()
		p.Stats.Old.Add(1)
		return
	}
	before := old.shown()
	p.buf = a.AppendJSON(p.buf[:0])
	payload := append([]byte(nil), p.buf...)
	p.packed = packRest(p.packed[:0], a)
	rest := append([]byte(nil), p.packed...)
	pv := p.privateView(a, old, had, payload)
	p.mu.Unlock()
	var pub *publicView
	if pv.private {
		pub = &publicView{payload: pv.public, agg: pv.agg}
	}
	v := newView(a, payload, pub, rest)
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

// view returns a copy of user's view, and whether there is one. Under mu.
func (p *Publisher) view(user string) (view, bool) {
	if v := p.views[user]; v != nil {
		return *v, true
	}
	return view{}, false
}

// store records v as user's view.
func (p *Publisher) store(user string, v view) {
	p.mu.Lock()
	if old := p.views[user]; old != nil {
		p.byStatus[old.statusOf()]--
		*old = v
	} else {
		nv := new(view) // not &v: that would move v to the heap on every call
		*nv = v
		p.views[user] = nv
	}
	p.byStatus[v.statusOf()]++
	p.mu.Unlock()
}

// shown is what v shows (a zero Shown for a zero view).
func (v view) shown() presence.Shown {
	if v.version == 0 {
		return presence.Shown{}
	}
	since, lastSeen := v.times()
	sh := presence.Shown{Version: v.version, Status: v.statusOf(), Since: since, LastSeen: lastSeen}
	if v.more != nil {
		sh.Text = v.more.text
	}
	return sh
}

// Resend hands the current presence of user, unchanged, to send, which
// delivers it to the subscribers that missed it; it reports whether there
// was one to send.
func (p *Publisher) Resend(user string, send func(version uint64, topic string, payload []byte) error) bool {
	p.mu.Lock()
	v, ok := p.view(user)
	p.mu.Unlock()
	if !ok {
		return false
	}
	payload, version := v.public(user, nil)
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
		user string
		v    view
	}
	var out []snap
	p.mu.Lock()
	if all {
		out = make([]snap, 0, len(p.views))
		for u, v := range p.views {
			out = append(out, snap{u, *v})
		}
	} else if v, ok := p.view(user); ok {
		out = append(out, snap{user, v})
	}
	p.mu.Unlock()
	scratch := make([]presence.SessionView, 4)
	for _, s := range out { // the payloads are made outside the lock
		payload, version := s.v.public(s.user, scratch)
		fn(s.user, version, payload)
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
			p.unkeep(u, *v)
			delete(p.views, u)
			p.byStatus[v.statusOf()]--
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
	v, _ := p.view(user)
	return v.shown()
}

// Current returns what everyone is shown of user (its public view, which
// the group topics carry), and whether anything is published.
func (p *Publisher) Current(user string) (presence.Shown, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.view(user)
	if !ok {
		return presence.Shown{}, false
	}
	if pub := v.pubView(); pub != nil {
		return pub.agg.Shown(), true
	}
	return v.shown(), true
}

// Get returns the true payload published for user (the admin API's and
// the events streams': operators see the truth).
func (p *Publisher) Get(user string) ([]byte, bool) {
	p.mu.Lock()
	v, ok := p.view(user)
	p.mu.Unlock()
	if !ok {
		return nil, false
	}
	return v.payload(user), true
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
		if v, ok := p.view(u); ok {
			p.unkeep(u, v)
			delete(p.views, u)
			p.byStatus[v.statusOf()]--
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
