package auth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// A check that finds every turn taken waits QueueWait, then is refused as
// busy without hashing (and without counting as a failure of its address).
func TestPasswordChecksBounded(t *testing.T) {
	t.Parallel()
	h, err := bcrypt.GenerateFromPassword([]byte("right"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(path, []byte("alice:"+string(h)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{PasswordFile: path, Passwords: PasswordLimits{Concurrency: 2, QueueWait: 50 * time.Millisecond, FailureBurst: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if cap(a.checks) != 2 {
		t.Fatalf("%d checks at once, want 2", cap(a.checks))
	}
	a.checks <- struct{}{}
	a.checks <- struct{}{} // every turn taken
	start := time.Now()
	_, err = a.AuthenticateFrom("192.0.2.1:1", "alice", []byte("right"), "c", nil)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("error %v, want ErrBusy", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("refused after %v, before the queue wait", waited)
	}
	if a.pwStats.Hashed.Load() != 0 || a.pwStats.Busy.Load() != 1 {
		t.Errorf("hashed %d, busy %d; want 0, 1", a.pwStats.Hashed.Load(), a.pwStats.Busy.Load())
	}
	<-a.checks // a turn frees: the same address is not throttled for the busy refusal
	if _, err := a.AuthenticateFrom("192.0.2.1:1", "alice", []byte("right"), "c", nil); err != nil {
		t.Fatalf("with a turn free: %v", err)
	}
}

// However many addresses fail, the throttle keeps at most Addresses; when
// full, it forgets first the addresses that have every failure back, so a
// guesser is not forgotten for others that stopped failing long ago.
func TestThrottleBounded(t *testing.T) {
	t.Parallel()
	th := newThrottle(PasswordLimits{FailureBurst: 3, FailureInterval: time.Second, Addresses: 1000}.withDefaults())
	now := time.Unix(1e9, 0)
	most := 0
	for i := range 20000 {
		a, _ := addrKey(fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255))
		th.take(a, now)
		most = max(most, th.size())
	}
	if most > 1000 {
		t.Fatalf("%d addresses kept, at most 1000", most)
	}

	th = newThrottle(PasswordLimits{FailureBurst: 3, FailureInterval: time.Second, Addresses: 16}.withDefaults())
	for i := range 16 {
		a, _ := addrKey(fmt.Sprintf("10.0.0.%d:1", i))
		th.take(a, now)
	}
	later := now.Add(time.Hour) // the 16 have their failures back
	hot, _ := addrKey("192.0.2.9:1")
	for range 3 {
		if !th.take(hot, later) {
			t.Fatal("the guesser throttled before its burst")
		}
	}
	for i := range 15 {
		a, _ := addrKey(fmt.Sprintf("172.16.0.%d:1", i))
		th.take(a, later)
	}
	if th.take(hot, later) {
		t.Fatal("the guesser was forgotten for addresses that stopped failing")
	}
	if n := th.size(); n > 16 {
		t.Fatalf("%d addresses kept, at most 16", n)
	}
}
