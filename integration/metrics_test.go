package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// scrape is one parse of GET /metrics.
type scrape map[string]*dto.MetricFamily

// scrapeMetrics fetches /metrics (with authorization, when not empty) and
// parses it with Prometheus's text parser.
func scrapeMetrics(t *testing.T, addr, authorization string) scrape {
	t.Helper()
	code, body := adminDo(t, addr, "/metrics", authorization)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// find returns the series of name whose labels include labels ("k=v").
func (s scrape) find(name string, labels ...string) (*dto.Metric, error) {
	f, ok := s[name]
	if !ok {
		return nil, fmt.Errorf("no %s", name)
	}
next:
	for _, m := range f.GetMetric() {
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m, nil
	}
	return nil, fmt.Errorf("no %s%v", name, labels)
}

// value returns a counter's or gauge's value (0 when the series is absent:
// a counter not yet counted).
func (s scrape) value(name string, labels ...string) float64 {
	m, err := s.find(name, labels...)
	if err != nil {
		return 0
	}
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

// count returns a histogram's sample count.
func (s scrape) count(name string, labels ...string) uint64 {
	m, err := s.find(name, labels...)
	if err != nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}

// /metrics tells what real clients did: sessions, users by status, a clean
// end, the transitions observers were shown, a refused CONNECT, the store
// calls and the commit-to-publish delay, in Prometheus's text format.
func TestMetrics(t *testing.T) {
	n := startNode(t, nil)
	obs := newObserver(t, n.MQTTAddr(), "presence/users/+")
	before := scrapeMetrics(t, n.AdminAddr(), "")

	// One after the other: with a store that batches (Redis), two opens
	// waiting together go in one round trip, observed as op=batch, not as
	// two op=open; ann is shown online only once her open is done.
	ann := dial5(t, n.MQTTAddr(), "ann-phone", "ann", withDevice("phone"))
	obs.waitStatus("ann", presence.Online)
	bob := dial5(t, n.MQTTAddr(), "bob-laptop", "bob", withDevice("laptop"))
	obs.waitStatus("bob", presence.Online)
	if rc := bob.publish(t, "presence/set", `{"status":"busy"}`, 1, false); rc != 0 {
		t.Fatalf("bob's presence/set: PUBACK %#x", rc)
	}
	obs.waitStatus("bob", presence.Busy)
	ann.disconnect()
	obs.waitStatus("ann", presence.Offline)
	if _, ack, err := connect5(t, ctDialTCP(t, n.MQTTAddr()), "bad-1", "al/ice"); err == nil && (ack == nil || ack.ReasonCode < 0x80) {
		t.Fatalf("user al/ice connected (%+v)", ack)
	}

	delta := func(s scrape, name string, labels ...string) float64 {
		return s.value(name, labels...) - before.value(name, labels...)
	}
	var s scrape
	testkit.Wait(t, waitTimeout, "the metrics show what the clients did", func() error {
		s = scrapeMetrics(t, n.AdminAddr(), "")
		for _, c := range []struct {
			what      string
			got, want float64
		}{
			{"sessions", s.value("presenced_sessions"), float64(n.Stats().Get("sessions"))},
			{"sessions (bob's only)", s.value("presenced_sessions"), 1},
			{"connections", s.value("presenced_connections"), float64(atomic.LoadInt64(&n.Server.Info.ClientsConnected))},
			{"users busy", s.value("presenced_users", "status=busy"), 1},
			{"users offline", s.value("presenced_users", "status=offline"), 1},
			{"users online", s.value("presenced_users", "status=online"), 0},
			{"clean ends", delta(s, "presenced_session_ends_total", "reason=clean"), 1},
			{"network ends", delta(s, "presenced_session_ends_total", "reason=network"), 0},
			{"online->offline shown", delta(s, "presenced_status_transitions_total", "from=online", "to=offline"), 1},
			{"online->busy shown", delta(s, "presenced_status_transitions_total", "from=online", "to=busy"), 1},
			{"none->online shown", delta(s, "presenced_status_transitions_total", "from=none", "to=online"), 2},
			{"bad identity refusals", delta(s, "presenced_connect_refusals_total", "cause=bad_identity"), 1},
			{"client id taken refusals", delta(s, "presenced_connect_refusals_total", "cause=client_id_taken"), 0},
			{"status sets", delta(s, "presenced_status_sets_total"), 1},
			{"stale writes", s.value("presenced_stale_writes_total"), 0},
		} {
			if c.got != c.want {
				return fmt.Errorf("%s: %v, want %v", c.what, c.got, c.want)
			}
		}
		for _, h := range []struct {
			name   string
			labels []string
			least  uint64
		}{
			{"presenced_store_operation_duration_seconds", []string{"op=open"}, 2},
			{"presenced_store_operation_duration_seconds", []string{"op=update"}, 1},
			{"presenced_store_operation_duration_seconds", []string{"op=end"}, 1},
			{"presenced_commit_to_publish_seconds", nil, 4}, // ann and bob online, bob busy, ann offline
		} {
			if got := s.count(h.name, h.labels...) - before.count(h.name, h.labels...); got < h.least {
				return fmt.Errorf("%s%v: %d observations, want at least %d", h.name, h.labels, got, h.least)
			}
		}
		return nil
	})
	// Every family of presence has help and the type its name promises;
	// the Go runtime's and the process's collectors are there.
	for name, f := range s {
		if !strings.HasPrefix(name, "presenced_") {
			continue
		}
		if f.GetHelp() == "" {
			t.Errorf("%s: no HELP", name)
		}
		switch {
		case strings.HasSuffix(name, "_total") && f.GetType() != dto.MetricType_COUNTER,
			strings.HasSuffix(name, "_seconds") && f.GetType() != dto.MetricType_HISTOGRAM:
			t.Errorf("%s: type %v", name, f.GetType())
		}
	}
	for _, name := range []string{
		"go_goroutines", "process_resident_memory_bytes", "presenced_tracker_queue_depth", "presenced_publish_queue_depth",
		"presenced_feed_queue_depth", "presenced_redis_outages_total", "presenced_redis_resets_total", "presenced_redis_reloads_total",
		"presenced_takeovers_total", "presenced_takeover_battles_total",
		"presenced_redis_feed_messages_total", "presenced_redis_channels", "presenced_interest_users_watched",
		"presenced_interest_users_heard", "presenced_interest_firehose", "presenced_interest_users_forgotten_total",
		"presenced_interest_users_lingering", "presenced_interest_users_evicted_total",
	} {
		if _, ok := s[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	if n := len(s["presenced_users"].GetMetric()); n != 7 {
		t.Errorf("presenced_users: %d statuses, want 7 (dormant is one)", n)
	}
	obs.check()
}

// The profiles and the metrics are behind the admin token when one is
// configured (the probes are not); without one the metrics answer on
// loopback and the profiles are not served.
func TestPprofToken(t *testing.T) {
	const token = "Metrics-Test-Token"
	n := startNode(t, func(c *configs.Config) { c.Admin.Token = token })
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline", "/metrics"} {
		if code, _ := adminDo(t, n.AdminAddr(), path, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, code)
		}
		if code, _ := adminDo(t, n.AdminAddr(), path, "Bearer wrong"); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", path, code)
		}
		if code, body := adminDo(t, n.AdminAddr(), path, "Bearer "+token); code != http.StatusOK {
			t.Errorf("GET %s with the token: %d %.200s", path, code, body)
		}
	}
	if code, body := adminDo(t, n.AdminAddr(), "/debug/pprof/", "Bearer "+token); !strings.Contains(string(body), "goroutine") {
		t.Errorf("GET /debug/pprof/: %d, no goroutine profile listed", code)
	}
	if code, _ := adminDo(t, n.AdminAddr(), "/healthz", ""); code != http.StatusOK {
		t.Errorf("GET /healthz without the token: %d", code)
	}
	// 4 paths, each without and with a wrong token.
	if got := scrapeMetrics(t, n.AdminAddr(), "Bearer "+token).value("presenced_admin_refused_total"); got != 8 {
		t.Errorf("presenced_admin_refused_total %v, want 8", got)
	}

	// Without a token the profiles are not served at all (issue 18: a
	// page of another site resolving its name to 127.0.0.1 read them).
	open := startNode(t, nil)
	if code, body := adminDo(t, open.AdminAddr(), "/debug/pprof/heap?debug=1", ""); code != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/heap without a token configured: %d %.100s, want 404", code, body)
	}
}
