package admin

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"strings"
)

// The web console: three static files embedded in the binary (no CDN, no
// build step), served at / and /console/. They hold no data, so they are
// served without the token (Token lets them through); every call the page
// makes to the API sends the token, which the operator types once and the
// tab keeps (sessionStorage), as a bearer header: never in a cookie or a
// URL, so a cross-site page can make the browser send nothing that
// authenticates.
//
//go:embed console/index.html console/app.js console/style.css
var consoleFS embed.FS

// consoleCSP allows the page its own script and style and its own API, and
// nothing else: no inline script, no frame, no form posted elsewhere.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleFile is one embedded file, ready to serve.
type consoleFile struct {
	ctype string
	raw   []byte
	gz    []byte
	etag  string
}

// consoleFiles are the console's files by URL path.
var consoleFiles = loadConsole()

func loadConsole() map[string]consoleFile {
	files := map[string]struct{ name, ctype string }{
		"/":                  {"console/index.html", "text/html; charset=utf-8"},
		"/console/app.js":    {"console/app.js", "text/javascript; charset=utf-8"},
		"/console/style.css": {"console/style.css", "text/css; charset=utf-8"},
	}
	out := make(map[string]consoleFile, len(files))
	for path, f := range files {
		raw, err := consoleFS.ReadFile(f.name)
		if err != nil {
			panic("admin: console file missing: " + f.name)
		}
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		_, _ = zw.Write(raw)
		_ = zw.Close()
		sum := sha256.Sum256(raw)
		out[path] = consoleFile{ctype: f.ctype, raw: raw, gz: gz.Bytes(), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return out
}

// ConsoleSize returns the console's weight: the bytes of its files, raw
// and gzipped (as served to a browser that accepts gzip).
func ConsoleSize() (raw, gzipped int) {
	for _, f := range consoleFiles {
		raw += len(f.raw)
		gzipped += len(f.gz)
	}
	return raw, gzipped
}

// isConsole reports whether path is one of the console's files (served
// without the token: they hold no data).
func isConsole(path string) bool {
	_, ok := consoleFiles[path]
	return ok
}

// consoleRoutes serves the console's files.
func consoleRoutes(mux *http.ServeMux) {
	serve := func(f consoleFile) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("Content-Security-Policy", consoleCSP)
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("X-Frame-Options", "DENY")
			h.Set("Referrer-Policy", "no-referrer")
			h.Set("Cross-Origin-Opener-Policy", "same-origin")
			h.Set("Cache-Control", "no-cache") // revalidated (ETag): a new binary's console is seen at once
			h.Set("ETag", f.etag)
			h.Set("Vary", "Accept-Encoding")
			h.Set("Content-Type", f.ctype)
			if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, f.etag) {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			body := f.raw
			if acceptsGzip(r.Header.Get("Accept-Encoding")) {
				h.Set("Content-Encoding", "gzip")
				body = f.gz
			}
			_, _ = w.Write(body)
		}
	}
	mux.HandleFunc("GET /{$}", serve(consoleFiles["/"]))
	mux.HandleFunc("GET /console/app.js", serve(consoleFiles["/console/app.js"]))
	mux.HandleFunc("GET /console/style.css", serve(consoleFiles["/console/style.css"]))
}

// acceptsGzip reports whether an Accept-Encoding header takes gzip.
func acceptsGzip(ae string) bool {
	for _, part := range strings.Split(ae, ",") {
		name, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
			return true
		}
	}
	return false
}
