package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

// Source is what the admin API reads. With a presenced.Plugin p:
//
//	admin.Source{Ready: p.Ready, Retained: p.Retained, User: p.User, Stats: func() any { return p.Stats() }, Battles: p.Battles}
type Source struct {
	// Ready reports whether the store answers.
	Ready func() bool
	// Retained returns the retained payload of user.
	Retained func(user string) ([]byte, bool)
	// User returns a user's whole record.
	User func(ctx context.Context, user string) (presence.User, bool, error)
	// Stats returns the counters, as a JSON-encodable value.
	Stats func() any
	// Held returns what is held back from observers of user (its grace),
	// as a JSON-encodable value; Holds lists every user held. Nil: none.
	Held  func(user string) (any, bool)
	Holds func() any
	// Battles returns the takeover battles going on on this node. Nil: the
	// endpoint answers an empty list.
	Battles func() []hooks.Battle
	// Group returns a group's snapshot (the group topic's, which this
	// call starts keeping), false when the group does not exist. Nil: no
	// group endpoints.
	Group func(group string) (roster.Snapshot, bool)
	// Groups returns every group's name and size.
	Groups func() map[string]int
	// Groups writes, nil when the API may not write (it has no token).
	SetGroup      func(ctx context.Context, group string, members []string) error
	AddMembers    func(ctx context.Context, group string, users []string) error
	RemoveMembers func(ctx context.Context, group string, users []string) error
	DeleteGroup   func(ctx context.Context, group string) error
	// Draining reports whether the node drains (nil: never).
	Draining func() bool
	// Drain starts draining the node, which then stops; it returns at once
	// (false: a drain had begun already). Nil: no drain endpoint.
	Drain func() bool
	// Metrics serves GET /metrics (see Metrics). Nil: no metrics endpoint.
	Metrics http.Handler
	// Pprof serves Go's profiles at /debug/pprof/. They tell much about
	// the process (its command line among them): serve them only behind a
	// Token, or on loopback, as the binary does.
	Pprof bool
	// List returns a page of users read from the store, cluster-wide
	// (store.Store's List). Nil: no GET /api/v1/users.
	List func(ctx context.Context, q presence.ListQuery) (presence.ListPage, error)
	// Actions are the operator's actions on users (actions.go); nil when
	// the API may not act (it has no token): they answer 403.
	Actions Actions
	// Log has a line for each action and each drain, with who asked
	// (nil: none); Counts counts them (nil: not counted).
	Log    *slog.Logger
	Counts *ActionCounts
	// Nodes returns every node's latest state (GET /api/v1/nodes). Nil:
	// no such endpoint.
	Nodes func(ctx context.Context) ([]presence.NodeStatus, error)
	// Events fans out the changes this node publishes (GET
	// /api/v1/events). Nil: no such endpoint.
	Events *Events
	// Follow has this node hear users (their changes made on other nodes
	// are published here, and reach Events) until the returned stop is
	// called: the users an events stream names. Nil: only what the node
	// hears anyway.
	Follow func(users []string) (stop func())
	// Heartbeat is how often an idle events stream writes a comment
	// (default admin.Heartbeat).
	Heartbeat time.Duration
	// SLO returns the presence SLO the canary measures (GET /api/v1/slo),
	// as a JSON-encodable value. Nil: the canary is off (404).
	SLO func() any
}

// Limits of the admin API.
const (
	// MaxBatch is the most users one batch query may name.
	MaxBatch = 1000
	// MaxPage is the most members one group page holds (the default).
	MaxPage = 1000
	// maxBody bounds a request body.
	maxBody = 1 << 20
	// storeBudget bounds a store read an endpoint makes.
	storeBudget = 5 * time.Second
)

