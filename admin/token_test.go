package admin

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestTokenGuardsEverythingButProbes(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	var tok Token
	tok.Set("s3cret-token")
	h := tok.Wrap(ok)
	tests := []struct {
		method, path, auth string
		want               int
	}{
		{"GET", "/healthz", "", 200},
		{"GET", "/readyz", "", 200},
		{"GET", "/api/v1/stats", "", 401},
		{"GET", "/api/v1/stats", "Bearer wrong", 401},
		{"GET", "/api/v1/stats", "Bearer s3cret-token-and-more", 401},
		{"GET", "/api/v1/stats", "Basic s3cret-token", 401},
		{"GET", "/api/v1/stats", "Bearer s3cret-token", 200},
		{"GET", "/api/v1/stats", "bearer s3cret-token", 200},
		{"POST", "/healthz", "", 401},
		{"GET", "/api/v1/slo", "", 401},
		{"GET", "/api/v1/slo", "Bearer s3cret-token", 200},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		if tt.auth != "" {
			r.Header.Set("Authorization", tt.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Errorf("%s %s %q: %d, want %d", tt.method, tt.path, tt.auth, w.Code, tt.want)
		}
		if w.Code == 401 && w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s %s: 401 without WWW-Authenticate", tt.method, tt.path)
		}
	}
	if got := tok.Refused.Load(); got != 6 {
		t.Errorf("refused %d, want 6", got)
	}
	// A token changed at run time applies at once; none refuses all.
	tok.Set("rotated")
	for auth, want := range map[string]int{"Bearer s3cret-token": 401, "Bearer rotated": 200} {
		r := httptest.NewRequest("GET", "/api/v1/stats", nil)
		r.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("after rotation %q: %d, want %d", auth, w.Code, want)
		}
	}
	tok.Set("")
	r := httptest.NewRequest("GET", "/api/v1/stats", nil)
	r.Header.Set("Authorization", "Bearer ")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 401 {
		t.Errorf("empty token: %d", w.Code)
	}
}
