package presenced

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/crypto/bcrypt"

	"github.com/presenced/presenced/auth"
	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
)

// The canary's secret admits a synthetic user and the observer (a service
// account without a user), nothing else; no other credential may
// authenticate a name the canary reserves; the canary's identities stay
// current through a reload.
func TestCanaryCredentials(t *testing.T) {
	dir := t.TempDir()
	var lines []byte
	for _, u := range []string{"alice", "presenced-canary-x-0"} {
		h, err := bcrypt.GenerateFromPassword([]byte(u+"-pw"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, []byte(u+":"+string(h)+"\n")...)
	}
	pw := filepath.Join(dir, "passwd")
	if err := os.WriteFile(pw, lines, 0o600); err != nil {
		t.Fatal(err)
	}
	next, err := auth.New(auth.Config{PasswordFile: pw})
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	c := &canaryCredentials{next: next, secret: secret}
	for _, tc := range []struct {
		name, user, password string
		want                 auth.Identity
		denied               bool
	}{
		{"synthetic user", "presenced-canary-a-1", string(secret), auth.Identity{User: "presenced-canary-a-1", Method: MethodCanary}, false},
		{"observer", "", string(secret), auth.Identity{Method: MethodCanary, Observer: true}, false},
		{"the secret for a real user", "alice", string(secret), auth.Identity{}, true},
		{"a real user", "alice", "alice-pw", auth.Identity{User: "alice", Method: auth.MethodPassword}, false},
		{"a reserved name in the password file", "presenced-canary-x-0", "presenced-canary-x-0-pw", auth.Identity{}, true},
		{"a wrong secret", "presenced-canary-a-1", "0123456789abcdef0123456789abcdeX", auth.Identity{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := c.AuthenticateFrom("127.0.0.1", tc.user, []byte(tc.password), tc.user+"/x", nil)
			if tc.denied {
				if !errors.Is(err, auth.ErrDenied) {
					t.Fatalf("%+v %v, want denied", id, err)
				}
				return
			}
			if err != nil || id.User != tc.want.User || id.Method != tc.want.Method || id.Observer != tc.want.Observer {
				t.Fatalf("%+v %v, want %+v", id, err, tc.want)
			}
			if !c.Current(id) {
				t.Fatalf("%+v not current", id)
			}
		})
	}
}

func TestLoopback(t *testing.T) {
	for in, want := range map[string]string{
		":1883": "127.0.0.1:1883", "0.0.0.0:1883": "127.0.0.1:1883", "[::]:1883": "[::1]:1883",
		"127.0.0.1:5": "127.0.0.1:5", "10.0.0.2:1883": "10.0.0.2:1883",
	} {
		if got := loopback(in); got != want {
			t.Errorf("loopback(%q) = %q, want %q", in, got, want)
		}
	}
}

// The canary in process, under the race detector, with a password file
// (its secret admits it): alone, it observes its own synthetic users; every
// kind of end is shown within its bound; Stop leaves no goroutine.
func TestBrokerCanary(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	h, err := bcrypt.GenerateFromPassword([]byte("alice-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(dir, "passwd")
	if err := os.WriteFile(pw, []byte("alice:"+string(h)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := brokerConfig()
	cfg.Auth.PasswordFile = pw
	zero := configs.Duration(0)
	off := 0
	cfg.Presence.OfflineGrace, cfg.Presence.DisconnectDebounce, cfg.Presence.MinDwell, cfg.Presence.Flap.Ends = &zero, &zero, &zero, &off
	// keep-alive 1 s, no grace: a 2.5 s bound; 4 users over 8 s, each kind once.
	cfg.Canary = configs.CanaryConfig{Enabled: true, Users: 4, Interval: configs.Duration(8 * time.Second), KeepAlive: configs.Duration(time.Second),
		Ends: []string{"clean", "rst", "silence", "drain"}, Window: configs.Duration(time.Hour)}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	n, err := NewBroker(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Error(err)
		}
	}
	defer stop()
	testkit.Wait(t, 30*time.Second, "every kind of end observed", func() error {
		s := n.SLO()
		for _, k := range s.Detection {
			if k.Ends == 0 {
				return fmt.Errorf("no %s end yet: %+v", k.Kind, s.Detection)
			}
		}
		return nil
	})
	s := n.SLO()
	if s.All.Within != s.All.Ends || s.All.P99 > s.Bound || s.Bound != 2.5 || s.Propagations == 0 {
		t.Fatalf("%+v", s)
	}
	if got := n.canary.c.Stats.MoveFailed.Load(); got != 0 {
		t.Errorf("%d drains not carried out", got)
	}
	stop()
	if c := n.canary.c.Stats.Connections.Load(); c != 0 {
		t.Errorf("%d canary connections after Stop", c)
	}
}
