package presenced

// Move asks this node to move one client, as a drain does (see
// hooks.Drain.Move): the canary's drain of one synthetic session. It
// reports false when no connection has the client id.
func (p *Plugin) Move(clientID string) bool {
	cl, ok := p.srv.Clients.Get(clientID)
	if !ok {
		return false
	}
	return p.drain.Move(cl)
}
