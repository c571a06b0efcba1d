package slo

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Kind is how a synthetic user's session ended.
type Kind string

// The end kinds the canary exercises.
const (
	Clean   Kind = "clean"   // an MQTT DISCONNECT
	Reset   Kind = "rst"     // the socket closed with SO_LINGER 0: a TCP RST
	Silence Kind = "silence" // the client stops sending: the keep-alive finds it
	Drain   Kind = "drain"   // the node asks that one client to move
)

// Kinds are every end kind, in the order the canary rotates them.
var Kinds = []Kind{Clean, Reset, Silence, Drain}

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool { return slices.Contains(Kinds, k) }

// index is k's index in Kinds (len(Kinds) for none).
func (k Kind) index() int {
	if i := slices.Index(Kinds, k); i >= 0 {
		return i
	}
	return len(Kinds)
}

// Defaults.
const (
	DefaultWindow     = time.Hour
	DefaultMaxSamples = 4096
)

// Options configure an Accounting.
type Options struct {
	// Window is how far back the quantiles and ratios of Report look
	// (default DefaultWindow).
	Window time.Duration
	// MaxSamples bounds each series' window (default DefaultMaxSamples):
	// beyond it the oldest sample is dropped, and counted (Dropped).
	MaxSamples int
}

// sample is one measurement at a time.
type sample struct {
	at     time.Time
	v      time.Duration // the latency; for a miss, how long it was waited for
	within bool
	missed bool
}

// series is a window of samples, oldest first.
type series struct{ s []sample }

func (s *series) add(x sample, window time.Duration, max int) (dropped int) {
	s.s = append(s.s, x)
	dropped = s.trim(x.at, window)
	if over := len(s.s) - max; over > 0 {
		s.s = slices.Delete(s.s, 0, over)
		dropped += over
	}
	return dropped
}

// trim drops the samples older than window before now; it does not count
// them as dropped (they left the window).
func (s *series) trim(now time.Time, window time.Duration) int {
	i := 0
	for i < len(s.s) && now.Sub(s.s[i].at) > window {
		i++
	}
	s.s = slices.Delete(s.s, 0, i)
	return 0
}

// exposure is connected and false-offline time, added at a time.
type exposure struct {
	at                  time.Time
	connected, offlined time.Duration
}

// Counts are the cumulative counts since the start, for Prometheus.
type Counts struct {
	Ends        [4]int64 // ends shown or missed, by Kinds index
	Late        [4]int64 // of which shown later than their bound, or never
	Missed      [4]int64 // of which never shown (before the next session)
	Propagated  int64    // propagation samples
	Skewed      int64    // propagation samples below zero (a clock ahead): counted as zero
	Connected   float64  // seconds the synthetic users were in fact connected, as observed
	FalseOff    float64  // of which seconds shown offline
	Dropped     int64    // samples dropped from a full window
	Propagation float64  // the sum of the propagation samples, in seconds
}

// Accounting is the SLI state. Its methods are safe for concurrent use.
type Accounting struct {
	o Options

	mu       sync.Mutex
	detect   [4]series
	prop     series
	exposure []exposure
	counts   Counts
}

// New returns an empty Accounting.
func New(o Options) *Accounting {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = DefaultMaxSamples
	}
	return &Accounting{o: o}
}

// Detected records an end of kind k shown latency after it happened, at
// at; bound is the detection bound it is held to.
func (a *Accounting) Detected(at time.Time, k Kind, latency, bound time.Duration) {
	i := k.index()
	if i == len(Kinds) {
		return
	}
	latency = max(latency, 0)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counts.Ends[i]++
	within := latency <= bound
	if !within {
		a.counts.Late[i]++
	}
	a.counts.Dropped += int64(a.detect[i].add(sample{at: at, v: latency, within: within}, a.o.Window, a.o.MaxSamples))
}

// Missed records an end of kind k that was never shown before the synthetic
// user's next session, waited for waited: late, and its latency at least
// waited (the quantiles count it as waited: a lower bound).
func (a *Accounting) Missed(at time.Time, k Kind, waited time.Duration) {
	i := k.index()
	if i == len(Kinds) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counts.Ends[i]++
	a.counts.Late[i]++
	a.counts.Missed[i]++
	a.counts.Dropped += int64(a.detect[i].add(sample{at: at, v: max(waited, 0), missed: true}, a.o.Window, a.o.MaxSamples))
}

// Propagated records a change committed on one node shown latency later
// on another, at at. A negative latency (the clocks disagree by more than
// it) counts as zero, and as skewed.
func (a *Accounting) Propagated(at time.Time, latency time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if latency < 0 {
		a.counts.Skewed++
		latency = 0
	}
	a.counts.Propagated++
	a.counts.Propagation += latency.Seconds()
	a.counts.Dropped += int64(a.prop.add(sample{at: at, v: latency, within: true}, a.o.Window, a.o.MaxSamples))
}

