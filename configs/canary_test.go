package configs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCanaryValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		key  string // "" when valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"on", func(c *Config) { c.Canary.Enabled = true }, ""},
		{"users", func(c *Config) { c.Canary.Users = 9 }, "canary.users"},
		{"keepalive not whole", func(c *Config) { c.Canary.KeepAlive = Duration(1500 * time.Millisecond) }, "canary.keepalive"},
		{"keepalive over the maximum", func(c *Config) {
			c.Canary.Enabled, c.Canary.KeepAlive, c.MQTT.MaxKeepAlive = true, Duration(20*time.Second), Duration(10*time.Second)
		}, "canary.keepalive"},
		// 1.5 × 5 s + 5 s + 1 s = 13.5 s: 40.5 s at least.
		{"interval under 3 bounds", func(c *Config) { c.Canary.Enabled, c.Canary.Interval = true, Duration(40*time.Second) }, "canary.interval"},
		{"interval under 3 bounds, off", func(c *Config) { c.Canary.Interval = Duration(40 * time.Second) }, ""},
		{"interval of 3 bounds, no flap control", func(c *Config) {
			c.Canary.Enabled, c.Canary.Interval = true, Duration(40500*time.Millisecond)
			*c.Presence.Flap.Ends = 0
		}, ""},
		// 3 ends in 2 minutes flap: a user ending every minute would.
		{"interval that flaps", func(c *Config) { c.Canary.Enabled, c.Canary.Interval = true, Duration(time.Minute) }, "canary.interval"},
		{"interval that does not flap", func(c *Config) { c.Canary.Enabled, c.Canary.Interval = true, Duration(61*time.Second) }, ""},
		{"ends", func(c *Config) { c.Canary.Ends = []string{"clean", "kill"} }, "canary.ends"},
		{"no end", func(c *Config) { c.Canary.Ends = []string{} }, "canary.ends"},
		{"window", func(c *Config) { c.Canary.Window = Duration(time.Second) }, "canary.window"},
		{"no listener", func(c *Config) { c.Canary.Enabled, c.MQTT.Addr = true, Off }, "canary.enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.key == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.key != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.key)):
				t.Errorf("error %v, want one naming %s", err, tc.key)
			}
		})
	}
}
