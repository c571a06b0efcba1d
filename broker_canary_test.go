package presenced

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/presenced/presenced/auth"
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
