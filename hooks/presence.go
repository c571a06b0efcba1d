package hooks

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/connack"
	"github.com/presenced/presenced/internal/loglimit"
	"github.com/presenced/presenced/internal/puback"
	"github.com/presenced/presenced/internal/wire"
	"github.com/presenced/presenced/listener"
	"github.com/presenced/presenced/presence"
)

// Tracker is what the hook hands presence events to (the tracker package
// implements it). Every method must return at once: no I/O on the packet
// path. conn names the connection; id is its client id, the session id.
type Tracker interface {
	// Connect is called when a connection with a user is about to be
	// established (before CONNACK). It replaces any earlier connection with
	// the same client id. act is the connection's activity, which the hook
	// records (nil when server-side idle is off). net is the
	// connection's facts, which the store keeps with the session.
	Connect(conn presence.ConnID, id, user, device string, act *presence.Activity, net presence.Conn)
	// Established is called once CONNACK has been sent.
	Established(conn presence.ConnID, id string)
	// Set applies a presence/set from the connection. It is activity: it
	// ends auto-idle.
	Set(conn presence.ConnID, id, user string, req presence.SetRequest)
	// Active is called once when a connection that its node shows idle for
	// want of activity is active again (act.Touch reported it).
	Active(conn presence.ConnID, id string)
	// LastWords records the text of the connection's will on presence/set,
	// applied when the session ends uncleanly.
	LastWords(conn presence.ConnID, id, text string)
	// WillDelay records the MQTT 5 will delay of a connection whose will
	// applies, before its Disconnect: observers are shown the end no sooner.
	WillDelay(conn presence.ConnID, id string, d time.Duration)
	// Expect records the check-in period the connection's device declared
	// and its margin (a device that sleeps by design: dormant.go), before
	// Established.
	Expect(conn presence.ConnID, id string, period, margin time.Duration)
	// Disconnect is called when the connection has ended.
	Disconnect(conn presence.ConnID, id string, reason presence.EndReason)
	// LastSign records, before its Disconnect, the last sign of life of a
	// connection ended for its keep-alive: the user's last_seen.
	LastSign(conn presence.ConnID, id string, at time.Time)
}

// DiscardedWillTopic is where a will under the presence prefix is sent
// instead of its own topic: mochi cannot suppress a will, only rewrite it.
// $SYS topics match no wildcard filter, and the Delivery hook drops every
// message on this topic before it is written, so it reaches nobody.
const DiscardedWillTopic = "$SYS/presenced/discarded-will"

// Options configure the hook. A zero limit is no limit.
type Options struct {
	Prefix   string       // topic prefix, e.g. "presence"
	Identity IdentityRule // where users come from
	// Server is the broker the hook is added to: the hook clears the will
	// of a connection taken over, and answers a refused CONNECT itself.
	Server  *mqtt.Server
	Tracker Tracker
	Log     *slog.Logger

	MaxSessionsPerUser int // live sessions of one user on this node; one more ends the oldest as kicked
	SetRate            int // presence/set per second per session
	SetBurst           int // and at once
	// Observers are the users who may read all presence (service
	// accounts); Service, when set, also says whether a connection
	// authenticated as one (a token's claim).
	Observers []string
	Service   func(cl *mqtt.Client) bool
	Now       func() time.Time
	// ServiceSessions gives a service account with a user a presence
	// session, as every other user has (presence.observer_sessions). Off,
	// a service account is not a person: it reads as before, but opens
	// no session, is never shown online and is counted nowhere. A program
	// whose every connection is a service account, since nothing tells
	// them apart (no authentication), sets it: nobody is named one there.
	ServiceSessions bool
	// Activity records each session's activity (presence.Activity), for
	// server-side idle (presence.idle_after): every PUBLISH the client may
	// make, presence/set included. Off: the packet path does nothing more.
	Activity bool
	// Battle damps takeover battles (two devices sharing a client id that
	// take the session from each other in a loop); zero Takeovers: off.
	Battle BattleOptions
	// Moved reports whether a drain asked a connection to move
	// (Drain.Moved): its session then ends as drain, even when the client
	// closed on reading the DISCONNECT before the drain set the stop
	// cause. Nil: no drain.
	Moved func(cl *mqtt.Client) bool
	// Notify takes a message published on prefix/notify/{user} (package
	// notify); nil: notify is off, and the topic is read-only as the rest
	// of the prefix. The hook has checked that user is a valid user name;
	// service says whether the connection is a service account.
	Notify func(cl *mqtt.Client, service bool, user string, pk packets.Packet) NotifyVerdict
	// Dormant is how devices that sleep by design declare their check-in
	// period (dormant.go).
	Dormant DormantOptions
}

// NotifyVerdict is what Options.Notify made of a message.
type NotifyVerdict uint8

// The verdicts.
const (
	NotifyTaken    NotifyVerdict = iota // taken: acknowledged, never delivered by mochi
	NotifyDenied                        // the connection may not publish there
	NotifyTooLarge                      // over notify.max_payload
	NotifyBusy                          // the stage's queue is full
)

