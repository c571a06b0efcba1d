package admin

import (
	"net"
	"net/http"
	"strings"
	"sync/atomic"
)

// Site keeps web pages away from the admin API, which a browser on the
// admin's machine can reach:
//   - a cross-site request to a mutating endpoint (any method but GET,
//     HEAD and OPTIONS) is refused: one whose Sec-Fetch-Site is neither
//     same-origin nor none, or, without it, whose Origin is not the
//     request's own host (net/http's CrossOriginProtection); a request
//     with neither header (curl, a program) is not a browser's and passes;
//   - with CheckHost, a request whose Host is a name other than localhost
//     (or a name under .localhost) and not in Hosts is refused: a page
//     whose own name was made to resolve to 127.0.0.1 (DNS rebinding)
//     sends its own name. An IP literal passes: a page cannot read the
//     answer of a request to an address that is not its own origin.
//
// Both answer 403 and count.
type Site struct {
	// Hosts are the Host names allowed besides loopback ("*" any), in
	// lower case, without a port.
	Hosts []string
	// CheckHost turns the Host check on (the binary: without a token, or
	// when admin.allowed_hosts is set).
	CheckHost bool

	CrossSite   atomic.Int64 // mutating requests refused as cross-site
	ForeignHost atomic.Int64 // requests refused for their Host
}

// Wrap returns h behind the checks.
func (s *Site) Wrap(h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.CrossSite.Add(1)
		httpError(w, http.StatusForbidden, "cross-site request refused")
	}))
	inner := cop.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.CheckHost && !s.hostAllowed(r.Host) {
			s.ForeignHost.Add(1)
			httpError(w, http.StatusForbidden, "Host not allowed (admin.allowed_hosts)")
			return
		}
		inner.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether the Host header host (with or without a
// port) names this machine's loopback, an IP address, or one of Hosts.
func (s *Site) hostAllowed(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" || net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	for _, a := range s.Hosts {
		if a == "*" || a == host {
			return true
		}
	}
	return false
}
