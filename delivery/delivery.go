package delivery

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/internal/wire"
)

// Delivery is the mochi hook that keeps presence in order for each
// subscriber and makes good what mochi drops for one. With a Guard (presence
// is then the server's ACL authority) it also keeps every version to one
// copy per subscriber and sends what a subscriber missed to that subscriber
// only.
//
// Two paths deliver presence to a subscriber: live, from the publisher, and
// retained, when it subscribes (mochi indexes the subscription, writes the
// SUBACK, then reads the retained messages it holds: the group topics';
// then, in OnPacketProcessed, this hook delivers the retained
// presence/users/{user} from presence's own store, Snapshots, which mochi
// does not hold). Interleaved, they could hand it an older retained version
// after a newer live one, and mochi's reading of the retained store races
// with its writing (Topics.Messages reads without the lock RetainMessage
// writes under). So a SUBSCRIBE whose filters
// can match presence/users/... or presence/groups/... holds a read fence,
// and every publish or retain of presence holds it for writing (Publish,
// Exclusive, Outlet.Step):
//
//   - from OnSubscribe to OnSubscribed: the filter checks and the index;
//   - through the SUBACK write, when that write cannot block: the socket is
//     presenced's listener (whose writes never block), or the client's
//     writer is idle right now (mochi's listeners write under the client's
//     lock, which a writer stuck on a full socket holds). A subscriber whose
//     writer is stuck writes its SUBACK outside the fence, so it holds up
//     nobody; a version delivered live to it meanwhile is noted, and its
//     retained copy refused (with a Guard);
//   - from OnPacketSent of the SUBACK to OnPacketProcessed: mochi reads and
//     queues the retained messages, and this hook queues the retained
//     presence/users/{user} (deliverRetained), the same way.
//
// Inside the fence there is only memory work: no socket write of a client
// that might not read, so no client can hold every publish up.
//
// When mochi drops a presence message because a subscriber's queue is full,
// Delivery notes what that subscriber missed; the pump asks for it
// (TakeMissing) and publishes the current state again, to that subscriber
// only with a Guard, to every subscriber of the user without one. A
// subscriber whose queue is still full gets it less and less often (backoff
// up to a second), and one that misses presence and takes none for longer
// than SlowAfter is disconnected as a slow consumer: it gets the whole
// snapshot again when it comes back.
type Delivery struct {
	mqtt.HookBase
	prefix    string
	users     string // prefix/users/
	groups    string // prefix/groups/
	server    *mqtt.Server
	slowAfter time.Duration
	now       func() time.Time
	log       *slog.Logger

	snapshots Snapshots // the retained store of presence/users/{user} (Serve)

	fence       sync.RWMutex
	subscribing sync.Map                   // *mqtt.Client -> *subscription
	live        atomic.Pointer[publishing] // the publish in progress, under the fence

	// Lock order: mu before a lag's fields (all under mu).
	mu      sync.Mutex
	lagging map[*mqtt.Client]*lag
	lagged  chan struct{} // signalled when a subscriber begins to miss presence

	Stats Stats
}

// Stats are the hook's counts, read with atomic loads.
type Stats struct {
	Dropped      atomic.Int64 // presence messages mochi dropped for a full subscriber queue
	InflightFull atomic.Int64 // presence messages mochi refused a subscriber for its full inflight store (noted, sent again)
	Repeats      atomic.Int64 // retained copies refused to a subscriber that had them live (Guard)
	Resent       atomic.Int64 // presence messages sent again to subscribers that missed them
	SlowExpelled atomic.Int64 // subscribers disconnected for taking no presence for SlowAfter while missing some
	Lagging      atomic.Int64 // subscribers missing presence now
	Retained     atomic.Int64 // retained presence/users/{user} delivered on SUBSCRIBE (Snapshots)
	// Application-topic accesses the Guard's Topics rule refused: reads
	// (a subscription's filter, or a delivery) and writes (a PUBLISH).
	TopicReadsRefused  atomic.Int64
	TopicWritesRefused atomic.Int64
	// Accesses to the Guard's Private topics (the lifecycle outputs)
	// refused: reads of connections that are not service accounts, and
	// every write.
	PrivateReadsRefused  atomic.Int64
	PrivateWritesRefused atomic.Int64
	// Reads of another user's presence/notify/{user} refused (a filter,
	// or a delivery).
	NotifyReadsRefused atomic.Int64
}

