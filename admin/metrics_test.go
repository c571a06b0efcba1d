package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// /metrics and /debug/pprof/ are served only when the source asks for
// them, and a token guards them like every endpoint but the probes.
func TestMetricsAndPprofRoutes(t *testing.T) {
	src, _ := fakeSource(false)
	get := func(h http.Handler, path, auth string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(b)
	}
	plain := Handler(src)
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		if code, _ := get(plain, path, ""); code != http.StatusNotFound {
			t.Errorf("GET %s without Metrics or Pprof: %d, want 404", path, code)
		}
	}
	m, err := Metrics()
	if err != nil {
		t.Fatal(err)
	}
	src.Metrics, src.Pprof = m, true
	var tok Token
	tok.Set("s3cret")
	guarded := tok.Wrap(Handler(src))
	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/symbol", "/debug/pprof/cmdline"} {
		if code, _ := get(guarded, path, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, code)
		}
		if code, _ := get(guarded, path, "Bearer s3cret"); code != http.StatusOK {
			t.Errorf("GET %s with the token: %d, want 200", path, code)
		}
	}
	if _, body := get(guarded, "/metrics", "Bearer s3cret"); !strings.Contains(body, "go_goroutines") || !strings.Contains(body, "process_") {
		t.Errorf("/metrics lacks the Go or process collector:\n%.300s", body)
	}
}
