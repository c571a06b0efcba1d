package presenced

import (
	"testing"
	"time"

	"github.com/presenced/presenced/configs"
)

// The sparkplug section crosses between the YAML layer and the embedded
// form's Config both ways, defaults applied.
func TestSparkplugConfig(t *testing.T) {
	y := configs.Defaults()
	y.Sparkplug = configs.SparkplugConfig{Enabled: true, DropStaleDeaths: true, MaxEdgeNodes: 7, ForgetAfter: configs.Duration(2 * time.Hour)}
	c := ConfigFrom(y)
	want := Sparkplug{Enabled: true, DropStaleDeaths: true, MaxEdgeNodes: 7, ForgetAfter: 2 * time.Hour}
	if c.Sparkplug != want {
		t.Fatalf("ConfigFrom: %+v, want %+v", c.Sparkplug, want)
	}
	if got := c.yaml().Sparkplug; got != y.Sparkplug {
		t.Fatalf("Config.yaml: %+v, want %+v", got, y.Sparkplug)
	}
	full, err := Config{Sparkplug: Sparkplug{Enabled: true}}.complete()
	if err != nil {
		t.Fatal(err)
	}
	if s := full.Sparkplug; !s.Enabled || s.DropStaleDeaths || s.MaxEdgeNodes != 10000 || s.ForgetAfter != time.Hour {
		t.Fatalf("defaults: %+v", s)
	}
}