// Exposed records, at at, that a synthetic user was in fact connected for
// connected, of which it was shown offline for offline (clamped to
// connected).
func (a *Accounting) Exposed(at time.Time, connected, offline time.Duration) {
	if connected <= 0 {
		return
	}
	offline = min(max(offline, 0), connected)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counts.Connected += connected.Seconds()
	a.counts.FalseOff += offline.Seconds()
	a.exposure = append(a.exposure, exposure{at: at, connected: connected, offlined: offline})
	i := 0
	for i < len(a.exposure) && at.Sub(a.exposure[i].at) > a.o.Window {
		i++
	}
	if over := len(a.exposure) - i - a.o.MaxSamples; over > 0 {
		i += over
		a.counts.Dropped += int64(over)
	}
	a.exposure = slices.Delete(a.exposure, 0, i)
}

// Counts returns the cumulative counts.
func (a *Accounting) Counts() Counts {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts
}

// KindReport is one end kind's detection over the window.
type KindReport struct {
	Kind Kind `json:"kind"`
	// Ends are the ends in the window; Within those shown within their
	// bound; Missed those never shown.
	Ends   int `json:"ends"`
	Within int `json:"within_bound"`
	Missed int `json:"missed"`
	// WithinRatio is Within / Ends (1 with no end: no budget spent).
	WithinRatio float64 `json:"within_bound_ratio"`
	// P50 and P99 are the detection latencies' quantiles in seconds (-1
	// with no end); a missed end counts as the time it was waited for, so
	// a quantile that falls on one is a lower bound.
	P50 float64 `json:"p50_seconds"`
	P99 float64 `json:"p99_seconds"`
}

// Report is the SLIs over the window, as GET /api/v1/slo gives them.
type Report struct {
	Window    float64      `json:"window_seconds"`
	Detection []KindReport `json:"detection"`
	// All is every kind's detection together.
	All KindReport `json:"detection_all"`
	// FalseOfflinePerMillion is the seconds shown offline per million
	// user-seconds in fact connected (0 with no exposure).
	FalseOfflinePerMillion float64 `json:"false_offline_per_million"`
	ConnectedSeconds       float64 `json:"connected_user_seconds"`
	FalseOfflineSeconds    float64 `json:"false_offline_seconds"`
	// Propagation is the cross-node propagation latencies' count and
	// quantiles in seconds (-1 with none).
	Propagations   int     `json:"propagations"`
	PropagationP50 float64 `json:"propagation_p50_seconds"`
	PropagationP99 float64 `json:"propagation_p99_seconds"`
}

// Report computes the SLIs over the window before now.
func (a *Accounting) Report(now time.Time) Report {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := Report{Window: a.o.Window.Seconds()}
	var all []sample
	for i, k := range Kinds {
		a.detect[i].trim(now, a.o.Window)
		s := a.detect[i].s
		all = append(all, s...)
		r.Detection = append(r.Detection, kindReport(k, s))
	}
	r.All = kindReport("all", all)
	for _, e := range a.exposure {
		if now.Sub(e.at) <= a.o.Window {
			r.ConnectedSeconds += e.connected.Seconds()
			r.FalseOfflineSeconds += e.offlined.Seconds()
		}
	}
	if r.ConnectedSeconds > 0 {
		r.FalseOfflinePerMillion = r.FalseOfflineSeconds / r.ConnectedSeconds * 1e6
	}
	a.prop.trim(now, a.o.Window)
	r.Propagations = len(a.prop.s)
	r.PropagationP50, r.PropagationP99 = quantile(a.prop.s, 0.5), quantile(a.prop.s, 0.99)
	return r
}

// Quantiles returns the window's detection p99 per kind (by Kinds index)
// and the propagation p99, in seconds: -1 with no sample.
func (a *Accounting) Quantiles(now time.Time) (detection [4]float64, propagation float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range Kinds {
		a.detect[i].trim(now, a.o.Window)
		detection[i] = quantile(a.detect[i].s, 0.99)
	}
	a.prop.trim(now, a.o.Window)
	return detection, quantile(a.prop.s, 0.99)
}

func kindReport(k Kind, s []sample) KindReport {
	r := KindReport{Kind: k, Ends: len(s), WithinRatio: 1, P50: quantile(s, 0.5), P99: quantile(s, 0.99)}
	for _, x := range s {
		if x.within {
			r.Within++
		}
		if x.missed {
			r.Missed++
		}
	}
	if r.Ends > 0 {
		r.WithinRatio = float64(r.Within) / float64(r.Ends)
	}
	return r
}

// quantile is the nearest-rank q-quantile of the samples' latencies in
// seconds: -1 with none.
func quantile(s []sample, q float64) float64 {
	if len(s) == 0 {
		return -1
	}
	v := make([]time.Duration, len(s))
	for i, x := range s {
		v[i] = x.v
	}
	slices.Sort(v)
	rank := int(math.Ceil(q*float64(len(v)))) - 1
	rank = min(max(rank, 0), len(v)-1)
	return v[rank].Seconds()
}

// Bound is the detection bound of an end: 1.5 × the keep-alive, plus the
// offline grace, plus a second (issue 22).
func Bound(keepAlive, grace time.Duration) time.Duration {
	return keepAlive*3/2 + grace + time.Second
}
