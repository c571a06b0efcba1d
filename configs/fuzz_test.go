package configs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Seeds of the fuzz target are in testdata/fuzz/FuzzLoadYAML; one of them is
// presenced.yaml as it was when the target was written.

// loadBytes loads b as the config file, with no environment and no flags.
func loadBytes(t *testing.T, b []byte) (Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "presenced.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return Load([]string{"--config", path}, nil, io.Discard)
}

// emptyListsNil makes every empty list nil, for comparisons in which an
// explicit empty list and none mean the same.
func emptyListsNil(c Config) Config {
	for _, p := range []*[]string{&c.MQTT.WSAllowedOrigins, &c.Presence.Observers, &c.Redis.Addrs} {
		if len(*p) == 0 {
			*p = nil
		}
	}
	return c
}

// FuzzLoadYAML loads fuzzed bytes as the config file. Load never panics. An
// error wraps ErrUnknownKey or ErrInvalid (never ErrFile: the file is
// there) and comes with the zero Config. A config it returns validates, is
// left as it is by ApplyDefaults, and, written back as YAML, loads to the
// same config (its secrets as ***, which is how they are written).
func FuzzLoadYAML(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := loadBytes(t, b)
		if err != nil {
			if !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("Load(%q): error %v wraps neither ErrUnknownKey nor ErrInvalid", b, err)
			}
			if errors.Is(err, ErrFile) {
				t.Fatalf("Load(%q): error %v wraps ErrFile, but the file is there", b, err)
			}
			if !reflect.DeepEqual(c, Config{}) {
				t.Fatalf("failed Load(%q) returned %+v", b, c)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Load(%q) returned a config that does not validate: %v", b, err)
		}
		again := c
		again.ApplyDefaults()
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("Load(%q): ApplyDefaults changes the config:\n%+v\nto\n%+v", b, c, again)
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("Load(%q): yaml.Marshal of the config: %v", b, err)
		}
		back, err := loadBytes(t, out)
		if err != nil {
			t.Fatalf("Load(%q) gave a config that, written as\n%s\ndoes not load: %v", b, out, err)
		}
		// A secret is written as ***, so that is what comes back.
		for _, p := range []*Secret{&c.Admin.Token, &c.Redis.Password} {
			if *p != "" {
				*p = "***"
			}
		}
		if !reflect.DeepEqual(emptyListsNil(back), emptyListsNil(c)) {
			t.Fatalf("Load(%q) gave a config that, written as\n%s\nloads as\n%+v\nnot\n%+v", b, out, back, c)
		}
	})
}
