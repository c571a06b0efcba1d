package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// What bounds the CPU that password checks cost (each bcrypt comparison of
// the default cost takes ~70 ms of one core).
var (
	// ErrThrottled refuses a password check, before any hashing, from an
	// address that failed too often lately (PasswordLimits.FailureBurst,
	// FailureInterval). An MQTT server answers it with CONNACK 0x9F
	// "connection rate exceeded" (MQTT 3.1.1: 0x03 "server unavailable").
	ErrThrottled = errors.New("auth: too many failed passwords from this address; try later")
	// ErrBusy refuses a password check that waited PasswordLimits.QueueWait
	// for one of the PasswordLimits.Concurrency checks at once. An MQTT
	// server answers it with CONNACK 0x89 "server busy" (3.1.1: 0x03).
	ErrBusy = errors.New("auth: too many password checks at once; try later")
)

// PasswordLimits bound the work of password checks. The zero value takes
// every default.
type PasswordLimits struct {
	// FailureBurst is how many password checks an address may fail before
	// it is refused (ErrThrottled) without hashing; default 10. An address
	// is an IPv4 address or an IPv6 /64.
	FailureBurst int
	// FailureInterval gives an address back one failure every interval;
	// default 6s (10 a minute once the burst is spent).
	FailureInterval time.Duration
	// Addresses is how many addresses with recent failures are kept;
	// default 65536. When full, addresses that have all their failures
	// back are forgotten first, then arbitrary ones.
	Addresses int
	// Concurrency is how many bcrypt comparisons run at once; default the
	// number of CPUs (GOMAXPROCS).
	Concurrency int
	// QueueWait is how long a check waits for its turn before ErrBusy;
	// default 2s.
	QueueWait time.Duration
	// CacheSize is how many users' verified passwords are kept (as a keyed
	// SHA-256 of user and password, never the password), so that a
	// reconnection with the same password costs no bcrypt; default 65536.
	// CacheOff (-1) turns the cache off. The cache is dropped whenever the
	// password file is read again.
	CacheSize int
}

// CacheOff as PasswordLimits.CacheSize turns the cache of verified
// passwords off.
const CacheOff = -1

// The defaults of PasswordLimits.
const (
	DefaultFailureBurst    = 10
	DefaultFailureInterval = 6 * time.Second
	DefaultAddresses       = 65536
	DefaultQueueWait       = 2 * time.Second
	DefaultCacheSize       = 65536
)

func (l PasswordLimits) withDefaults() PasswordLimits {
	if l.FailureBurst <= 0 {
		l.FailureBurst = DefaultFailureBurst
	}
	if l.FailureInterval <= 0 {
		l.FailureInterval = DefaultFailureInterval
	}
	if l.Addresses <= 0 {
		l.Addresses = DefaultAddresses
	}
	if l.Concurrency <= 0 {
		l.Concurrency = runtime.GOMAXPROCS(0)
	}
	if l.QueueWait <= 0 {
		l.QueueWait = DefaultQueueWait
	}
	if l.CacheSize == 0 {
		l.CacheSize = DefaultCacheSize
	}
	return l
}

// PasswordStats count what password checks cost, read with atomic loads.
type PasswordStats struct {
	Hashed    atomic.Int64 // bcrypt comparisons run (unknown users' too)
	Cached    atomic.Int64 // checks answered by the cache of verified passwords
	Throttled atomic.Int64 // checks refused before hashing: the address failed too often
	Busy      atomic.Int64 // checks refused after waiting for their turn
}

// throttle is the failures of each address, as token buckets: a check takes
// a token before hashing and a success gives it back, so that checks in
// flight count too.
type throttle struct {
	burst float64
	every time.Duration
	max   int

	mu    sync.Mutex
	addrs map[netip.Addr]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newThrottle(l PasswordLimits) *throttle {
	return &throttle{burst: float64(l.FailureBurst), every: l.FailureInterval, max: l.Addresses, addrs: make(map[netip.Addr]*bucket)}
}

// addrKey is the address a throttle counts remote under: the IP of
// "host:port" or of a bare IP, IPv6 cut to its /64; false when it is not
// an IP (a unix socket, a test pipe).
func addrKey(remote string) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(remote)
	a := ap.Addr()
	if err != nil {
		if a, err = netip.ParseAddr(remote); err != nil {
			return netip.Addr{}, false
		}
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		a = p.Addr()
	}
	return a, true
}

// refill brings b's tokens to now.
func (t *throttle) refill(b *bucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(t.burst, b.tokens+float64(d)/float64(t.every))
		b.at = now
	}
}