// subscription is a SUBSCRIBE in progress that can match presence/users/...
type subscription struct {
	mu       sync.Mutex
	held     bool                // holds the fence for reading
	retained bool                // mochi is queueing its retained messages
	live     map[string]struct{} // users delivered live while it did not hold the fence
	// users are the SUBSCRIBE's filters (as the hooks before this one
	// left them) that are delivered the retained presence/users/{user}
	// (Snapshots) if granted, by index in the packet's filters, whose
	// reason codes OnSubscribed gives.
	users []retainFilter
	codes []byte
}

// retainFilter is a filter of a SUBSCRIBE, and its index.
type retainFilter struct {
	i   int
	sub packets.Subscription
}

// publishing is the publish of one user's presence in progress.
type publishing struct {
	topic, user string
	version     uint64
	targets     map[*mqtt.Client]struct{} // nil: every subscriber
	missed      map[*mqtt.Client]struct{} // dropped or held back during this publish (nil: none)

	mu   sync.Mutex     // took's (OnQosPublish may run on another goroutine)
	took []*mqtt.Client // the subscribers that took it (OnQosPublish)
}

// lag is what one subscriber missed.
type lag struct {
	missed  map[string]uint64 // user -> version it missed
	since   time.Time         // when it last took presence while missing some
	backoff time.Duration     // doubles with each miss in a row, up to maxBackoff
	nextTry time.Time         // when what it missed may be sent again
}

// Backoff of what is sent again to one subscriber.
const (
	minBackoff = 20 * time.Millisecond
	maxBackoff = time.Second
)

// DeliveryOptions configure the hook.
type DeliveryOptions struct {
	Prefix string       // topic prefix, e.g. "presence"
	Server *mqtt.Server // to find a topic's subscribers
	// SlowAfter is how long a subscriber may miss presence and take none
	// before it is disconnected as a slow consumer (default 10s).
	SlowAfter time.Duration
	Now       func() time.Time // the clock of backoffs and SlowAfter (default time.Now)
	Log       *slog.Logger
}

