package admin

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/presenced/presenced/presence"
)

// nodeRoutes serves GET /api/v1/nodes (with Source.Nodes): every node the
// store knows, by name, with its latest word (presence.NodeStatus, as
// presence/nodes/{node} carries it):
//
//	{"nodes":[{"node":"a","state":"up","sessions":12,"incarnation":"…","at":"…"}]}
//
// A node's session count is the one it last announced (every few seconds);
// the serving node's own is counted now.
func nodeRoutes(mux *http.ServeMux, src Source) {
	mux.HandleFunc("GET /api/v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), storeBudget)
		defer cancel()
		list, err := src.Nodes(ctx)
		if err != nil {
			httpError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		slices.SortFunc(list, func(a, b presence.NodeStatus) int { return strings.Compare(a.Node, b.Node) })
		writeJSON(w, map[string]any{"nodes": nonNil(list)})
	})
}