// Stats are the hook's counts, read with atomic loads.
type Stats struct {
	SetAccepted     atomic.Int64
	SetRejected     atomic.Int64
	WritesDenied    atomic.Int64 // publishes refused under the read-only prefix
	WillsDiscarded  atomic.Int64 // wills under the prefix rewritten away
	WillsSuppressed atomic.Int64 // wills of taken-over connections cleared
	BadIdentity     atomic.Int64 // connections refused for a bad user or device
	ClientIDTaken   atomic.Int64 // connections refused: the client id is another user's session
	SessionsKicked  atomic.Int64 // oldest sessions ended for a user's session limit
	SetLimited      atomic.Int64 // presence/set over the rate
	Abandoned       atomic.Int64 // connections that ended before their CONNACK, cleaned up
	Takeovers       atomic.Int64 // connections that took over a live connection with the same client id
	Battles         atomic.Int64 // takeover battle episodes detected
	BattleRefused   atomic.Int64 // newcomers refused during a takeover battle
	BattleEvicted   atomic.Int64 // client ids the battle detector dropped for its cap
	NotifyTaken     atomic.Int64 // messages on prefix/notify/{user} handed to notify
	NotifyRefused   atomic.Int64 // messages on prefix/notify/... refused: not allowed, a bad user, too large or busy
	// PrivacyRejected counts the presence/set refused for their privacy
	// keys (issue 22): a last_seen that is no mode, a privacy key at
	// session scope (also counted in SetRejected).
	PrivacyRejected atomic.Int64
	ExpectRefused   atomic.Int64 // connections refused for a bad user property expect (dormant.go)
}

// Presence is the mochi hook that turns connection events into presence
// events. It decides nothing about who may connect (the program's
// authentication hook does) beyond presenced's identity rules, and it keeps
// the presence namespace read-only through OnPublish, not OnACLCheck: mochi
// lets a connection do what any one hook allows, so a deny in OnACLCheck
// would not hold beside an allow-all authentication hook.
type Presence struct {
	mqtt.HookBase
	o         Options
	set       string // prefix/set
	notify    string // prefix/notify/
	under     string // prefix/
	observers map[string]struct{}
	gate      gate
	nextID    atomic.Uint64
	battles   *battles

	// Lock order: mu, then a link's bucket lock, then the tracker's locks
	// (Tracker.Connect and the kick's Disconnect are called under mu). No
	// socket write under mu.
	mu     sync.RWMutex
	links  map[*mqtt.Client]*link // every connection past OnConnect
	active sync.Map               // *mqtt.Client -> *link, the connections whose activity is recorded (lock-free reads on the PUBLISH path)
	byUser userConns              // connections with a user, oldest first
	// refusals limits the logs of a link's refused publishes: made at its
	// first refused publish (link.refused), as few connections have one,
	// and forgotten with the link.
	refusals map[*link]*loglimit.Limiter

	// takenOver holds the connections a newer one with the same client id
	// is taking over (*mqtt.Client -> *atomic.Bool, set once Tidy saw it
	// closed): OnWill sends their wills nowhere. The hook never writes the
	// old connection's will itself: mochi's read loop of that connection
	// writes it without a lock when it ends (server.go:481), which a write
	// from the taking connection's goroutine would race (issue 18).
	takenOver sync.Map

	Stats Stats
}

// link is what the hook keeps of a connection, one per connection: it
// fits the 48-byte size class (TestLinkIsCompact), the limiter of its
// refused publishes' logs (Presence.refusals) and of its presence/set
// rate (set), which few connections need, being kept aside.
type link struct {
	conn        presence.ConnID // 0: no user (an observer), or not yet established
	user        string
	act         *presence.Activity     // nil: activity not recorded
	set         atomic.Pointer[bucket] // presence/set rate; nil until its first presence/set (setBucket)
	service     bool                   // may read all presence
	established bool
	refused     bool // has a limiter in Presence.refusals (under Presence.mu)
}

// setBucket returns l's presence/set rate limiter, made full (burst
// tokens) at its first use.
func (l *link) setBucket(burst int) *bucket {
	if b := l.set.Load(); b != nil {
		return b
	}
	l.set.CompareAndSwap(nil, &bucket{tokens: float64(burst)})
	return l.set.Load()
}

// userConns holds the connections of each user, oldest first. Most users
// have one connection: one holds it without a slice (a 24-byte map slot,
// no array), and many, instead, the users with two or more (never both).
type userConns struct {
	one  map[string]*mqtt.Client
	many map[string][]*mqtt.Client // two or more each
}

// remove removes cl from user's connections, if there.
func (u *userConns) remove(user string, cl *mqtt.Client) {
	if c, ok := u.one[user]; ok {
		if c == cl {
			delete(u.one, user)
		}
		return
	}
	live, ok := u.many[user]
	if !ok {
		return
	}
	for i, c := range live {
		if c == cl {
			live = append(live[:i:i], live[i+1:]...)
			break
		}
	}
	switch len(live) {
	case 0:
		delete(u.many, user)
	case 1:
		delete(u.many, user)
		u.one[user] = live[0]
	default:
		u.many[user] = live
	}
}

