package publisher_test

import (
	"log/slog"
	"runtime"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"

	"github.com/presenced/presenced/delivery"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/publisher"
)

// nopBroker is a publisher.Broker that does nothing but count.
type nopBroker struct{ published int }

func (b *nopBroker) Publish(_ string, _ uint64, _ string, _ []byte, commit func()) error {
	b.published++
	commit()
	return nil
}

// churnAggregates returns the two states of a user in the churn scenario:
// online with one session, with a status text, and offline after a clean
// end.
func churnAggregates() [2]presence.Aggregate {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	return [2]presence.Aggregate{
		{User: "alice", Status: presence.Away, Text: "x", Since: at, Sessions: []presence.SessionView{
			{ID: "alice-phone", Epoch: 7, Node: "bench", Device: "phone", Status: presence.Away, ConnectedAt: at},
		}},
		{User: "alice", Status: presence.Offline, Text: "x", Since: at.Add(time.Second), LastSeen: at.Add(time.Second), Reason: presence.EndClean},
	}
}

// BenchmarkPublish measures the publisher's handling of one committed
// change of a user (one op), online and offline in turn with rising
// versions: encoding the payload, keeping the view, and the broker's
// publish. "nop": a broker that only commits the view (the publisher's own cost);
// "outlet": the delivery.Outlet of a mochi server with presence's Delivery
// hook and no subscriber (the live publish through mochi: its topic
// index and the inline client; since issue 23 mochi retains nothing of
// it, the publisher's view is the retained copy).
func BenchmarkPublish(b *testing.B) {
	aggs := churnAggregates()
	run := func(b *testing.B, br publisher.Broker) *publisher.Publisher {
		p := publisher.New(publisher.Options{Prefix: "presence", Broker: br, Log: nil})
		v := uint64(0)
		b.ReportAllocs()
		for b.Loop() {
			v++
			a := aggs[v&1]
			a.Version = v
			p.Publish(a)
		}
		if got := p.Stats.Published.Load(); got != int64(v) {
			b.Fatalf("%d published, want %d", got, v)
		}
		return p
	}
	b.Run("nop", func(b *testing.B) { run(b, new(nopBroker)) })
	b.Run("outlet", func(b *testing.B) {
		srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
		if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
			b.Fatal(err)
		}
		d := delivery.NewDelivery(delivery.DeliveryOptions{Prefix: "presence", Server: srv, Log: nil})
		if err := srv.AddHook(d, nil); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = srv.Close() })
		p := run(b, delivery.NewOutlet(srv, d))
		if p.Stats.Errors.Load() != 0 {
			b.Fatalf("%d publish errors", p.Stats.Errors.Load())
		}
		// Since issue 23 the publisher's view is the retained copy: mochi
		// keeps none.
		if n := srv.Topics.Retained.Len(); n != 0 {
			b.Fatalf("mochi retains %d messages, want none", n)
		}
		if _, ok := p.Get("alice"); !ok {
			b.Fatal("the publisher holds no view of alice")
		}
	})
}

// shower is a publisher.Shower that shows what it is given at once.
type shower struct {
	shown     presence.Shown
	published int
}

func (s *shower) Shown(string) presence.Shown  { return s.shown }
func (s *shower) Publish(a presence.Aggregate) { s.shown = a.Shown(); s.published++ }

// BenchmarkPacer measures the pacer's handling of changes on an injected
// clock, with the default pacing (offline grace 5 s, disconnect debounce
// 1 s, dwell 1 s, flap control) and no rate limit. "churn": an op is the
// churn scenario's two changes, 2 s apart: online (shown at once), then
// offline after a clean end (held for the debounce, shown at its due
// time); "set": an op is one status change (away and busy in turn, 2 s
// apart), shown at once.
func BenchmarkPacer(b *testing.B) {
	rules := presence.Pacing{Grace: 5 * time.Second, Debounce: time.Second, Dwell: time.Second,
		FlapWindow: 2 * time.Minute, FlapEnds: 3, FlapGrace: 30 * time.Second}
	aggs := churnAggregates()
	b.Run("churn", func(b *testing.B) {
		out := new(shower)
		q := publisher.NewPacer(rules, 0, 0, out)
		now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		v := uint64(0)
		b.ReportAllocs()
		m := mallocs()
		for b.Loop() {
			now = now.Add(2 * time.Second)
			v++
			on := aggs[0]
			on.Version, on.Since = v, now
			q.Offer(on, presence.Cause{}, now)
			q.Run(now)
			now = now.Add(2 * time.Second)
			v++
			off := aggs[1]
			off.Version, off.Since, off.LastSeen = v, now, now
			q.Offer(off, presence.Cause{Ended: presence.EndClean}, now)
			q.Run(now)
			now = now.Add(2 * time.Second)
			q.Run(now)
		}
		perChange(b, 2, m)
		if out.published != int(v) || q.Stats.Released.Load() != int64(v/2) {
			b.Fatalf("%d shown, %d released; want %d and %d", out.published, q.Stats.Released.Load(), v, v/2)
		}
	})
	b.Run("set", func(b *testing.B) {
		out := new(shower)
		q := publisher.NewPacer(rules, 0, 0, out)
		now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		st := [2]presence.Status{presence.Away, presence.Busy}
		v := uint64(0)
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(2 * time.Second)
			v++
			a := aggs[0]
			a.Version, a.Since, a.Status = v, now, st[v&1]
			q.Offer(a, presence.Cause{}, now)
			q.Run(now)
		}
		if out.published != int(v) {
			b.Fatalf("%d shown, want %d", out.published, v)
		}
	})
}

// perChange reports the loop's time and allocations per change, for a loop
// of b.N iterations of changes changes each, from the allocation count
// before the loop (mallocs).
func perChange(b *testing.B, changes int, mallocs uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	n := float64(b.N * changes)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/change")
	b.ReportMetric(float64(ms.Mallocs-mallocs)/n, "allocs/change")
}

func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}
