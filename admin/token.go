package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
)

// Token guards a handler with a bearer token: every request but GET
// /healthz and GET /readyz (which probes call without credentials), and the
// console's static files (GET / and /console/*, which hold no data), must
// carry "Authorization: Bearer <token>". The comparison takes the same time
// whatever the token sent; the token is never logged. Set may change it at
// any time (a SIGHUP reading admin.token_file again).
type Token struct {
	sum     atomic.Pointer[[sha256.Size]byte] // of the token; nil: no token, every request refused
	file    string                            // the file the token is read from (LoadToken), "" for none
	Refused atomic.Int64                      // requests refused for a missing or wrong token
}

// Set makes token the one to present; an empty token refuses everything.
func (t *Token) Set(token string) {
	if token == "" {
		t.sum.Store(nil)
		return
	}
	sum := sha256.Sum256([]byte(token))
	t.sum.Store(&sum)
}

// Wrap returns h behind the token.
func (t *Token) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || isConsole(r.URL.Path)) {
			h.ServeHTTP(w, r)
			return
		}
		if !t.allows(r.Header.Get("Authorization")) {
			t.Refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer realm="presenced admin"`)
			httpError(w, http.StatusUnauthorized, "a bearer token is required (admin.token)")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// allows compares hashes, so that the time taken says nothing of the
// token's length or of how much of it matched.
func (t *Token) allows(header string) bool {
	want := t.sum.Load()
	scheme, got, ok := strings.Cut(header, " ")
	if want == nil || !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// LoadToken returns the token given, or read from file (trimmed) when file
// is set: admin.token or admin.token_file. Reload reads the file again.
func LoadToken(token, file string) (*Token, error) {
	t := &Token{file: file}
	if file == "" {
		t.Set(token)
		return t, nil
	}
	return t, t.Reload()
}

// Reload reads the token file again (on SIGHUP); a token given as a value
// stays as it is. On an error the token in use is kept.
func (t *Token) Reload() error {
	if t.file == "" {
		return nil
	}
	b, err := os.ReadFile(t.file)
	if err != nil {
		return fmt.Errorf("admin.token_file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return fmt.Errorf("admin.token_file %s: empty", t.file)
	}
	t.Set(token)
	return nil
}
