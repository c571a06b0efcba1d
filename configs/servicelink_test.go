package configs

import (
	"bytes"
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"
)

// kubernetesEnv is what Kubernetes puts into a pod for a Service presenced
// (ports 1883 named mqtt and 1882 named mqtt-ws) and a Service
// presenced-redis (port 6379).
var kubernetesEnv = []string{
	"PRESENCED_PORT=tcp://10.0.0.1:1883",
	"PRESENCED_PORT_1883_TCP=tcp://10.0.0.1:1883",
	"PRESENCED_PORT_1883_TCP_PROTO=tcp",
	"PRESENCED_PORT_1883_TCP_PORT=1883",
	"PRESENCED_PORT_1883_TCP_ADDR=10.0.0.1",
	"PRESENCED_PORT_1882_TCP_ADDR=10.0.0.1",
	"PRESENCED_SERVICE_HOST=10.0.0.1",
	"PRESENCED_SERVICE_PORT=1883",
	"PRESENCED_SERVICE_PORT_MQTT=1883",
	"PRESENCED_SERVICE_PORT_MQTT_WS=1882",
	"PRESENCED_REDIS_SERVICE_HOST=10.0.0.2",
	"PRESENCED_REDIS_SERVICE_PORT=6379",
	"PRESENCED_REDIS_PORT=tcp://10.0.0.2:6379",
	"PRESENCED_REDIS_PORT_6379_TCP=tcp://10.0.0.2:6379",
	"PRESENCED_REDIS_PORT_6379_TCP_PROTO=tcp",
	"PRESENCED_REDIS_PORT_6379_TCP_PORT=6379",
	"PRESENCED_REDIS_PORT_6379_TCP_ADDR=10.0.0.2",
	"PRESENCED_DNS_PORT_53_UDP_ADDR=10.0.0.3",
	"PRESENCED_SIG_PORT_9000_SCTP=sctp://10.0.0.4:9000",
}

func TestServiceLinksAreIgnored(t *testing.T) {
	t.Parallel()
	for _, kv := range kubernetesEnv {
		name, _, _ := strings.Cut(kv, "=")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, notes, err := LoadWithNotes(nil, []string{kv}, nil)
			if err != nil {
				t.Fatalf("LoadWithNotes: %v", err)
			}
			if !reflect.DeepEqual(c, Defaults()) {
				t.Errorf("config changed: %+v", c)
			}
			if !reflect.DeepEqual(notes.IgnoredEnv, []string{name}) {
				t.Errorf("IgnoredEnv = %q, want [%s]", notes.IgnoredEnv, name)
			}
			if _, err := Load(nil, []string{kv}, nil); err != nil {
				t.Errorf("Load: %v", err)
			}
		})
	}
}

func TestServiceLinksBesideSettings(t *testing.T) {
	t.Parallel()
	env := append([]string{"HOME=/root", "PRESENCED_MQTT_ADDR=:2000"}, kubernetesEnv...)
	c, notes, err := LoadWithNotes(nil, env, nil)
	if err != nil {
		t.Fatalf("LoadWithNotes: %v", err)
	}
	if c.MQTT.Addr != ":2000" {
		t.Errorf("mqtt.addr = %q, want :2000", c.MQTT.Addr)
	}
	if len(notes.IgnoredEnv) != len(kubernetesEnv) {
		t.Errorf("IgnoredEnv has %d names, want %d: %q", len(notes.IgnoredEnv), len(kubernetesEnv), notes.IgnoredEnv)
	}
	for i := 1; i < len(notes.IgnoredEnv); i++ {
		if notes.IgnoredEnv[i-1] >= notes.IgnoredEnv[i] {
			t.Errorf("IgnoredEnv is not sorted: %q", notes.IgnoredEnv)
			break
		}
	}
	for _, name := range notes.IgnoredEnv {
		if strings.Contains(name, "=") {
			t.Errorf("IgnoredEnv holds a value: %q", name)
		}
	}
}

