package notify

import (
	"slices"
	"time"
)

// Message is one message published on presence/notify/{user}.
type Message struct {
	ID       string    // idempotency key: the node that took it, its start and a sequence
	User     string    // the user it is for
	Payload  []byte    // as published
	QoS      byte      // as published, at most 1
	QueuedAt time.Time // when the node took it
}

// Session is a live session of a user, as the store reports it.
type Session struct {
	Node  string
	ID    string
	Epoch uint64
}

// Forward is a message to send to another node, which holds a session of
// the user that was not live when the message was held (it returned).
type Forward struct {
	Node string
	Msg  Message
}

// held is a message waiting on this node.
type held struct {
	msg      Message
	deadline time.Time
	// seen are the sessions live when it was held (they had it, or hold a
	// copy of their own) or that it was sent to since: a session not in
	// seen is one that returned.
	seen map[Session]struct{}
	// local: a session of this node returned; the message waits for its
	// subscription (Take) or its deadline.
	local bool
}

// Machine holds the messages waiting on this node, per user, oldest first,
// each with its deadline. It is pure: no clock, no I/O, no goroutine; the
// stage gives it the time and the sessions it read, and acts on what it
// answers. It is not safe for concurrent use (the stage's goroutine owns
// it).
type Machine struct {
	node              string
	maxPerUser, limit int
	users             map[string][]*held
	total             int
}

// NewMachine returns a machine for node, which holds at most maxPerUser
// messages of one user and limit in all.
func NewMachine(node string, maxPerUser, limit int) *Machine {
	return &Machine{node: node, maxPerUser: max(maxPerUser, 1), limit: max(limit, 1), users: make(map[string][]*held)}
}

// Len is how many messages wait; Users how many users have one.
func (m *Machine) Len() int   { return m.total }
func (m *Machine) Users() int { return len(m.users) }

// Waiting reports whether user has a message waiting.
func (m *Machine) Waiting(user string) bool { return len(m.users[user]) > 0 }

// Hold keeps msg until deadline. seen are the user's sessions that had it
// already (or hold their own copy). When the user already has maxPerUser
// messages waiting, the oldest is dropped (returned, evicted); when the
// machine holds limit messages in all, msg itself is refused (refused).
func (m *Machine) Hold(msg Message, deadline time.Time, seen []Session) (evicted []Message, refused bool) {
	q := m.users[msg.User]
	if len(q) >= m.maxPerUser {
		n := len(q) - m.maxPerUser + 1
		for _, h := range q[:n] {
			evicted = append(evicted, h.msg)
		}
		q = slices.Delete(q, 0, n)
		m.total -= n
	}
	if m.total >= m.limit {
		m.set(msg.User, q)
		return evicted, true
	}
	h := &held{msg: msg, deadline: deadline, seen: make(map[Session]struct{}, len(seen))}
	for _, s := range seen {
		h.seen[s] = struct{}{}
	}
	m.set(msg.User, append(q, h))
	m.total++
	return evicted, false
}

// set stores a user's queue, or forgets the user when it is empty.
func (m *Machine) set(user string, q []*held) {
	if len(q) == 0 {
		delete(m.users, user)
		return
	}
	m.users[user] = q
}

// Live tells the machine the user's live sessions now (from a change
// heard, or a read of the store). Each waiting message goes to the nodes of
// the sessions that returned (not seen): another node's are returned as
// forwards, and the message is done with; this node's own mark the message
// to wait for that session's subscription (Take), or its deadline.
func (m *Machine) Live(user string, live []Session) []Forward {
	q := m.users[user]
	if len(q) == 0 {
		return nil
	}
	var out []Forward
	keep := q[:0]
	for _, h := range q {
		sent := map[string]bool{}
		for _, s := range live {
			if _, ok := h.seen[s]; ok {
				continue
			}
			h.seen[s] = struct{}{}
			if s.Node == m.node {
				h.local = true
				continue
			}
			if !sent[s.Node] {
				sent[s.Node] = true
				out = append(out, Forward{Node: s.Node, Msg: h.msg})
			}
		}
		if len(sent) > 0 && !h.local {
			m.total--
			continue
		}
		keep = append(keep, h)
	}
	clear(q[len(keep):])
	m.set(user, keep)
	return out
}

// Take removes and returns every message of user, oldest first: a
// connection of the user subscribed to its notify topic on this node.
func (m *Machine) Take(user string) []Message {
	q := m.users[user]
	out := make([]Message, len(q))
	for i, h := range q {
		out[i] = h.msg
	}
	m.total -= len(q)
	delete(m.users, user)
	return out
}

// Due returns the users with a message whose deadline is at or before now.
func (m *Machine) Due(now time.Time) []string {
	var out []string
	for u, q := range m.users {
		for _, h := range q {
			if !h.deadline.After(now) {
				out = append(out, u)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// Expire removes and returns user's messages whose deadline is at or
// before now: the stage, having read the user, pushes them when the user is
// offline, and drops them when it is online (its sessions had them, or
// never subscribed).
func (m *Machine) Expire(user string, now time.Time) []Message {
	q := m.users[user]
	var out []Message
	keep := q[:0]
	for _, h := range q {
		if h.deadline.After(now) {
			keep = append(keep, h)
			continue
		}
		out = append(out, h.msg)
	}
	clear(q[len(keep):])
	m.total -= len(out)
	m.set(user, keep)
	return out
}

// Next returns the earliest deadline (zero: nothing waits).
func (m *Machine) Next() time.Time {
	var next time.Time
	for _, q := range m.users {
		for _, h := range q {
			if next.IsZero() || h.deadline.Before(next) {
				next = h.deadline
			}
		}
	}
	return next
}

// Verdict is what becomes of a message when it is published.
type Verdict int

// The verdicts.
const (
	Route Verdict = iota + 1 // the user has live sessions: send it to their nodes
	Wait                     // the user's last session ended within the grace: hold it until the deadline
	Push                     // the user is offline: push now
)

// Decide is the rule for a message published for a user with live
// sessions live, last seen at lastSeen (the store's time of its last
// session's end, or of that session's last packet when it ended for its
// keep-alive: the grace counts from the last sign of life, as the
// presence pacing's does; zero: never), now: route it to the live
// sessions; else hold it while the user may come back within grace of
// that (never
// longer than grace from now, whatever the clocks say); else push.
func Decide(live int, lastSeen, now time.Time, grace time.Duration) (Verdict, time.Time) {
	if live > 0 {
		return Route, time.Time{}
	}
	if grace <= 0 || lastSeen.IsZero() {
		return Push, time.Time{}
	}
	end := lastSeen.Add(grace)
	if !end.After(now) {
		return Push, time.Time{}
	}
	if cap := now.Add(grace); end.After(cap) {
		end = cap
	}
	return Wait, end
}
