package hooks

import (
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
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
	policy Policy
	d      *Delivery
}

// NewGuard returns the ACL hook. A nil policy allows everything.
func NewGuard(d *Delivery, policy Policy) *Guard {
	if policy == nil {
		policy = func(*mqtt.Client, string, bool) bool { return true }
	}
	return &Guard{policy: policy, d: d}
}

// ID implements mqtt.Hook.
func (g *Guard) ID() string { return "presence-guard" }

// Provides implements mqtt.Hook.
func (g *Guard) Provides(b byte) bool { return b == mqtt.OnACLCheck }

// OnACLCheck implements mqtt.Hook.
func (g *Guard) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	if !g.policy(cl, topic, write) {
		return false
	}
	if write || cl.Net.Inline {
		return true
	}
	return g.d.mayDeliver(cl, topic)
}

// Authenticator is a hook that decides who may connect and nothing else:
// with a Guard, the program's authentication must not come with an
// OnACLCheck of its own (mochi's auth.Hook and auth.AllowHook have one).
// A nil Check lets every client connect.
type Authenticator struct {
	mqtt.HookBase
	Check func(cl *mqtt.Client, pk packets.Packet) bool
}

// ID implements mqtt.Hook.
func (a *Authenticator) ID() string { return "presence-authenticator" }

// Provides implements mqtt.Hook.
func (a *Authenticator) Provides(b byte) bool { return b == mqtt.OnConnectAuthenticate }

// OnConnectAuthenticate implements mqtt.Hook.
func (a *Authenticator) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	return a.Check == nil || a.Check(cl, pk)
}
