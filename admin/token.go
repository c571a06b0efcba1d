package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"sync/atomic"
)

// Token guards a handler with a bearer token: every request but GET
// /healthz and GET /readyz (which probes call without credentials) must
// carry "Authorization: Bearer <token>". The comparison takes the same time
// whatever the token sent; the token is never logged. Set may change it at
// any time (a SIGHUP reading admin.token_file again).
type Token struct {
	sum     atomic.Pointer[[sha256.Size]byte] // of the token; nil: no token, every request refused
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
		if r.Method == http.MethodGet && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz") {
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
