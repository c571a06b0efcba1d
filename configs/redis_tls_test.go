package configs

import (
	"strings"
	"testing"
)

// redis.tls keys need redis.tls.enabled; a client certificate needs its
// key; auth.passwords keys are held to their ranges.
func TestValidateRedisTLSAndPasswords(t *testing.T) {
	for _, c := range []struct {
		edit func(*Config)
		key  string
	}{
		{func(c *Config) { c.Redis.TLS.CAFile = "ca.pem" }, "redis.tls.enabled"},
		{func(c *Config) { c.Redis.TLS.InsecureSkipVerify = true }, "redis.tls.enabled"},
		{func(c *Config) { c.Redis.TLS.Enabled, c.Redis.TLS.CertFile = true, "c.pem" }, "redis.tls.cert_file"},
		{func(c *Config) { c.Auth.Passwords.FailureBurst = 100000 }, "auth.passwords.failure_burst"},
		{func(c *Config) { c.Auth.Passwords.Addresses = 2 }, "auth.passwords.addresses"},
		{func(c *Config) { c.Auth.Passwords.CacheSize = -2 }, "auth.passwords.cache_size"},
		{func(c *Config) { c.Auth.Passwords.Concurrency = -1 }, "auth.passwords.concurrency"},
	} {
		cfg := Defaults()
		c.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: %v", c.key, err)
		}
	}
	ok := Defaults()
	ok.Redis.TLS.Enabled, ok.Auth.Passwords.CacheSize = true, -1
	if err := ok.Validate(); err != nil {
		t.Errorf("TLS on, cache off: %v", err)
	}
}
