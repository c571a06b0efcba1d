package admin

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// TestConsoleServed: the console's three files are served with their
// types, a strict Content-Security-Policy (no inline script), nosniff, an
// ETag that a revalidation answers 304, and gzip to a browser that takes
// it; the page names no other origin (no CDN) and has no inline script.
func TestConsoleServed(t *testing.T) {
	src, _ := fakeSource(false)
	h := Handler(src)
	for path, ctype := range map[string]string{"/": "text/html", "/console/app.js": "text/javascript", "/console/style.css": "text/css"} {
		w := do(h, "GET", path, "")
		if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), ctype) {
			t.Fatalf("%s: %d %q", path, w.Code, w.Header().Get("Content-Type"))
		}
		csp := w.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "default-src 'none'") {
			t.Fatalf("%s: CSP %q", path, csp)
		}
		if w.Header().Get("X-Content-Type-Options") != "nosniff" || w.Header().Get("Cache-Control") != "no-cache" {
			t.Fatalf("%s: headers %v", path, w.Header())
		}
		body := w.Body.String()
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Fatalf("%s names another origin", path)
		}
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("If-None-Match", w.Header().Get("ETag"))
		w2 := httptest.NewRecorder()
		h.ServeHTTP(w2, r)
		if w2.Code != http.StatusNotModified {
			t.Fatalf("%s revalidated: %d, want 304", path, w2.Code)
		}
		r = httptest.NewRequest("GET", path, nil)
		r.Header.Set("Accept-Encoding", "br, gzip;q=0.8")
		w3 := httptest.NewRecorder()
		h.ServeHTTP(w3, r)
		zr, err := gzip.NewReader(w3.Body)
		if err != nil || w3.Header().Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s gzip: %v %q", path, err, w3.Header().Get("Content-Encoding"))
		}
		unz, _ := io.ReadAll(zr)
		if !bytes.Equal(unz, []byte(body)) {
			t.Fatalf("%s: gzip differs from the file", path)
		}
	}
	page := do(h, "GET", "/", "").Body.String()
	if strings.Contains(page, "<script>") || regexp.MustCompile(`\son[a-z]+=`).MatchString(page) || strings.Contains(page, "style=") {
		t.Fatal("the page has inline script or style, which the CSP refuses")
	}
	if w := do(h, "GET", "/console/other.js", ""); w.Code != http.StatusNotFound {
		t.Fatalf("an unknown console file: %d", w.Code)
	}
	raw, gz := ConsoleSize()
	if raw > 64<<10 || gz > 20<<10 {
		t.Fatalf("the console weighs %d bytes (%d gzipped): keep it small", raw, gz)
	}
	t.Logf("console: %d bytes, %d gzipped", raw, gz)
}

// TestConsoleWithoutToken: behind a Token, the console's files are served
// without one (they hold no data), the API is not, and the token is never
// taken from a cookie or the URL.
func TestConsoleWithoutToken(t *testing.T) {
	src, _ := fakeSource(false)
	src.Nodes = func(context.Context) ([]presence.NodeStatus, error) { return nil, nil }
	tok, _ := LoadToken("s3cret", "")
	h := tok.Wrap(Handler(src))
	for _, p := range []string{"/", "/console/app.js", "/console/style.css"} {
		if w := do(h, "GET", p, ""); w.Code != http.StatusOK {
			t.Fatalf("%s without a token: %d", p, w.Code)
		}
	}
	for _, p := range []string{"/api/v1/nodes", "/api/v1/stats", "/nothing", "/api/v1/nodes?token=s3cret", "/api/v1/nodes?access_token=s3cret"} {
		if w := do(h, "GET", p, ""); w.Code != http.StatusUnauthorized {
			t.Fatalf("%s without a token: %d", p, w.Code)
		}
	}
	r := httptest.NewRequest("GET", "/api/v1/nodes", nil)
	r.AddCookie(&http.Cookie{Name: "token", Value: "s3cret"})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("a token in a cookie: %d", w.Code)
	}
	if w := do(h, "POST", "/", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("POST / without a token: %d", w.Code)
	}
}

// TestNodesEndpoint: GET /api/v1/nodes lists the nodes by name in the
// node topics' JSON; a store error is a 503.
func TestNodesEndpoint(t *testing.T) {
	src, _ := fakeSource(false)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fail := false
	src.Nodes = func(context.Context) ([]presence.NodeStatus, error) {
		if fail {
			return nil, presence.ErrBadNode
		}
		return []presence.NodeStatus{
			{Node: "b", State: presence.NodeDown, Incarnation: "i2", At: at, ReportedBy: "a"},
			{Node: "a", State: presence.NodeUp, Sessions: 3, Incarnation: "i1", At: at},
		}, nil
	}
	h := Handler(src)
	w := do(h, "GET", "/api/v1/nodes", "")
	want := `{"nodes":[{"node":"a","state":"up","sessions":3,"incarnation":"i1","at":"2026-01-02T03:04:05.000Z"},` +
		`{"node":"b","state":"down","sessions":0,"incarnation":"i2","reported_by":"a","at":"2026-01-02T03:04:05.000Z"}]}` + "\n"
	if w.Code != http.StatusOK || w.Body.String() != want {
		t.Fatalf("nodes: %d %s", w.Code, w.Body)
	}
	fail = true
	if w := do(h, "GET", "/api/v1/nodes", ""); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("a store error: %d", w.Code)
	}
}