// NewDelivery returns the hook.
func NewDelivery(o DeliveryOptions) *Delivery {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.SlowAfter <= 0 {
		o.SlowAfter = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Delivery{
		prefix: o.Prefix, users: o.Prefix + "/users/", groups: o.Prefix + "/groups/", server: o.Server, slowAfter: o.SlowAfter, now: o.Now, log: o.Log,
		lagging: make(map[*mqtt.Client]*lag), lagged: make(chan struct{}, 1),
	}
}

// Lagged is signalled when a subscriber begins to miss presence: the pump
// sends again only while someone misses something (Lagging), and sleeps
// otherwise.
func (d *Delivery) Lagged() <-chan struct{} { return d.lagged }

// ID implements mqtt.Hook.
func (d *Delivery) ID() string { return "presence-delivery" }

// Provides implements mqtt.Hook. OnPacketSent and OnPacketProcessed run for
// every packet and return at once for all but a SUBACK and a SUBSCRIBE.
func (d *Delivery) Provides(b byte) bool {
	switch b {
	case mqtt.OnSubscribe, mqtt.OnSubscribed, mqtt.OnPacketSent, mqtt.OnPacketProcessed,
		mqtt.OnPublishDropped, mqtt.OnQosPublish, mqtt.OnDisconnect:
		return true
	}
	return false
}

// Publish runs fn, which publishes version of user's presence through mochi,
// inside the fence. targets, when not nil, are the only subscribers that may
// receive it (with a Guard): a message sent again. Afterwards every
// subscriber that missed the user and was not dropped this time has it.
func (d *Delivery) Publish(user string, version uint64, targets []*mqtt.Client, fn func()) {
	p := &publishing{topic: d.users + user, user: user, version: version}
	if targets != nil {
		p.targets = make(map[*mqtt.Client]struct{}, len(targets))
		for _, cl := range targets {
			p.targets[cl] = struct{}{}
		}
	}
	d.fence.Lock()
	d.live.Store(p)
	refused := d.inflightRefused()
	fn()
	if d.inflightRefused() != refused {
		d.inflightFull(p)
	}
	d.live.Store(nil)
	d.fence.Unlock()
	if targets != nil {
		d.Stats.Resent.Add(int64(len(targets)))
	}
	d.settle(p)
}

// inflightRefused is mochi's count of QoS 1 and 2 deliveries it refused
// because the client's inflight store was full (Capabilities.
// MaximumInflight, mqtt.max_inflight_messages). mochi calls no hook for
// those (v2.7.9 publishToClient returns ErrQuotaExceeded), so a
// subscriber that is slow to acknowledge would miss that version for good.
func (d *Delivery) inflightRefused() int64 {
	if d.server == nil {
		return 0
	}
	return atomic.LoadInt64(&d.server.Info.InflightDropped)
}

// inflightFull notes, after a publish during which mochi refused some
// delivery for a full inflight store, the subscribers of p's topic that
// mochi refused it as having missed p's version: the pump sends it again
// once they acknowledge (issue 23: a firehose observer at QoS 1 lost
// thousands of users in a burst of 45,000 changes). The count is
// mochi's, across every topic, so a refusal elsewhere costs this scan and
// nothing else.
//
// mochi says neither whom it refused nor when, and a subscriber's store
// may be empty again by now (one observer read 1,000 acknowledgements
// between mochi's refusal and this scan). So a subscriber counts as
// refused when it is subscribed at QoS 1 or 2 and did not take the
// version (mochi calls OnQosPublish for each one that did: p.took), and
// was not dropped (OnPublishDropped noted that already). A subscriber the
// ACL refused is counted too, when some delivery was refused meanwhile:
// it is sent the version once more, and refused again. Shared
// subscriptions are left out: mochi picks one member per message, and
// noting every member would send the version to several.
func (d *Delivery) inflightFull(p *publishing) {
	p.mu.Lock()
	took := make(map[*mqtt.Client]struct{}, len(p.took))
	for _, cl := range p.took {
		took[cl] = struct{}{}
	}
	p.mu.Unlock()
	maxQos := d.server.Options.Capabilities.MaximumQos
	for id, sub := range d.server.Topics.Subscribers(p.topic).Subscriptions {
		cl, ok := d.server.Clients.Get(id)
		if !ok || cl.Net.Inline || min(sub.Qos, maxQos) == 0 {
			continue
		}
		if _, target := p.targets[cl]; p.targets != nil && !target {
			continue
		}
		_, taken := took[cl]
		if _, dropped := p.missed[cl]; taken || dropped {
			continue
		}
		d.Stats.InflightFull.Add(1)
		if p.missed == nil {
			p.missed = make(map[*mqtt.Client]struct{})
		}
		p.missed[cl] = struct{}{}
		d.miss(cl, p.user, p.version)
	}
}

// OnQosPublish notes, during a publish of presence (Publish), each
// subscriber that took it (mochi calls it once the message is in the
// client's inflight store): inflightFull leaves those out. A message sent
// again on a reconnect (Dup) or published by someone else is not this
// publish; the topic is empty when mochi sends a topic alias, and the
// version then says which message it is.
func (d *Delivery) OnQosPublish(cl *mqtt.Client, pk packets.Packet, _ int64, _ int) {
	p := d.live.Load()
	if p == nil || p.user == "" || pk.FixedHeader.Type != packets.Publish || pk.FixedHeader.Dup || pk.Origin != mqtt.InlineClientId {
		return
	}
	if pk.TopicName != p.topic {
		if v, ok := Version(pk.Payload); pk.TopicName != "" || !ok || v != p.version {
			return
		}
	}
	p.mu.Lock()
	p.took = append(p.took, cl)
	p.mu.Unlock()
}

// Exclusive runs fn, which writes retained presence, inside the fence.
func (d *Delivery) Exclusive(fn func()) {
	d.fence.Lock()
	defer d.fence.Unlock()
	fn()
}

// advance runs retain, which stores topic's new retained message, then
// live, which publishes on topic, as one step of the fence, which the caller holds (Outlet.Step): no
// subscriber's reading of the retained messages falls between them, so each
// gets either the retained message or the live one after what it read. With
// to set, the live message is for those of to only that subscribed to topic
// before the retain, whose reading of the retained messages is done (they
// missed it): the others read it as retained (with a Guard only those
// receive it; without one, every subscriber of topic does). The group
// topics use it for a group's first snapshot on a node (to: the
// subscriptions that asked for it) and for each batch (to nil: the
// snapshot retained, the delta live).
func (d *Delivery) advance(topic string, to []*mqtt.Client, retain func(), live func()) {
	retain()
	p := &publishing{topic: topic}
	if to != nil {
		var subs map[string]packets.Subscription
		if d.server != nil {
			subs = d.server.Topics.Subscribers(topic).Subscriptions
		}
		p.targets = make(map[*mqtt.Client]struct{}, len(to))
		for _, cl := range to {
			_, subscribed := subs[cl.ID]
			_, reading := d.subscribing.Load(cl)
			if subscribed && !reading && !cl.Closed() {
				p.targets[cl] = struct{}{}
			}
		}
		if len(p.targets) == 0 {
			return
		}
	}
	d.live.Store(p)
	live()
	d.live.Store(nil)
}

// send runs live, which publishes on topic, for the subscribers in to
// only, inside the fence, which the caller holds (Outlet.Step). Unlike
// advance it keeps a subscriber whose SUBSCRIBE is still being processed:
// a group topic's resume asked for no retained message, so it would read
// none.
func (d *Delivery) send(topic string, to []*mqtt.Client, live func()) {
	p := &publishing{topic: topic, targets: make(map[*mqtt.Client]struct{}, len(to))}
	for _, cl := range to {
		p.targets[cl] = struct{}{}
	}
	d.live.Store(p)
	live()
	d.live.Store(nil)
}

// settle records what p delivered to the subscribers that are missing
// something: one that took p (it subscribes to p's topic and p was neither
// dropped nor held back for it) is making progress, so its backoff ends,
// and it no longer misses p's user at p's version or below.
func (d *Delivery) settle(p *publishing) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.lagging) == 0 {
		return
	}
	var subs map[string]packets.Subscription
	if d.server != nil {
		subs = d.server.Topics.Subscribers(p.topic).Subscriptions
	}
	for cl, l := range d.lagging {
		if _, missed := p.missed[cl]; missed {
			continue
		}
		if _, target := p.targets[cl]; p.targets != nil && !target {
			continue
		}
		if _, sub := subs[cl.ID]; subs != nil && !sub {
			continue
		}
		l.backoff, l.nextTry, l.since = 0, time.Time{}, now
		if m, ok := l.missed[p.user]; ok && m <= p.version {
			delete(l.missed, p.user)
			if len(l.missed) == 0 {
				d.unlag(cl)
			}
		}
	}
}

