package tracker

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/store"
)

// lockedBuffer is a bytes.Buffer the tracker's workers may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b.b.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// With Options.Sessions, a session's open and end are logged once each,
// with the user, client id, device, node and epoch; the end with its
// reason and lasted_ms. A takeover logs the old session ended (takeover)
// and the new one opened.
func TestTrackerSessionLog(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	mem := store.NewMemory(presence.NewRules(nil), clk.Now, func(store.Event) {})
	var buf lockedBuffer
	tr := New(mem, Options{Node: "n1", TTL: time.Minute, Shards: 2, Sessions: slog.New(slog.NewJSONHandler(&buf, nil))})
	tr.Start()
	defer tr.Stop()
	const old, nu = 1, 2
	tr.Connect(old, "bob-phone", "bob", "phone", nil, presence.Conn{})
	tr.Established(old, "bob-phone")
	waitIdle(t, tr)
	tr.Connect(nu, "bob-phone", "bob", "phone", nil, presence.Conn{})
	tr.Disconnect(old, "bob-phone", presence.EndTakeover)
	tr.Established(nu, "bob-phone")
	waitIdle(t, tr)
	tr.Disconnect(nu, "bob-phone", presence.EndNetwork)
	waitIdle(t, tr)

	lines := buf.lines(t)
	want := []struct{ msg, reason string }{{"session opened", ""}, {"session ended", "takeover"}, {"session opened", ""}, {"session ended", "network"}}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %v", len(lines), len(want), lines)
	}
	var epochs []float64
	for i, w := range want {
		l := lines[i]
		if l["msg"] != w.msg || l["level"] != "INFO" || l["user"] != "bob" || l["client_id"] != "bob-phone" || l["device"] != "phone" || l["node"] != "n1" {
			t.Errorf("line %d: %v, want %q of bob-phone (phone) on n1", i, l, w.msg)
		}
		epoch, _ := l["epoch"].(float64)
		if epoch == 0 {
			t.Errorf("line %d: no epoch: %v", i, l)
		}
		epochs = append(epochs, epoch)
		if w.reason == "" {
			continue
		}
		if l["reason"] != w.reason {
			t.Errorf("line %d: reason %v, want %s", i, l["reason"], w.reason)
		}
		if ms, ok := l["lasted_ms"].(float64); !ok || ms < 0 {
			t.Errorf("line %d: lasted_ms %v, want a count of milliseconds", i, l["lasted_ms"])
		}
		if _, ok := l["lasted"]; ok {
			t.Errorf("line %d: a duration field without its unit: %v", i, l)
		}
	}
	if epochs[0] != epochs[1] || epochs[2] != epochs[3] || epochs[0] == epochs[2] {
		t.Errorf("epochs %v: want the old session's twice, then the new one's twice", epochs)
	}
}
