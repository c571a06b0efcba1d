package interest

import (
	"maps"
	"strings"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/filter"
)

// Hook is the mochi hook that tells the stage of the subscriptions mochi
// grants and removes. Add it after presence's hook (it
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
	case mqtt.OnSessionEstablished, mqtt.OnSubscribed, mqtt.OnUnsubscribed, mqtt.OnDisconnect, mqtt.OnClientExpired:
		return true
	}
	return false
}

// OnSessionEstablished takes over the subscriptions a connection
// inherited (a persistent session resumed, or taken over with clean start
// off: mochi copies them without an OnSubscribed), and drops what an older
// connection with the same client id counted. A connection that subscribes
// to nothing costs the stage nothing: its session makes no interest (the
// node need not hear the users of its own sessions).
func (h *Hook) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	if cl.Net.Inline {
		return
	}
	s := h.Stage
	subs := cl.State.Subscriptions.GetAll()
	maps.DeleteFunc(subs, func(f string, _ packets.Subscription) bool { return !s.reads(f) })
	var user string
	var service bool
	if len(subs) > 0 {
		user, service = s.o.Viewer(cl)
	}
	s.mu.Lock()
	old := s.clients[cl.ID]
	if old == nil && len(subs) == 0 {
		s.mu.Unlock()
		return
	}
	delete(s.clients, cl.ID)
	var inherited map[string]struct{}
	if len(subs) > 0 { // counted before the old one is dropped: no watcher count falls to 0 between
		c := &client{cl: cl, filters: make(map[string]struct{}, len(subs)), viewer: user, service: service}
		for _, sub := range subs {
			c.filters[sub.Filter] = struct{}{}
		}
		s.clients[cl.ID] = c
		s.applyLocked(c, s.needOf(c))
		inherited = maps.Clone(c.filters)
	}
	if old != nil {
		s.applyLocked(old, need{})
	}
	s.mu.Unlock()
	s.wake()
	s.tellNodes(inherited)
}

// OnSubscribed counts the filters mochi granted that can read presence (a
// user's, a group's or a node's topic). A SUBSCRIBE of application topics
// only costs the stage no lock and no record: it returns at once.
func (h *Hook) OnSubscribed(cl *mqtt.Client, pk packets.Packet, codes []byte) {
	if cl.Net.Inline {
		return
	}
	s := h.Stage
	var groups []string
	var granted map[string]struct{}
	for i, f := range pk.Filters {
		if i < len(codes) && codes[i] >= 0x80 || !s.reads(f.Filter) { // refused, or no presence
			continue
		}
		if granted == nil {
			granted = make(map[string]struct{}, len(pk.Filters))
		}
		granted[f.Filter] = struct{}{}
		if g, ok := s.groupFilter(f.Filter); ok {
			groups = append(groups, g)
		}
	}
	if granted == nil {
		return
	}
	s.mu.Lock()
	c := s.clientLocked(cl)
	for f := range granted {
		c.filters[f] = struct{}{}
	}
	s.applyLocked(c, s.needOf(c))
	s.mu.Unlock()
	s.wake()
	if s.o.Groups != nil {
		for _, g := range groups {
			s.o.Groups.Watch(cl, s.groups+g)
		}
	}
	s.tellNodes(granted)
}

// reads reports whether a filter can read presence: a user's, a group's or
// a node's topic (what needOf and tellNodes look at).
func (s *Stage) reads(f string) bool {
	plain := filter.Unshared(f)
	if _, ok := exactLast(plain, s.users); ok {
		return true
	}
	_, group := s.groupFilter(plain)
	return group || canMatch(plain, s.users+"x") || canMatch(plain, s.node+"x")
}

// tellNodes tells Options.Nodes of the filters that can read a node topic.
func (s *Stage) tellNodes(filters map[string]struct{}) {
	if s.o.Nodes == nil {
		return
	}
	for f := range filters {
		if canMatch(filter.Unshared(f), s.node+"x") {
			s.o.Nodes(f)
		}
	}
}

// OnUnsubscribed forgets the filters given up.
func (h *Hook) OnUnsubscribed(cl *mqtt.Client, pk packets.Packet) {
	if cl.Net.Inline {
		return
	}
	s := h.Stage
	s.mu.Lock()
	c := s.clients[cl.ID]
	if c == nil || c.cl != cl {
		s.mu.Unlock()
		return // it never subscribed to presence: nothing to forget, nobody to wake
	}
	for _, f := range pk.Filters {
		delete(c.filters, f.Filter)
	}
	s.applyLocked(c, s.needOf(c))
	s.mu.Unlock()
	s.wake()
}

// OnDisconnect drops the connection's subscriptions when mochi drops them
// with it (a clean session); a persistent session keeps them until it
// expires or is taken over.
func (h *Hook) OnDisconnect(cl *mqtt.Client, _ error, expire bool) {
	if cl.Net.Inline {
		return
	}
	s := h.Stage
	s.mu.Lock()
	c := s.clients[cl.ID]
	if c == nil || c.cl != cl || !expire || cl.IsTakenOver() {
		s.mu.Unlock()
		return // nothing counted, or kept with its persistent session
	}
	s.applyLocked(c, need{})
	delete(s.clients, cl.ID)
	s.mu.Unlock()
	s.wake()
}

// OnClientExpired forgets an expired persistent session's subscriptions.
func (h *Hook) OnClientExpired(cl *mqtt.Client) {
	s := h.Stage
	s.mu.Lock()
	c := s.clients[cl.ID]
	if c == nil || c.cl != cl {
		s.mu.Unlock()
		return
	}
	s.applyLocked(c, need{})
	delete(s.clients, cl.ID)
	s.mu.Unlock()
	s.wake()
}

// clientLocked returns cl's record, made when missing (mu is held).
func (s *Stage) clientLocked(cl *mqtt.Client) *client {
	c := s.clients[cl.ID]
	if c == nil || c.cl != cl {
		if c != nil {
			s.applyLocked(c, need{})
		}
		user, service := s.o.Viewer(cl)
		c = &client{cl: cl, filters: make(map[string]struct{}), viewer: user, service: service}
		s.clients[cl.ID] = c
	}
	return c
}

// needOf is what a client's filters make the node need, under the
// visibility: an exact presence/users/{user} needs that user; a wildcard
// that can read users is the firehose under visibility open or for a
// service account, the viewer's group mates under groups, the viewer under
// self; presence/groups/{group} watches that group's topic.
func (s *Stage) needOf(c *client) need {
	n := need{users: make(map[string]struct{}), groups: make(map[string]struct{})}
	for f := range c.filters {
		plain := filter.Unshared(f)
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
