package configs

import (
	"errors"
	"strings"
	"testing"
)

func TestLifecycleValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		key  string // "" when valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"both on", func(c *Config) { c.Lifecycle.AWS.Enabled, c.Lifecycle.EMQX.Enabled = true, true }, ""},
		{"mode", func(c *Config) { c.Lifecycle.AWS.Mode = "cooked" }, "lifecycle.aws.mode"},
		{"wildcard", func(c *Config) { c.Lifecycle.EMQX.Prefix = "$SYS/+" }, "lifecycle.emqx.prefix"},
		{"empty level", func(c *Config) { c.Lifecycle.AWS.Prefix = "a//b" }, "lifecycle.aws.prefix"},
		{"under presence", func(c *Config) { c.Lifecycle.AWS.Enabled, c.Lifecycle.AWS.Prefix = true, "presence/aws" }, "lifecycle.aws.prefix"},
		{"overlap", func(c *Config) {
			c.Lifecycle.AWS.Enabled, c.Lifecycle.EMQX.Enabled = true, true
			c.Lifecycle.EMQX.Prefix = "$aws/events/presence/x"
		}, "lifecycle.emqx.prefix"},
		{"depth", func(c *Config) { c.Lifecycle.QueueDepth = 3 }, "lifecycle.queue_depth"},
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