// take takes a token of addr, and reports false, taking nothing, when it
// has none.
func (t *throttle) take(addr netip.Addr, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.addrs[addr]
	if b == nil {
		if len(t.addrs) >= t.max {
			t.shrink(now)
		}
		b = &bucket{tokens: t.burst, at: now}
		t.addrs[addr] = b
	}
	t.refill(b, now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// give gives addr its token back (the check succeeded, or did not run).
func (t *throttle) give(addr netip.Addr, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := t.addrs[addr]; b != nil {
		t.refill(b, now)
		if b.tokens = min(t.burst, b.tokens+1); b.tokens >= t.burst {
			delete(t.addrs, addr) // nothing to remember
		}
	}
}

// shrink forgets the addresses whose buckets are full again, and then, if
// more than 7/8 of max are still kept, arbitrary ones down to 7/8: the map
// stays bounded, and one shrink pays for max/8 insertions.
func (t *throttle) shrink(now time.Time) {
	for a, b := range t.addrs {
		if t.refill(b, now); b.tokens >= t.burst {
			delete(t.addrs, a)
		}
	}
	for a := range t.addrs {
		if len(t.addrs) <= t.max-t.max/8-1 {
			break
		}
		delete(t.addrs, a)
	}
}

// size is how many addresses are kept.
func (t *throttle) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.addrs)
}

// verified is a cache of verified passwords: per user, a keyed SHA-256 of
// user and password. It belongs to one loaded password file, so a reload
// drops it.
type verified struct {
	key [32]byte // random, per process: the digests are of no use elsewhere
	max int

	mu sync.Mutex
	m  map[string][sha256.Size]byte
}

// processKey keys every cache of this process.
var processKey = func() (k [32]byte) {
	if _, err := rand.Read(k[:]); err != nil {
		panic(fmt.Sprintf("auth: random key: %v", err))
	}
	return k
}()

func newVerified(size int) *verified {
	if size <= 0 {
		return nil
	}
	return &verified{key: processKey, max: size, m: make(map[string][sha256.Size]byte)}
}

func (v *verified) digest(user string, password []byte) (d [sha256.Size]byte) {
	h := hmac.New(sha256.New, v.key[:])
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(user)))
	h.Write(n[:])
	h.Write([]byte(user))
	h.Write(password)
	copy(d[:], h.Sum(nil))
	return d
}

// has reports whether user's password was verified to be password.
func (v *verified) has(user string, password []byte) bool {
	if v == nil {
		return false
	}
	d := v.digest(user, password)
	v.mu.Lock()
	got, ok := v.m[user]
	v.mu.Unlock()
	return ok && hmac.Equal(got[:], d[:])
}

// add records that password is user's; a full cache first forgets an
// arbitrary user.
func (v *verified) add(user string, password []byte) {
	if v == nil {
		return
	}
	d := v.digest(user, password)
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.m[user]; !ok && len(v.m) >= v.max {
		for u := range v.m {
			delete(v.m, u)
			break
		}
	}
	v.m[user] = d
}

// checkPassword checks user's password against t, from remote ("" or an
// address that is not an IP: not throttled), within the limits.
func (a *Authenticator) checkPassword(t *passwordTable, remote, user string, password []byte) error {
	now := a.now()
	addr, throttled := addrKey(remote)
	if throttled {
		if !a.throttle.take(addr, now) {
			a.pwStats.Throttled.Add(1)
			return ErrThrottled
		}
	}
	giveBack := func() {
		if throttled {
			a.throttle.give(addr, a.now())
		}
	}
	if len(password) <= MaxPasswordBytes && t.cache.has(user, password) {
		a.pwStats.Cached.Add(1)
		giveBack()
		return nil
	}
	if !a.acquire() {
		a.pwStats.Busy.Add(1)
		giveBack()
		return ErrBusy
	}
	a.pwStats.Hashed.Add(1)
	ok := t.check(user, password)
	<-a.checks
	if !ok {
		return denied("unknown user or wrong password")
	}
	t.cache.add(user, password)
	giveBack()
	return nil
}

// acquire takes one of the checks at once, waiting at most QueueWait.
func (a *Authenticator) acquire() bool {
	select {
	case a.checks <- struct{}{}:
		return true
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.limits.QueueWait)
	defer cancel()
	select {
	case a.checks <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// PasswordStats returns the counts of password checks.
func (a *Authenticator) PasswordStats() *PasswordStats { return &a.pwStats }

// ThrottledAddresses is how many addresses with recent failures are kept.
func (a *Authenticator) ThrottledAddresses() int { return a.throttle.size() }