// Handler serves:
//
//	GET /healthz                        200 "ok"
//	GET /readyz                         200 "ready"; 503 "draining" while the node drains, "degraded" while Redis is unreachable
//	POST /api/v1/drain                  202 {"state":"draining"}: the node drains, then stops (see configs' drain section)
//	GET /api/v1/users                   a page of users from the store, cluster-wide (with Source.List):
//	                                    ?status=&group=&node=&prefix=&limit=&cursor= (list.go)
//	GET /api/v1/users/{user}            the retained presence JSON, or 404
//	GET /api/v1/users/{user}/sessions   account, live and recently ended sessions, with end reasons, and
//	                                    the change held back from observers (its grace), or null
//	GET /api/v1/held                    every change held back from observers, the users who flap
//	GET /api/v1/stats                   counters
//	GET /api/v1/battles                 the takeover battles going on on this node
//	POST /api/v1/users/batch            {"users":[...]} (at most MaxBatch): each user's retained presence, or null
//	GET /api/v1/groups                  every group's name and size
//	GET /api/v1/groups/{group}          the group's snapshot, a page of members at a time (?after=user&limit=n)
//	PUT /api/v1/groups/{group}          {"members":[...]}: the group with exactly these members
//	DELETE /api/v1/groups/{group}       the group removed
//	POST /api/v1/groups/{group}/members {"users":[...]}: added
//	DELETE /api/v1/groups/{group}/members/{user}
//	POST /api/v1/users/{user}/sessions/{client_id}/kick  [{"reason_code":152}]: 202 {"kicked":1} (Source.Actions)
//	POST /api/v1/users/{user}/kick      202 {"kicked":n}: every live session of the user
//	PUT /api/v1/users/{user}/account    {"status":"away","text":"..."}: 200 the user's presence JSON after it
//	DELETE /api/v1/users/{user}/account the account setting cleared: 200 the presence JSON
//	DELETE /api/v1/users/{user}         204: an offline user forgotten; 409 while a session is live
//	GET /metrics                        Prometheus metrics (with Source.Metrics)
//	GET /debug/pprof/...                Go's profiles, net/http/pprof (with Source.Pprof)
//	GET /                               the web console (console.go): static files, no data; GET /console/* its script and style
//	GET /api/v1/nodes                   every node's state and session count (with Source.Nodes)
//	GET /api/v1/events                  a text/event-stream of the changes this node publishes (with Source.Events;
//	                                    ?user=U (repeated) has this node hear those users meanwhile, &only=1 sends only theirs)
//
// The writes answer 403 unless the API is guarded by a token.
func Handler(src Source) http.Handler {
	mux := http.NewServeMux()
	healthRoutes(mux, src)
	userRoutes(mux, src)
	operationRoutes(mux, src)
	actionRoutes(mux, src)
	if src.Group != nil {
		groupRoutes(mux, src)
	}
	debugRoutes(mux, src)
	if src.List != nil {
		listRoutes(mux, src)
	}
	consoleRoutes(mux)
	if src.Nodes != nil {
		nodeRoutes(mux, src)
	}
	if src.Events != nil {
		eventRoutes(mux, src)
	}
	return mux
}

// healthRoutes serves /healthz and /readyz.
func healthRoutes(mux *http.ServeMux, src Source) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if src.Draining != nil && src.Draining() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("draining\n"))
			return
		}
		if !src.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("degraded: redis unreachable; connections are served and presence changes held\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
}

// userRoutes serves the users' presence: one user, one user's sessions, a
// batch of users.
func userRoutes(mux *http.ServeMux, src Source) {
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
		var held any // null: observers see the truth
		if src.Held != nil {
			if h, ok := src.Held(u.Name); ok {
				held = h
			}
		}
		dormant := u.Dormant // a sleeping device's session, while its check-in is awaited (expires_at: when it is missed); nil: none
		writeJSON(w, struct {
			User    string             `json:"user"`
			Account presence.Account   `json:"account"`
			Live    []presence.Session `json:"live"`
			Ended   []presence.Session `json:"ended"`
			Held    any                `json:"held"`
			Dormant *presence.Session  `json:"dormant,omitempty"`
		}{u.Name, u.Account, nonNil(u.Sessions), nonNil(u.Ended), held, dormant})
	})
	mux.HandleFunc("POST /api/v1/users/batch", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Users []string `json:"users"`
		}
		if !readJSON(w, r, &req) {
			return
		}
		if len(req.Users) > MaxBatch {
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%d users, at most %d", len(req.Users), MaxBatch))
			return
		}
		out := make(map[string]json.RawMessage, len(req.Users))
		for _, u := range req.Users {
			if payload, ok := src.Retained(u); ok {
				out[u] = payload
			} else {
				out[u] = json.RawMessage("null")
			}
		}
		writeJSON(w, map[string]any{"users": out})
	})
}