// unlag forgets a subscriber that misses nothing. d.mu is held.
func (d *Delivery) unlag(cl *mqtt.Client) {
	if _, ok := d.lagging[cl]; ok {
		delete(d.lagging, cl)
		d.Stats.Lagging.Add(-1)
	}
}

// OnSubscribe takes the fence for reading for a SUBSCRIBE whose filters can
// match presence/users/... or presence/groups/...: mochi checks and indexes
// them next.
func (d *Delivery) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if cl.Net.Inline {
		return pk
	}
	var s *subscription
	for i, f := range pk.Filters {
		if d.canMatchUsers(f.Filter) || d.canMatch(f.Filter, d.groups) {
			if s == nil {
				d.fence.RLock()
				s = &subscription{held: true}
				d.subscribing.Store(cl, s)
			}
			if d.retainsUsers(cl, f) {
				s.users = append(s.users, retainFilter{i, f})
			}
		}
	}
	return pk
}

// retainsUsers reports whether filter f of a SUBSCRIBE of cl is delivered
// the retained presence/users/{user} it matches once granted, as mochi's
// publishRetainedToClient decides for every other topic: never for a
// shared subscription (MQTT 5 §4.8.2), nor with retain handling 2, nor
// with 1 when cl already had the subscription. Called before mochi
// indexes it.
func (d *Delivery) retainsUsers(cl *mqtt.Client, f packets.Subscription) bool {
	if _, _, ok := d.usersOf(f.Filter); !ok {
		return false
	}
	switch f.RetainHandling {
	case 2:
		return false
	case 1:
		_, existed := cl.State.Subscriptions.Get(f.Filter)
		return !existed
	}
	return true
}

// OnSubscribed runs after the index, before the SUBACK is written: the
// fence stays held through that write only if it cannot block.
func (d *Delivery) OnSubscribed(cl *mqtt.Client, _ packets.Packet, codes []byte) {
	v, ok := d.subscribing.Load(cl)
	if !ok {
		return
	}
	s := v.(*subscription)
	s.mu.Lock()
	s.codes = codes
	s.mu.Unlock()
	if wire.NeverBlocks(cl) || wire.Idle(cl) {
		return
	}
	s.mu.Lock()
	s.held = false
	s.mu.Unlock()
	d.fence.RUnlock()
}

