package hooks

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/connack"
	"github.com/presenced/presenced/listener"
)

// LimitsOptions configure the Limits hook. A zero limit is no limit.
type LimitsOptions struct {
	// Server answers a refused CONNECT with its CONNACK (without one, only
	// a 3.1.1 client is answered).
	Server *mqtt.Server
	Log    *slog.Logger

	ServerKeepAlive time.Duration  // given to clients that connect with keep-alive 0
	MaxKeepAlive    time.Duration  // the keep-alive ceiling, ServerKeepAlive included
	MaxPerAddress   int            // connections from one IP address
	Unlimited       []netip.Prefix // addresses MaxPerAddress does not apply to

	MaxSubscriptions int // topic filters per connection
	MaxTopicLength   int // bytes of a topic filter
	MaxTopicLevels   int // levels of a topic filter

	MaxWillDelay    time.Duration // a will's delay ceiling
	MaxDelayedWills int           // delayed wills waiting on this node; one more is sent at once

	// The bounds of a session's unacknowledged QoS 1 and 2 messages
	// (mochi's Capabilities.MaximumInflight bounds their count).
	MaxInflightBytes int64         // bytes held: over it, the connection ends and the message is dropped
	MaxInflightAge   time.Duration // the oldest one's age: over it, the connection ends

	Retained RetainedLimits // retained messages outside the presence prefix

	MaxPersistentPerUser int // persistent sessions one user may hold on this node, connected or not
}

// LimitsStats are the Limits hook's counts, read with atomic loads.
type LimitsStats struct {
	PerAddress      atomic.Int64 // connections refused: too many from one address
	ReceiveMaxZero  atomic.Int64 // MQTT 5 CONNECTs refused: Receive Maximum 0 (a protocol error)
	KeepAliveCapped atomic.Int64 // connections held to the keep-alive ceiling
	FiltersRefused  atomic.Int64 // topic filters over the subscription limits

	TopicsRefused   atomic.Int64 // PUBLISHes with a topic name over MaxTopicLength (connection ended)
	ExpiryCapped    atomic.Int64 // DISCONNECTs whose session expiry was held to the server's maximum
	WillsRefused    atomic.Int64 // CONNECTs refused for their will topic
	WillDelayCapped atomic.Int64 // wills whose delay was held to MaxWillDelay
	WillsUndelayed  atomic.Int64 // delayed wills sent at once: MaxDelayedWills were waiting

	InflightDropped atomic.Int64 // QoS 1/2 messages not kept: their session's MaxInflightBytes was reached
	InflightEnded   atomic.Int64 // connections ended for MaxInflightBytes or MaxInflightAge

	RetainedRefused atomic.Int64 // retained messages refused for the retained limits

	PersistentRefused atomic.Int64 // CONNECTs refused: their user holds MaxPersistentPerUser persistent sessions
}

// Limits is the mochi hook of the broker's limits on one connection, which
// know nothing of presence: connections per IP address, the keep-alive and
// the subscription filters. See OnConnect and OnSubscribe.
//
// The per-address count. A connection counts against its address from its
// OnConnect on, so that a flood of CONNECTs that are never established
// (each holding a socket and two goroutines until mochi is done with it)
// is held to the limit like established ones. It stops counting at its
// OnDisconnect. mochi calls OnDisconnect only for a connection that got
// its CONNACK: one refused by a later hook's OnConnect, by
// OnConnectAuthenticate, or whose CONNACK could not be written gets none.
// Such a connection is closed but never established (OnSessionEstablished
// marks that), and no longer counts: when its address reaches the limit,
// the address's closed unestablished connections are dropped before the
// limit is applied, so the next CONNECT never sees a refused one as live;
// and Tidy, called every second by the plugin's pump, drops them all, so
// that nothing is kept of an address that never comes back.
type Limits struct {
	mqtt.HookBase
	o LimitsOptions

	mu    sync.Mutex // no socket write under it
	addrs map[string]*address
	// conns are the connections counted, to their address's count (a
	// 16-byte map slot; its IP address string is not kept: the address
	// stays in addrs as long as one of them counts).
	conns map[*mqtt.Client]*address

	fmu     sync.Mutex // flights and dropped (limits_inflight.go); after mu, never both
	flights map[*mqtt.Client]*flight
	dropped []dropped

	retained retained // limits_retained.go

	wmu   sync.Mutex           // wills (limits_wills.go); never held with mu or fmu
	wills map[string]time.Time // delayed wills waiting, by client id, to when the delay ends

	smu      sync.Mutex           // sessions and users (limits_sessions.go); never held with another
	sessions map[string]persisted // persistent sessions counted, by sessionKey (user and client id as sent)
	users    map[string]int       // of them, by user

	Stats LimitsStats
}

// address is what Limits keeps of an IP address. Of its connections
// counted, those not yet established are waiting: one, the most an
// address has but for a burst of CONNECTs, is held inline (no map per
// address).
type address struct {
	n       int                       // connections counted
	waiting *mqtt.Client              // one not yet established; nil: none
	more    map[*mqtt.Client]struct{} // the others not yet established; made at the first
}

