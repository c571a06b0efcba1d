package node

import (
	"encoding/json"
	"net/http"
	"sync/atomic"

	"github.com/presenced/presenced/presence"
)

// adminHandler serves the admin port:
//
//	GET /healthz                        200 "ok"
//	GET /readyz                         200 "ready", or 503 "degraded" while Redis is unreachable
//	GET /api/v1/users/{user}            the retained presence JSON, or 404
//	GET /api/v1/users/{user}/sessions   live and recently ended sessions, with end reasons
//	GET /api/v1/stats                   counters
func (n *Node) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !n.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("degraded: redis unreachable; connections are served and presence changes held\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("GET /api/v1/users/{user}", func(w http.ResponseWriter, r *http.Request) {
		payload, ok := n.Publisher.Get(r.PathValue("user"))
		if !ok {
			httpError(w, http.StatusNotFound, "user never seen")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(payload)
	})
	mux.HandleFunc("GET /api/v1/users/{user}/sessions", func(w http.ResponseWriter, r *http.Request) {
		u, ok, err := n.store.User(r.Context(), r.PathValue("user"))
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
		writeJSON(w, n.Stats())
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

// Stats is a snapshot of the node's counters.
type Stats struct {
	Node            string `json:"node"`
	Connections     int64  `json:"connections"`
	TrackedSessions int    `json:"tracked_sessions"`
	RetainedUsers   int    `json:"retained_users"`
	TrackerDepth    int64  `json:"tracker_queue_depth"`
	TrackerRetrying int64  `json:"tracker_retrying"`
	PublisherDepth  int64  `json:"publisher_queue_depth"`
	Opened          int64  `json:"sessions_opened"`
	Ended           int64  `json:"sessions_ended"`
	Updated         int64  `json:"sessions_updated"`
	StaleWrites     int64  `json:"stale_writes"`
	StaleEvents     int64  `json:"stale_events"`
	StoreErrors     int64  `json:"store_errors"`
	LostSessions    int64  `json:"lost_sessions"`
	Published       int64  `json:"published"`
	Coalesced       int64  `json:"coalesced"`
	OldVersions     int64  `json:"old_versions_dropped"`
	SetAccepted     int64  `json:"set_accepted"`
	SetRejected     int64  `json:"set_rejected"`
	WritesDenied    int64  `json:"writes_denied"`
	WillsDiscarded  int64  `json:"wills_discarded"`
	WillsSuppressed int64  `json:"wills_suppressed"`
	BadIdentity     int64  `json:"bad_identity"`
	DroppedForQueue int64  `json:"dropped_full_queue"`
	Resent          int64  `json:"resent"`
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	t, p, h := &n.Tracker.Stats, &n.Publisher.Stats, &n.Hook.Counters
	return Stats{
		Node:            n.cfg.NodeID,
		Connections:     atomic.LoadInt64(&n.Server.Info.ClientsConnected),
		TrackedSessions: n.Tracker.Len(),
		RetainedUsers:   n.Publisher.Users(),
		TrackerDepth:    t.Depth.Load(),
		TrackerRetrying: t.Retrying.Load(),
		PublisherDepth:  p.Depth.Load(),
		Opened:          t.Opened.Load(),
		Ended:           t.Ended.Load(),
		Updated:         t.Updated.Load(),
		StaleWrites:     t.Stale.Load(),
		StaleEvents:     t.StaleEvents.Load(),
		StoreErrors:     t.Errors.Load(),
		LostSessions:    t.Lost.Load(),
		Published:       p.Published.Load(),
		Coalesced:       p.Coalesced.Load(),
		OldVersions:     p.Old.Load(),
		SetAccepted:     h.SetAccepted.Load(),
		SetRejected:     h.SetRejected.Load(),
		WritesDenied:    h.WritesDenied.Load(),
		WillsDiscarded:  h.WillsDiscarded.Load(),
		WillsSuppressed: h.WillsSuppressed.Load(),
		BadIdentity:     h.BadIdentity.Load(),
		DroppedForQueue: h.Dropped.Load(),
		Resent:          p.Resent.Load(),
	}
}
