package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/presence"
)

// The monitoring an operator deploys, against real processes: Debian's
// promtool checks and unit-tests deploy/prometheus/alerts.yml; a real
// prometheus scrapes real presenced binaries (one with the memory store;
// two sharing a redis-server) while real MQTT clients connect, take over,
// flap and fail to authenticate, with the alert rules loaded; then every
// query of every panel of deploy/grafana/presenced.json must return data,
// every rule must evaluate without error, and the activity must show in
// the figures Prometheus holds.

const (
	monScrape = time.Second // scrape and rule evaluation interval
	// monRate replaces Grafana's $__rate_interval: five scrapes.
	monRate = "5s"
	// monWait bounds each poll of Prometheus: a few scrapes, on a busy
	// machine.
	monWait = 60 * time.Second
)

// monTools returns Debian's prometheus and promtool (make deps installs
// them).
func monTools(t *testing.T) (prom, promtool string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs prometheus and the presenced binary")
	}
	for _, name := range []string{"prometheus", "promtool"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("%s not found: run `make deps` (make test does)", name)
		}
		if name == "prometheus" {
			prom = p
		} else {
			promtool = p
		}
	}
	return prom, promtool
}

func TestMonitoring(t *testing.T) {
	prom, promtool := monTools(t)
	t.Run("Rules", func(t *testing.T) {
		for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
			cmd := exec.Command(promtool, args...)
			cmd.Dir = "../deploy/prometheus"
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			if !strings.Contains(string(out), "SUCCESS") {
				t.Fatalf("promtool %s: no SUCCESS:\n%s", strings.Join(args, " "), out)
			}
		}
	})
	t.Run("OneNode", func(t *testing.T) {
		m := newMonSetup(t)
		n := m.start(t, "mon-one", "")
		p := startPrometheus(t, prom, m.tokenFile, n.admin)
		m.activity(t, []*monNode{n})
		p.waitUp(t, 1)
		p.expectActivity(t)
		p.rulesHealthy(t)
		p.dashboardHasData(t, 1)
		m.sessionLines(t, n)
	})
	t.Run("TwoNodesRedis", func(t *testing.T) {
		srv := redistest.Start(t)
		m := newMonSetup(t)
		a := m.start(t, "mon-a", srv.Addr())
		b := m.start(t, "mon-b", srv.Addr())
		p := startPrometheus(t, prom, m.tokenFile, a.admin, b.admin)
		m.activity(t, []*monNode{a, b})
		p.waitUp(t, 2)
		p.expectActivity(t)
		p.waitData(t, `presenced_redis_feed_messages_total > 0`)

		// An outage: Redis killed, a connect to have a node call it; the
		// gauge shows it, and the alert is pending (its for: is 30 s).
		srv.Stop(t)
		dave := dial5(t, a.mqtt, "dave-phone", "dave", withPassword(monPasswords["dave"]))
		p.waitData(t, `presenced_redis_unreachable == 1`)
		p.waitAlert(t, "PresencedRedisUnreachable")
		srv.Restart(t)
		p.waitData(t, `presenced_redis_outages_total > 0`)
		p.waitData(t, `count(presenced_redis_unreachable == 0) == 2`)
		dave.disconnect()

		p.rulesHealthy(t)
		p.dashboardHasData(t, 2)
	})
}

// monPasswords are the users of the monitoring tests' password file.
var monPasswords = map[string]string{
	"alice": "alice-Secret-1", "bob": "bob-Secret-2", "carol": "carol-Secret-3", "dave": "dave-Secret-4", "ops": "ops-Secret-5",
}

// monSetup is the configuration the nodes of a monitoring test share: a
// password file, an admin token file (which Prometheus reads too), flap
// control, the session log.
type monSetup struct {
	bin, config, tokenFile string
}

// monNode is one presenced process.
type monNode struct {
	p           *binProc
	mqtt, admin string
}

