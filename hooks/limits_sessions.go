package hooks

import (
	"errors"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/connack"
)

// Persistent sessions per user. mochi keeps a persistent session (3.1.1
// clean session off, MQTT 5 session expiry above 0) after its connection
// ends, with its subscriptions and queued messages, for up to
// MaximumSessionExpiryInterval: a user could leave any number behind under
// fresh client ids. Limits counts them by user (the connection's username,
// set by the authentication hook) from OnSessionEstablished until mochi
// lets them go (OnDisconnect of one that expires at once, OnClientExpired),
// and refuses a CONNECT that would make one more.

// persisted is a persistent session Limits counts.
type persisted struct {
	user string
	cl   *mqtt.Client
}

// errPersistent stops a CONNECT over MaxPersistentPerUser; the hook has
// already answered it.
var errPersistent = errors.New("presence: too many persistent sessions")

// persistentConnect reports whether a CONNECT asks for a persistent session.
func persistentConnect(pk packets.Packet) bool {
	if pk.ProtocolVersion == 5 {
		return pk.Properties.SessionExpiryInterval > 0
	}
	return !pk.Connect.Clean
}

// persistentClient reports whether an established connection's session
// outlives it.
func persistentClient(cl *mqtt.Client) bool {
	if cl.Properties.ProtocolVersion == 5 {
		return cl.Properties.Props.SessionExpiryInterval > 0
	}
	return !cl.Properties.Clean
}

// sessionKey is what the persistent sessions are counted under: the user
// and the client id as sent. (mochi's own key, cl.ID, is scoped by the user
// only from presence's OnConnect on, after this hook's OnConnect.)
func sessionKey(cl *mqtt.Client) string {
	return string(cl.Properties.Username) + "\x00" + ClientID(cl)
}

// checkPersistent refuses a CONNECT for a persistent session when its user
// holds MaxPersistentPerUser under other client ids (MQTT 5 CONNACK 0x97,
// quota exceeded; 3.1.1: 0x03). Taking over one's own session passes.
func (l *Limits) checkPersistent(cl *mqtt.Client, pk packets.Packet) error {
	if l.o.MaxPersistentPerUser <= 0 || !persistentConnect(pk) {
		return nil
	}
	user := string(cl.Properties.Username)
	l.smu.Lock()
	held := l.users[user]
	if s, ok := l.sessions[sessionKey(cl)]; ok && s.user == user {
		held-- // its own, taken over
	}
	if held >= l.o.MaxPersistentPerUser {
		l.pruneSessions(user)
		held = l.users[user]
		if s, ok := l.sessions[sessionKey(cl)]; ok && s.user == user {
			held--
		}
	}
	l.smu.Unlock()
	if held < l.o.MaxPersistentPerUser {
		return nil
	}
	l.Stats.PersistentRefused.Add(1)
	l.o.Log.Debug("connection refused: too many persistent sessions", "client", ClientID(cl), "remote", cl.Net.Remote)
	connack.Refuse(l.o.Server, cl, packets.ErrQuotaExceeded, packets.Err3ServerUnavailable)
	return errPersistent
}

// pruneSessions stops counting user's sessions mochi no longer holds.
// l.smu is held.
func (l *Limits) pruneSessions(user string) {
	if l.o.Server == nil {
		return
	}
	for id, s := range l.sessions {
		if s.user != user {
			continue
		}
		if held, ok := l.o.Server.Clients.Get(s.cl.ID); !ok || held != s.cl && s.cl.Closed() {
			l.uncountSession(id)
		}
	}
}

// countSession counts cl's session if it is persistent (replacing what was
// counted under its client id), or stops counting its client id.
func (l *Limits) countSession(cl *mqtt.Client) {
	if l.o.MaxPersistentPerUser <= 0 {
		return
	}
	l.smu.Lock()
	defer l.smu.Unlock()
	l.uncountSession(sessionKey(cl))
	if !persistentClient(cl) {
		return
	}
	u := string(cl.Properties.Username)
	l.sessions[sessionKey(cl)] = persisted{user: u, cl: cl}
	l.users[u]++
}

// endSession stops counting cl's session if it is the one counted under
// its client id.
func (l *Limits) endSession(cl *mqtt.Client) {
	if l.o.MaxPersistentPerUser <= 0 {
		return
	}
	l.smu.Lock()
	defer l.smu.Unlock()
	if s, ok := l.sessions[sessionKey(cl)]; ok && s.cl == cl {
		l.uncountSession(sessionKey(cl))
	}
}

// uncountSession stops counting the session of client id. l.smu is held.
func (l *Limits) uncountSession(id string) {
	s, ok := l.sessions[id]
	if !ok {
		return
	}
	delete(l.sessions, id)
	if l.users[s.user]--; l.users[s.user] <= 0 {
		delete(l.users, s.user)
	}
}

// PersistentSessions returns how many persistent sessions are counted.
func (l *Limits) PersistentSessions() int {
	l.smu.Lock()
	defer l.smu.Unlock()
	return len(l.sessions)
}
