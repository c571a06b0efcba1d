package integration

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// The image tests build and run what deploy/ ships. They need root and
// Debian's podman, buildah, runc (and iptables for the port publishing),
// podman-compose and systemd-analyze, which make deps installs.
const (
	// itestImage is the tag TestImage builds: one of its own, so the
	// tag `make image` gives users is left alone; each build replaces the
	// last (deploy/image/build.sh removes the image the tag named before).
	itestImage = "localhost/presenced:itest"
	// itestContainer is the container's fixed name, so a run that was
	// killed leaves at most one behind, which the next run removes.
	itestContainer = "presenced-itest-image"
)

// deployTools returns the paths of the tools, or skips the test without
// them or without root, or fails it instead when the run must have them
// (INTEGRATION_REQUIRE_IMAGE=1, which make test sets, or CI).
func deployTools(t *testing.T, names ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs images and units")
	}
	missing := func(msg string) {
		t.Helper()
		msg += ": run `make deps` as root (make test does)"
		ci := os.Getenv("CI")
		if os.Getenv("INTEGRATION_REQUIRE_IMAGE") == "1" || (ci != "" && ci != "false" && ci != "0") {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if os.Geteuid() != 0 {
		missing("not root")
	}
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			missing(n + " not found")
		}
	}
}

// runCmd runs name with args in dir ("" : here) within timeout and returns
// its standard output; the error carries the standard error.
func runCmd(t *testing.T, timeout time.Duration, dir, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// mustRun is runCmd that fails the test on an error.
func mustRun(t *testing.T, timeout time.Duration, dir, name string, args ...string) string {
	t.Helper()
	out, err := runCmd(t, timeout, dir, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// podmanRun is podman's global flags for a container on this kind of
// machine (docs/deployment.md): runc, since crun refuses cgroups in hybrid
// mode, and ulimits no higher than this process's hard limits, since
// without CAP_SYS_RESOURCE runc cannot raise them to podman's defaults.
func podmanRun(t *testing.T) []string {
	t.Helper()
	nofile, nproc := hardLimit(t, "Max open files"), hardLimit(t, "Max processes")
	nofile, nproc = min(nofile, 65536), min(nproc, 4096)
	return []string{"--runtime", "runc", "run",
		"--ulimit", fmt.Sprintf("nofile=%d:%d", nofile, nofile),
		"--ulimit", fmt.Sprintf("nproc=%d:%d", nproc, nproc)}
}

// hardLimit is this process's hard limit of the /proc/self/limits row.
func hardLimit(t *testing.T, row string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, row); ok {
			f := strings.Fields(rest)
			if len(f) < 2 {
				break
			}
			if f[1] == "unlimited" {
				return 1 << 20
			}
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("/proc/self/limits %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("/proc/self/limits has no %q row", row)
	return 0
}

// imageInspect is what the tests read of `podman image inspect`.
type imageInspect struct {
	Config struct {
		User         string
		ExposedPorts map[string]struct{}
		Env          []string
		Entrypoint   []string
		Cmd          []string
		Labels       map[string]string
		StopSignal   string
	}
	HealthCheck *struct{ Test []string }
	Size        int64
}

// gitHead is the repository's HEAD commit, or "unknown" without git, as
// the Makefile says it.
func gitHead(t *testing.T) string {
	t.Helper()
	out, err := runCmd(t, time.Minute, "..", "git", "rev-parse", "HEAD")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(out)
}

// versionFile is the VERSION file's version.
func versionFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// defaultPorts are the ports of the default MQTT, WebSocket and admin
// listeners, as "1883/tcp".
func defaultPorts(t *testing.T) []string {
	t.Helper()
	cfg, err := configs.Load(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, a := range []string{cfg.MQTT.Addr, cfg.MQTT.WSAddr, cfg.Admin.Addr} {
		_, p, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatalf("default address %q: %v", a, err)
		}
		ports = append(ports, p+"/tcp")
	}
	slices.Sort(ports)
	return ports
}

// The image as make image builds it: its configuration, its files (from
// the docker-archive it writes), then a container of it under podman that
// serves presence to a real client through a published port, as user
// 65532, passes its health check, and stops cleanly on podman stop.
func TestImage(t *testing.T) {
	deployTools(t, "make", "git", "go", "podman", "buildah", "runc", "iptables")
	began := time.Now()
	version, head := versionFile(t), gitHead(t)
	dir := t.TempDir()
	archive := filepath.Join(dir, "image.tar")

	mustRun(t, 10*time.Minute, "..", "make", "image", "IMAGE="+itestImage, "IMAGE_ARCHIVE="+archive)
	t.Logf("make image: %v", time.Since(began).Round(time.Millisecond))

	t.Run("configuration", func(t *testing.T) {
		var got []imageInspect
		if err := json.Unmarshal([]byte(mustRun(t, time.Minute, "", "podman", "image", "inspect", itestImage)), &got); err != nil || len(got) != 1 {
			t.Fatalf("podman image inspect: %v (%d images)", err, len(got))
		}
		img := got[0]
		t.Logf("image size %d bytes", img.Size)
		c := img.Config
		if c.User != "65532:65532" {
			t.Errorf("user %q, want 65532:65532", c.User)
		}
		var ports []string
		for p := range c.ExposedPorts {
			ports = append(ports, p)
		}
		slices.Sort(ports)
		if want := defaultPorts(t); !slices.Equal(ports, want) {
			t.Errorf("exposed ports %v, want the default listeners' %v", ports, want)
		}
		if !slices.Contains(c.Env, "PRESENCED_CONFIG=/etc/presenced/presenced.yaml") {
			t.Errorf("env %v lacks PRESENCED_CONFIG=/etc/presenced/presenced.yaml", c.Env)
		}
		if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/presenced"}) || len(c.Cmd) != 0 {
			t.Errorf("entrypoint %q cmd %q, want [/usr/local/bin/presenced] and none", c.Entrypoint, c.Cmd)
		}
		if img.HealthCheck == nil || !slices.Equal(img.HealthCheck.Test, []string{"CMD", "/usr/local/bin/presenced", "health"}) {
			t.Errorf("health check %+v, want CMD /usr/local/bin/presenced health", img.HealthCheck)
		}
		for k, want := range map[string]string{
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": head,
			"org.opencontainers.image.licenses": "MIT",
			"org.opencontainers.image.source":   "https://github.com/presenced/presenced",
		} {
			if c.Labels[k] != want {
				t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
			}
		}
		if c.StopSignal != "SIGTERM" {
			t.Errorf("stop signal %q, want SIGTERM", c.StopSignal)
		}
	})

	t.Run("files", func(t *testing.T) {
		files := archiveFiles(t, archive, itestImage)
		want := map[string]int64{ // path: mode
			"etc/group": 0o644, "etc/passwd": 0o644, "etc/presenced/presenced.yaml": 0o644,
			"etc/ssl/certs/ca-certificates.crt": 0o644, "usr/local/bin/presenced": 0o755,
		}
		for name, f := range files {
			if f.hdr.Typeflag == tar.TypeDir {
				continue
			}
			mode, ok := want[name]
			if !ok {
				t.Errorf("the image holds %s, which is not in its list", name)
				continue
			}
			if f.hdr.Mode&0o7777 != mode || f.hdr.Uid != 0 || f.hdr.Gid != 0 {
				t.Errorf("%s: mode %o owner %d:%d, want %o 0:0", name, f.hdr.Mode, f.hdr.Uid, f.hdr.Gid, mode)
			}
		}
		for name := range want {
			if _, ok := files[name]; !ok {
				t.Errorf("the image lacks %s", name)
			}
		}
		cfg, err := os.ReadFile("../configs/presenced.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if string(files["etc/presenced/presenced.yaml"].data) != string(cfg) {
			t.Error("/etc/presenced/presenced.yaml is not configs/presenced.yaml")
		}
		if p := string(files["etc/passwd"].data); !strings.Contains(p, "\npresenced:x:65532:65532:") {
			t.Errorf("/etc/passwd names no presenced 65532:65532:\n%s", p)
		}
		if g := string(files["etc/group"].data); !strings.Contains(g, "\npresenced:x:65532:") {
			t.Errorf("/etc/group names no presenced 65532:\n%s", g)
		}
	})

	t.Run("version", func(t *testing.T) {
		args := append(podmanRun(t), "--rm", "--no-healthcheck", itestImage, "--version")
		out := strings.TrimSpace(mustRun(t, 2*time.Minute, "", "podman", args...))
		if want := "presenced " + version + " revision " + head + " "; !strings.HasPrefix(out, want) {
			t.Errorf("--version %q, want it to start %q", out, want)
		}
	})

	t.Run("runs", func(t *testing.T) { imageRuns(t, dir) })
	t.Logf("TestImage: %v", time.Since(began).Round(time.Millisecond))
}

// imageRuns runs the image read-only, without capabilities, with a
// password file, and checks what a user sees of it.
func imageRuns(t *testing.T, dir string) {
	// Users and their passwords through the binary make image built, as a
	// user would; the file must be readable by the image's user.
	passwd := filepath.Join(dir, "passwd")
	for _, u := range []string{"una", "watcher"} {
		cmd := exec.Command("../bin/presenced", "passwd", passwd, u)
		cmd.Stdin = strings.NewReader("pw-" + u + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("presenced passwd %s: %v\n%s", u, err, out)
		}
	}
	if err := os.Chmod(passwd, 0o644); err != nil {
		t.Fatal(err)
	}

	_, _ = runCmd(t, time.Minute, "", "podman", "rm", "--force", "--ignore", itestContainer)
	t.Cleanup(func() {
		if _, err := runCmd(t, time.Minute, "", "podman", "rm", "--force", "--ignore", itestContainer); err != nil {
			t.Errorf("removing the container: %v", err)
		}
	})
	// Read-only, without capabilities: presenced writes no files and
	// binds ports above 1024.
	args := append(podmanRun(t), "--detach", "--name", itestContainer,
		"--read-only", "--cap-drop", "all", "--security-opt", "no-new-privileges",
		"--publish", "127.0.0.1::1883",
		"--volume", passwd+":/etc/presenced/passwd:ro",
		"--env", "PRESENCED_AUTH_PASSWORD_FILE=/etc/presenced/passwd",
		itestImage)
	mustRun(t, 2*time.Minute, "", "podman", args...)
	logs := func() string {
		out, _ := runCmd(t, time.Minute, "", "podman", "logs", itestContainer)
		return out
	}

	// The health check (podman runs it on a systemd timer, which this
	// machine lacks; podman healthcheck run runs it now): healthy once
	// presenced is ready.
	if _, err := testkit.Poll(60*time.Second, 250*time.Millisecond, func() error {
		_, err := runCmd(t, time.Minute, "", "podman", "healthcheck", "run", itestContainer)
		return err
	}); err != nil {
		t.Fatalf("never healthy: %v\nlogs:\n%s", err, logs())
	}
	if h := strings.TrimSpace(mustRun(t, time.Minute, "", "podman", "inspect", "--format", "{{.State.Health.Status}}", itestContainer)); h != "healthy" {
		t.Errorf("health %q, want healthy", h)
	}
	// The check can fail: a path the admin port does not serve is 404.
	if out, err := runCmd(t, time.Minute, "", "podman", "exec", itestContainer, "/usr/local/bin/presenced", "health", "--path", "/nonexistent"); err == nil {
		t.Errorf("presenced health --path /nonexistent passed: %s", out)
	}

	// Runs as 65532:65532, which the image's /etc/passwd names.
	pid := strings.TrimSpace(mustRun(t, time.Minute, "", "podman", "inspect", "--format", "{{.State.Pid}}", itestContainer))
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"Uid:", "Gid:"} {
		if v := procRow(string(status), row); strings.Join(strings.Fields(v), " ") != "65532 65532 65532 65532" {
			t.Errorf("/proc/%s/status %s %q, want 65532 four times", pid, row, v)
		}
	}
	if v := procRow(string(status), "CapEff:"); v != "0000000000000000" {
		t.Errorf("/proc/%s/status CapEff %q, want none", pid, v)
	}
	if top := mustRun(t, time.Minute, "", "podman", "top", itestContainer, "user", "group"); !slices.ContainsFunc(strings.Split(top, "\n"), func(l string) bool {
		return slices.Equal(strings.Fields(l), []string{"presenced", "presenced"})
	}) {
		t.Errorf("podman top:\n%s\nwant user and group presenced", top)
	}

	// MQTT through the published port: a wrong password is refused, una's
	// phone shows her online to a watcher.
	port := strings.TrimSpace(mustRun(t, time.Minute, "", "podman", "port", itestContainer, "1883/tcp"))
	if !strings.HasPrefix(port, "127.0.0.1:") {
		t.Fatalf("podman port: %q", port)
	}
	conn, err := net.DialTimeout("tcp", port, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if _, ack, err := connect5(t, conn, "una-bad", "una", withPassword("wrong")); err == nil || ack == nil || ack.ReasonCode != 0x86 {
		t.Errorf("a wrong password: CONNACK %+v, %v; want 0x86", ack, err)
	}
	obs := newObserver(t, port, "presence/users/+", withUser("watcher"), withPassword("pw-watcher"))
	una := dial5(t, port, "una-phone", "una", withDevice("phone"), withPassword("pw-una"))
	on := obs.waitStatus("una", presence.Online)
	if len(on.Sessions) != 1 || on.Sessions[0].Device != "phone" {
		t.Errorf("una online with sessions %+v, want her phone", on.Sessions)
	}
	una.disconnect()
	obs.check()

	// podman stop sends SIGTERM: presenced drains and exits 0.
	stopped := time.Now()
	mustRun(t, 2*time.Minute, "", "podman", "stop", "--time", "40", itestContainer)
	t.Logf("podman stop: %v", time.Since(stopped).Round(time.Millisecond))
	if code := strings.TrimSpace(mustRun(t, time.Minute, "", "podman", "inspect", "--format", "{{.State.ExitCode}}", itestContainer)); code != "0" {
		t.Errorf("exit code %s, want 0\nlogs:\n%s", code, logs())
	}
	if l := logs(); !strings.Contains(l, `"message":"presenced stopped"`) {
		t.Errorf("logs do not end with presenced stopped:\n%s", l)
	}
}

// procRow is the value of a /proc/PID/status row such as "Uid:".
func procRow(status, row string) string {
	for line := range strings.Lines(status) {
		if v, ok := strings.CutPrefix(line, row); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// archiveFile is one file of an image's layers.
type archiveFile struct {
	hdr  *tar.Header
	data []byte
}

// archiveFiles reads a docker-archive (the one image tagged tag) and returns
// the files of its layers, later layers over earlier ones.
func archiveFiles(t *testing.T, path, tag string) map[string]archiveFile {
	t.Helper()
	entries := map[string][]byte{}
	readTar(t, path, func(hdr *tar.Header, r io.Reader) {
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, hdr.Name, err)
		}
		entries[hdr.Name] = b
	})
	var manifest []struct {
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("%s: manifest.json: %v (%d images)", path, err, len(manifest))
	}
	if !slices.Contains(manifest[0].RepoTags, tag) {
		t.Errorf("%s: tags %v, want %s", path, manifest[0].RepoTags, tag)
	}
	files := map[string]archiveFile{}
	for _, l := range manifest[0].Layers {
		layer, ok := entries[l]
		if !ok {
			t.Fatalf("%s: no layer %s", path, l)
		}
		f := filepath.Join(t.TempDir(), "layer.tar")
		if err := os.WriteFile(f, layer, 0o600); err != nil {
			t.Fatal(err)
		}
		readTar(t, f, func(hdr *tar.Header, r io.Reader) {
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(hdr.Name, "./")] = archiveFile{hdr: hdr, data: b}
		})
	}
	return files
}

// readTar calls each for every entry of the tar file at path.
func readTar(t *testing.T, path string, each func(*tar.Header, io.Reader)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(bufio.NewReader(f))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		each(hdr, tr)
	}
}

// The Dockerfile's VERSION default is the VERSION file's, so an image
// built without --build-arg VERSION is labelled with the right version.
func TestImageDockerfileVersion(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	want := "ARG VERSION=" + versionFile(t)
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "ARG VERSION=") {
			if strings.TrimSpace(line) != want {
				t.Errorf("Dockerfile: %q, want %q (the VERSION file)", strings.TrimSpace(line), want)
			}
			return
		}
	}
	t.Errorf("Dockerfile has no %q", want)
}