// New returns the hook.
func New(o Options) *Presence {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &Presence{o: o, set: o.Prefix + "/set", notify: o.Prefix + "/notify/", under: o.Prefix + "/",
		observers: make(map[string]struct{}, len(o.Observers)),
		links:     make(map[*mqtt.Client]*link),
		byUser:    userConns{one: make(map[string]*mqtt.Client), many: make(map[string][]*mqtt.Client)},
		refusals:  make(map[*link]*loglimit.Limiter),
		battles:   newBattles(o.Battle)}
	for _, u := range o.Observers {
		h.observers[u] = struct{}{}
	}
	return h
}

// ID implements mqtt.Hook.
func (h *Presence) ID() string { return "presence" }

// Provides implements mqtt.Hook. Nothing on the path of an established
// connection's packets but OnPublish, which returns at once for every topic
// outside the prefix: BenchmarkHookPINGREQ measures that PINGREQ costs
// nothing more.
func (h *Presence) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnect, mqtt.OnSessionEstablish, mqtt.OnSessionEstablished,
		mqtt.OnDisconnect, mqtt.OnPublish, mqtt.OnWill, mqtt.OnClientExpired:
		return true
	}
	return false
}

func (h *Presence) identify(cl *mqtt.Client) (Identity, error) {
	return h.o.Identity.Identify(string(cl.Properties.Username), ClientID(cl))
}

// ClientID returns the client id a connection sent (or mochi assigned).
// Past the presence hook's OnConnect, cl.ID is the broker's key of it,
// scoped by its owner (presence.ClientKey): use this, not cl.ID, to show a
// client id or to match it against a rule (an ACL's %c).
func ClientID(cl *mqtt.Client) string { return presence.ClientIDOf(cl.ID) }

// scope makes cl.ID the broker's key of its client id, owned by the
// connection's user or, for an observer, its user name: mochi's client
// list, persisted sessions and takeovers are then per user, and two users
// may use the same client id without meeting.
func scope(cl *mqtt.Client, id Identity) {
	owner := id.User
	if owner == "" {
		owner = string(cl.Properties.Username)
	}
	if owner != "" && !presence.Scoped(cl.ID) {
		cl.ID = presence.ClientKey(owner, cl.ID)
	}
}

// errBadIdentity stops a CONNECT whose identity cannot be used; the hook
// has already answered it with CONNACK "bad user name or password".
var errBadIdentity = errors.New("presence: bad identity")

// OnConnect refuses, with the CONNACK code that fits:
//   - a user, client id or device that cannot be used (0x86 "bad user name
//     or password");
//   - a client id that is a live or persisted session of another user name
//     (0x85 "client identifier not valid"; 3.1.1: 0x02), which cannot
//     happen since client ids are scoped (below), and is kept as a second
//     line;
//   - a connection that would take over a live connection with the same
//     client id while that id is in a takeover battle (0x9F "connection
//     rate exceeded"; 3.1.1: 0x03 "server unavailable"): the incumbent keeps
//     the session until the back-off runs out (see battles).
//
// It then makes cl.ID the broker's key of the client id, owned by the
// connection's user (see presence.ClientKey and ClientID): one user can
// never take over, block or inherit another's session, and two users may
// use the same client id. Presence shows the client id as sent.
//
// A drain's refusals (Drain) and the broker's own limits (connections per
// address, keep-alive: Limits) are those hooks', added before this one.
func (h *Presence) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	ident, err := h.identify(cl)
	if err == nil {
		if d := device(pk); d != "" {
			err = presence.ValidDevice(d)
		}
	}
	if err != nil {
		h.Stats.BadIdentity.Add(1)
		h.o.Log.Info("connection refused: bad identity", "client", ClientID(cl), "remote", cl.Net.Remote, "err", err)
		// A name presence cannot use is a bad user name: 0x86, and 3.1.1's
		// 0x04 (mochi would map 0x86 to 0x05, not authorized).
		connack.Refuse(h.o.Server, cl, packets.ErrBadUsernameOrPassword, connack.Err3BadUsernameOrPassword)
		return errBadIdentity
	}
	if err := h.checkExpect(cl, pk); err != nil {
		return err
	}
	scope(cl, ident)
	if h.o.Server != nil {
		old, ok := h.o.Server.Clients.Get(cl.ID)
		if ok && old != cl && !bytes.Equal(old.Properties.Username, cl.Properties.Username) {
			h.Stats.ClientIDTaken.Add(1)
			h.o.Log.Info("connection refused: the client id is another user's session", "client", ClientID(cl), "remote", cl.Net.Remote, "username", string(cl.Properties.Username))
			connack.Refuse(h.o.Server, cl, packets.ErrClientIdentifierNotValid, packets.Code{})
			return errBadIdentity
		}
		if ok && old != cl {
			h.settle(cl.ID, old) // a reconnect after a DISCONNECT is no takeover
		}
		if ok && old != cl && !old.Closed() && h.battles.refuse(cl.ID, h.o.Now()) {
			h.Stats.BattleRefused.Add(1)
			h.o.Log.Debug("connection refused: takeover battle", "client", ClientID(cl), "remote", cl.Net.Remote)
			connack.Refuse(h.o.Server, cl, packets.ErrConnectionRateExceeded, packets.Err3ServerUnavailable)
			return errBadIdentity
		}
	}
	h.mu.Lock()
	if old := h.links[cl]; old != nil && old.refused { // not in mochi: one OnConnect per client
		delete(h.refusals, old)
		old.refused = false
	}
	h.links[cl] = new(link)
	h.mu.Unlock()
	return nil
}

