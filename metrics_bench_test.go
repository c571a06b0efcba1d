package presenced

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/store"
	"github.com/presenced/presenced/tracker"
)

// cpuNow is the process's CPU time (user and system).
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchPlugin is presence with the memory store and no pacing, started on
// a mochi server without listeners, and one open session.
func benchPlugin(b *testing.B) (*Plugin, presence.SessionRef) {
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	_ = srv.AddHook(new(hooks.Authenticator), nil)
	var cfg Config
	cfg.NodeID = "bench"
	cfg.Presence.OfflineGrace, cfg.Presence.DisconnectDebounce, cfg.Presence.MinDwell, cfg.Presence.Flap.Ends = Off, Off, Off, Off
	p, err := Attach(srv, cfg, WithACL(nil))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = srv.Close()
		_ = p.Stop(ctx)
	})
	s, err := p.store.Open(ctx, presence.OpenArgs{User: "u", ID: "u-1", Node: "bench", Device: "d", Status: presence.Online, TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	return p, presence.SessionRef{User: "u", ID: "u-1", Epoch: s.Epoch}
}

// A status update through the store as the tracker calls it, then
// committed, fed, published and delivered to an inline subscriber: the
// path the metrics time. cpu-ns/op is the process's CPU time per change.
func BenchmarkUpdateToPublish(b *testing.B) {
	p, ref := benchPlugin(b)
	got := make(chan struct{}, 1)
	if err := p.Subscribe("presence/users/u", 1, func(*mqtt.Client, packets.Subscription, packets.Packet) {
		select {
		case got <- struct{}{}:
		default:
		}
	}); err != nil {
		b.Fatal(err)
	}
	st, ctx := p.store, context.Background()
	statuses := [2]presence.Status{presence.Away, presence.Online}
	select { // the retained message of the open
	case <-got:
	case <-time.After(5 * time.Second):
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuNow()
	for i := range b.N {
		s := statuses[i%2]
		if err := st.Update(ctx, ref, presence.Update{Status: &s}); err != nil {
			b.Fatal(err)
		}
		<-got
	}
	b.ReportMetric(float64(cpuNow()-cpu)/float64(b.N), "cpu-ns/op")
}

// The memory store's update (reporting to nothing), called directly and
// timed as the tracker times it (two clock reads and a histogram
// observation): what the timing adds to a store call.
func BenchmarkStoreUpdate(b *testing.B) {
	m := store.NewMemory(presence.NewRules(nil), time.Now, func(store.Event) {})
	ctx := context.Background()
	s, err := m.Open(ctx, presence.OpenArgs{User: "u", ID: "u-1", Node: "bench", Device: "d", Status: presence.Online, TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ref := presence.SessionRef{User: "u", ID: "u-1", Epoch: s.Epoch}
	meters := newMeters()
	for _, bc := range []struct {
		name  string
		timed bool
	}{{"direct", false}, {"timed", true}} {
		b.Run(bc.name, func(b *testing.B) {
			statuses := [2]presence.Status{presence.Away, presence.Online}
			b.ReportAllocs()
			for i := range b.N {
				start := time.Now()
				if err := m.Update(ctx, ref, presence.Update{Status: &statuses[i%2]}); err != nil {
					b.Fatal(err)
				}
				if bc.timed {
					meters.observe(tracker.OpUpdate, time.Since(start))
				}
			}
		})
	}
}