// wait records cl as not yet established.
func (a *address) wait(cl *mqtt.Client) {
	if a.waiting == cl {
		return
	}
	if _, ok := a.more[cl]; ok {
		return
	}
	if a.waiting == nil {
		a.waiting = cl
		return
	}
	if a.more == nil {
		a.more = make(map[*mqtt.Client]struct{})
	}
	a.more[cl] = struct{}{}
}

// unwait removes cl from the connections not yet established.
func (a *address) unwait(cl *mqtt.Client) {
	if a.waiting == cl {
		a.waiting = nil
		return
	}
	delete(a.more, cl)
}

// NewLimits returns the hook.
func NewLimits(o LimitsOptions) *Limits {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	l := &Limits{o: o, addrs: make(map[string]*address), conns: make(map[*mqtt.Client]*address), flights: make(map[*mqtt.Client]*flight)}
	l.retained.init()
	l.wills = make(map[string]time.Time)
	l.sessions, l.users = make(map[string]persisted), make(map[string]int)
	return l
}

// ID implements mqtt.Hook.
func (l *Limits) ID() string { return "presence-limits" }

// Provides implements mqtt.Hook. Without a per-address limit, nothing is
// counted, and neither establishment nor end is followed.
func (l *Limits) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnect, mqtt.OnSubscribe, mqtt.OnPacketRead, mqtt.OnPacketEncode:
		return true
	case mqtt.OnQosPublish, mqtt.OnQosComplete, mqtt.OnQosDropped:
		return l.o.MaxInflightBytes > 0 || l.o.MaxInflightAge > 0
	case mqtt.OnClientExpired:
		return l.o.MaxInflightBytes > 0 || l.o.MaxInflightAge > 0 || l.o.MaxPersistentPerUser > 0
	case mqtt.OnPublish, mqtt.OnRetainMessage, mqtt.OnRetainedExpired:
		return l.o.Retained.any()
	case mqtt.OnSessionEstablished:
		return l.o.MaxPerAddress > 0 || l.o.MaxDelayedWills > 0 || l.o.MaxPersistentPerUser > 0
	case mqtt.OnDisconnect:
		return l.o.MaxPerAddress > 0 || l.o.MaxPersistentPerUser > 0
	case mqtt.OnWill, mqtt.OnWillSent:
		return l.o.MaxDelayedWills > 0
	}
	return false
}

// errPerAddress stops a CONNECT over the per-address limit; the hook has
// already answered it.
var errPerAddress = errors.New("presence: too many connections from one address")

// errReceiveMaxZero stops an MQTT 5 CONNECT with Receive Maximum 0; the hook
// has already answered it.
var errReceiveMaxZero = errors.New("presence: receive maximum 0")

// OnConnect refuses one connection more than MaxPerAddress from one IP
// address (0x97 "quota exceeded"; 3.1.1: 0x03 "server unavailable"),
// unless the address is one of Unlimited.
//
// It gives a client that asked for keep-alive 0 the server keep-alive, so
// that no session can live forever on a half-open socket, and holds one
// that asked for more than MaxKeepAlive to it (MQTT 5 clients are told in
// CONNACK; a 3.1.1 client's deadline is simply shorter).
func (l *Limits) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	if l.o.MaxPerAddress > 0 && !l.count(cl, addressOf(cl)) {
		l.Stats.PerAddress.Add(1)
		l.o.Log.Debug("connection refused: too many from one address", "client", ClientID(cl), "remote", cl.Net.Remote)
		connack.Refuse(l.o.Server, cl, packets.ErrQuotaExceeded, packets.Err3ServerUnavailable)
		return errPerAddress
	}
	if c, ok := listener.From(cl.Net.Conn); ok && c.ReceiveMaximumZero() {
		// MQTT 5 §3.1.2.11.3: Receive Maximum 0 is a protocol error.
		// mochi decodes it as an absent property; the listener saw it.
		l.Stats.ReceiveMaxZero.Add(1)
		l.o.Log.Debug("connection refused: receive maximum 0", "client", ClientID(cl), "remote", cl.Net.Remote)
		connack.Refuse(l.o.Server, cl, packets.ErrProtocolViolation, packets.Code{})
		return errReceiveMaxZero // no longer counted once closed (see Limits)
	}
	if err := l.checkWill(cl, pk); err != nil {
		return err // no longer counted once closed (see Limits)
	}
	if err := l.checkPersistent(cl, pk); err != nil {
		return err
	}
	ka, capped, set := keepAlive(pk.Connect.Keepalive, l.o.ServerKeepAlive, l.o.MaxKeepAlive)
	if capped {
		l.Stats.KeepAliveCapped.Add(1)
	}
	if set {
		cl.State.Keepalive = ka
		cl.State.ServerKeepalive = true
	}
	return nil
}