// device returns the MQTT 5 CONNECT user property "device".
func device(pk packets.Packet) string {
	for _, p := range pk.Properties.User {
		if p.Key == "device" {
			return p.Val
		}
	}
	return ""
}

// underPrefix reports whether topic is in the broker's namespace.
func (h *Presence) underPrefix(topic string) bool {
	return topic == h.o.Prefix || strings.HasPrefix(topic, h.under)
}

// OnSessionEstablish runs before CONNACK and before mochi takes over an
// existing connection with the same client id. It marks that connection
// taken over, so that OnWill sends its will nowhere when the old socket
// closes: a takeover is not a death. The takeover is counted, and told to the
// battle detector. A connection with a user then opens its session, but for
// a service account (Options.ServiceSessions). When the user already has
// MaxSessionsPerUser connections on this node (a takeover does not add one),
// the oldest is ended as kicked.
func (h *Presence) OnSessionEstablish(cl *mqtt.Client, pk packets.Packet) {
	h.gate.enter(cl)
	id, err := h.identify(cl)
	if h.o.Server != nil {
		if old, ok := h.o.Server.Clients.Get(cl.ID); ok && old != cl && !old.Closed() {
			h.takenOver.Store(old, new(atomic.Bool))
			h.tookOver(cl.ID, id.User)
		}
	}
	if err != nil {
		return
	}
	_, listed := h.observers[id.User]
	if id.Observer() {
		_, listed = h.observers[string(cl.Properties.Username)]
	}
	service := listed || (h.o.Service != nil && h.o.Service(cl))
	h.mu.Lock()
	l := h.links[cl]
	if l == nil { // OnConnect did not run (a test, or a hook that skips it)
		l = new(link)
		h.links[cl] = l
	}
	l.service = service
	if !opensSession(id, service, h.o.ServiceSessions) {
		l.user = id.User // "" for an observer; a service account reads as itself
		h.mu.Unlock()
		return
	}
	if d := device(pk); d != "" {
		id.Device = d
	}
	l.conn, l.user = presence.ConnID(h.nextID.Add(1)), id.User
	if h.o.Activity {
		l.act = presence.NewActivity(h.o.Now()) // connecting is activity
		h.active.Store(cl, l)
	}
	oldest := h.admit(cl, id.User)
	if oldest != nil {
		// Its end goes to the tracker before the new session, so that
		// observers do not see one session too many in between; its
		// OnDisconnect then finds nothing left to end.
		if old := h.forgetLocked(oldest); old != nil && old.conn != 0 {
			h.o.Tracker.Disconnect(old.conn, oldest.ID, presence.EndKicked)
		}
	}
	// The tracker hears of the session under h.mu, in the step that gives
	// it its conn: whoever forgets the link after (a kick by a newer
	// connection of the user, Tidy, OnDisconnect) ends a session the
	// tracker already has. Told after h.mu, a kick or a Tidy could end it
	// before it began, and the tracker then kept it for good (issue 18).
	h.o.Tracker.Connect(l.conn, cl.ID, id.User, id.Device, l.act, connFacts(cl, h.o.Server))
	if period, margin := h.expectation(pk, id.Device); period > 0 {
		h.o.Tracker.Expect(l.conn, cl.ID, period, margin)
	}
	h.mu.Unlock()
	if oldest != nil {
		h.Stats.SessionsKicked.Add(1)
		h.o.Log.Info("session limit: ending the user's oldest session", "user", id.User, "client", oldest.ID, "max", h.o.MaxSessionsPerUser)
		kick(h.o.Server, oldest, packets.ErrQuotaExceeded)
	}
}

// tookOver records a takeover of client id by user, and logs a takeover
// battle once per episode.
func (h *Presence) tookOver(id, user string) {
	h.Stats.Takeovers.Add(1)
	v := h.battles.takeover(id, user, h.o.Now())
	if v.Evicted > 0 {
		h.Stats.BattleEvicted.Add(int64(v.Evicted))
	}
	switch {
	case v.Episode:
		h.Stats.Battles.Add(1)
		h.o.Log.Warn("takeover battle: two connections keep taking this client id from each other; newcomers are refused with a back-off", "client", id, "user", user, "takeovers", v.InWindow, "window_ms", h.o.Battle.Window.Milliseconds(), "refused_until", v.Until)
	case v.Detected:
		h.o.Log.Debug("takeover battle goes on: longer back-off", "client", id, "user", user, "refused_until", v.Until)
	}
}

