package interest

import (
	"strings"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Hook is the mochi hook that tells the stage of the subscriptions mochi
// grants and removes and of the sessions. Add it after presence's hook (it
// asks that hook who reads through a connection).
type Hook struct {
	mqtt.HookBase
	Stage *Stage
}

// ID implements mqtt.Hook.
func (h *Hook) ID() string { return "presence-interest" }

// Provides implements mqtt.Hook.
func (h *Hook) Provides(b byte) bool {
	switch b {
	case mqtt.OnSessionEstablished, mqtt.OnSubscribe, mqtt.OnSubscribed, mqtt.OnUnsubscribed, mqtt.OnDisconnect, mqtt.OnClientExpired:
		return true
	}
	return false
}

// OnSessionEstablished counts the connection's session, and takes over the
// subscriptions it inherited (a persistent session resumed, or taken over
// with clean start off: mochi copies them without an OnSubscribed).
func (h *Hook) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	if cl.Net.Inline {
		return
	}
	s := h.Stage
	user, service := s.o.Viewer(cl)
	s.mu.Lock()
	old := s.clients[cl.ID]
	c := &client{cl: cl, filters: make(map[string]struct{}), viewer: user, service: service}
	for _, sub := range cl.State.Subscriptions.GetAll() {
		c.filters[sub.Filter] = struct{}{}
	}
	s.clients[cl.ID] = c
	if old != nil {
		s.endSessionLocked(old)
		s.applyLocked(old, need{})
	}
	if user != "" {
		c.session = true
		s.sessions[user]++
		if s.sessions[user] == 1 {
			s.needLocked(user, false)
		}
	}
	s.applyLocked(c, s.needOf(c))
	s.mu.Unlock()
	s.wake()
}

// OnSubscribe has the groups stage watch the group topics subscribed to.
// It runs before mochi indexes the filters and before the delivery hook
// (added after this one) takes its fence for the subscription: the groups
// stage takes its topic lock here, and holds that lock while it takes the
// fence to publish a group's snapshot, so a Watch from inside the fence
// (OnSubscribed) could deadlock with it.
func (h *Hook) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	s := h.Stage
	if cl.Net.Inline || s.o.Groups == nil {
		return pk
	}
	for _, f := range pk.Filters {
		if _, ok := s.groupFilter(f.Filter); ok {
			s.o.Groups.Watch(cl, f.Filter)
		}
	}
	return pk
}

// OnSubscribed counts the filters mochi granted. A group topic refused
// (watched by OnSubscribe all the same) that nobody here watches lingers
// out like one given up.
func (h *Hook) OnSubscribed(cl *mqtt.Client, pk packets.Packet, codes []byte) {
	if cl.Net.Inline {
		return
	}
	s := h.Stage
	s.mu.Lock()
	c := s.clientLocked(cl)
	for i, f := range pk.Filters {
		if i < len(codes) && codes[i] >= 0x80 { // refused
			if g, ok := s.groupFilter(f.Filter); ok && s.gwatch[g] == 0 {
				if _, idle := s.gidle[g]; !idle {
					s.gidle[g] = s.o.Now()
				}
			}
			continue
		}
		c.filters[f.Filter] = struct{}{}
	}
	s.applyLocked(c, s.needOf(c))
	s.mu.Unlock()
	s.wake()
}

// OnUnsubscribed forgets the filters given up.
func (h *Hook) OnUnsubscribed(cl *mqtt.Client, pk packets.Packet) {
	if cl.Net.Inline {
		return
	}
	s := h.Stage
	s.mu.Lock()
	if c := s.clients[cl.ID]; c != nil && c.cl == cl {
		for _, f := range pk.Filters {
			delete(c.filters, f.Filter)
		}
		s.applyLocked(c, s.needOf(c))
	}
	s.mu.Unlock()
	s.wake()
}

