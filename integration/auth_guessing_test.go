package integration

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/presenced/presenced/configs"
)

// CONNACK codes of a throttled or busy password check.
const (
	rcPwRateExceeded = 0x9F // MQTT 5
	rc3PwUnavailable = 0x03 // MQTT 3.1.1
)

// A client guessing passwords over MQTT from one address gets 0x86 for its
// first auth.passwords.failure_burst (10) guesses, then 0x9F (3.1.1: 0x03)
// without any bcrypt comparison, even with the right password; a client
// from another address still connects.
func TestAuthPasswordGuessingThrottled(t *testing.T) {
	pwfile := filepath.Join(t.TempDir(), "passwd")
	writePasswordFile(t, pwfile, map[string]string{"alice": "alice-Secret-1"})
	n := startAuthNode(t, func(c *configs.Config) { c.Auth.PasswordFile = pwfile })
	for i := range 10 {
		if got := try(t, ctDialTCP(t, n.MQTTAddr()), 5, fmt.Sprintf("guess-%d", i), "alice", fmt.Sprintf("Guess-%d", i)); got != rcBadUserNameOrPass {
			t.Fatalf("guess %d: CONNACK %#x, want %#x", i, got, rcBadUserNameOrPass)
		}
	}
	for i := range 20 {
		if got := try(t, ctDialTCP(t, n.MQTTAddr()), 5, "guess", "alice", fmt.Sprintf("More-%d", i)); got != rcPwRateExceeded {
			t.Fatalf("guess %d after the burst: CONNACK %#x, want %#x", 10+i, got, rcPwRateExceeded)
		}
	}
	if got := try(t, ctDialTCP(t, n.MQTTAddr()), 4, "guess3", "alice", "More-v3"); got != rc3PwUnavailable {
		t.Errorf("3.1.1 guess after the burst: CONNACK %#x, want %#x", got, rc3PwUnavailable)
	}
	if got := try(t, ctDialTCP(t, n.MQTTAddr()), 5, "alice-1", "alice", "alice-Secret-1"); got != rcPwRateExceeded {
		t.Errorf("the right password from the throttled address: CONNACK %#x, want %#x", got, rcPwRateExceeded)
	}
	s := n.Stats()
	if h, th := s.Of("auth_password_checks_total", "hashed"), s.Of("auth_password_checks_total", "throttled"); h != 10 || th != 22 {
		t.Errorf("password checks: hashed %d, throttled %d; want 10 (the burst), 22", h, th)
	}
	if got := s.Of("auth_connects_total", "throttled"); got != 22 {
		t.Errorf("auth_connects_total{throttled} %d, want 22", got)
	}
	if got := try(t, dialFrom(t, n.MQTTAddr(), "127.0.0.2"), 5, "alice-2", "alice", "alice-Secret-1"); got != 0 {
		t.Errorf("the right password from another address: CONNACK %#x, want 0", got)
	}
}

// Devices reconnecting with the same password cost one bcrypt comparison,
// not one each; a reload of the password file (SIGHUP) drops what was
// cached.
func TestAuthPasswordCache(t *testing.T) {
	pwfile := filepath.Join(t.TempDir(), "passwd")
	writePasswordFile(t, pwfile, map[string]string{"alice": "alice-Secret-1"})
	n := startAuthNode(t, func(c *configs.Config) { c.Auth.PasswordFile = pwfile })
	for i := range 5 {
		if got := try(t, ctDialTCP(t, n.MQTTAddr()), 5, fmt.Sprintf("alice-%d", i), "alice", "alice-Secret-1"); got != 0 {
			t.Fatalf("connect %d: CONNACK %#x", i, got)
		}
	}
	s := n.Stats()
	if h, c := s.Of("auth_password_checks_total", "hashed"), s.Of("auth_password_checks_total", "cached"); h != 1 || c != 4 {
		t.Errorf("5 connects: hashed %d, cached %d; want 1, 4", h, c)
	}
	if err := n.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := try(t, ctDialTCP(t, n.MQTTAddr()), 5, "alice-9", "alice", "alice-Secret-1"); got != 0 {
		t.Fatalf("after the reload: CONNACK %#x", got)
	}
	if h := n.Stats().Of("auth_password_checks_total", "hashed"); h != 2 {
		t.Errorf("after the reload: hashed %d, want 2 (the cache dropped)", h)
	}
}