// Battles returns the takeover battles going on.
func (h *Presence) Battles() []Battle {
	out := h.battles.list(h.o.Now())
	if out == nil {
		out = []Battle{}
	}
	return out
}

// admit records cl as user's newest connection and returns the oldest one
// to end when the user is over the limit. A connection that takes over the
// same client id replaces it and does not count. h.mu is held.
//
// Closed connections are dropped from the user's list here (their links
// are forgotten by OnDisconnect or Tidy, which find them gone): else a
// storm of connections reset before their CONNACK, kept until the next
// Tidy, made every admit of the user scan thousands under h.mu.
func (h *Presence) admit(cl *mqtt.Client, user string) *mqtt.Client {
	u := &h.byUser
	list, several := u.many[user]
	if !several {
		c, ok := u.one[user]
		if !ok || c.Closed() {
			u.one[user] = cl // no other live connection: nothing to end
			return nil
		}
		delete(u.one, user)
		u.many[user] = []*mqtt.Client{c, cl}
		if c.ID == cl.ID || h.o.MaxSessionsPerUser <= 0 || 1 < h.o.MaxSessionsPerUser {
			return nil
		}
		return c
	}
	live := list[:0]
	var oldest *mqtt.Client
	count := 0
	for _, c := range list {
		if c.Closed() {
			continue
		}
		live = append(live, c)
		if c.ID != cl.ID {
			count++
			if oldest == nil {
				oldest = c
			}
		}
	}
	clear(list[len(live):])
	if len(live) == 0 {
		delete(u.many, user)
		u.one[user] = cl
	} else {
		u.many[user] = append(live, cl)
	}
	if h.o.MaxSessionsPerUser <= 0 || count < h.o.MaxSessionsPerUser {
		return nil
	}
	return oldest
}

// kick ends a connection with code: a DISCONNECT first when writing it
// cannot block (presenced's listener), else only the socket is closed.
func kick(srv *mqtt.Server, cl *mqtt.Client, code packets.Code) {
	if srv != nil && wire.NeverBlocks(cl) {
		_ = srv.DisconnectClient(cl, code)
		return
	}
	cl.Stop(code)
}

// link returns what the hook keeps of a connection with a user.
func (h *Presence) link(cl *mqtt.Client) (*link, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	l, ok := h.links[cl]
	if !ok || l.conn == 0 {
		return nil, false
	}
	return l, true
}

// Sessions returns how many connections with a user (presence sessions)
// this hook holds.
func (h *Presence) Sessions() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for _, l := range h.links {
		if l.conn != 0 {
			n++
		}
	}
	return n
}

// Viewer returns who reads through connection cl: its user ("" for an
// observer) and whether it may read all presence (a service account).
func (h *Presence) Viewer(cl *mqtt.Client) (user string, service bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if l, ok := h.links[cl]; ok {
		return l.user, l.service
	}
	return "", false
}

// OnSessionEstablished runs after CONNACK.
func (h *Presence) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	h.gate.leave(cl)
	h.mu.Lock()
	l := h.links[cl]
	if l != nil {
		l.established = true
	}
	h.mu.Unlock()
	if l != nil && l.conn != 0 {
		h.o.Tracker.Established(l.conn, cl.ID)
	}
}

// OnDisconnect ends the connection's session with the reason mochi gives.
func (h *Presence) OnDisconnect(cl *mqtt.Client, err error, _ bool) {
	h.gate.leave(cl)
	// A connection being taken over must not return to mochi before the
	// takeover is done: mochi then deletes a clean session's client from
	// its list by id unless it is marked taken over, which the newcomer
	// does after closing it; a late mark would have mochi delete the
	// newcomer, and the next connection with the id would not take it
	// over (two connections served).
	h.gate.await(cl)
	h.takenOver.Delete(cl) // mochi sent (or skipped) its will before this hook
	if l := h.forget(cl); l != nil && l.conn != 0 {
		// mochi clears the will of a clean DISCONNECT before this hook,
		// this hook clears a taken-over one's and Drain a moved one's: a
		// will left applies.
		if will := cl.Properties.Will; atomic.LoadUint32(&will.Flag) == 1 && will.WillDelayInterval > 0 && cl.Properties.ProtocolVersion == 5 {
			h.o.Tracker.WillDelay(l.conn, cl.ID, time.Duration(will.WillDelayInterval)*time.Second)
		}
		reason := EndReason(err, cl.StopCause())
		if reason == presence.EndNetwork && closing(cl) {
			// The client closed on reading the server's DISCONNECT
			// (shutting down) before mochi set the stop cause.
			reason = presence.EndShutdown
		}
		if h.o.Moved != nil && h.o.Moved(cl) {
			// The client may have closed on reading the DISCONNECT before
			// the drain set the stop cause.
			reason = presence.EndDrain
		}
		if reason == presence.EndTimeout {
			h.o.Tracker.LastSign(l.conn, cl.ID, LastSign(h.o.Now(), cl.State.Keepalive))
		}
		h.o.Tracker.Disconnect(l.conn, cl.ID, reason)
	}
}

