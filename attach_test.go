package presenced_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"go.uber.org/goleak"

	presenced "github.com/presenced/presenced"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/integration/redistest"
)

func newServer(inline bool) *mqtt.Server {
	return mqtt.New(&mqtt.Options{InlineClient: inline, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// Attach refuses a server without the inline client, and a bad config,
// naming the key.
func TestAttachRefuses(t *testing.T) {
	if _, err := presenced.Attach(newServer(false), presenced.Config{}); !errors.Is(err, presenced.ErrNoInlineClient) {
		t.Errorf("no inline client: %v", err)
	}
	_, err := presenced.Attach(newServer(true), presenced.Config{NodeID: "a b"})
	if err == nil || !strings.Contains(err.Error(), "node_id") {
		t.Errorf("bad node id: %v", err)
	}
	// Only the server's one OnACLCheck can keep a user's presence from
	// another user.
	var self presenced.Config
	self.Presence.Visibility = "self"
	if _, err := presenced.Attach(newServer(true), self); err == nil || !strings.Contains(err.Error(), "WithACL") {
		t.Errorf("visibility self without WithACL: %v", err)
	}
	if _, err := presenced.Attach(newServer(true), self, presenced.WithACL(nil)); err != nil {
		t.Errorf("visibility self with WithACL: %v", err)
	}
}

// Stop stops and waits for every goroutine Start started, with either
// store; Stop before Start, and twice, is harmless.
func TestStopLeavesNoGoroutines(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			var cfg presenced.Config
			cfg.NodeID = "leak-" + store
			if store == "redis" {
				r := redistest.Start(t)
				cfg.Redis.Addrs = []string{r.Addr()}
			}
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			srv := newServer(true)
			_ = srv.AddHook(new(hooks.Authenticator), nil)
			p, err := presenced.Attach(srv, cfg, presenced.WithACL(nil))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.Start(ctx); err == nil {
				t.Error("a second Start succeeded")
			}
			if err := srv.Serve(); err != nil {
				t.Fatal(err)
			}
			_ = srv.Close()
			if err := p.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