func TestNoServiceLinksNoNotes(t *testing.T) {
	t.Parallel()
	_, notes, err := LoadWithNotes(nil, []string{"PRESENCED_LOG_LEVEL=warn"}, nil)
	if err != nil || notes.IgnoredEnv != nil {
		t.Errorf("LoadWithNotes: notes %+v, err %v; want no notes, no error", notes, err)
	}
}

// A typo is still refused, with its suggestion, among service links; the
// error names only the typo.
func TestTypoAmongServiceLinks(t *testing.T) {
	t.Parallel()
	env := append([]string{"PRESENCED_MQTT_ADR=:1"}, kubernetesEnv...)
	c, notes, err := LoadWithNotes(nil, env, nil)
	mustContain(t, err, ErrUnknownKey, "PRESENCED_MQTT_ADR", `did you mean "PRESENCED_MQTT_ADDR"`)
	if err != nil && strings.Contains(err.Error(), "SERVICE") {
		t.Errorf("error names a service link: %v", err)
	}
	if !reflect.DeepEqual(c, Config{}) || notes.IgnoredEnv != nil {
		t.Errorf("on error got config %+v and notes %+v, want zero values", c, notes)
	}

	_, err = Load(nil, []string{"PRESENCED_MQTT_ADR=:1"}, nil)
	mustContain(t, err, ErrUnknownKey, "PRESENCED_MQTT_ADR", `did you mean "PRESENCED_MQTT_ADDR"`)
}

func TestIsServiceLink(t *testing.T) {
	t.Parallel()
	for _, kv := range kubernetesEnv {
		name, _, _ := strings.Cut(kv, "=")
		if !isServiceLink(name) {
			t.Errorf("isServiceLink(%s) = false, want true", name)
		}
	}
	// Near misses are unknown keys, not service links.
	for _, name := range []string{
		"PRESENCED_MQTT_ADR",
		"PRESENCED_MQTT_ADDR_PORT_X",
		"PRESENCED_PORTS",
		"PRESENCED_PORT_",
		"PRESENCED_PORT_1883",
		"PRESENCED_PORT_1883_HTTP",
		"PRESENCED_PORT_1883_TCP_HOST",
		"PRESENCED_PORT_X_TCP",
		"PRESENCED_PORT_1883_tcp",
		"PRESENCED_SERVICE_HOSTS",
		"PRESENCED_SERVICE_HOST_X",
		"PRESENCED_SERVICE_PORT_",
		"PRESENCED_SERVICE",
		"PRESENCED_service_host",
		"_SERVICE_HOST",
		"_PORT",
	} {
		if isServiceLink(name) {
			t.Errorf("isServiceLink(%s) = true, want false", name)
		}
		if !strings.HasPrefix(name, envPrefix) {
			continue
		}
		if _, err := Load(nil, []string{name + "=x"}, nil); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("Load with %s: err = %v, want ErrUnknownKey", name, err)
		}
	}
}

// No setting's variable may look like a service link. Load checks the
// settings first, so such a key would still work, but a Service whose links
// have the same name would then set it without anyone noticing.
func TestNoKeyLooksLikeServiceLink(t *testing.T) {
	t.Parallel()
	names := []string{envConfigFile}
	for _, lf := range leaves() {
		names = append(names, lf.env)
	}
	for _, name := range names {
		if isServiceLink(name) {
			t.Errorf("%s has the shape of a Kubernetes service link; rename the key", name)
		}
	}
}

func TestUsageMentionsVersionAndServiceLinks(t *testing.T) {
	t.Parallel()
	var usage bytes.Buffer
	if _, err := Load([]string{"-h"}, nil, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"--version", "Kubernetes service links"} {
		if !strings.Contains(usage.String(), want) {
			t.Errorf("usage does not mention %q:\n%s", want, usage.String())
		}
	}
}