// closing reports whether cl's listener (presenced's) is closing: the
// server is shutting down.
func closing(cl *mqtt.Client) bool {
	c, ok := listener.From(cl.Net.Conn)
	return ok && c.ListenerClosing()
}

// forget removes cl from the hook's records and returns what was kept.
func (h *Presence) forget(cl *mqtt.Client) *link {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.forgetLocked(cl)
}

// forgetLocked is forget with h.mu held.
func (h *Presence) forgetLocked(cl *mqtt.Client) *link {
	l := h.links[cl]
	if l == nil {
		return nil
	}
	delete(h.links, cl)
	if l.act != nil {
		h.active.Delete(cl)
	}
	if l.refused {
		delete(h.refusals, l)
		l.refused = false
	}
	if l.user != "" {
		h.byUser.remove(l.user, cl)
	}
	return l
}

// Tidy ends what mochi never tells the hooks about: a connection whose
// CONNACK could not be written (the client reset) gets neither
// OnSessionEstablished nor OnDisconnect, and one that an authentication hook
// after this one refused gets no OnDisconnect. Its records, its gate entry
// and its tracked session would stay forever; Tidy, called every second by
// the pump, ends them as network. It also forgets the takeover battles
// that are over.
func (h *Presence) Tidy() {
	h.battles.expire(h.o.Now())
	// A taken-over connection that will get no OnDisconnect (its CONNACK
	// failed: no read loop, no will) is forgotten once seen closed, and
	// without records, twice.
	h.takenOver.Range(func(k, v any) bool {
		cl := k.(*mqtt.Client)
		h.mu.RLock()
		_, linked := h.links[cl]
		h.mu.RUnlock()
		if cl.Closed() && !linked && v.(*atomic.Bool).Swap(true) {
			h.takenOver.Delete(k)
		}
		return true
	})
	var gone []*mqtt.Client
	h.mu.RLock()
	for cl, l := range h.links {
		if !l.established && cl.Closed() {
			gone = append(gone, cl)
		}
	}
	h.mu.RUnlock()
	for _, cl := range gone {
		// mochi's list is changed only while no connection with the id is
		// between the gate and its Clients.Add.
		h.gate.leaveWith(cl, func() { h.dropClient(cl) })
		if l := h.forget(cl); l != nil {
			h.Stats.Abandoned.Add(1)
			if l.conn != 0 {
				h.o.Tracker.Disconnect(l.conn, cl.ID, presence.EndNetwork)
			}
		}
	}
}

// dropClient removes an abandoned connection's client from mochi's list, as
// mochi does when a clean session ends: mochi adds the client before it
// writes the CONNACK and, when that write fails, returns without removing
// it, so every CONNECT-then-reset would keep a client (about 5 KiB) for
// good. A persistent session's client stays, to expire as mochi's do; one
// taken over, or replaced in the list since, is left alone.
func (h *Presence) dropClient(cl *mqtt.Client) {
	if h.o.Server == nil || cl.IsTakenOver() {
		return
	}
	if cl.Properties.ProtocolVersion == 5 && cl.Properties.Props.SessionExpiryInterval > 0 ||
		cl.Properties.ProtocolVersion < 5 && !cl.Properties.Clean {
		return
	}
	if cur, ok := h.o.Server.Clients.Get(cl.ID); ok && cur == cl {
		h.o.Server.UnsubscribeClient(cl)
		cl.ClearInflights()
		h.o.Server.Clients.Delete(cl.ID)
	}
}

// OnClientExpired removes an expired persistent session's subscriptions:
// mochi v2.7.9 deletes the client (clearExpiredClients) but leaves its
// subscriptions in the topic index for good.
func (h *Presence) OnClientExpired(cl *mqtt.Client) {
	if h.o.Server != nil {
		h.o.Server.UnsubscribeClient(cl)
	}
}

