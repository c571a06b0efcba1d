// Package admin is the operators' HTTP API of a presenced node: health,
// readiness, a user's presence (the retained payload, byte for byte), a
// user's sessions with their end reasons, and every counter. An embedding
// program can mount Handler in its own mux.
package admin

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/presenced/presenced/presence"
)

// Source is what the admin API reads. With a presenced.Plugin p:
//
//	admin.Source{Ready: p.Ready, Retained: p.Retained, User: p.User, Stats: func() any { return p.Stats() }}
type Source struct {
	// Ready reports whether the store answers.
	Ready func() bool
	// Retained returns the retained payload of user.
	Retained func(user string) ([]byte, bool)
	// User returns a user's whole record.
	User func(ctx context.Context, user string) (presence.User, bool, error)
	// Stats returns the counters, as a JSON-encodable value.
	Stats func() any
}

// Handler serves:
//
//	GET /healthz                        200 "ok"
//	GET /readyz                         200 "ready", or 503 "degraded" while Redis is unreachable
//	GET /api/v1/users/{user}            the retained presence JSON, or 404
//	GET /api/v1/users/{user}/sessions   account, live and recently ended sessions, with end reasons
//	GET /api/v1/stats                   counters
func Handler(src Source) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !src.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("degraded: redis unreachable; connections are served and presence changes held\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("GET /api/v1/users/{user}", func(w http.ResponseWriter, r *http.Request) {
		payload, ok := src.Retained(r.PathValue("user"))
		if !ok {
			httpError(w, http.StatusNotFound, "user never seen")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(payload)
	})
	mux.HandleFunc("GET /api/v1/users/{user}/sessions", func(w http.ResponseWriter, r *http.Request) {
		u, ok, err := src.User(r.Context(), r.PathValue("user"))
		if err != nil {
			httpError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		if !ok {
			httpError(w, http.StatusNotFound, "user never seen")
			return
		}
		writeJSON(w, struct {
			User    string             `json:"user"`
			Account presence.Account   `json:"account"`
			Live    []presence.Session `json:"live"`
			Ended   []presence.Session `json:"ended"`
		}{u.Name, u.Account, nonNil(u.Sessions), nonNil(u.Ended)})
	})
	mux.HandleFunc("GET /api/v1/stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, src.Stats())
	})
	return mux
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
