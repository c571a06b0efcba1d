package hooks

import (
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Authenticator is a hook that decides who may connect and nothing else:
// with a Guard (package delivery), the program's authentication must not come with an
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