// OnPublish keeps the namespace read-only and consumes presence/set.
//
// Under the prefix, only the broker itself publishes, except presence/set by
// a connection with a user, and presence/notify/{user} when notify is on
// (publishNotify). Any other publish there is refused and changes
// nothing: MQTT 5 QoS 1 and 2 get PUBACK or PUBREC 0x87 (not authorized),
// QoS 0 is dropped, and an MQTT 3.1.1 client publishing with QoS 1 or 2 is
// disconnected (3.1.1 has no negative acknowledgement).
//
// A valid presence/set is handed to the tracker; either way no subscriber
// receives the message and nothing is retained (CodeSuccessIgnore). An
// invalid payload changes nothing: MQTT 5 QoS 1 gets PUBACK 0x99 (payload
// format invalid), QoS 2 PUBREC 0x99; QoS 0 and MQTT 3.1.1 cannot be told,
// so the message is acknowledged as usual and dropped (and counted).
//
// The rate (SetRate a second, SetBurst at once, per connection) applies to
// valid requests, which are what reach the store and every observer: over
// it, MQTT 5 QoS 1 and 2 get 0x96 (message rate too high); QoS 0 and MQTT
// 3.1.1 are acknowledged as usual and dropped (and counted). An invalid one
// costs no more than any other publish, and is refused whatever the rate.
//
// Only packets.Code errors and the two sentinels stop mochi from
// delivering, so no other error is ever returned.
//
// A PUBLISH outside the prefix (which mochi has already let through its ACL
// check), and a valid presence/set, are the session's activity (see
// Options.Activity): a refused one is not.
func (h *Presence) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline {
		return pk, nil
	}
	if !h.underPrefix(pk.TopicName) {
		if h.o.Activity {
			h.touch(cl)
		}
		return pk, nil
	}
	if user, ok := strings.CutPrefix(pk.TopicName, h.notify); ok && h.o.Notify != nil {
		return h.publishNotify(cl, pk, user)
	}
	l, hasUser := h.link(cl)
	if pk.TopicName != h.set || !hasUser {
		h.Stats.WritesDenied.Add(1)
		h.logRefused(cl, pk, "presence topics are read-only")
		return h.refuse(cl, pk, packets.ErrNotAuthorized)
	}
	req, err := presence.ParseSetRequest(pk.Payload)
	if err != nil {
		h.Stats.SetRejected.Add(1)
		if errors.Is(err, presence.ErrBadPrivacy) {
			h.Stats.PrivacyRejected.Add(1)
		}
		h.logRefused(cl, pk, "invalid presence/set: "+err.Error())
		if cl.Properties.ProtocolVersion < 5 {
			return pk, packets.CodeSuccessIgnore
		}
		return h.refuse(cl, pk, packets.ErrPayloadFormatInvalid)
	}
	back := l.act != nil && l.act.Touch(h.o.Now()) // the session was auto-idle
	if h.o.SetRate > 0 && !l.setBucket(h.o.SetBurst).take(h.o.Now(), float64(h.o.SetRate), float64(h.o.SetBurst)) {
		if back {
			h.o.Tracker.Active(l.conn, cl.ID) // activity all the same
		}
		h.Stats.SetLimited.Add(1)
		h.o.Log.Debug("presence/set over the rate", "client", ClientID(cl))
		if cl.Properties.ProtocolVersion < 5 || pk.FixedHeader.Qos == 0 {
			return pk, packets.CodeSuccessIgnore // acknowledged as usual, dropped
		}
		return h.refuse(cl, pk, packets.ErrMessageRateTooHigh)
	}
	h.Stats.SetAccepted.Add(1)
	if req.OnlyActivity() && req.Scope == presence.ScopeSession {
		if back {
			h.o.Tracker.Active(l.conn, cl.ID)
		}
		return pk, packets.CodeSuccessIgnore
	}
	if back && req.Scope == presence.ScopeAccount {
		h.o.Tracker.Active(l.conn, cl.ID) // an account change leaves the session's status
	}
	h.o.Tracker.Set(l.conn, cl.ID, l.user, req) // ends auto-idle: one write with the change
	return pk, packets.CodeSuccessIgnore
}

// SetNotify sets Options.Notify after New (the notify stage is built
// after the hook, whose Viewer it uses). Call it before the server serves.
func (h *Presence) SetNotify(fn func(cl *mqtt.Client, service bool, user string, pk packets.Packet) NotifyVerdict) {
	h.o.Notify = fn
}

// publishNotify is the one exception to the read-only prefix: a message
// on prefix/notify/{user} goes to package notify (Options.Notify), which
// decides who may publish there; mochi never delivers it itself (it is
// acknowledged as usual). A refusal answers as any refused publish does:
// 0x87 not authorized, 0x90 topic name invalid (not one valid user), 0x95
// packet too large, 0x97 quota exceeded (the stage is busy).
func (h *Presence) publishNotify(cl *mqtt.Client, pk packets.Packet, user string) (packets.Packet, error) {
	code, why := packets.ErrNotAuthorized, "notify: not allowed"
	if presence.ValidUser(user) != nil {
		code, why = packets.ErrTopicNameInvalid, "notify: not a user's topic"
	} else {
		h.mu.RLock()
		l := h.links[cl]
		service := l != nil && l.service
		h.mu.RUnlock()
		switch h.o.Notify(cl, service, user, pk) {
		case NotifyTaken:
			h.Stats.NotifyTaken.Add(1)
			return pk, packets.CodeSuccessIgnore
		case NotifyTooLarge:
			code, why = packets.ErrPacketTooLarge, "notify: payload over notify.max_payload"
		case NotifyBusy:
			code, why = packets.ErrQuotaExceeded, "notify: busy"
		}
	}
	h.Stats.NotifyRefused.Add(1)
	h.logRefused(cl, pk, why)
	return h.refuse(cl, pk, code)
}

