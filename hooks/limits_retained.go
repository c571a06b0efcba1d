package hooks

import (
	"strings"
	"sync"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// RetainedLimits bound the retained messages clients leave outside the
// presence prefix, in total and per user (the connection's username, which
// the authentication hook has set). A zero limit is no limit.
type RetainedLimits struct {
	Prefix       string // presence's topic prefix: its retained messages are not counted
	Max          int    // retained messages
	MaxBytes     int64  // their bytes (topic and payload)
	MaxPerUser   int
	BytesPerUser int64
}

// any reports whether a limit is set.
func (r RetainedLimits) any() bool {
	return r.Max > 0 || r.MaxBytes > 0 || r.MaxPerUser > 0 || r.BytesPerUser > 0
}

// retained is what Limits keeps of the retained messages outside the
// prefix: who left each and its size, counted per user and in total.
// mochi tells of a message kept or cleared in OnRetainMessage and of one
// purged in OnRetainedExpired; OnPublish refuses one over a limit before
// mochi keeps it. Two publishes at once may both pass the check: the
// limits are exceeded by at most the publishes in progress.
type retained struct {
	mu     sync.Mutex
	topics map[string]owned
	users  map[string]*tally
	total  tally
}

type owned struct {
	user  string
	bytes int64
}

type tally struct {
	n     int
	bytes int64
}

func (r *retained) init() {
	r.topics = make(map[string]owned)
	r.users = make(map[string]*tally)
}

// retainCounted reports whether topic is one the retained limits count.
func (l *Limits) retainCounted(topic string) bool {
	p := l.o.Retained.Prefix
	return p == "" || (topic != p && !strings.HasPrefix(topic, p+"/"))
}

// OnPublish refuses a retained message outside the presence prefix that
// would take its user or the broker over a retained limit: an MQTT 5
// QoS 1/2 publish gets PUBACK/PUBREC 0x97 (quota exceeded) and is not
// delivered; any other is delivered but not retained. An empty payload
// (which clears) always passes.
func (l *Limits) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if !pk.FixedHeader.Retain || len(pk.Payload) == 0 || cl.Net.Inline || !l.o.Retained.any() || !l.retainCounted(pk.TopicName) {
		return pk, nil
	}
	if l.retainable(cl.Properties.Username, pk.TopicName, int64(len(pk.TopicName)+len(pk.Payload))) {
		return pk, nil
	}
	l.Stats.RetainedRefused.Add(1)
	l.o.Log.Debug("retained message refused: over the retained limits", "client", ClientID(cl), "topic", pk.TopicName)
	if cl.Properties.ProtocolVersion == 5 && pk.FixedHeader.Qos > 0 {
		// Answered here, as presence's refusals are: a reason code
		// returned to mochi is logged by it at error, once per packet.
		return refusePublish(l.o.Server, cl, pk, packets.ErrQuotaExceeded)
	}
	pk.FixedHeader.Retain = false
	return pk, nil
}

// retainable reports whether user may leave a retained message of size
// bytes on topic (replacing what is there).
func (l *Limits) retainable(user []byte, topic string, size int64) bool {
	o := l.o.Retained
	r := &l.retained
	r.mu.Lock()
	defer r.mu.Unlock()
	u := string(user)
	var mine tally
	if t := r.users[u]; t != nil {
		mine = *t
	}
	total := r.total
	if old, ok := r.topics[topic]; ok { // replaced: its old size leaves its owner
		total.n--
		total.bytes -= old.bytes
		if old.user == u {
			mine.n--
			mine.bytes -= old.bytes
		}
	}
	return (o.Max <= 0 || total.n+1 <= o.Max) && (o.MaxBytes <= 0 || total.bytes+size <= o.MaxBytes) &&
		(o.MaxPerUser <= 0 || mine.n+1 <= o.MaxPerUser) && (o.BytesPerUser <= 0 || mine.bytes+size <= o.BytesPerUser)
}

// OnRetainMessage counts a retained message kept (r 1) against the user
// who published it, or stops counting one cleared.
func (l *Limits) OnRetainMessage(cl *mqtt.Client, pk packets.Packet, r int64) {
	if !l.retainCounted(pk.TopicName) {
		return
	}
	l.retained.mu.Lock()
	defer l.retained.mu.Unlock()
	l.forgetRetained(pk.TopicName)
	if r == 1 {
		u := cl.Properties.Username
		o := owned{user: string(u), bytes: int64(len(pk.TopicName) + len(pk.Payload))}
		l.retained.topics[pk.TopicName] = o
		t := l.retained.users[o.user]
		if t == nil {
			t = new(tally)
			l.retained.users[o.user] = t
		}
		t.n++
		t.bytes += o.bytes
		l.retained.total.n++
		l.retained.total.bytes += o.bytes
	}
}

// OnRetainedExpired stops counting a retained message mochi purged.
func (l *Limits) OnRetainedExpired(topic string) {
	l.retained.mu.Lock()
	defer l.retained.mu.Unlock()
	l.forgetRetained(topic)
}

// forgetRetained stops counting topic's retained message; retained.mu is
// held.
func (l *Limits) forgetRetained(topic string) {
	r := &l.retained
	old, ok := r.topics[topic]
	if !ok {
		return
	}
	delete(r.topics, topic)
	r.total.n--
	r.total.bytes -= old.bytes
	if t := r.users[old.user]; t != nil {
		if t.n--; t.n <= 0 {
			delete(r.users, old.user)
		} else {
			t.bytes -= old.bytes
		}
	}
}

// RetainedCounts returns the retained messages counted and their bytes.
func (l *Limits) RetainedCounts() (n int, bytes int64) {
	l.retained.mu.Lock()
	defer l.retained.mu.Unlock()
	return l.retained.total.n, l.retained.total.bytes
}
