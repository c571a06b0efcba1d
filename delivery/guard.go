package delivery

import (
	"strings"

	mqtt "github.com/mochi-mqtt/server/v2"

	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/internal/filter"
)

// Policy is a program's access decision: may cl write (publish) or read
// (subscribe to, or receive) topic.
type Policy func(cl *mqtt.Client, topic string, write bool) bool

// Guard is the one OnACLCheck hook of a server on which presence decides
// what each subscriber receives: mochi grants an access that any hook
// allows, so presence can refuse a delivery only where no other hook
// answers OnACLCheck. The program's decision (Policy) comes first; for a
// read the program allows, Delivery then decides: a message sent again
// reaches only the subscribers that missed it, a retained copy of what a
// subscriber already has is not delivered again, and the rewritten wills
// reach nobody.
type Guard struct {
	mqtt.HookBase
	o GuardOptions
}

// Viewers tells who reads through a connection: its user ("" for an
// observer) and whether it is a service account (hooks.Presence).
type Viewers interface {
	Viewer(cl *mqtt.Client) (user string, service bool)
}

// GuardOptions configure the Guard.
type GuardOptions struct {
	Delivery *Delivery
	// Viewers tells who reads through a connection (the presence hook);
	// nil: every connection is a service account.
	Viewers Viewers
	// Policy is the program's decision; nil allows everything.
	Policy Policy
	// Sees decides whether viewer may read user's presence (never asked of
	// service accounts, nor of a user about themself); nil: everyone's.
	// presence.visibility self refuses all; groups asks the roster.
	Sees func(viewer, user string) bool
	// SeesGroup decides whether viewer may read group's topic (never asked
	// of service accounts); nil: every group's.
	SeesGroup func(viewer, group string) bool
	// NodesPrivate keeps presence/nodes/{node} (and filters under
	// presence/nodes/) to service accounts (presence.visibility self and
	// groups: a node's session count says how many people are online).
	NodesPrivate bool
	// Notify keeps prefix/notify/{user} (package notify) to that user's
	// connections and to service accounts: a filter with a wildcard there
	// is granted, and each delivery is checked with its topic name.
	Notify bool
	// Topics decides the application topics (everything outside the
	// presence prefix, and filters that do not name it) of connections
	// that are not service accounts; nil: DefaultTopics.
	Topics Topics
	// Private reports whether a topic or filter reaches the topics that
	// only service accounts read (unless Topics is not DefaultTopics, an
	// ACL file, and grants the read) and that nobody publishes to, not
	// even a service account: the lifecycle outputs'. nil: none.
	Private func(topicOrFilter string) bool
}

// Topics is an access decision on application topics: may user ("" for an
// anonymous connection) with client id clientID write (publish to) topic,
// or read it (a topic name, or a subscription filter without its
// $share/<group>/). An acl.File is one.
type Topics interface {
	Allows(user, clientID, topic string, write bool) bool
}

// DefaultTopics is the rule without an ACL file: a user publishes and
// subscribes to any application topic; an anonymous connection only
// subscribes; and nobody but a service account subscribes to a filter
// whose first level is a wildcard ("+", "+/+", "+/x", "#": they read every
// application's topics).
type DefaultTopics struct{}

// Allows implements Topics.
func (DefaultTopics) Allows(user, _, topic string, write bool) bool {
	if write {
		return user != ""
	}
	first, _, _ := strings.Cut(topic, "/")
	return first != "+" && first != "#"
}

// NewGuard returns the ACL hook.
func NewGuard(o GuardOptions) *Guard {
	if o.Policy == nil {
		o.Policy = func(*mqtt.Client, string, bool) bool { return true }
	}
	if o.Topics == nil {
		o.Topics = DefaultTopics{}
	}
	return &Guard{o: o}
}

// ID implements mqtt.Hook.
func (g *Guard) ID() string { return "presence-guard" }

// Provides implements mqtt.Hook.
func (g *Guard) Provides(b byte) bool { return b == mqtt.OnACLCheck }

