package presenced

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

func brokerConfig() configs.Config {
	cfg := configs.Defaults()
	cfg.NodeID = "unit"
	cfg.MQTT.Addr, cfg.MQTT.WSAddr, cfg.Admin.Addr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	return cfg
}

// Stop stops every goroutine the node started, including connections'.
func TestBrokerStopLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	n, err := NewBroker(brokerConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", n.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// A port in use stops the start with an error naming the key.
func TestBrokerStartFailsOnPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, key := range []string{"mqtt.addr", "mqtt.ws_addr", "admin.addr"} {
		cfg := brokerConfig()
		switch key {
		case "mqtt.addr":
			cfg.MQTT.Addr = ln.Addr().String()
		case "mqtt.ws_addr":
			cfg.MQTT.WSAddr = ln.Addr().String()
		case "admin.addr":
			cfg.Admin.Addr = ln.Addr().String()
		}
		n, err := NewBroker(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		err = n.Start(context.Background())
		if err == nil {
			_ = n.Stop(context.Background())
			t.Fatalf("%s in use: started", key)
		}
		if got := err.Error(); len(got) < len(key) || got[:len(key)] != key {
			t.Errorf("%s in use: error %q does not name the key", key, got)
		}
	}
}

// Retained presence is never purged. mochi deletes a retained message older
// than MaximumMessageExpiryInterval (clearExpiredRetainedMessages, every
// second). Until issue 8 the binary set it to 0, so that nothing expired and
// any client could fill the broker with retained messages for ever; now
// other retained messages expire after mqtt.retained_expiry. Since issue
// 23 retained presence is not in mochi's store at all (the publisher's
// views are its retained store, delivered on SUBSCRIBE), so nothing purges
// it: the test asserts that presence survives the purge, outside mochi's
// store, and that another retained message does not.
func TestRetainedPresenceNeverExpires(t *testing.T) {
	cfg := brokerConfig()
	cfg.MQTT.RetainedExpiry = configs.Duration(2 * time.Second)
	n, err := NewBroker(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.Stop(context.Background()) }()
	if got := n.Server().Options.Capabilities.MaximumMessageExpiryInterval; got != 2 {
		t.Fatalf("MaximumMessageExpiryInterval = %d, want 2", got)
	}
	n.presence.publisher.Publish(presence.Aggregate{User: "zoe", Status: presence.Offline, Version: 7})
	if err := n.Server().Publish("other/topic", []byte("x"), true, 0); err != nil {
		t.Fatal(err)
	}
	retained := func() bool {
		ok := false
		n.presence.publisher.Snapshots("zoe", false, func(string, uint64, []byte) { ok = true })
		return ok
	}
	testkit.Wait(t, 5*time.Second, "presence retained", func() error {
		return testkit.Why(retained(), "not retained")
	})
	if _, ok := n.Server().Topics.Retained.Get("presence/users/zoe"); ok {
		t.Fatal("mochi retains presence/users/zoe")
	}
	// The other message goes within the interval and the purge's second.
	testkit.Wait(t, 10*time.Second, "other retained message purged", func() error {
		_, ok := n.Server().Topics.Retained.Get("other/topic")
		return testkit.Why(!ok, "still retained")
	})
	// Presence outlives two full intervals since it was published.
	testkit.During(t, 4*time.Second, "retained presence kept", func() error {
		return testkit.Why(retained(), "retained presence was purged")
	})
}
