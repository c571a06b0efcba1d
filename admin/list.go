package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/presenced/presenced/presence"
)

// listTimeout bounds one list request's reads of the store.
const listTimeout = 10 * time.Second

// listRoutes serves GET /api/v1/users (with Source.List):
//
//	?status=S (repeatable, or comma-separated)&group=G&node=N&prefix=P&limit=L&cursor=C
//	-> {"users":[<retained presence JSON>...],"next":"<cursor, empty when done>","counts":{...},"examined":n}
//
// A bad limit, status, group name, filter or cursor answers 400; a group
// that does not exist 404; a store that does not answer 503.
func listRoutes(mux *http.ServeMux, src Source) {
	mux.HandleFunc("GET /api/v1/users", func(w http.ResponseWriter, r *http.Request) {
		q, err := listQuery(r)
		if err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), listTimeout)
		defer cancel()
		page, err := src.List(ctx, q)
		switch {
		case errors.Is(err, presence.ErrBadQuery):
			httpError(w, http.StatusBadRequest, err.Error())
			return
		case errors.Is(err, presence.ErrNoGroup):
			httpError(w, http.StatusNotFound, err.Error())
			return
		case err != nil:
			httpError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		users := make([]json.RawMessage, len(page.Users))
		for i, p := range page.Users {
			users[i] = p.AppendJSON(nil)
		}
		writeJSON(w, struct {
			Users    []json.RawMessage   `json:"users"`
			Next     string              `json:"next"`
			Counts   presence.ListCounts `json:"counts"`
			Examined int                 `json:"examined"`
		}{users, page.Next, page.Counts, page.Examined})
	})
}

// listQuery reads a list query from r's URL; the store checks its values.
func listQuery(r *http.Request) (presence.ListQuery, error) {
	v := r.URL.Query()
	q := presence.ListQuery{Group: v.Get("group"), Node: v.Get("node"), Prefix: v.Get("prefix"), Cursor: v.Get("cursor")}
	if len(v["status"]) > 16 {
		return q, errors.New("at most 16 status filters")
	}
	for _, s := range v["status"] {
		for _, one := range strings.Split(s, ",") {
			q.Statuses = append(q.Statuses, presence.Status(strings.TrimSpace(one)))
		}
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > presence.ListMax {
			return q, errors.New("limit must be 1 to " + strconv.Itoa(presence.ListMax))
		}
		q.Limit = n
	}
	return q, q.Validate()
}