// keepAlive returns the keep-alive in seconds to hold a client that asked
// for asked to, whether that caps what it asked, and whether to set it at
// all (false: what it asked stands).
func keepAlive(asked uint16, server, ceiling time.Duration) (ka uint16, capped, set bool) {
	d := time.Duration(asked) * time.Second
	switch {
	case asked == 0 && server > 0:
		d = server
		if ceiling > 0 && d > ceiling {
			d = ceiling
		}
	case ceiling > 0 && d > ceiling:
		d = ceiling
		capped = true
	default:
		return asked, false, false
	}
	return uint16(d / time.Second), capped, true
}

// count counts cl against its address ip, and reports false, counting
// nothing, when the address is at the limit.
func (l *Limits) count(cl *mqtt.Client, ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.addrs[ip]
	if a == nil {
		a = &address{}
		l.addrs[ip] = a
	}
	if a.n >= l.o.MaxPerAddress && !l.unlimited(ip) {
		l.dropClosed(a)
		if a.n >= l.o.MaxPerAddress {
			return false
		}
	}
	a.n++
	a.wait(cl)
	l.conns[cl] = a
	return true
}

// dropClosed stops counting the connections of address a that were closed
// before they were established: mochi tells no hook of them. l.mu is held.
func (l *Limits) dropClosed(a *address) {
	if cl := a.waiting; cl != nil && cl.Closed() {
		a.waiting = nil
		delete(l.conns, cl)
		a.n--
	}
	for cl := range a.more {
		if cl.Closed() {
			delete(a.more, cl)
			delete(l.conns, cl)
			a.n--
		}
	}
}

// unlimited reports whether the per-address limit spares ip.
func (l *Limits) unlimited(ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range l.o.Unlimited {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// addressOf returns the IP address cl counts against.
func addressOf(cl *mqtt.Client) string { return remoteIP(cl.Net.Remote) }

// remoteIP returns the host part of a remote address.
func remoteIP(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	return host
}

// OnSessionEstablished marks the connection established: from now on only
// its OnDisconnect stops its count.
func (l *Limits) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	l.forgetWill(cl.ID) // mochi has dropped its delayed will
	l.countSession(cl)
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := l.conns[cl]; a != nil {
		a.unwait(cl)
	}
}

// OnDisconnect stops counting the connection, and its session when mochi
// lets it go at once.
func (l *Limits) OnDisconnect(cl *mqtt.Client, _ error, expire bool) {
	if expire && !cl.IsTakenOver() {
		l.endSession(cl)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.conns[cl]
	if a == nil {
		return
	}
	delete(l.conns, cl)
	a.unwait(cl)
	if a.n--; a.n <= 0 {
		// The address cl counted against (mochi sets cl.Net.Remote once,
		// when it makes the client); checked, so that a changed one
		// could only keep an empty address, never drop another.
		if ip := addressOf(cl); l.addrs[ip] == a {
			delete(l.addrs, ip)
		}
	}
}

// Tidy stops counting every connection that was closed before it was
// established (see Limits), ends the connections whose oldest
// unacknowledged message is older than MaxInflightAge, forgets the
// sessions mochi no longer holds (limits_inflight.go) and the delayed wills
// whose delay has ended (limits_wills.go). The plugin's pump
// calls it every second.
func (l *Limits) Tidy() {
	l.mu.Lock()
	for ip, a := range l.addrs {
		if l.dropClosed(a); a.n <= 0 {
			delete(l.addrs, ip)
		}
	}
	l.mu.Unlock()
	now := time.Now()
	l.tidyFlights(now)
	l.wmu.Lock()
	l.expireWills(now)
	l.wmu.Unlock()
}

// counted returns how many connections count against the IP address ip.
func (l *Limits) counted(ip string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := l.addrs[ip]; a != nil {
		return a.n
	}
	return 0
}

// OnSubscribe refuses, with 0x8F (topic filter invalid), a topic filter
// longer than MaxTopicLength bytes, with more than MaxTopicLevels levels, or
// beyond the MaxSubscriptions filters a connection may hold. mochi has no
// way for a hook to refuse one filter but its ACL check, which another hook
// can overrule, so the filter is replaced by an empty one, which mochi
// refuses as invalid (and which presence's later hooks skip).
func (l *Limits) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if cl.Net.Inline {
		return pk
	}
	held := cl.State.Subscriptions.Len()
	var filters packets.Subscriptions
	for _, f := range pk.Filters {
		refused := (l.o.MaxTopicLength > 0 && len(f.Filter) > l.o.MaxTopicLength) ||
			(l.o.MaxTopicLevels > 0 && strings.Count(f.Filter, "/")+1 > l.o.MaxTopicLevels)
		if !refused && l.o.MaxSubscriptions > 0 {
			if _, ok := cl.State.Subscriptions.Get(f.Filter); !ok {
				if held >= l.o.MaxSubscriptions {
					refused = true
				} else {
					held++
				}
			}
		}
		if refused {
			l.Stats.FiltersRefused.Add(1)
			f.Filter = ""
		}
		filters = append(filters, f)
	}
	pk.Filters = filters
	return pk
}