func newMonSetup(t *testing.T) *monSetup {
	t.Helper()
	dir := t.TempDir()
	m := &monSetup{bin: mnBinary(t), config: filepath.Join(dir, "presenced.yaml"), tokenFile: filepath.Join(dir, "admin.token")}
	pw := filepath.Join(dir, "passwd")
	writePasswordFile(t, pw, monPasswords)
	writeAtomic(t, m.tokenFile, []byte("Monitoring-Admin-Token\n"))
	writeAtomic(t, m.config, []byte(fmt.Sprintf(
		"log:\n  sessions: true\nauth:\n  password_file: %s\nadmin:\n  token_file: %s\npresence:\n  observers: [ops]\n", pw, m.tokenFile)))
	return m
}

// start runs a node (with Redis at redisAddr, else the memory store).
// Flap control is on (two ends within its window), the rest of the pacing
// off, as in every binary test.
func (m *monSetup) start(t *testing.T, id, redisAddr string) *monNode {
	t.Helper()
	args := []string{"--config", m.config, "--mqtt-addr", "127.0.0.1:0", "--ws-addr", "127.0.0.1:0",
		"--admin-addr", "127.0.0.1:0", "--node-id", id, "--log-format", "json"}
	if redisAddr != "" {
		args = append(args, "--redis-addr", redisAddr)
	}
	p := binStart(t, m.bin, binEnv("PRESENCED_PRESENCE_FLAP_ENDS=2", "PRESENCED_REDIS_NODE_TTL=3s"), args...)
	started := p.waitLine(t, "presenced started")
	n := &monNode{p: p}
	n.mqtt, _ = started["mqtt"].(string)
	n.admin, _ = started["admin"].(string)
	if n.mqtt == "" || n.admin == "" {
		t.Fatalf("started line: %v", started)
	}
	return n
}

