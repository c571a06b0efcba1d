package presenced

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/crypto/bcrypt"
)

// The node's collector passes Prometheus's lint and shows each listener,
// the authentication's results and the admin port's refusals.
func TestBrokerCollector(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(file, []byte("alice:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := brokerConfig()
	cfg.Auth.PasswordFile = file
	cfg.Admin.Token = "tok"
	n, err := NewBroker(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop(context.Background()) })
	c := n.table
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	for name, want := range map[string]int{
		"presenced_listener_connections":            2, // tcp and ws
		"presenced_auth_connects_total":             6, // accepted, anonymous, refused, client_id_denied, throttled, busy
		"presenced_admin_refused_total":             1,
		"presenced_auth_password_checks_total":      4, // hashed, cached, throttled, busy
		"presenced_auth_password_failing_addresses": 1,
	} {
		if got := testutil.CollectAndCount(c, name); got != want {
			t.Errorf("%s: %d series, want %d", name, got, want)
		}
	}
}