// OnPacketSent holds the fence for reading, once the SUBACK of a noted
// SUBSCRIBE is written, while mochi reads and queues its retained messages.
func (d *Delivery) OnPacketSent(cl *mqtt.Client, pk packets.Packet, _ []byte) {
	if pk.FixedHeader.Type != packets.Suback {
		return
	}
	v, ok := d.subscribing.Load(cl)
	if !ok {
		return
	}
	s := v.(*subscription)
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	if !held {
		d.fence.RLock()
	}
	s.mu.Lock()
	s.held, s.retained = true, true
	s.mu.Unlock()
}

// OnPacketProcessed delivers, once mochi has delivered the retained
// messages it holds, the retained presence/users/{user} the SUBSCRIBE's
// granted filters match (deliverRetained), still inside the fence, then
// releases it. It is called for every packet, so it returns at once for
// everything else.
func (d *Delivery) OnPacketProcessed(cl *mqtt.Client, pk packets.Packet, _ error) {
	if pk.FixedHeader.Type != packets.Subscribe {
		return
	}
	v, ok := d.subscribing.Load(cl)
	if !ok {
		return
	}
	s := v.(*subscription)
	s.mu.Lock()
	held, retained, codes := s.held, s.retained, s.codes
	s.mu.Unlock()
	if held && retained { // the SUBACK is written: mochi delivered its retained messages
		for _, f := range s.users {
			if f.i < len(codes) && codes[f.i] < packets.ErrUnspecifiedError.Code {
				d.deliverRetained(cl, f.sub)
			}
		}
	}
	d.subscribing.Delete(cl)
	if held {
		d.fence.RUnlock()
	}
}

// mayDeliver is the Guard's decision for a read of topic by cl, which the
// program's policy has allowed: a live delivery during a publish, a retained
// one while cl subscribes, or a SUBSCRIBE's filter check.
func (d *Delivery) mayDeliver(cl *mqtt.Client, topic string) bool {
	if topic == hooks.DiscardedWillTopic {
		return false
	}
	user, ok := d.user(topic)
	if !ok {
		if p := d.live.Load(); p != nil && p.topic == topic && p.targets != nil {
			_, target := p.targets[cl]
			return target // a group's first snapshot, for the subscriptions that missed it
		}
		return true
	}
	v, subscribing := d.subscribing.Load(cl)
	if p := d.live.Load(); p != nil && p.topic == topic {
		// A live delivery: the publisher holds the fence, so no filter
		// check and no retained reading runs now.
		if _, target := p.targets[cl]; p.targets != nil && !target {
			return false // sent again for others
		}
		if subscribing {
			s := v.(*subscription)
			s.mu.Lock()
			if !s.held {
				if s.live == nil {
					s.live = make(map[string]struct{})
				}
				s.live[user] = struct{}{}
			}
			s.mu.Unlock()
		}
		return true
	}
	if subscribing {
		s := v.(*subscription)
		s.mu.Lock()
		_, had := s.live[user]
		retained := s.retained
		s.mu.Unlock()
		if retained && had {
			// It got this user live while it did not hold the fence; the
			// retained copy read after is the same version or older.
			d.Stats.Repeats.Add(1)
			return false
		}
	}
	return true
}

// canMatchUsers reports whether a filter can match prefix/users/{user}.
func (d *Delivery) canMatchUsers(filter string) bool { return d.canMatch(filter, d.users) }

// canMatch reports whether a filter can match base{name} (base: prefix/users/
// or prefix/groups/).
func (d *Delivery) canMatch(filter, base string) bool {
	if strings.HasPrefix(filter, "$share/") {
		return false // shared subscriptions get no retained messages
	}
	want := strings.Split(base+"x", "/")
	got := strings.Split(filter, "/")
	for i, level := range got {
		if level == "#" {
			return true
		}
		if i >= len(want) {
			return false
		}
		if level != "+" && level != want[i] && i != len(want)-1 {
			return false
		}
	}
	return len(got) == len(want)
}

// group returns the group of a presence/groups/{group} topic.
func (d *Delivery) group(topic string) (string, bool) {
	g, ok := strings.CutPrefix(topic, d.prefix+"/groups/")
	return g, ok && g != "" && !strings.Contains(g, "/")
}

// underPrefix reports whether a topic or filter names the presence prefix
// (the prefix itself, or under it), without wildcards in its place.
func (d *Delivery) underPrefix(topic string) bool {
	rest, ok := strings.CutPrefix(topic, d.prefix)
	return ok && (rest == "" || rest[0] == '/')
}

// underNodes reports whether a topic or filter is under presence/nodes/.
func (d *Delivery) underNodes(topic string) bool {
	return strings.HasPrefix(topic, d.prefix+"/nodes/")
}