// activity makes what the panels and alerts watch: sessions on every node,
// a takeover, a user who flaps, a refused password, an admin request with
// a wrong token.
func (m *monSetup) activity(t *testing.T, nodes []*monNode) {
	t.Helper()
	first, last := nodes[0], nodes[len(nodes)-1]
	pw := func(u string) connectOpt { return withPassword(monPasswords[u]) }
	obs := newObserver(t, first.mqtt, "presence/users/+", withUser("ops"), pw("ops"))

	alice := dial5(t, first.mqtt, "alice-phone", "alice", pw("alice"), withDevice("phone"))
	t.Cleanup(alice.drop)
	obs.waitFor("alice", "session alice-phone", hasSession("alice-phone"))
	again := dial5(t, first.mqtt, "alice-phone", "alice", pw("alice"), withDevice("phone")) // takes the first over
	t.Cleanup(again.drop)
	bob := dial5(t, last.mqtt, "bob-laptop", "bob", pw("bob"), withDevice("laptop"))
	t.Cleanup(bob.drop)
	obs.waitFor("bob", "session bob-laptop", hasSession("bob-laptop"))

	// carol's connection drops twice: she flaps (flap.ends 2).
	for i := range 2 {
		c := dial5(t, first.mqtt, "carol-phone", "carol", pw("carol"))
		obs.waitFor("carol", "session carol-phone", hasSession("carol-phone"))
		c.drop()
		if i == 0 {
			obs.waitStatus("carol", presence.Offline)
		}
	}

	conn, err := net.DialTimeout("tcp", last.mqtt, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, code := try5(t, conn, "mallory-1", withUser("alice"), withPassword("not-her-password")); code == 0 {
		t.Fatal("a wrong password was accepted")
	}

	req, _ := http.NewRequest(http.MethodGet, "http://"+first.admin+"/api/v1/stats", nil)
	req.Header.Set("Authorization", "Bearer not-the-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("admin request with a wrong token: %d, want 401", resp.StatusCode)
	}
}

// sessionLines checks log.sessions' lines of alice's takeover: her first
// session ended as a takeover, with lasted_ms, and both opened.
func (m *monSetup) sessionLines(t *testing.T, n *monNode) {
	t.Helper()
	var opened, endedTakeover int
	deadline := time.Now().Add(waitTimeout)
	for {
		opened, endedTakeover = 0, 0
		for _, line := range strings.Split(n.p.stdout.String(), "\n") {
			var l map[string]any
			if json.Unmarshal([]byte(line), &l) != nil || l["client_id"] != "alice-phone" {
				continue
			}
			if l["user"] != "alice" || l["device"] != "phone" || l["node"] != "mon-one" || l["epoch"] == nil || l["component"] != "sessions" {
				t.Fatalf("session line without its fields: %s", line)
			}
			switch l["message"] {
			case "session opened":
				opened++
			case "session ended":
				if _, ok := l["lasted_ms"].(float64); !ok || l["reason"] != "takeover" {
					t.Fatalf("alice's end: %s, want reason takeover and lasted_ms", line)
				}
				endedTakeover++
			}
		}
		if opened == 2 && endedTakeover == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice-phone: %d session opened lines, %d ended (takeover), want 2 and 1\n%s", opened, endedTakeover, n.p.stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// promProc is a prometheus server of a test's own.
type promProc struct {
	url string
	out *binBuffer
}

// startPrometheus runs prometheus on a loopback port with a configuration
// of its own: the job "presenced" scrapes targets' /metrics every second
// with the admin token read from tokenFile, and the rules of
// deploy/prometheus/alerts.yml are evaluated every second.
func startPrometheus(t *testing.T, bin, tokenFile string, targets ...string) *promProc {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(targets))
	for i, a := range targets {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  evaluation_interval: %[1]s
rule_files:
  - %[2]q
scrape_configs:
  - job_name: presenced
    scrape_interval: %[1]s
    scrape_timeout: %[1]s
    authorization:
      credentials_file: %[3]q
    static_configs:
      - targets: [%[4]s]
`, monScrape, rules, tokenFile, strings.Join(quoted, ", "))
	cfgFile := filepath.Join(dir, "prometheus.yml")
	writeAtomic(t, cfgFile, []byte(config))
	addr := freeAddr(t)
	p := &promProc{url: "http://" + addr, out: &binBuffer{}}
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(monWait)
	for {
		resp, err := http.Get(p.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-done:
			t.Fatalf("prometheus exited:\n%s", p.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within %v (%v):\n%s", monWait, err, p.out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// get GETs path of the Prometheus API and decodes its data; a request
// Prometheus refuses (bad PromQL) fails the test.
func (p *promProc) get(t *testing.T, path string, data any) {
	t.Helper()
	resp, err := http.Get(p.url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Status != "success" {
		t.Fatalf("GET %s: %d %s (%v)", path, resp.StatusCode, b, err)
	}
	if err := json.Unmarshal(r.Data, data); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, r.Data)
	}
}

// promSample is one series of an instant vector.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query now.
func (p *promProc) query(t *testing.T, expr string) []promSample {
	t.Helper()
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	p.get(t, "/api/v1/query?query="+url.QueryEscape(expr), &d)
	if d.ResultType != "vector" {
		t.Fatalf("%s: a %s, want a vector", expr, d.ResultType)
	}
	var out []promSample
	if err := json.Unmarshal(d.Result, &out); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return out
}

// waitData polls until expr returns at least one series.
func (p *promProc) waitData(t *testing.T, expr string) []promSample {
	t.Helper()
	deadline := time.Now().Add(monWait)
	for {
		if r := p.query(t, expr); len(r) > 0 {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("no data for %s within %v\n%s", expr, monWait, p.out)
		}
		time.Sleep(monScrape / 4)
	}
}

// waitUp waits until Prometheus has scraped n presenced targets, each at
// least three times (a rate over monRate needs two samples).
func (p *promProc) waitUp(t *testing.T, n int) {
	t.Helper()
	p.waitData(t, fmt.Sprintf(`count(up{job="presenced"} == 1) == %d`, n))
	p.waitData(t, fmt.Sprintf(`count(count_over_time(presenced_sessions{job="presenced"}[%s]) >= 3) == %d`, monRate, n))
}

// expectActivity: what the clients did shows in the figures Prometheus
// holds.
func (p *promProc) expectActivity(t *testing.T) {
	t.Helper()
	for _, expr := range []string{
		`sum(presenced_sessions) >= 2`, // alice's second connection and bob's
		`presenced_takeovers_total > 0`,
		`presenced_session_ends_total{reason="network"} > 0`,
		`presenced_users_flapping > 0`,
		`presenced_auth_connects_total{result="refused"} > 0`,
		`presenced_admin_refused_total > 0`,
		`max(presenced_users{status="online"}) >= 2`,
		`presenced_store_operation_duration_seconds_count > 0`,
		`presenced_commit_to_publish_seconds_count > 0`,
	} {
		p.waitData(t, expr)
	}
}

// rulesHealthy waits until every rule of alerts.yml has been evaluated,
// and fails on any that failed to evaluate.
func (p *promProc) rulesHealthy(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(monWait)
	for {
		var d struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		}
		p.get(t, "/api/v1/rules", &d)
		var waiting []string
		total := 0
		for _, g := range d.Groups {
			for _, r := range g.Rules {
				total++
				switch r.Health {
				case "ok":
				case "err":
					t.Fatalf("rule %s: %s", r.Name, r.LastError)
				default:
					waiting = append(waiting, r.Name)
				}
			}
		}
		if total < 17 {
			t.Fatalf("prometheus loaded %d rules of alerts.yml, want 17", total)
		}
		if len(waiting) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rules not evaluated within %v: %v", monWait, waiting)
		}
		time.Sleep(monScrape / 4)
	}
}

// waitAlert waits until alert name is pending or firing.
func (p *promProc) waitAlert(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(monWait)
	for {
		var d struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		p.get(t, "/api/v1/alerts", &d)
		for _, a := range d.Alerts {
			if a.Labels["alertname"] == name && (a.State == "pending" || a.State == "firing") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("alert %s neither pending nor firing within %v: %+v", name, monWait, d.Alerts)
		}
		time.Sleep(monScrape / 4)
	}
}

// monPanel is one query of the dashboard.
type monPanel struct {
	title, expr string
}

// dashboardQueries returns every target expression of every panel of
// deploy/grafana/presenced.json (rows' panels included), with Grafana's
// variables replaced: $job by the scrape job, $instance by any,
// $__rate_interval by monRate.
func dashboardQueries(t *testing.T) (queries []monPanel, variables []string) {
	t.Helper()
	b, err := os.ReadFile("../deploy/grafana/presenced.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("presenced.json: %v", err)
	}
	type panel struct {
		Title   string            `json:"title"`
		Type    string            `json:"type"`
		Panels  []json.RawMessage `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	replace := strings.NewReplacer("${job}", "presenced", "$job", "presenced", "${instance}", ".+", "$instance", ".+",
		"${__rate_interval}", monRate, "$__rate_interval", monRate)
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("panel: %v", err)
			}
			walk(p.Panels)
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				q := replace.Replace(tg.Expr)
				if strings.Contains(q, "$") {
					t.Fatalf("panel %q: a variable the test does not know in %s", p.Title, tg.Expr)
				}
				queries = append(queries, monPanel{p.Title, q})
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			variables = append(variables, v.Name)
		}
	}
	return queries, variables
}

