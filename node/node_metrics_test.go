package node

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"
)

// The node's collector passes Prometheus's lint and shows each listener,
// the authentication's results and the admin port's refusals.
func TestNodeCollector(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(file, []byte("alice:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Auth.PasswordFile = file
	cfg.Admin.Token = "tok"
	n, err := New(cfg, zerolog.Nop(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop(context.Background()) })
	c := collector{n}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	for name, want := range map[string]int{
		"presenced_listener_connections": 2, // tcp and ws
		"presenced_auth_connects_total":  4,
		"presenced_admin_refused_total":  1,
	} {
		if got := testutil.CollectAndCount(c, name); got != want {
			t.Errorf("%s: %d series, want %d", name, got, want)
		}
	}
}
