package presenced

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"
)

// /api/v1/stats carries the Go runtime's figures, with presence and
// without (the benchmark's bare broker), for the memory benchmark.
func TestStatsRuntimeFigures(t *testing.T) {
	for _, mode := range []string{"on", "off"} {
		t.Run("presence "+mode, func(t *testing.T) {
			cfg := brokerConfig()
			cfg.Presence.Mode = mode
			n, err := NewBroker(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if err := n.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = n.Stop(ctx)
			}()
			resp, err := http.Get("http://" + n.AdminAddr() + "/api/v1/stats")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var st struct {
				Runtime map[string]float64 `json:"runtime"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"goroutines", "heap_inuse", "heap_alloc", "stack_inuse", "sys"} {
				if st.Runtime[k] <= 0 {
					t.Errorf("runtime.%s = %v, want > 0 (got %v)", k, st.Runtime[k], st.Runtime)
				}
			}
			for _, k := range []string{"heap_idle", "heap_released", "gc_sys", "other_sys", "next_gc", "gc_count"} {
				if _, ok := st.Runtime[k]; !ok {
					t.Errorf("runtime.%s missing (got %v)", k, st.Runtime)
				}
			}
		})
	}
}
