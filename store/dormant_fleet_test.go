package store

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// The fake fleet of issue 22 (dormant is not offline): devices that sleep
// by design, each with its period (1m .. 1h), check in with jitter (early
// or late, within 90 % of the margin), stay connected a few seconds and
// disconnect cleanly; a tenth reconnect under a new client id each time;
// some die (they stop checking in after a clean end). The memory store runs
// on a fake clock, its reaper every reap interval as the node's task does;
// what it commits is what observers are shown (a missed check-in is not
// held by the pacing: presence.Pacing; a clean end is debounced as any).
//
// It measures what the issue asks: minutes shown offline while a device
// was merely sleeping (must be 0), and for the dead ones, how long after
// next_expected they were shown offline (p99 within margin + one reap
// interval).

type fleetEvent struct {
	at     time.Time
	device int
	kind   int // 0 connect, 1 disconnect
}

type fleetQueue []fleetEvent

func (q fleetQueue) Len() int           { return len(q) }
func (q fleetQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q fleetQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *fleetQueue) Push(x any)        { *q = append(*q, x.(fleetEvent)) }
func (q *fleetQueue) Pop() any          { old := *q; x := old[len(old)-1]; *q = old[:len(old)-1]; return x }
func (q fleetQueue) peek() (fleetEvent, bool) {
	if len(q) == 0 {
		return fleetEvent{}, false
	}
	return q[0], true
}

type fleetDevice struct {
	user          string
	period        time.Duration
	margin        time.Duration
	newIDs        bool      // a new client id at each check-in
	diesAt        time.Time // zero: never; it does not check in after this
	dead          bool
	id            string
	epoch         uint64
	checkins      int
	status        presence.Status // as last committed
	since         time.Time       // when status was last changed
	next          time.Time       // next_expected as last shown
	falseOffline  time.Duration
	shownOffline  time.Time
	lastNextShown time.Time
}

func TestDormantFleet(t *testing.T) {
	devices, span := 500, 4*time.Hour // DORMANT_FLEET=devices,hours for a larger run
	const reap = time.Second          // presence.reap_interval's default
	if v := os.Getenv("DORMANT_FLEET"); v != "" {
		var h int
		if _, err := fmt.Sscanf(v, "%d,%d", &devices, &h); err != nil || devices < 1 || h < 1 {
			t.Fatalf("DORMANT_FLEET=%q: want devices,hours", v)
		}
		span = time.Duration(h) * time.Hour
	}
	if testing.Short() {
		t.Skip("the fleet takes a few seconds")
	}
	falseOffline, over := runFleet(t, devices, span, reap, 90)
	if falseOffline != 0 {
		t.Errorf("false-offline %v, want 0", falseOffline)
	}
	if len(over) == 0 {
		t.Fatal("no device died")
	}
	if p99 := percentile(over, .99); p99 < 0 || p99 > reap {
		t.Errorf("p99 of the delay past next_expected + margin is %v, want within [0, %v]", p99, reap)
	}
	if over[0] < 0 {
		t.Errorf("a device was shown offline %v before next_expected + margin", -over[0])
	}
}

// The meter itself: devices that check in up to 150 % of the margin late
// are shown offline while they merely sleep, and the fleet counts it.
func TestDormantFleetCountsFalseOffline(t *testing.T) {
	if falseOffline, _ := runFleet(t, 100, time.Hour, time.Second, 150); falseOffline == 0 {
		t.Fatal("check-ins later than the margin made no false-offline minute: the meter is blind")
	}
}

func percentile(xs []time.Duration, q float64) time.Duration {
	return xs[min(len(xs)-1, int(q*float64(len(xs))))]
}