// metricName finds the presenced_, go_ and process_ names a query reads.
var metricName = regexp.MustCompile(`\b(presenced_[a-z_]+|go_[a-z_]+|process_[a-z_]+)\b`)

// dashboardHasData runs every panel's query and waits until each returns
// data; the variables' label values must name the job and every instance.
func (p *promProc) dashboardHasData(t *testing.T, nodes int) {
	t.Helper()
	queries, variables := dashboardQueries(t)
	if len(queries) < 20 {
		t.Fatalf("%d queries in the dashboard", len(queries))
	}
	if !slices.Equal(variables, []string{"job", "instance"}) {
		t.Errorf("dashboard variables with queries: %v, want job and instance", variables)
	}
	// Every metric a panel reads is one presenced serves.
	var names []string
	p.get(t, "/api/v1/label/__name__/values", &names)
	for _, q := range queries {
		for _, m := range metricName.FindAllString(q.expr, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")
			if !slices.Contains(names, m) && !slices.Contains(names, base+"_bucket") {
				t.Errorf("panel %q reads %s, which no node serves", q.title, m)
			}
		}
	}
	var jobs, instances []string
	p.get(t, "/api/v1/label/job/values?match[]=presenced_sessions", &jobs)
	p.get(t, "/api/v1/label/instance/values?match[]="+url.QueryEscape(`presenced_sessions{job=~"presenced"}`), &instances)
	if !slices.Contains(jobs, "presenced") || len(instances) != nodes {
		t.Errorf("$job values %v, $instance values %v: want presenced and %d instances", jobs, instances, nodes)
	}
	deadline := time.Now().Add(monWait)
	for {
		var empty []string
		for _, q := range queries {
			if len(p.query(t, q.expr)) == 0 {
				empty = append(empty, fmt.Sprintf("%s: %s", q.title, q.expr))
			}
		}
		if len(empty) == 0 {
			t.Logf("%d dashboard queries, each with data", len(queries))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d dashboard queries return no data after %v:\n%s", len(empty), len(queries), monWait, strings.Join(empty, "\n"))
		}
		time.Sleep(monScrape)
	}
}

