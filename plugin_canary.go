package presenced

import "github.com/presenced/presenced/presence"

// Move asks this node to move one client of user, as a drain does (see
// hooks.Drain.Move): the canary's drain of one synthetic session. It
// reports false when no connection has the client id.
func (p *Plugin) Move(user, clientID string) bool {
	cl, ok := p.srv.Clients.Get(presence.ClientKey(user, clientID))
	if !ok {
		if cl, ok = p.srv.Clients.Get(clientID); !ok {
			return false
		}
	}
	return p.drain.Move(cl)
}
