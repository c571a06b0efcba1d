package presenced

import (
	"slices"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"

	"github.com/presenced/presenced/delivery"
)

// presence.clock_interval crosses between the YAML layer and the embedded
// form's Config both ways: unset is the default (5 s), 0 is Off.
func TestClockConfig(t *testing.T) {
	for _, tc := range []struct {
		plain time.Duration
		want  time.Duration
	}{{0, 5 * time.Second}, {Off, Off}, {2 * time.Second, 2 * time.Second}} {
		full, err := Config{Presence: Presence{ClockInterval: tc.plain}}.complete()
		if err != nil {
			t.Fatal(err)
		}
		if got := full.Presence.ClockInterval; got != tc.want {
			t.Errorf("ClockInterval %v: completed to %v, want %v", tc.plain, got, tc.want)
		}
		if back := ConfigFrom(full.yaml()).Presence.ClockInterval; back != tc.want {
			t.Errorf("ClockInterval %v: back from YAML %v, want %v", tc.plain, back, tc.want)
		}
	}
	if _, err := (Config{Presence: Presence{ClockInterval: 100 * time.Millisecond}}).complete(); err == nil {
		t.Error("ClockInterval 100ms accepted")
	}
}

// The stage is built with the configured interval, not at all when off,
// and hides the version unless presence.visibility is open.
func TestClockWiring(t *testing.T) {
	attach := func(c Config, opts ...Option) *Plugin {
		t.Helper()
		p, err := Attach(mqtt.New(&mqtt.Options{InlineClient: true}), c, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := attach(Config{NodeID: "n"}); p.clock == nil || p.clock.Message().Interval != 5*time.Second || p.clock.Topic() != "presence/clock" {
		t.Errorf("default: %+v", p.clock)
	}
	if p := attach(Config{NodeID: "n", Presence: Presence{ClockInterval: Off}}); p.clock != nil {
		t.Error("a clock with presence.clock_interval off")
	}
	open := attach(Config{NodeID: "n"})
	open.clockPublished(42)
	if v := open.clock.Message().Version; v != 42 {
		t.Errorf("open visibility: version %d, want 42", v)
	}
	self := attach(Config{NodeID: "n", Presence: Presence{Visibility: VisibilitySelf}}, WithACL(delivery.Policy(nil)))
	self.clockPublished(42)
	if v := self.clock.Message().Version; v != 0 {
		t.Errorf("visibility self: version %d, want 0 (hidden)", v)
	}
	if !slices.Contains(open.Stats().Names(), "clock_messages_total") {
		t.Error("no clock_messages_total figure")
	}
}
