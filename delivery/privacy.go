package delivery

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/presence"
)

// Privacy is the mochi hook that gives the user themself and service
// accounts their true presence, per delivery, retained deliveries
// included (issue 22; docs/presence.md, "Privacy: invisible and
// last_seen"). What mochi holds, retains and delivers of a user with a
// privacy setting is only ever the public view (publisher.Publisher
// publishes presence.Aggregate.Public), so nothing private leaves the node
// by default. Privacy keeps, for those users only, the latest true payload
// beside the latest public one (publisher.Privy: Keep, Forget), and at
// OnPacketEncode, the last moment before a PUBLISH of
// presence/users/{user} is written to one connection, it chooses for that
// connection (Choose): the truth for the user and for service accounts,
// the latest public view for everyone else. A change that left the
// public view as it was goes to the entitled subscriptions alone (Send),
// through the Guard's targets.
//
// Its map is bounded by the users this node shows that have a privacy
// setting; OnPacketEncode costs one atomic load for every packet while
// there are none. Lock order: the publisher's lock, then mu.
type Privacy struct {
	mqtt.HookBase
	users   string // prefix/users/
	viewers Viewers
	outlet  *Outlet
	guarded bool // a Guard keeps what is sent again to its targets

	mu sync.RWMutex
	m  map[string]kept
	n  atomic.Int64 // len(m)

	Stats PrivacyStats
}

// PrivacyStats are the hook's counts, read with atomic loads.
type PrivacyStats struct {
	Upgraded   atomic.Int64 // presence deliveries given the truth (the user's own, a service account's)
	Downgraded atomic.Int64 // presence deliveries given the public view instead of what they held
	Sent       atomic.Int64 // true changes sent to entitled subscriptions only
	Unsent     atomic.Int64 // true changes not sent: no Guard to keep them to the entitled
}

// kept is what the hook keeps of one user: the latest public payload,
// the truth at the same version, and the latest truth (a change of the
// truth alone moves it on).
type kept struct {
	public, truthAtPublic, truth []byte
}

// PrivacyOptions configure the hook.
type PrivacyOptions struct {
	Prefix  string  // topic prefix, e.g. "presence"
	Viewers Viewers // who reads through a connection (the presence hook)
	Outlet  *Outlet // to send a change to the entitled subscriptions only
	// Guarded: the server has the Guard (presence is its ACL authority),
	// which alone keeps a message to its targets; without it a change of
	// the truth alone is sent to nobody.
	Guarded bool
}

// NewPrivacy returns the hook.
func NewPrivacy(o PrivacyOptions) *Privacy {
	return &Privacy{users: o.Prefix + "/users/", viewers: o.Viewers, outlet: o.Outlet, guarded: o.Guarded, m: make(map[string]kept)}
}

// ID implements mqtt.Hook.
func (h *Privacy) ID() string { return "presence-privacy" }

// Provides implements mqtt.Hook.
func (h *Privacy) Provides(b byte) bool { return b == mqtt.OnPacketEncode }

// Keep implements publisher.Privy.
func (h *Privacy) Keep(user string, public, truth []byte) {
	h.mu.Lock()
	k, ok := h.m[user]
	if !ok {
		h.n.Add(1)
	}
	if !ok || !bytes.Equal(k.public, public) {
		k.truthAtPublic = truth // a new public view, published with this truth
	}
	k.public, k.truth = public, truth
	h.m[user] = k
	h.mu.Unlock()
}

// Forget implements publisher.Privy.
func (h *Privacy) Forget(user string) {
	h.mu.Lock()
	if _, ok := h.m[user]; ok {
		delete(h.m, user)
		h.n.Add(-1)
	}
	h.mu.Unlock()
}

// Users returns how many users the hook keeps the truth of.
func (h *Privacy) Users() int64 { return h.n.Load() }

// Send implements publisher.Privy: the subscriptions of topic on this node
// that are entitled to user's truth (presence.Entitled) get payload, not
// retained; nobody else does (the Guard keeps it to them).
func (h *Privacy) Send(user string, version uint64, topic string, payload []byte) error {
	if !h.guarded || h.outlet == nil || h.viewers == nil {
		h.Stats.Unsent.Add(1)
		return nil
	}
	to := h.outlet.Subscribers(topic, func(cl *mqtt.Client) bool {
		viewer, service := h.viewers.Viewer(cl)
		return presence.Entitled(viewer, service, user)
	})
	if len(to) == 0 {
		return nil
	}
	h.Stats.Sent.Add(int64(len(to)))
	return h.outlet.SendTo(user, to)(version, topic, payload)
}