// touch records a PUBLISH of cl as its session's activity and, when its
// node showed it idle for want of activity, has its own status written
// back. Atomics and a lock-free map read only: no store write, no lock.
func (h *Presence) touch(cl *mqtt.Client) {
	v, ok := h.active.Load(cl)
	if !ok {
		return // no user, or not yet established
	}
	l := v.(*link)
	if l.act.Touch(h.o.Now()) {
		h.o.Tracker.Active(l.conn, cl.ID)
	}
}

// refuse answers a publish that changes nothing with code, the way its
// protocol version and QoS allow.
func (h *Presence) refuse(cl *mqtt.Client, pk packets.Packet, code packets.Code) (packets.Packet, error) {
	return refusePublish(h.o.Server, cl, pk, code)
}

// refusePublish answers a refused publish with code, the way its protocol
// version and QoS allow (QoS 0 dropped; MQTT 3.1.1 QoS 1/2 disconnected
// through srv, when given; MQTT 5 QoS 1/2 acknowledged with the code),
// and has mochi drop the packet quietly.
func refusePublish(srv *mqtt.Server, cl *mqtt.Client, pk packets.Packet, code packets.Code) (packets.Packet, error) {
	switch {
	case pk.FixedHeader.Qos == 0:
		return pk, packets.ErrRejectPacket
	case cl.Properties.ProtocolVersion < 5:
		if srv != nil {
			_ = srv.DisconnectClient(cl, code)
		}
		return pk, packets.ErrRejectPacket
	}
	// mochi would answer a returned reason code with a PUBACK, but logs
	// it at error with the whole packet, payload included: the hook
	// answers itself (a QoS 2 exchange needs a PUBREC, which with a
	// failure code ends it) and has mochi drop the packet quietly.
	puback.Refuse(cl, pk, code)
	return pk, packets.ErrRejectPacket
}

// refusalLogEvery is how often one connection's refused publishes are
// logged: one line (at info, without the payload) per interval, with the
// number held back since the last.
const refusalLogEvery = time.Minute

// logRefused logs a refused publish of cl, at most once per connection
// per refusalLogEvery.
func (h *Presence) logRefused(cl *mqtt.Client, pk packets.Packet, why string) {
	h.mu.RLock()
	l := h.links[cl]
	var lim *loglimit.Limiter
	if l != nil && l.refused {
		lim = h.refusals[l]
	}
	h.mu.RUnlock()
	if l == nil {
		return
	}
	if lim == nil {
		lim = h.refusalLimiter(cl, l)
	}
	if ok, held := lim.Allow(h.o.Now(), refusalLogEvery); ok {
		h.o.Log.Info("publish refused", "client", ClientID(cl), "user", l.user, "topic", pk.TopicName,
			"bytes", len(pk.Payload), "why", why, "held_back", held, "log_every", refusalLogEvery.String())
	}
}

// refusalLimiter returns the limiter of link l's refused publishes' logs,
// made at the first. A link forgotten meanwhile gets one that is not kept
// (kept, nothing would forget it).
func (h *Presence) refusalLimiter(cl *mqtt.Client, l *link) *loglimit.Limiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	if lim := h.refusals[l]; lim != nil {
		return lim
	}
	lim := new(loglimit.Limiter)
	if h.links[cl] == l {
		h.refusals[l] = lim
		l.refused = true
	}
	return lim
}

// OnWill rewrites a will under the presence prefix so that it is never
// delivered raw (mochi sends wills without an ACL check, and cannot be told
// to drop one). A will on presence/set with a valid session-scope payload
// becomes the session's last words: its text is kept with last_seen when the
// session ends uncleanly, checked against the session's epoch by the store.
// Wills to other topics pass unchanged.
func (h *Presence) OnWill(cl *mqtt.Client, will mqtt.Will) (mqtt.Will, error) {
	if _, ok := h.takenOver.Load(cl); ok {
		h.Stats.WillsSuppressed.Add(1)
		return discarded(will), nil
	}
	if h.o.Moved != nil && h.o.Moved(cl) { // a drain moved it: no death either
		h.Stats.WillsSuppressed.Add(1)
		return discarded(will), nil
	}
	if !h.underPrefix(will.TopicName) {
		return will, nil
	}
	if will.TopicName == h.set {
		if l, ok := h.link(cl); ok {
			if req, err := presence.ParseSetRequest(will.Payload); err == nil && req.Scope == presence.ScopeSession && req.Text != nil {
				h.o.Tracker.LastWords(l.conn, cl.ID, *req.Text)
			}
		}
	}
	h.Stats.WillsDiscarded.Add(1)
	return discarded(will), nil
}

// discarded is will sent nowhere (DiscardedWillTopic).
func discarded(will mqtt.Will) mqtt.Will {
	will.TopicName = DiscardedWillTopic
	will.Payload = nil
	will.Retain = false
	will.Qos = 0
	will.User = nil
	return will
}
