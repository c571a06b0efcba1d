package presenced

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/store"
	"github.com/presenced/presenced/tracker"
)

// What presence counts for its figures that no stage counts (the table of
// stats.go reads the stages' own counts): the status transitions shown,
// with atomics indexed by label so that the hot path never allocates nor
// looks a label up, and the two histograms, which observe on the way
// (store calls, and publishes).

// statuses are the values of the status label, most available first.
var statuses = [...]presence.Status{presence.Online, presence.Idle, presence.Away, presence.Busy, presence.DND, presence.Dormant, presence.Offline}

// statusIndex returns s's index in statuses (len(statuses): none, or unknown).
func statusIndex(s presence.Status) int {
	for i, v := range statuses {
		if v == s {
			return i
		}
	}
	return len(statuses)
}

// Buckets, in seconds. A store call is microseconds in memory and a round
// trip with Redis; a publish may be held seconds on purpose (the pacing).
var (
	storeOpBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	publishBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
)

// meters is what presence counts only for the metrics.
type meters struct {
	storeOp      *prometheus.HistogramVec
	storeOps     [tracker.NumOps]prometheus.Observer // storeOp's children, resolved once
	publishDelay prometheus.Histogram

	// shown counts status changes observers were shown, from (statuses
	// index; len(statuses): nothing shown before) to.
	shown [len(statuses) + 1][len(statuses) + 1]atomic.Int64

	mu      sync.Mutex
	commits map[string]commit // users with a committed change not yet shown
}

// commit is the newest committed change of a user not yet shown.
type commit struct {
	version uint64
	at      time.Time
}

func newMeters() *meters {
	m := &meters{
		storeOp: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "presenced_store_operation_duration_seconds",
			Help:    "Time the store took to answer one of the tracker's calls (open, end, update, account, renew), failed calls included.",
			Buckets: storeOpBuckets,
		}, []string{"op"}),
		publishDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "presenced_commit_to_publish_seconds",
			Help: "Time from a committed change reaching this node (memory store: its commit; Redis: the arrival of its feed message) " +
				"to its retained publish, the pacing's deliberate holds (offline grace, debounce, dwell, publish rate) included.",
			Buckets: publishBuckets,
		}),
		commits: make(map[string]commit),
	}
	for i, op := range tracker.OpNames {
		m.storeOps[i] = m.storeOp.WithLabelValues(op)
	}
	return m
}

// observe times a store call of the tracker (tracker.Options.Observe).
func (m *meters) observe(op tracker.Op, d time.Duration) { m.storeOps[op].Observe(d.Seconds()) }

// committed notes a committed change reaching the node (a Changed event)
// that is newer than what observers were shown.
func (m *meters) committed(e store.Event, shown uint64) {
	if e.At.IsZero() || e.Aggregate.Version <= shown {
		return
	}
	m.mu.Lock()
	if c, ok := m.commits[e.Aggregate.User]; !ok || c.version < e.Aggregate.Version {
		m.commits[e.Aggregate.User] = commit{version: e.Aggregate.Version, at: e.At}
	}
	m.mu.Unlock()
}

// published notes a publish of a (the publisher's Published): observers
// were shown before.
func (m *meters) published(a presence.Aggregate, before presence.Shown, now time.Time) {
	if before.Status != a.Status {
		m.shown[statusIndex(before.Status)][statusIndex(a.Status)].Add(1)
	}
	m.mu.Lock()
	c, ok := m.commits[a.User]
	if ok && c.version <= a.Version {
		delete(m.commits, a.User)
	}
	m.mu.Unlock()
	if ok && c.version == a.Version {
		m.publishDelay.Observe(now.Sub(c.at).Seconds())
	}
}

// transitions reports the status changes observers were shown, from (none:
// nothing shown before) to, each pair seen at least once.
func (m *meters) transitions(emit func(float64, ...string)) {
	for i := range len(statuses) + 1 {
		from := "none"
		if i < len(statuses) {
			from = string(statuses[i])
		}
		for j, to := range statuses {
			if v := m.shown[i][j].Load(); v > 0 {
				emit(float64(v), from, string(to))
			}
		}
	}
}

// pending returns how many users have a committed change not yet shown
// that is being timed.
func (m *meters) pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.commits)
}
