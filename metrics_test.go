package presenced

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/presenced/presenced/admin"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/store"
)

// histogram returns the count and sum of the histogram o (one child).
func histogram(t *testing.T, o prometheus.Observer) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// A publish is timed from the commit of the version it shows, and counted
// as a transition from what was shown; an old or repeated publish, and a
// change older than what is shown, are neither.
func TestMetersPublished(t *testing.T) {
	m := newMeters()
	t0 := time.Unix(1000, 0)
	a := presence.Aggregate{User: "ann", Version: 10, Status: presence.Online}
	m.committed(store.Event{Kind: store.Changed, Aggregate: a, At: t0}, 0)
	m.committed(store.Event{Kind: store.Changed, Aggregate: presence.Aggregate{User: "bob", Version: 5}, At: t0}, 5) // shown already
	if n := m.pending(); n != 1 {
		t.Fatalf("pending %d, want 1 (bob's change was shown already)", n)
	}
	m.published(a, presence.Shown{}, t0.Add(3*time.Millisecond))
	if n, sum := histogram(t, m.publishDelay); n != 1 || sum != 0.003 {
		t.Errorf("commit to publish: %d observations, sum %v; want 1, 0.003", n, sum)
	}
	if v := m.shown[len(statuses)][statusIndex(presence.Online)].Load(); v != 1 {
		t.Errorf("none->online %d, want 1", v)
	}
	// An offline that was committed, held, and shown. (The publisher
	// tells the meters of publishes only: an old or repeated one is not
	// published, so no longer reaches them; see publisher's TestPublished.)
	off := presence.Aggregate{User: "ann", Version: 11, Status: presence.Offline}
	m.committed(store.Event{Kind: store.Changed, Aggregate: off, At: t0.Add(time.Second)}, 10)
	m.published(off, presence.Shown{Version: 10, Status: presence.Online}, t0.Add(6*time.Second))
	if n, sum := histogram(t, m.publishDelay); n != 2 || sum != 5.003 {
		t.Errorf("commit to publish: %d observations, sum %v; want 2, 5.003", n, sum)
	}
	if v := m.shown[statusIndex(presence.Online)][statusIndex(presence.Offline)].Load(); v != 1 {
		t.Errorf("online->offline %d, want 1", v)
	}
	if n := m.pending(); n != 0 {
		t.Errorf("pending %d after every change was shown", n)
	}
}

// The collector passes Prometheus's lint (names, units, _total, HELP), has
// every status and reason label from the start, and sits beside the Go and
// process collectors in one registry.
func TestCollectorLint(t *testing.T) {
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	_ = srv.AddHook(new(hooks.Authenticator), nil)
	p, err := Attach(srv, Config{NodeID: "lint"}, WithACL(nil))
	if err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.CollectAndLint(p.Collector())
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}
	if n := testutil.CollectAndCount(p.Collector(), "presenced_users"); n != len(statuses) {
		t.Errorf("presenced_users: %d series, want one per status (%d)", n, len(statuses))
	}
	if n := testutil.CollectAndCount(p.Collector(), "presenced_session_ends_total"); n != len(presence.EndReasons) {
		t.Errorf("presenced_session_ends_total: %d series, want one per reason (%d)", n, len(presence.EndReasons))
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(p.Collector()); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil { // pedantic: what is collected is what was described
		t.Fatal(err)
	}
	if _, err := admin.Metrics(p.Collector()); err != nil {
		t.Errorf("beside the Go and process collectors: %v", err)
	}
	if _, err := admin.Metrics(p.Collector(), p.Collector()); err == nil || !strings.Contains(err.Error(), "metrics") {
		t.Errorf("registered twice: %v", err)
	}
	for _, r := range presence.EndReasons {
		if !r.Valid() {
			t.Errorf("reason %q not valid", r)
		}
	}
}