// user returns the user of a presence/users/{user} topic.
func (d *Delivery) user(topic string) (string, bool) {
	u, ok := strings.CutPrefix(topic, d.users)
	return u, ok && u != "" && !strings.Contains(u, "/")
}

// Version returns the version of a presence/users/{user} payload, written by
// presence.Aggregate.AppendJSON: the first `,"version":` is the field
// (inside a string value a quote is always escaped).
func Version(payload []byte) (uint64, bool) {
	const key = `,"version":`
	i := bytes.Index(payload, []byte(key))
	if i < 0 {
		return 0, false
	}
	rest := payload[i+len(key):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	v, err := strconv.ParseUint(string(rest[:j]), 10, 64)
	return v, err == nil
}

// OnPublishDropped notes a presence message mochi dropped for cl because its
// outbound queue (mqtt.max_writes_pending) was full.
func (d *Delivery) OnPublishDropped(cl *mqtt.Client, pk packets.Packet) {
	user, ok := d.user(pk.TopicName)
	if !ok {
		return
	}
	version, ok := Version(pk.Payload)
	if !ok {
		return
	}
	d.Stats.Dropped.Add(1)
	if p := d.live.Load(); p != nil && p.topic == pk.TopicName {
		if p.missed == nil { // made on the first miss: most publishes miss no one
			p.missed = make(map[*mqtt.Client]struct{})
		}
		p.missed[cl] = struct{}{} // the publisher's own goroutine, inside the fence
	}
	d.miss(cl, user, version)
}

// miss notes that cl missed version of user.
func (d *Delivery) miss(cl *mqtt.Client, user string, version uint64) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.lagging[cl]
	if l == nil {
		l = &lag{missed: make(map[string]uint64), since: now}
		d.lagging[cl] = l
		d.Stats.Lagging.Add(1)
		select {
		case d.lagged <- struct{}{}:
		default:
		}
	}
	l.missed[user] = max(l.missed[user], version)
	l.backoff = min(max(2*l.backoff, minBackoff), maxBackoff)
	l.nextTry = now.Add(l.backoff)
}

// OnDisconnect forgets the subscriber.
func (d *Delivery) OnDisconnect(cl *mqtt.Client, _ error, _ bool) {
	d.mu.Lock()
	d.unlag(cl)
	d.mu.Unlock()
}

// TakeMissing returns, for up to n users, the subscribers whose backoff has
// passed that missed them: what to send again, and to whom. Those
// subscribers are not asked about again before their backoff passes once
// more; a miss doubles it, a delivery resets it.
func (d *Delivery) TakeMissing(n int, now time.Time) map[string][]*mqtt.Client {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string][]*mqtt.Client)
	for cl, l := range d.lagging {
		if now.Before(l.nextTry) {
			continue
		}
		for u := range l.missed {
			if _, ok := out[u]; !ok && len(out) == n {
				continue
			}
			out[u] = append(out[u], cl)
		}
		l.nextTry = now.Add(max(l.backoff, minBackoff))
	}
	return out
}

// Tidy disconnects, as slow consumers, the subscribers that miss presence
// and have taken none for longer than SlowAfter, and forgets what they
// missed on topics they no longer subscribe to. The pump calls it now and
// then.
func (d *Delivery) Tidy(now time.Time) {
	var slow []*mqtt.Client
	d.mu.Lock()
	for cl, l := range d.lagging {
		if cl.Closed() {
			d.unlag(cl)
			continue
		}
		if d.server != nil {
			for u := range l.missed {
				if _, ok := d.server.Topics.Subscribers(d.users + u).Subscriptions[cl.ID]; !ok {
					delete(l.missed, u)
				}
			}
		}
		if len(l.missed) == 0 {
			d.unlag(cl)
			continue
		}
		if now.Sub(l.since) > d.slowAfter {
			slow = append(slow, cl)
			d.log.Warn("disconnecting a slow subscriber: it has not taken the presence sent again",
				"client", hooks.ClientID(cl), "missed_users", len(l.missed), "lagging_ms", now.Sub(l.since).Milliseconds())
			d.unlag(cl)
		}
	}
	d.mu.Unlock()
	for _, cl := range slow {
		d.Stats.SlowExpelled.Add(1)
		// Stop closes the socket without writing to it (a DISCONNECT
		// would wait on the very queue that is full).
		cl.Stop(packets.ErrPendingClientWritesExceeded)
	}
}