// OnDisconnect ends the connection's session, and its subscriptions when
// mochi drops them with it (a clean session); a persistent session keeps
// them until it expires or is taken over.
func (h *Hook) OnDisconnect(cl *mqtt.Client, _ error, expire bool) {
	if cl.Net.Inline {
		return
	}
	s := h.Stage
	s.mu.Lock()
	if c := s.clients[cl.ID]; c != nil && c.cl == cl {
		s.endSessionLocked(c)
		if expire && !cl.IsTakenOver() {
			s.applyLocked(c, need{})
			delete(s.clients, cl.ID)
		}
	}
	s.mu.Unlock()
	s.wake()
}

// OnClientExpired forgets an expired persistent session's subscriptions.
func (h *Hook) OnClientExpired(cl *mqtt.Client) {
	s := h.Stage
	s.mu.Lock()
	if c := s.clients[cl.ID]; c != nil && c.cl == cl {
		s.endSessionLocked(c)
		s.applyLocked(c, need{})
		delete(s.clients, cl.ID)
	}
	s.mu.Unlock()
	s.wake()
}

// clientLocked returns cl's record, made when missing (mu is held).
func (s *Stage) clientLocked(cl *mqtt.Client) *client {
	c := s.clients[cl.ID]
	if c == nil || c.cl != cl {
		if c != nil {
			s.endSessionLocked(c)
			s.applyLocked(c, need{})
		}
		user, service := s.o.Viewer(cl)
		c = &client{cl: cl, filters: make(map[string]struct{}), viewer: user, service: service}
		s.clients[cl.ID] = c
	}
	return c
}

// endSessionLocked uncounts a client's session.
func (s *Stage) endSessionLocked(c *client) {
	if !c.session {
		return
	}
	c.session = false
	if s.sessions[c.viewer] > 0 {
		s.sessions[c.viewer]--
		if s.sessions[c.viewer] == 0 {
			delete(s.sessions, c.viewer)
			s.releaseLocked(c.viewer)
		}
	}
}

// needOf is what a client's filters make the node need, under the
// visibility: an exact presence/users/{user} needs that user; a wildcard
// that can read users is the firehose under visibility open or for a
// service account, the viewer's group mates under groups, the viewer under
// self; presence/groups/{group} watches that group's topic; a filter that
// can read presence/nodes/... watches the node topics.
func (s *Stage) needOf(c *client) need {
	n := need{users: make(map[string]struct{}), groups: make(map[string]struct{})}
	for f := range c.filters {
		plain := unshared(f)
		if u, ok := exactLast(plain, s.users); ok {
			n.users[u] = struct{}{}
		} else if canMatch(plain, s.users+"x") {
			switch {
			case c.service || s.o.Visibility == Open:
				n.fire = true
			case s.o.Visibility == ByGroups && s.o.Mates != nil && c.viewer != "":
				for _, m := range s.o.Mates(c.viewer) {
					n.users[m] = struct{}{}
				}
				n.users[c.viewer] = struct{}{}
			case c.viewer != "":
				n.users[c.viewer] = struct{}{}
			}
		}
		if g, ok := s.groupFilter(plain); ok {
			n.groups[g] = struct{}{}
		}
		if canMatch(plain, s.node+"x") {
			n.nodes = true
		}
	}
	return n
}

// applyLocked replaces what c counted with next.
func (s *Stage) applyLocked(c *client, next need) {
	prev := c.need
	for u := range next.users {
		if _, ok := prev.users[u]; !ok {
			s.watchLocked(u)
		}
	}
	for u := range prev.users {
		if _, ok := next.users[u]; !ok {
			s.unwatchLocked(u)
		}
	}
	switch {
	case next.fire && !prev.fire:
		s.fire++
		s.fireIdle = time.Time{}
	case !next.fire && prev.fire:
		s.fire--
		if s.fire == 0 {
			s.fireIdle = s.o.Now()
		}
	}
	for g := range next.groups {
		if _, ok := prev.groups[g]; !ok {
			s.gwatch[g]++
			delete(s.gidle, g)
		}
	}
	for g := range prev.groups {
		if _, ok := next.groups[g]; !ok {
			if s.gwatch[g]--; s.gwatch[g] <= 0 {
				delete(s.gwatch, g)
				s.gidle[g] = s.o.Now()
			}
		}
	}
	if next.nodes != prev.nodes {
		before := s.nwatch > 0
		if next.nodes {
			s.nwatch++
		} else {
			s.nwatch--
		}
		if after := s.nwatch > 0; after != before && s.o.NodesWatched != nil {
			s.o.NodesWatched(after) // must not block: it is told under mu
		}
	}
	c.need = next
}