// OnPacketEncode gives the PUBLISH of a user's presence the payload that
// connection cl is entitled to (Choose).
func (h *Privacy) OnPacketEncode(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if h.n.Load() == 0 || pk.FixedHeader.Type != packets.Publish || cl.Net.Inline {
		return pk
	}
	user, byTopic := h.userOf(pk)
	if user == "" {
		return pk
	}
	h.mu.RLock()
	k, ok := h.m[user]
	h.mu.RUnlock()
	if !ok {
		return pk
	}
	viewer, service := "", false
	if h.viewers != nil {
		viewer, service = h.viewers.Viewer(cl)
	}
	out := k.choose(pk.Payload, byTopic, pk.FixedHeader.Retain, presence.Entitled(viewer, service, user))
	if !bytes.Equal(out, pk.Payload) {
		if bytes.Equal(out, k.truth) {
			h.Stats.Upgraded.Add(1)
		} else {
			h.Stats.Downgraded.Add(1)
		}
		pk.Payload = out
	}
	return pk
}

// Inline wraps the handler of an inline subscription (the program's own,
// a service account): a user's presence reaches it as the truth.
func (h *Privacy) Inline(fn mqtt.InlineSubFn) mqtt.InlineSubFn {
	return func(cl *mqtt.Client, sub packets.Subscription, pk packets.Packet) {
		if h.n.Load() > 0 {
			if user, byTopic := h.userOf(pk); user != "" {
				h.mu.RLock()
				k, ok := h.m[user]
				h.mu.RUnlock()
				if ok {
					pk.Payload = k.choose(pk.Payload, byTopic, false, true)
				}
			}
		}
		fn(cl, sub, pk)
	}
}

// userOf returns the user whose presence pk may be: the {user} of its
// topic presence/users/{user} (byTopic), or, for a PUBLISH whose topic
// name a topic alias replaced, the "user" its payload starts with.
func (h *Privacy) userOf(pk packets.Packet) (user string, byTopic bool) {
	if pk.TopicName != "" {
		u, ok := strings.CutPrefix(pk.TopicName, h.users)
		if !ok || u == "" || strings.Contains(u, "/") {
			return "", false
		}
		return u, true
	}
	return payloadUser(pk.Payload), false
}

// payloadUser reads the user a presence payload starts with
// (presence.Aggregate.AppendJSON writes it first), "" when it does not.
func payloadUser(b []byte) string {
	const head = `{"user":"`
	if !bytes.HasPrefix(b, []byte(head)) {
		return ""
	}
	end := bytes.Index(b[len(head)-1:], []byte(`","status":`))
	if end < 0 {
		return ""
	}
	var u string
	if json.Unmarshal(b[len(head)-1:len(head)-1+end+1], &u) != nil {
		return ""
	}
	return u
}

// choose is Choose over what k keeps.
func (k kept) choose(payload []byte, byTopic, retained, entitled bool) []byte {
	return Choose(k.public, k.truthAtPublic, k.truth, payload, byTopic, retained, entitled)
}

// Choose is the per-delivery decision for a PUBLISH carrying payload to a
// connection, for a user whose latest public payload is public (published
// with the truth truthAtPublic) and whose latest true payload is truth:
// entitled (presence.Entitled: the user, a service account) gets the
// truth, everyone else the public view, and no version twice:
//
//   - entitled, on the user's own topic (byTopic; only the broker
//     publishes there): a retained delivery (on subscribe) gets the latest
//     truth; a live one the truth of its own version (the latest truth,
//     or the one published with the public view), else it is left as it
//     is (an older public view still queued: the truth follows);
//   - entitled, without the topic (a topic alias): a payload that is the
//     public view gets the truth published with it;
//   - anyone else: a payload that is a truth gets the latest public view
//     instead (mochi never holds a truth for them: a safety net).
func Choose(public, truthAtPublic, truth, payload []byte, byTopic, retained, entitled bool) []byte {
	switch {
	case entitled && byTopic && retained:
		return truth
	case entitled && bytes.Equal(payload, public):
		return truthAtPublic
	case entitled:
		return payload
	case bytes.Equal(payload, truth) || bytes.Equal(payload, truthAtPublic):
		return public
	}
	return payload
}