// operationRoutes serves the node's counters, what it holds back, its
// takeover battles and, with Source.Drain, the drain.
func operationRoutes(mux *http.ServeMux, src Source) {
	mux.HandleFunc("GET /api/v1/stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, src.Stats())
	})
	if src.Holds != nil {
		mux.HandleFunc("GET /api/v1/held", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, src.Holds())
		})
	}
	mux.HandleFunc("GET /api/v1/battles", func(w http.ResponseWriter, _ *http.Request) {
		var list []hooks.Battle
		if src.Battles != nil {
			list = src.Battles()
		}
		writeJSON(w, map[string]any{"battles": nonNil(list)})
	})
	mux.HandleFunc("GET /api/v1/slo", func(w http.ResponseWriter, _ *http.Request) {
		if src.SLO == nil {
			httpError(w, http.StatusNotFound, "the canary is off on this node (canary.enabled): no SLO is measured")
			return
		}
		writeJSON(w, src.SLO())
	})
	if src.Drain != nil {
		mux.HandleFunc("POST /api/v1/drain", func(w http.ResponseWriter, r *http.Request) {
			started := src.Drain()
			src.acted(r, ActionDrain, http.StatusAccepted, "started", started)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_ = json.NewEncoder(w).Encode(map[string]any{"state": "draining", "started": started})
		})
	}
}

// debugRoutes serves /metrics (with Source.Metrics) and /debug/pprof/
// (with Source.Pprof).
func debugRoutes(mux *http.ServeMux, src Source) {
	if src.Metrics != nil {
		mux.Handle("GET /metrics", src.Metrics)
	}
	if src.Pprof {
		profiling(mux)
	}
}

// groupRoutes serves the group endpoints.
func groupRoutes(mux *http.ServeMux, src Source) {
	mux.HandleFunc("GET /api/v1/groups", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"groups": src.Groups()})
	})
	mux.HandleFunc("GET /api/v1/groups/{group}", func(w http.ResponseWriter, r *http.Request) {
		s, ok := src.Group(r.PathValue("group"))
		if !ok {
			httpError(w, http.StatusNotFound, "no such group")
			return
		}
		limit := MaxPage
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxPage {
				httpError(w, http.StatusBadRequest, fmt.Sprintf("limit must be 1 to %d", MaxPage))
				return
			}
			limit = n
		}
		after := r.URL.Query().Get("after")
		i, _ := slices.BinarySearchFunc(s.Members, after, func(m roster.Member, u string) int { return strings.Compare(m.User, u) })
		if after != "" && i < len(s.Members) && s.Members[i].User == after {
			i++
		}
		page := s.Members[i:min(i+limit, len(s.Members))]
		next := ""
		if i+limit < len(s.Members) {
			next = page[len(page)-1].User
		}
		writeJSON(w, struct {
			roster.Snapshot
			Next string `json:"next,omitempty"` // the after= of the next page
		}{roster.Snapshot{Group: s.Group, Version: s.Version, Members: nonNil(page), Counts: s.Counts}, next})
	})
	write := func(fn func(w http.ResponseWriter, r *http.Request)) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			if src.SetGroup == nil {
				httpError(w, http.StatusForbidden, "group writes need admin.token (or admin.token_file)")
				return
			}
			if err := presence.ValidGroup(r.PathValue("group")); err != nil {
				httpError(w, http.StatusBadRequest, err.Error())
				return
			}
			fn(w, r)
		}
	}
	done := func(w http.ResponseWriter, err error) {
		if err != nil {
			httpError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	users := func(w http.ResponseWriter, r *http.Request, field string) ([]string, bool) {
		var req map[string][]string
		if !readJSON(w, r, &req) {
			return nil, false
		}
		for _, u := range req[field] {
			if err := presence.ValidUser(u); err != nil {
				httpError(w, http.StatusBadRequest, err.Error())
				return nil, false
			}
		}
		return req[field], true
	}
	mux.HandleFunc("PUT /api/v1/groups/{group}", write(func(w http.ResponseWriter, r *http.Request) {
		if m, ok := users(w, r, "members"); ok {
			done(w, src.SetGroup(r.Context(), r.PathValue("group"), m))
		}
	}))
	mux.HandleFunc("DELETE /api/v1/groups/{group}", write(func(w http.ResponseWriter, r *http.Request) {
		done(w, src.DeleteGroup(r.Context(), r.PathValue("group")))
	}))
	mux.HandleFunc("POST /api/v1/groups/{group}/members", write(func(w http.ResponseWriter, r *http.Request) {
		if m, ok := users(w, r, "users"); ok {
			done(w, src.AddMembers(r.Context(), r.PathValue("group"), m))
		}
	}))
	mux.HandleFunc("DELETE /api/v1/groups/{group}/members/{user}", write(func(w http.ResponseWriter, r *http.Request) {
		done(w, src.RemoveMembers(r.Context(), r.PathValue("group"), []string{r.PathValue("user")}))
	}))
}

// readJSON decodes a request body of at most maxBody bytes into v, or
// answers 400.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		httpError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return false
	}
	return true
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
