package integration

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/presenced/presenced/configs"
)

// composeFile is what the test reads of compose.yaml.
type composeFile struct {
	Services map[string]struct {
		Image           string
		Build           string
		Environment     map[string]string
		Volumes         []string
		Secrets         []string
		Ports           []string
		StopGracePeriod string `yaml:"stop_grace_period"`
	}
	Secrets map[string]struct{ File string }
}

// prometheusFile is what the test reads of deploy/compose/prometheus.yml.
type prometheusFile struct {
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		Authorization struct {
			Type            string
			CredentialsFile string `yaml:"credentials_file"`
		}
		StaticConfigs []struct{ Targets []string } `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// readYAML decodes the YAML file at path into v, refusing unknown keys
// only where v says so (the structs above read a part).
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// compose.yaml and what it mounts agree: podman-compose reads it (its
// --dry-run prints the podman commands of `up`), each presenced node's
// configuration loads with presenced's own loader and names the node, the
// Redis service and the admin token compose mounts; the ports published
// are the ones the nodes listen on, on loopback and distinct; Prometheus
// scrapes every node's admin port with that token. The Redis and
// Prometheus images cannot be pulled here (no registry), so compose does
// not run: this is what can be checked without them.
func TestCompose(t *testing.T) {
	deployTools(t, "podman", "podman-compose")
	version := versionFile(t)
	var c composeFile
	readYAML(t, "../compose.yaml", &c)

	// podman-compose's dry run. Its 1.0.3 (bookworm) creates the project's
	// network even then: a project name of the test's own, removed after.
	const project = "presenced-itest"
	t.Cleanup(func() {
		_, _ = runCmd(t, time.Minute, "", "podman", "network", "rm", "--force", project+"_default")
	})
	out := mustRun(t, 2*time.Minute, "..", "podman-compose", "--project-name", project, "--file", "compose.yaml", "--dry-run", "up", "--detach")
	for svc := range c.Services {
		if !strings.Contains(out, "podman run --name="+project+"_"+svc+"_1 ") {
			t.Errorf("podman-compose --dry-run up runs no container of %s:\n%s", svc, out)
		}
	}

	for _, svc := range []string{"redis", "node1", "node2", "prometheus"} {
		if _, ok := c.Services[svc]; !ok {
			t.Fatalf("compose.yaml has no service %s", svc)
		}
	}
	if f := c.Secrets["admin_token"].File; f != "./deploy/compose/admin_token" {
		t.Errorf("secret admin_token from %q, want ./deploy/compose/admin_token", f)
	}

	hostPorts := map[string]string{} // host address: service
	adminTargets := []string{}
	for _, svc := range []string{"node1", "node2"} {
		s := c.Services[svc]
		if want := "${PRESENCED_IMAGE:-localhost/presenced:" + version + "}"; s.Image != want {
			t.Errorf("%s: image %q, want %q (make image's tag)", svc, s.Image, want)
		}
		if s.Build != "." {
			t.Errorf("%s: build %q, want . (the Dockerfile)", svc, s.Build)
		}
		cfgPath := s.Environment["PRESENCED_CONFIG"]
		host := mountOf(s.Volumes, cfgPath)
		if host == "" {
			t.Fatalf("%s: PRESENCED_CONFIG %q is not mounted (volumes %v)", svc, cfgPath, s.Volumes)
		}
		cfg, err := configs.Load([]string{"--config", filepath.Join("..", host)}, nil, nil)
		if err != nil {
			t.Fatalf("%s: %s does not load: %v", svc, host, err)
		}
		if cfg.NodeID != svc {
			t.Errorf("%s: node_id %q, want the service's name", svc, cfg.NodeID)
		}
		if !slices.Equal(cfg.Redis.Addrs, []string{"redis:6379"}) {
			t.Errorf("%s: redis.addrs %v, want [redis:6379], compose's redis", svc, cfg.Redis.Addrs)
		}
		if cfg.Admin.TokenFile != "/run/secrets/admin_token" || !slices.Contains(s.Secrets, "admin_token") {
			t.Errorf("%s: admin.token_file %q, secrets %v; want compose's admin_token at /run/secrets/admin_token", svc, cfg.Admin.TokenFile, s.Secrets)
		}
		if !cfg.Auth.AllowAnonymous && !cfg.AuthEnabled() {
			t.Errorf("%s: without authentication nor allow_anonymous, MQTT listens on the container's loopback only", svc)
		}
		// Every listener is published, on the host's loopback, on a host
		// port of its own.
		published := map[string]bool{}
		for _, p := range s.Ports {
			f := strings.Split(p, ":")
			if len(f) != 3 || f[0] != "127.0.0.1" {
				t.Errorf("%s: port %q, want 127.0.0.1:HOST:CONTAINER", svc, p)
				continue
			}
			if other, ok := hostPorts[f[1]]; ok {
				t.Errorf("%s: host port %s is %s's too", svc, f[1], other)
			}
			hostPorts[f[1]] = svc
			published[f[2]] = true
		}
		for _, a := range []string{cfg.MQTT.Addr, cfg.MQTT.WSAddr, cfg.Admin.Addr} {
			h, port, err := net.SplitHostPort(a)
			if err != nil {
				t.Fatalf("%s: %q: %v", svc, a, err)
			}
			if h != "" && h != "0.0.0.0" && h != "::" {
				t.Errorf("%s: listens on %s, not on every interface of the container", svc, a)
			}
			if !published[port] {
				t.Errorf("%s: port %s is not published (%v)", svc, port, s.Ports)
			}
		}
		_, adminPort, _ := net.SplitHostPort(cfg.Admin.Addr)
		adminTargets = append(adminTargets, svc+":"+adminPort)
		// compose stops a container with SIGTERM, then SIGKILL after the
		// grace period: the drain must fit in it.
		grace, err := time.ParseDuration(s.StopGracePeriod)
		if drain := cfg.Drain.Timeout.D() + 10*time.Second; err != nil || grace < drain {
			t.Errorf("%s: stop_grace_period %q, want at least the drain's %v", svc, s.StopGracePeriod, drain)
		}
	}

	prom := c.Services["prometheus"]
	host := mountOf(prom.Volumes, "/etc/prometheus/prometheus.yml")
	if host != "./deploy/compose/prometheus.yml" {
		t.Fatalf("prometheus: /etc/prometheus/prometheus.yml from %q, want ./deploy/compose/prometheus.yml", host)
	}
	var p prometheusFile
	readYAML(t, filepath.Join("..", host), &p)
	if len(p.ScrapeConfigs) != 1 {
		t.Fatalf("prometheus.yml: %d scrape configs, want 1", len(p.ScrapeConfigs))
	}
	sc := p.ScrapeConfigs[0]
	var targets []string
	for _, st := range sc.StaticConfigs {
		targets = append(targets, st.Targets...)
	}
	slices.Sort(targets)
	if !slices.Equal(targets, adminTargets) {
		t.Errorf("prometheus.yml targets %v, want the nodes' admin ports %v", targets, adminTargets)
	}
	if sc.MetricsPath != "/metrics" {
		t.Errorf("metrics_path %q, want /metrics", sc.MetricsPath)
	}
	if a := sc.Authorization; a.Type != "Bearer" || a.CredentialsFile != "/run/secrets/admin_token" || !slices.Contains(prom.Secrets, "admin_token") {
		t.Errorf("prometheus: authorization %+v, secrets %v; want Bearer from compose's admin_token", a, prom.Secrets)
	}
	if t.Failed() {
		t.Logf("podman-compose --dry-run up:\n%s", out)
	}
}

// mountOf is the host side of the volume mounted at target, or "".
func mountOf(volumes []string, target string) string {
	for _, v := range volumes {
		f := strings.Split(v, ":")
		if len(f) >= 2 && f[1] == target {
			return f[0]
		}
	}
	return ""
}
