package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
)

// The presence SLO's fault drill (docs/slo.md), with real processes: two
// presenced binaries on a real redis-server, authentication by password
// file (the canary is admitted by its own secret), the canary on with a
// short schedule, and a real prometheus scraping both with
// deploy/prometheus/alerts.yml loaded. Without a fault every end of the
// other node's synthetic users is shown within its bound and no burn-rate
// alert fires; then node a is stopped (SIGSTOP) while b's synthetic users
// end, so that a is shown those ends late, and the fast burn-rate alert
// fires for a.

// The drill's schedule: keep-alive 2 s and grace 1 s make the bound 5 s
// (1.5 × 2 + 1 + 1); a cycle of 15 s (3 bounds) with 3 users is an end
// every 5 s per node.
var canaryDrillEnv = []string{
	"PRESENCED_REDIS_NODE_TTL=3s",
	"PRESENCED_CANARY_ENABLED=true", "PRESENCED_CANARY_INTERVAL=15s", "PRESENCED_CANARY_KEEPALIVE=2s",
	"PRESENCED_PRESENCE_OFFLINE_GRACE=1s",
}

const canaryDrillBound = 5 * time.Second

func TestCanarySLODrill(t *testing.T) {
	prom, _ := monTools(t)
	srv := redistest.Start(t)
	m := newMonSetup(t)
	start := func(id string) *monNode {
		p := binStart(t, m.bin, binEnv(canaryDrillEnv...), "--config", m.config, "--mqtt-addr", "127.0.0.1:0", "--ws-addr", "off",
			"--admin-addr", "127.0.0.1:0", "--node-id", id, "--log-format", "json", "--redis-addr", srv.Addr())
		// Cleanups run last first: a stopped node is continued before it is killed.
		t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) })
		started := p.waitLine(t, "presenced started")
		n := &monNode{p: p}
		n.mqtt, _ = started["mqtt"].(string)
		n.admin, _ = started["admin"].(string)
		if n.mqtt == "" || n.admin == "" {
			t.Fatalf("started line: %v", started)
		}
		return n
	}
	a, b := start("slo-a"), start("slo-b")
	p := startPrometheus(t, prom, m.tokenFile, a.admin, b.admin)
	p.waitData(t, `count(up{job="presenced"} == 1) == 2`)

	// No fault: each node is shown 6 ends of the other's synthetic users
	// (every kind at least once), all within the bound.
	waitCanary(t, p, `count(sum by (instance) (presenced_canary_ends_total) >= 6) == 2`, 3*time.Minute)
	waitCanary(t, p, `count(presenced_canary_ends_total > 0) == 8`, time.Minute)
	if late := p.query(t, `sum(presenced_canary_ends_late_total) > 0`); len(late) > 0 {
		t.Fatalf("ends shown late without a fault: %v\n%s", late, sloOf(t, m, a))
	}
	if alerts := firingSLO(t, p); len(alerts) > 0 {
		t.Fatalf("a burn-rate alert without a fault: %v", alerts)
	}
	for _, n := range []*monNode{a, b} {
		s := sloOf(t, m, n)
		if s.All.Ends < 6 || s.All.Within != s.All.Ends || s.Propagations == 0 || s.All.P99 <= 0 || s.All.P99 > canaryDrillBound.Seconds() {
			t.Fatalf("%s: %+v", n.admin, s)
		}
		t.Logf("%s without a fault: %d ends, p99 %.3f s, propagation p99 %.4f s, false offline %.0f per million",
			n.admin, s.All.Ends, s.All.P99, s.PropagationP99, s.FalseOfflinePerMillion)
	}

	// The fault: a stopped while b's synthetic users end (4 of b's sessions
	// begin meanwhile: 20 s, 4 bounds), then continued.
	before := canaryFigure(t, m, b, "presenced_canary_sessions_total")
	if err := a.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for canaryFigure(t, m, b, "presenced_canary_sessions_total") < before+4 {
		if time.Now().After(deadline) {
			t.Fatal("b's canary began no 4 sessions within 2 minutes")
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err := a.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// a was shown b's ends late (or not at all), and the page fires for a.
	waitCanary(t, p, fmt.Sprintf(`sum(presenced_canary_ends_late_total{instance=%q}) >= 2`, a.admin), time.Minute)
	deadline = time.Now().Add(time.Minute)
	for {
		alerts := firingSLO(t, p)
		if alerts["PresencedSLODetectionFastBurn/"+a.admin] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PresencedSLODetectionFastBurn did not fire for %s: %v\n%s", a.admin, alerts, sloOf(t, m, a))
		}
		time.Sleep(monScrape / 4)
	}
	s := sloOf(t, m, a)
	t.Logf("%s after the fault: %d ends, %d within the bound, %d missed, p99 %.3f s", a.admin, s.All.Ends, s.All.Within, s.All.Missed, s.All.P99)
	if s.All.Within == s.All.Ends {
		t.Fatalf("GET /api/v1/slo shows no late end: %+v", s)
	}
	// b, meanwhile, swept a (its record expired: redis.node_ttl 3 s) while
	// a's synthetic users were in fact connected: false offline, if one was
	// connected then.
	sb := sloOf(t, m, b)
	t.Logf("%s after the fault: %d ends, %d within the bound, false offline %.1f s of %.1f s (%.0f per million)",
		b.admin, sb.All.Ends, sb.All.Within, sb.FalseOfflineSeconds, sb.ConnectedSeconds, sb.FalseOfflinePerMillion)
}

