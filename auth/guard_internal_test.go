package auth

import (
	"errors"
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
