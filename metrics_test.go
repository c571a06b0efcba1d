package presenced

import (
	"context"
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
	"github.com/presenced/presenced/tracker"
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
	m.published(a, presence.Shown{}, presence.Shown{Version: 10, Status: presence.Online}, t0.Add(3*time.Millisecond))
	if n, sum := histogram(t, m.publishDelay); n != 1 || sum != 0.003 {
		t.Errorf("commit to publish: %d observations, sum %v; want 1, 0.003", n, sum)
	}
	if v := m.shown[len(statuses)][statusIndex(presence.Online)].Load(); v != 1 {
		t.Errorf("none->online %d, want 1", v)
	}
	// The same version again (not published: old), then an offline that
	// was committed, held, and shown.
	m.published(a, presence.Shown{Version: 10, Status: presence.Online}, presence.Shown{Version: 10, Status: presence.Online}, t0.Add(time.Second))
	off := presence.Aggregate{User: "ann", Version: 11, Status: presence.Offline}
	m.committed(store.Event{Kind: store.Changed, Aggregate: off, At: t0.Add(time.Second)}, 10)
	m.published(off, presence.Shown{Version: 10, Status: presence.Online}, presence.Shown{Version: 11, Status: presence.Offline}, t0.Add(6*time.Second))
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

// fakeStore answers every call; End fails for user "x".
type fakeStore struct{}

func (fakeStore) Open(context.Context, presence.OpenArgs) (presence.Session, error) {
	return presence.Session{}, nil
}
func (fakeStore) End(_ context.Context, a presence.EndArgs) error {
	if a.User == "x" {
		return presence.ErrStaleEpoch
	}
	return nil
}
func (fakeStore) Update(context.Context, presence.SessionRef, presence.Update) error { return nil }
func (fakeStore) SetAccount(context.Context, string, presence.AccountUpdate) error   { return nil }
func (fakeStore) Renew(context.Context, []presence.SessionRef, time.Duration) ([]presence.SessionRef, error) {
	return nil, nil
}

// Every store call is timed under its op; an end is counted by reason
// once the store took it.
func TestTimedStore(t *testing.T) {
	m := newMeters()
	s := timedStore{fakeStore{}, m}
	ctx := context.Background()
	_, _ = s.Open(ctx, presence.OpenArgs{})
	_ = s.End(ctx, presence.EndArgs{User: "a", Reason: presence.EndClean})
	_ = s.End(ctx, presence.EndArgs{User: "x", Reason: presence.EndClean})
	_ = s.End(ctx, presence.EndArgs{User: "a", Reason: presence.EndNetwork})
	_ = s.Update(ctx, presence.SessionRef{}, presence.Update{})
	_ = s.SetAccount(ctx, "a", presence.AccountUpdate{})
	_, _ = s.Renew(ctx, nil, time.Minute)
	for op, want := range map[int]uint64{opOpen: 1, opEnd: 3, opUpdate: 1, opAccount: 1, opRenew: 1} {
		if n, _ := histogram(t, m.storeOps[op]); n != want {
			t.Errorf("%s: %d observations, want %d", storeOpNames[op], n, want)
		}
	}
	if c, n := m.ends[reasonIndex(presence.EndClean)].Load(), m.ends[reasonIndex(presence.EndNetwork)].Load(); c != 1 || n != 1 {
		t.Errorf("ends: clean %d, network %d; want 1, 1 (a refused end is no end)", c, n)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = s.End(ctx, presence.EndArgs{User: "a", Reason: presence.EndClean}) }); allocs != 0 {
		t.Errorf("a timed end allocates %v times", allocs)
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
	if n := testutil.CollectAndCount(p.Collector(), "presenced_session_ends_total"); n != len(endReasons) {
		t.Errorf("presenced_session_ends_total: %d series, want one per reason (%d)", n, len(endReasons))
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
	for _, r := range endReasons {
		if !r.Valid() {
			t.Errorf("reason %q not valid", r)
		}
	}
}

// batchStore is fakeStore that batches: every write succeeds but the
// second.
type batchStore struct{ fakeStore }

func (batchStore) Batch(_ context.Context, ws []presence.Write) ([]uint64, []error) {
	errs := make([]error, len(ws))
	if len(ws) > 1 {
		errs[1] = presence.ErrStaleEpoch
	}
	return make([]uint64, len(ws)), errs
}

// The timing wrapper keeps a store's batching, which the tracker finds by
// a type assertion, and counts the ends a batch committed.
func TestTimedStoreKeepsBatching(t *testing.T) {
	m := newMeters()
	if _, ok := timed(fakeStore{}, m).(tracker.Batcher); ok {
		t.Fatal("a store that does not batch was made to")
	}
	s, ok := timed(batchStore{}, m).(tracker.Batcher)
	if !ok {
		t.Fatal("the wrapper hides the store's Batch: the tracker would write one call per round trip")
	}
	end := func(r presence.EndReason) presence.Write {
		return presence.Write{Kind: presence.WriteEnd, End: presence.EndArgs{User: "a", Reason: r}}
	}
	s.Batch(context.Background(), []presence.Write{end(presence.EndClean), end(presence.EndClean), {Kind: presence.WriteOpen}, end(presence.EndTimeout)})
	if n, _ := histogram(t, m.storeOps[opBatch]); n != 1 {
		t.Errorf("batch: %d observations, want 1", n)
	}
	if c, to := m.ends[reasonIndex(presence.EndClean)].Load(), m.ends[reasonIndex(presence.EndTimeout)].Load(); c != 1 || to != 1 {
		t.Errorf("ends: clean %d, timeout %d; want 1, 1 (the refused end is no end)", c, to)
	}
}
