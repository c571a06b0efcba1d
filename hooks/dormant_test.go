package hooks

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// expectTracker records the check-in periods the hook hands over.
type expectTracker struct {
	testkit.NopTracker
	mu     sync.Mutex
	expect map[string][2]time.Duration // client id -> period, margin
}

func (e *expectTracker) Expect(_ presence.ConnID, id string, period, margin time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expect[id] = [2]time.Duration{period, margin}
}

func withExpect(v ...string) packets.Packet {
	var pk packets.Packet
	pk.Properties.User = append(pk.Properties.User, packets.UserProperty{Key: "device", Val: "sensor"})
	for _, x := range v {
		pk.Properties.User = append(pk.Properties.User, packets.UserProperty{Key: "expect", Val: x})
	}
	return pk
}

// A device declares its check-in period by the CONNECT user property
// expect, or by its device label in the configuration (the property wins);
// a bad one is refused, counted. The margin is the configured one, else
// the default rule.
func TestExpect(t *testing.T) {
	const h = time.Hour
	for _, tc := range []struct {
		name            string
		pk              packets.Packet
		devices         map[string]time.Duration
		margin          time.Duration
		refused         bool
		period, margin2 time.Duration
	}{
		{name: "none", pk: packets.Packet{}},
		{name: "property", pk: withExpect("1h"), period: h, margin2: 6 * time.Minute},
		{name: "property, configured margin", pk: withExpect("90s"), margin: 20 * time.Second, period: 90 * time.Second, margin2: 20 * time.Second},
		{name: "short period: the margin's floor", pk: withExpect("2s"), period: 2 * time.Second, margin2: presence.MinDormantMargin},
		{name: "label", pk: withExpect(), devices: map[string]time.Duration{"sensor": 15 * time.Minute}, period: 15 * time.Minute, margin2: 90 * time.Second},
		{name: "the property wins over the label", pk: withExpect("30m"), devices: map[string]time.Duration{"sensor": h}, period: 30 * time.Minute, margin2: 3 * time.Minute},
		{name: "first property wins", pk: withExpect("1h", "bogus"), period: h, margin2: 6 * time.Minute},
		{name: "not a duration", pk: withExpect("hourly"), refused: true},
		{name: "a bare number", pk: withExpect("3600"), refused: true},
		{name: "too short", pk: withExpect("500ms"), refused: true},
		{name: "too long", pk: withExpect("169h"), refused: true},
		{name: "negative", pk: withExpect("-1h"), refused: true},
		{name: "empty", pk: withExpect(""), refused: true},
		{name: "huge", pk: withExpect(string(make([]byte, 4096))), refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler)})
			tr := &expectTracker{expect: map[string][2]time.Duration{}}
			p := New(Options{Prefix: "presence", Tracker: tr, Dormant: DormantOptions{Devices: tc.devices, Margin: tc.margin}})
			cl := clientFrom(srv, "s1", "10.0.0.1:1")
			cl.Properties.ProtocolVersion = 5
			cl.Properties.Username = []byte("sensor-1")
			err := p.OnConnect(cl, tc.pk)
			if tc.refused {
				if err == nil || p.Stats.ExpectRefused.Load() != 1 {
					t.Fatalf("accepted: %v, refused %d", err, p.Stats.ExpectRefused.Load())
				}
				return
			}
			if err != nil || p.Stats.ExpectRefused.Load() != 0 {
				t.Fatalf("refused: %v", err)
			}
			p.OnSessionEstablish(cl, tc.pk)
			got, ok := tr.expect[cl.ID]
			if ok != (tc.period > 0) || got != [2]time.Duration{tc.period, tc.margin2} {
				t.Fatalf("expect %v (%v), want %v, %v", got, ok, tc.period, tc.margin2)
			}
		})
	}
}
