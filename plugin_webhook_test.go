package presenced_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	presenced "github.com/presenced/presenced"
	"github.com/presenced/presenced/configs"
)

// The webhooks section maps onto Config and back; Attach reads each
// secret_file and refuses a missing or empty one, naming the key and not
// the secret; with an endpoint the figures of the webhooks are in the
// table, without one they are not.
func TestWebhooksConfigAndAttach(t *testing.T) {
	y := configs.Defaults()
	y.Webhooks.Endpoints = []configs.WebhookEndpoint{{URL: "https://hooks.example.com/p", Secret: "s", MaxBatch: 7, MaxWait: configs.Duration(time.Second)}}
	y.ApplyDefaults()
	c := presenced.ConfigFrom(y)
	if e := c.Webhooks.Endpoints; len(e) != 1 || e[0].MaxBatch != 7 || e[0].Secret != "s" || e[0].Name != "hooks.example.com" || e[0].BreakerThreshold != 5 {
		t.Fatalf("ConfigFrom: %+v", c.Webhooks)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string]string{"missing": filepath.Join(dir, "nope"), "empty": empty} {
		var cfg presenced.Config
		cfg.Webhooks.Endpoints = []presenced.WebhookEndpoint{{URL: "https://hooks.example.com/p", SecretFile: file}}
		if _, err := presenced.Attach(newServer(true), cfg); err == nil || !strings.Contains(err.Error(), "webhooks.endpoints[0].secret_file") {
			t.Errorf("%s secret_file: %v", name, err)
		}
	}
	good := filepath.Join(dir, "secret")
	if err := os.WriteFile(good, []byte("whsec_9f8e\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg presenced.Config
	cfg.Webhooks.Endpoints = []presenced.WebhookEndpoint{{Name: "app", URL: "http://127.0.0.1:9/p", SecretFile: good}}
	p, err := presenced.Attach(newServer(true), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); !slices.Contains(s.Names(), "webhook_sent_total") || !slices.Contains(s.Names(), "webhook_lease_held") {
		t.Errorf("no webhook figures: %v", s.Names())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	plain, err := presenced.Attach(newServer(true), presenced.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(plain.Stats().Names(), "webhook_lease_held") {
		t.Error("webhook figures without an endpoint")
	}
}