// waitCanary polls prometheus until expr returns a series.
func waitCanary(t *testing.T, p *promProc, expr string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(p.query(t, expr)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: nothing within %v", expr, within)
		}
		time.Sleep(monScrape / 2)
	}
}

// firingSLO returns the canary's alerts firing, as alertname/instance.
func firingSLO(t *testing.T, p *promProc) map[string]bool {
	t.Helper()
	var d struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	p.get(t, "/api/v1/alerts", &d)
	out := map[string]bool{}
	for _, a := range d.Alerts {
		if strings.HasPrefix(a.Labels["alertname"], "PresencedSLO") && a.State == "firing" {
			out[a.Labels["alertname"]+"/"+a.Labels["instance"]] = true
		}
	}
	return out
}

// canarySLO is the part of GET /api/v1/slo the drill reads.
type canarySLO struct {
	All struct {
		Ends   int     `json:"ends"`
		Within int     `json:"within_bound"`
		Missed int     `json:"missed"`
		P99    float64 `json:"p99_seconds"`
	} `json:"detection_all"`
	Propagations           int     `json:"propagations"`
	PropagationP99         float64 `json:"propagation_p99_seconds"`
	FalseOfflinePerMillion float64 `json:"false_offline_per_million"`
	FalseOfflineSeconds    float64 `json:"false_offline_seconds"`
	ConnectedSeconds       float64 `json:"connected_user_seconds"`
	raw                    string
}

func (s canarySLO) String() string { return s.raw }

// canaryAdminGet reads path from n's admin port with the token.
func canaryAdminGet(t *testing.T, m *monSetup, n *monNode, path string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+n.admin+path, nil)
	req.Header.Set("Authorization", "Bearer Monitoring-Admin-Token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return body
}

func sloOf(t *testing.T, m *monSetup, n *monNode) canarySLO {
	t.Helper()
	body := canaryAdminGet(t, m, n, "/api/v1/slo")
	var s canarySLO
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatalf("/api/v1/slo: %v: %s", err, body)
	}
	s.raw = string(body)
	return s
}

// canaryFigure reads one unlabelled figure of n's /metrics.
func canaryFigure(t *testing.T, m *monSetup, n *monNode, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(string(canaryAdminGet(t, m, n, "/metrics")), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("%s not in /metrics", name)
	return 0
}