// Regroup recomputes what the wildcard subscribers need after the groups
// changed (visibility groups: their mates).
func (s *Stage) Regroup() {
	if s.o.Visibility != ByGroups {
		return
	}
	s.mu.Lock()
	for _, c := range s.clients {
		s.applyLocked(c, s.needOf(c))
	}
	s.mu.Unlock()
	s.wake()
}

// following reports whether an inline subscription is followed (tests).
func (s *Stage) following(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.follows[id]
	return ok
}

// exactLast returns the user of a filter that reads one user's topic only:
// presence/users/{user}, or a filter whose levels are those of base then a
// user, with wildcards before the last level only ("presence/+/bob" reads
// bob's only, of the user topics).
func exactLast(filter, base string) (string, bool) {
	if u, ok := strings.CutPrefix(filter, base); ok {
		return u, u != "" && !strings.ContainsAny(u, "/+#")
	}
	i := strings.LastIndexByte(filter, '/')
	if i < 0 || strings.Count(filter, "/") != strings.Count(base, "/") {
		return "", false
	}
	u := filter[i+1:]
	if u == "" || strings.ContainsAny(u, "+#") || !canMatch(filter[:i+1]+"x", base+"x") {
		return "", false
	}
	return u, true
}

// groupFilter returns the group of an exact presence/groups/{group} filter.
func (s *Stage) groupFilter(filter string) (string, bool) {
	g, ok := strings.CutPrefix(filter, s.groups)
	return g, ok && g != "" && !strings.ContainsAny(g, "/+#")
}

// unshared returns the filter of a shared subscription ($share/<name>/f),
// or filter itself.
func unshared(filter string) string {
	if rest, ok := strings.CutPrefix(filter, "$share/"); ok {
		if _, f, ok := strings.Cut(rest, "/"); ok {
			return f
		}
	}
	return filter
}

// canMatch reports whether filter can match the topic example (of the
// right depth), by MQTT's wildcard rules.
func canMatch(filter, example string) bool {
	fl, tl := strings.Split(filter, "/"), strings.Split(example, "/")
	for i, level := range fl {
		if level == "#" {
			return true
		}
		if i >= len(tl) || (level != "+" && level != tl[i] && i != len(tl)-1) {
			return false
		}
	}
	return len(fl) == len(tl)
}

// Follow counts an inline subscription of the program's own (mochi's
// Server.Subscribe, which no hook is told of) as interest: the program is
// a service account, so a wildcard over users is a firehose. id names the
// subscription (its subscription id); Unfollow forgets it.
func (s *Stage) Follow(id, filter string) {
	s.mu.Lock()
	c := s.follows[id]
	if c == nil {
		c = &client{filters: make(map[string]struct{}), service: true}
		s.follows[id] = c
	}
	c.filters[filter] = struct{}{}
	n := s.needOf(c)
	n.groups = nil // an inline subscription reads a group topic's snapshot as retained only
	s.applyLocked(c, n)
	s.mu.Unlock()
	s.wake()
}

// Unfollow forgets an inline subscription's filter.
func (s *Stage) Unfollow(id, filter string) {
	s.mu.Lock()
	if c := s.follows[id]; c != nil {
		delete(c.filters, filter)
		n := s.needOf(c)
		n.groups = nil
		s.applyLocked(c, n)
		if len(c.filters) == 0 {
			delete(s.follows, id)
		}
	}
	s.mu.Unlock()
	s.wake()
}
