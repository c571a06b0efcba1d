package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func loadWebhooksYAML(t *testing.T, yaml string, env ...string) (Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "presenced.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load([]string{"--config", path}, env, nil)
}

// An endpoint's keys are decoded strictly, take their defaults, and never
// print the secret.
func TestWebhooksConfig(t *testing.T) {
	t.Parallel()
	c, err := loadWebhooksYAML(t, `
webhooks:
  endpoints:
    - url: https://hooks.example.com/presence?token=abc
      secret: s3cr3t
      max_batch: 50
    - name: audit
      url: http://127.0.0.1:9000/hook
      secret_file: /run/secrets/hook
      events: [user.online, session.opened, session.ended]
`)
	if err != nil {
		t.Fatal(err)
	}
	w := c.Webhooks
	if len(w.Endpoints) != 2 || w.Replay != 10000 {
		t.Fatalf("webhooks %+v", w)
	}
	a, b := w.Endpoints[0], w.Endpoints[1]
	if a.Name != "hooks.example.com" || a.MaxBatch != 50 || a.MaxWait != Duration(time.Second) || a.Queue != 10000 ||
		a.Timeout != Duration(10*time.Second) || a.RetryBackoff != Duration(500*time.Millisecond) || a.RetryMaxBackoff != Duration(time.Minute) ||
		a.BreakerThreshold != 5 || a.BreakerCooldown != Duration(30*time.Second) || len(a.Events) != 3 || a.Secret != "s3cr3t" {
		t.Fatalf("first endpoint %+v", a)
	}
	if b.Name != "audit" || b.SecretFile != "/run/secrets/hook" || len(b.Events) != 3 || b.Events[2] != "session.ended" {
		t.Fatalf("second endpoint %+v", b)
	}
	if s := a.Secret.String(); strings.Contains(s, "s3cr3t") {
		t.Fatal("the secret prints")
	}

	_, err = loadWebhooksYAML(t, "webhooks:\n  endpoints:\n    - url: https://x.example/h\n      secret: s\n      max_bach: 5\n")
	mustContain(t, err, ErrUnknownKey, `"webhooks.endpoints[0].max_bach"`, "line 5", "webhooks.endpoints[0].max_batch")

	_, err = loadWebhooksYAML(t, `
webhooks:
  endpoints:
    - url: ftp://x.example/h?token=hidden
      events: [user.online, user.typing]
      max_batch: 0
      timeout: 1ms
    - url: https://x.example/a
      secret: a
      secret_file: /f
    - url: https://x.example/b
      secret: b
`)
	mustContain(t, err, ErrInvalid, "webhooks.endpoints[0].url: must be an http:// or https:// URL",
		"webhooks.endpoints[0].secret: must be set", `"user.typing" is not one of`, "webhooks.endpoints[0].timeout",
		"webhooks.endpoints[1].secret: and secret_file are both set", `webhooks.endpoints[2].name: "x.example" names another endpoint`)
	if strings.Contains(err.Error(), "hidden") {
		t.Errorf("an error repeats the URL's query: %v", err)
	}

	c, err = Load(nil, []string{`PRESENCED_WEBHOOKS_ENDPOINTS=[{url: "http://127.0.0.1:9/h", secret: e, max_wait: 50ms}]`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := c.Webhooks.Endpoints; len(e) != 1 || e[0].MaxWait != Duration(50*time.Millisecond) || e[0].Name != "127.0.0.1:9" {
		t.Fatalf("from the environment: %+v", e)
	}
	_, err = Load(nil, []string{`PRESENCED_WEBHOOKS_ENDPOINTS=[{url: "http://127.0.0.1:9/h", secret: e, bogus: 1}]`}, nil)
	mustContain(t, err, ErrInvalid, "PRESENCED_WEBHOOKS_ENDPOINTS", "bogus")
}