// OnACLCheck is called for a SUBSCRIBE's filters, for every PUBLISH and
// for every delivery, retained ones included, with the topic (or filter)
// and whether it is a write. After the program's policy, a write of a
// connection that is not a service account must pass Topics outside the
// presence prefix (presence's OnPublish decides under it), and a read
// must pass presence's rules (a shared subscription's filter judged
// without its $share/<group>/, $SHARE in any case as mochi takes it):
//   - with Private, a write to a private topic (the lifecycle outputs') is
//     refused to everyone, and a read to all but service accounts unless
//     an ACL file (Topics other than DefaultTopics) grants it; counted;
//   - "#" and "$SYS/..." are for service accounts only (also "+/#",
//     "+/+/#" ..., which read as much);
//   - a topic or filter that does not name the presence prefix must pass
//     Topics (DefaultTopics: no wildcard first level, which would read
//     every application's topics);
//   - with Sees, presence/users/{user} is readable only by that user, by
//     those Sees allows and by service accounts (a wildcard filter is
//     allowed, and each delivery is checked: bob's presence/users/+
//     delivers only bob and those he may see), and with SeesGroup the same
//     holds for presence/groups/{group};
//   - with NodesPrivate, presence/nodes/... (a topic, or a filter under it)
//     is for service accounts only;
//   - with Notify, presence/notify/{user} is readable only by that user's
//     connections and by service accounts (presence/notify/+ is granted,
//     and delivers only the subscriber's own);
//   - the Delivery hook's rules (what is sent again goes only to those who
//     missed it; no retained repeat; no rewritten will).
func (g *Guard) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	if !g.o.Policy(cl, topic, write) {
		return false
	}
	if cl.Net.Inline {
		return true
	}
	user, service := "", true
	if g.o.Viewers != nil {
		user, service = g.o.Viewers.Viewer(cl)
	}
	appUser := user
	if user == "" && !service && cl.Closed() {
		// A persisted session whose connection has ended: the hook has
		// let go of it; the user authenticated is its username (a message
		// for it waits if the Topics rule allows it to that user).
		appUser = string(cl.Properties.Username)
	}
	if g.o.Private != nil {
		if plain := filter.Unshared(topic); g.o.Private(plain) {
			if write {
				g.o.Delivery.Stats.PrivateWritesRefused.Add(1)
				return false
			}
			if _, byDefault := g.o.Topics.(DefaultTopics); !service && (byDefault || !g.o.Topics.Allows(appUser, hooks.ClientID(cl), plain, false)) {
				g.o.Delivery.Stats.PrivateReadsRefused.Add(1)
				return false
			}
		}
	}
	if write {
		// Under the prefix presence's OnPublish decides (presence/set).
		if service || g.o.Delivery.underPrefix(topic) || g.o.Topics.Allows(appUser, hooks.ClientID(cl), topic, true) {
			return true
		}
		g.o.Delivery.Stats.TopicWritesRefused.Add(1)
		return false
	}
	if !service {
		plain := filter.Unshared(topic)
		if everything(plain) || strings.HasPrefix(plain, "$SYS") {
			return false
		}
		if !g.o.Delivery.underPrefix(plain) && !g.o.Topics.Allows(appUser, hooks.ClientID(cl), plain, false) {
			g.o.Delivery.Stats.TopicReadsRefused.Add(1)
			return false
		}
		// A wildcard ("presence/users/+" or ".../#", only ever a filter)
		// is allowed: each delivery is checked with the topic name.
		if u, ok := g.o.Delivery.user(plain); ok && g.o.Sees != nil && u != user && !strings.ContainsAny(u, "+#") && !g.o.Sees(user, u) {
			return false
		}
		if gr, ok := g.o.Delivery.group(plain); ok && g.o.SeesGroup != nil && !strings.ContainsAny(gr, "+#") && !g.o.SeesGroup(user, gr) {
			return false
		}
		if g.o.NodesPrivate && g.o.Delivery.underNodes(plain) {
			return false
		}
		if u, ok := strings.CutPrefix(plain, g.o.Delivery.prefix+"/notify/"); ok && g.o.Notify && !strings.ContainsAny(u, "+#") && (u != appUser || u == "") {
			g.o.Delivery.Stats.NotifyReadsRefused.Add(1)
			return false
		}
	}
	return g.o.Delivery.mayDeliver(cl, topic)
}

// everything reports whether filter reads every topic of some depth
// onwards: "#", "+/#", "+/+/#" ... (each as good as "#").
func everything(filter string) bool {
	for {
		level, rest, more := strings.Cut(filter, "/")
		switch {
		case level == "#" && !more:
			return true
		case level != "+" || !more:
			return false
		}
		filter = rest
	}
}