// runFleet runs a fleet of devices over span, the reaper every reap, each
// check-in early or late by up to jitterPct percent of its margin, and
// returns the time shown offline while a device merely slept, and for each
// dead device how long after next_expected + margin it was shown offline
// (sorted).
func runFleet(t *testing.T, devices int, span, reap time.Duration, jitterPct int64) (time.Duration, []time.Duration) {
	t.Helper()
	rng := rand.New(rand.NewSource(22))
	start := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	clk := testkit.NewClock(start)
	periods := []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour}
	fleet := make([]*fleetDevice, devices)
	byUser := map[string]*fleetDevice{}
	q := &fleetQueue{}
	for i := range fleet {
		p := periods[rng.Intn(len(periods))]
		d := &fleetDevice{user: fmt.Sprintf("sensor-%04d", i), period: p, margin: presence.DormantMargin(p, 0), newIDs: rng.Intn(10) == 0}
		if rng.Intn(20) == 0 { // 5 % die somewhere in the run
			d.diesAt = start.Add(time.Duration(rng.Int63n(int64(span / 2))))
		}
		fleet[i], byUser[d.user] = d, d
		heap.Push(q, fleetEvent{at: start.Add(time.Duration(rng.Int63n(int64(p)))), device: i})
	}
	// The store reports every committed change: what observers are shown.
	report := func(e Event) {
		if e.Kind != Changed {
			return
		}
		a := e.Aggregate
		d := byUser[a.User]
		now := clk.Now()
		if d.status == presence.Offline && !d.dead {
			d.falseOffline += now.Sub(d.since)
		}
		if a.Status != d.status {
			d.status, d.since = a.Status, now
		}
		if a.Status == presence.Dormant {
			d.next = a.NextExpected
		}
		if a.Status == presence.Offline && d.dead && d.shownOffline.IsZero() {
			d.shownOffline, d.lastNextShown = now, d.next
		}
	}
	m := NewMemory(presence.NewRules(nil), clk.Now, report)
	ctx := context.Background()
	end := start.Add(span)
	nextReap := start.Add(reap)
	for clk.Now().Before(end) {
		// Run every event due before the next reap, in time order, then the reaper.
		for {
			ev, ok := q.peek()
			if !ok || ev.at.After(nextReap) {
				break
			}
			heap.Pop(q)
			if ev.at.After(clk.Now()) {
				clk.Advance(ev.at.Sub(clk.Now()))
			}
			d := fleet[ev.device]
			switch ev.kind {
			case 0:
				if d.id == "" || d.newIDs {
					d.id = fmt.Sprintf("c%d", d.checkins)
				}
				d.checkins++
				s, err := m.Open(ctx, presence.OpenArgs{User: d.user, ID: d.id, Node: "n1", Device: "sensor", TTL: time.Hour, Expect: d.period, Margin: d.margin})
				if err != nil {
					t.Fatal(err)
				}
				d.epoch = s.Epoch
				heap.Push(q, fleetEvent{at: ev.at.Add(time.Duration(1+rng.Intn(10)) * time.Second), device: ev.device, kind: 1})
			case 1:
				if err := m.End(ctx, presence.EndArgs{User: d.user, ID: d.id, Epoch: d.epoch, Reason: presence.EndClean}); err != nil {
					t.Fatal(err)
				}
				if !d.diesAt.IsZero() && !ev.at.Before(d.diesAt) {
					d.dead = true // it never checks in again
					continue
				}
				// Jitter: early or late, within jitterPct % of the margin.
				jm := d.margin * time.Duration(jitterPct) / 100
				j := time.Duration(rng.Int63n(int64(jm)*2)) - jm
				heap.Push(q, fleetEvent{at: ev.at.Add(d.period + j), device: ev.device})
			}
		}
		clk.Advance(nextReap.Sub(clk.Now()))
		if _, err := m.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		nextReap = nextReap.Add(reap)
	}
	var falseOffline time.Duration
	var over []time.Duration // delay past next_expected + margin, per dead device
	var lates []float64      // delay past next_expected, in margins
	dead := 0
	for _, d := range fleet {
		if d.status == presence.Offline && !d.dead {
			d.falseOffline += end.Sub(d.since)
		}
		falseOffline += d.falseOffline
		if !d.dead {
			continue
		}
		dead++
		if d.shownOffline.IsZero() {
			t.Errorf("%s died and was never shown offline (next expected %v)", d.user, d.next)
			continue
		}
		delay := d.shownOffline.Sub(d.lastNextShown)
		over = append(over, delay-d.margin)
		lates = append(lates, float64(delay)/float64(d.margin))
	}
	slices.Sort(over)
	slices.Sort(lates)
	checkins := 0
	for _, d := range fleet {
		checkins += d.checkins
	}
	t.Logf("fleet: %d devices, %v simulated, %d check-ins, %d died; reaper every %v; jitter up to %d%% of the margin", devices, span, checkins, dead, reap, jitterPct)
	t.Logf("false-offline: %v (%.1f device-minutes)", falseOffline, falseOffline.Minutes())
	if len(over) > 0 {
		t.Logf("dead shown offline after next_expected + margin: min %v, p50 %v, p99 %v, max %v (delay / margin: p50 %.3f, max %.3f)",
			over[0], percentile(over, .5), percentile(over, .99), over[len(over)-1], lates[len(lates)/2], lates[len(lates)-1])
	}
	return falseOffline, over
}