// admin.unready_after against a real redis-server stopped and started: a
// node with 0s answers /readyz 503 as soon as it finds Redis unreachable;
// one with 3s stays ready until the outage is 3 s old (never sooner after
// the kill), then answers 503; both are ready again once Redis answers.
// Both serve MQTT throughout.
func TestMonitoringReadiness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the presenced binary")
	}
	const later = 3 * time.Second
	srv := redistest.Start(t)
	bin := mnBinary(t)
	start := func(id, after string) *monNode {
		p := binStart(t, bin, binEnv("PRESENCED_ADMIN_UNREADY_AFTER="+after, "PRESENCED_REDIS_NODE_TTL=3s"),
			"--mqtt-addr", "127.0.0.1:0", "--ws-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
			"--node-id", id, "--log-format", "json", "--redis-addr", srv.Addr())
		started := p.waitLine(t, "presenced started")
		n := &monNode{p: p}
		n.mqtt, _ = started["mqtt"].(string)
		n.admin, _ = started["admin"].(string)
		return n
	}
	atOnce, patient := start("ready-0", "0s"), start("ready-3", later.String())
	readyz := func(n *monNode) (int, string) {
		resp, err := http.Get("http://" + n.admin + "/readyz")
		if err != nil {
			t.Fatalf("GET /readyz: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitReady := func(what string) {
		deadline := time.Now().Add(waitTimeout)
		for {
			c0, _ := readyz(atOnce)
			c3, _ := readyz(patient)
			if c0 == http.StatusOK && c3 == http.StatusOK {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /readyz %d and %d, want 200 on both", what, c0, c3)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitReady("at start")

	killed := time.Now()
	srv.Stop(t)
	var drop0, drop3 time.Time
	deadline := killed.Add(later + 2*waitTimeout)
	for drop0.IsZero() || drop3.IsZero() {
		now := time.Now()
		if now.After(deadline) {
			t.Fatalf("after %v of outage: not ready at %v (0s) and %v (%v)", now.Sub(killed), drop0, drop3, later)
		}
		if c, body := readyz(atOnce); c == http.StatusServiceUnavailable && drop0.IsZero() {
			if !strings.HasPrefix(body, "degraded") {
				t.Fatalf("/readyz 503 %q, want degraded", body)
			}
			drop0 = now
		}
		if c, _ := readyz(patient); c == http.StatusServiceUnavailable && drop3.IsZero() {
			drop3 = now
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("FIGURES readiness: unready_after 0s not ready %v after the kill; %v: %v after it", drop0.Sub(killed).Round(time.Millisecond), later, drop3.Sub(killed).Round(time.Millisecond))
	if drop3.Sub(killed) < later {
		t.Errorf("unready_after %v: not ready %v after Redis was killed, sooner than the setting", later, drop3.Sub(killed))
	}
	if !drop0.Before(drop3) {
		t.Errorf("unready_after 0s dropped at %v, not before %v's %v", drop0.Sub(killed), later, drop3.Sub(killed))
	}
	// MQTT is served all along.
	c := dial5(t, patient.mqtt, "erin-phone", "erin")
	c.disconnect()

	srv.Restart(t)
	waitReady("after Redis came back")
}
