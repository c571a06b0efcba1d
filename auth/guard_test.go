package auth_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/auth"
)

// fakeClock is a clock the tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A client guessing passwords from one address is refused before bcrypt
// once it spent its failures; another address is not; the address gets one
// failure back per interval. IPv6 addresses count by /64.
func TestPasswordGuessingThrottledBeforeBcrypt(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: t0}
	passwd := writeFile(t, t.TempDir(), "passwd", []byte(hashLine(t, "alice", "right")))
	a := newAuth(t, auth.Config{PasswordFile: passwd, Now: clk.now,
		Passwords: auth.PasswordLimits{FailureBurst: 3, FailureInterval: time.Minute}})
	hashed := func() int64 { return a.PasswordStats().Hashed.Load() }
	try := func(remote, password string) error {
		_, err := a.AuthenticateFrom(remote, "alice", []byte(password), "c", nil)
		return err
	}
	const guesser = "192.0.2.7:40000"
	for i := range 3 {
		if err := try(guesser, fmt.Sprintf("guess-%d", i)); !errors.Is(err, auth.ErrDenied) {
			t.Fatalf("guess %d: %v, want ErrDenied", i, err)
		}
	}
	if got := hashed(); got != 3 {
		t.Fatalf("bcrypt ran %d times for 3 guesses", got)
	}
	for i := range 100 {
		if err := try(fmt.Sprintf("192.0.2.7:%d", 40001+i), "guess"); !errors.Is(err, auth.ErrThrottled) {
			t.Fatalf("guess %d after the burst: %v, want ErrThrottled", 3+i, err)
		}
	}
	// The right password too: a throttled address learns nothing.
	if err := try(guesser, "right"); !errors.Is(err, auth.ErrThrottled) {
		t.Fatalf("right password from a throttled address: %v, want ErrThrottled", err)
	}
	if got := hashed(); got != 3 {
		t.Fatalf("bcrypt ran %d times, want 3: the throttle must refuse before hashing", got)
	}
	if got := a.PasswordStats().Throttled.Load(); got != 101 {
		t.Errorf("throttled %d, want 101", got)
	}
	if err := try("198.51.100.1:1", "right"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	clk.add(time.Minute) // one failure back
	if err := try(guesser, "right"); err != nil {
		t.Fatalf("a minute later: %v", err)
	}
	if err := try(guesser, "wrong"); !errors.Is(err, auth.ErrDenied) { // the success took its token and gave it back
		t.Fatalf("after a success: %v, want ErrDenied", err)
	}
	if err := try(guesser, "wrong"); !errors.Is(err, auth.ErrThrottled) {
		t.Fatalf("then: %v, want ErrThrottled", err)
	}

	// IPv6: one /64 is one address.
	for i := range 3 {
		_ = try(fmt.Sprintf("[2001:db8:1:2::%x]:1883", i+1), "wrong")
	}
	if err := try("[2001:db8:1:2:ffff::1]:1883", "wrong"); !errors.Is(err, auth.ErrThrottled) {
		t.Fatalf("same /64: %v, want ErrThrottled", err)
	}
	if err := try("[2001:db8:1:3::1]:1883", "right"); err != nil {
		t.Fatalf("another /64: %v", err)
	}
}

// A verified password is cached: the same password again costs no bcrypt,
// another password does; a reload drops the cache.
func TestPasswordCacheSkipsBcryptUntilReload(t *testing.T) {
	t.Parallel()
	passwd := writeFile(t, t.TempDir(), "passwd", []byte(hashLine(t, "alice", "right")+hashLine(t, "bob", "bobs")))
	a := newAuth(t, auth.Config{PasswordFile: passwd})
	s := a.PasswordStats()
	expect := func(step, user, password string, ok bool, hashed, cached int64) {
		t.Helper()
		_, err := a.AuthenticateFrom("192.0.2.1:5", user, []byte(password), "c", nil)
		if ok != (err == nil) {
			t.Fatalf("%s: error %v, want ok=%v", step, err, ok)
		}
		if h, c := s.Hashed.Load(), s.Cached.Load(); h != hashed || c != cached {
			t.Fatalf("%s: hashed %d, cached %d; want %d, %d", step, h, c, hashed, cached)
		}
	}
	expect("first", "alice", "right", true, 1, 0)
	expect("again", "alice", "right", true, 1, 1)
	expect("again", "alice", "right", true, 1, 2)
	expect("wrong password", "alice", "wrong", false, 2, 2)
	expect("another user's password", "bob", "right", false, 3, 2)
	expect("bob", "bobs", "x", false, 4, 2) // no user "bobs"
	expect("bob first", "bob", "bobs", true, 5, 2)
	expect("bob again", "bob", "bobs", true, 5, 3)
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	expect("after reload", "alice", "right", true, 6, 3)
	expect("after reload, again", "alice", "right", true, 6, 4)
	// A changed password: the old one is refused after the reload.
	replaceFile(t, passwd, []byte(hashLine(t, "alice", "new")))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	expect("old password after a change", "alice", "right", false, 7, 4)
	expect("new password", "alice", "new", true, 8, 4)

	off := newAuth(t, auth.Config{PasswordFile: passwd, Passwords: auth.PasswordLimits{CacheSize: auth.CacheOff}})
	for range 2 {
		if _, err := off.Authenticate("alice", []byte("new"), "c", nil); err != nil {
			t.Fatal(err)
		}
	}
	if h, c := off.PasswordStats().Hashed.Load(), off.PasswordStats().Cached.Load(); h != 2 || c != 0 {
		t.Errorf("cache off: hashed %d, cached %d; want 2, 0", h, c)
	}
}

// The addresses the throttle keeps are bounded, however many fail.
func TestPasswordThrottleAddressesBounded(t *testing.T) {
	t.Parallel()
	passwd := writeFile(t, t.TempDir(), "passwd", []byte(hashLine(t, "alice", "right")))
	a := newAuth(t, auth.Config{PasswordFile: passwd, Passwords: auth.PasswordLimits{Addresses: 16, FailureBurst: 2}})
	most := 0
	for i := range 60 {
		_, _ = a.AuthenticateFrom(fmt.Sprintf("10.%d.%d.1:1", i/256, i%256), "alice", []byte("wrong"), "c", nil)
		most = max(most, a.ThrottledAddresses())
	}
	if most > 16 || most < 8 {
		t.Errorf("at most %d addresses kept, want 8..16", most)
	}
}
