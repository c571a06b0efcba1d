package presenced

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/presenced/presenced/listener"
	"github.com/presenced/presenced/stats"
)

// Stats returns every figure of the broker, read now: presence's (see
// Plugin.Stats) and the broker's own (its listeners', its authentication's
// and its admin port's), by the names of the metrics. For one release its
// JSON also carries the objects these had before: "listeners" (by
// listener), "auth" (with an authentication method) and "admin_refused".
func (b *Broker) Stats() stats.Snapshot {
	var s stats.Snapshot
	if b.presence != nil {
		s = b.presence.Stats()
	} else {
		s = s.Merge(stats.Snapshot{Extra: map[string]any{"node": b.cfg.NodeID, "runtime": ReadRuntimeStats()}})
	}
	s = s.Merge(b.table.Snapshot())
	listeners := map[string]listener.Stats{}
	for name, l := range b.listeners() {
		listeners[name] = l.Stats()
	}
	legacy := map[string]any{"listeners": listeners}
	if b.auth != nil {
		a := &b.auth.Stats
		legacy["auth"] = map[string]int64{"accepted": a.Accepted.Load(), "anonymous": a.Anonymous.Load(),
			"refused": a.Refused.Load(), "client_id_denied": a.ClientIDDenied.Load(),
			"expired": a.Expired.Load(), "revoked": a.Revoked.Load()}
	}
	if b.adminToken != nil {
		legacy["admin_refused"] = b.adminToken.Refused.Load()
	}
	return s.Merge(stats.Snapshot{Extra: legacy})
}

// Collector returns the broker's metrics: presence's and its own.
func (b *Broker) Collector() prometheus.Collector {
	if b.presence == nil {
		return b.table
	}
	return collectors{b.presence.Collector(), b.table}
}

// statsListener is what the figures read of a listener.
type statsListener interface{ Stats() listener.Stats }

// listeners returns the listeners bound, by name.
func (b *Broker) listeners() map[string]statsListener {
	out := map[string]statsListener{}
	if b.tcp != nil {
		out["tcp"] = b.tcp
	}
	if b.ws != nil {
		out["ws"] = b.ws
	}
	return out
}

// buildTable is the broker's own figures.
func (b *Broker) buildTable() *stats.Table {
	perListener := func(name, help string, kind stats.Kind, read func(listener.Stats) int64) stats.Stat {
		return stats.Stat{Name: name, Help: help, Kind: kind, Labels: []string{"listener"},
			Read: func(emit func(float64, ...string)) {
				for n, l := range b.listeners() {
					emit(float64(read(l.Stats())), n)
				}
			}}
	}
	authResults := stats.Stat{Name: "auth_connects_total", Kind: stats.Counter, Labels: []string{"result"},
		Help: "CONNECTs the authentication decided, by result (accepted, anonymous, refused: bad credentials, client_id_denied, throttled: a password from an address that failed too often, busy: no turn for a password check).",
		Read: func(emit func(float64, ...string)) {
			if b.auth == nil {
				return
			}
			a := &b.auth.Stats
			emit(float64(a.Accepted.Load()), "accepted")
			emit(float64(a.Anonymous.Load()), "anonymous")
			emit(float64(a.Refused.Load()), "refused")
			emit(float64(a.ClientIDDenied.Load()), "client_id_denied")
			emit(float64(a.Throttled.Load()), "throttled")
			emit(float64(a.Busy.Load()), "busy")
		}}
	passwordChecks := stats.Stat{Name: "auth_password_checks_total", Kind: stats.Counter, Labels: []string{"result"},
		Help: "Password checks by what they cost: hashed (a bcrypt comparison), cached (a verified password, no bcrypt), throttled (refused before hashing: the address failed too often), busy (refused: no turn within auth.passwords.queue_wait).",
		Read: func(emit func(float64, ...string)) {
			if b.creds == nil {
				return
			}
			p := b.creds.PasswordStats()
			emit(float64(p.Hashed.Load()), "hashed")
			emit(float64(p.Cached.Load()), "cached")
			emit(float64(p.Throttled.Load()), "throttled")
			emit(float64(p.Busy.Load()), "busy")
		}}
	throttledAddrs := stats.Stat{Name: "auth_password_failing_addresses", Kind: stats.Gauge,
		Help: "Addresses (IPv4, IPv6 /64) with recent password failures kept by the throttle (at most auth.passwords.addresses).",
		Read: func(emit func(float64, ...string)) {
			if b.creds != nil {
				emit(float64(b.creds.ThrottledAddresses()))
			}
		}}
	authEnded := stats.Stat{Name: "auth_sessions_ended_total", Kind: stats.Counter, Labels: []string{"reason"},
		Help: "Connections the authentication ended: expired (the token's exp passed), revoked (the user was removed from the password file, on reload).",
		Read: func(emit func(float64, ...string)) {
			if b.auth == nil {
				return
			}
			emit(float64(b.auth.Stats.Expired.Load()), "expired")
			emit(float64(b.auth.Stats.Revoked.Load()), "revoked")
		}}
	adminRefused := stats.Stat{Name: "admin_refused_total", Kind: stats.Counter,
		Help: "Admin requests refused for a missing or wrong bearer token.",
		Read: func(emit func(float64, ...string)) {
			if b.adminToken != nil {
				emit(float64(b.adminToken.Refused.Load()))
			}
		}}
	adminSite := stats.Stat{Name: "admin_site_refused_total", Kind: stats.Counter, Labels: []string{"reason"},
		Help: "Admin requests refused as a web page's: cross_site (a mutating request from another site), host (a Host name not allowed: DNS rebinding).",
		Read: func(emit func(float64, ...string)) {
			if b.adminSite != nil {
				emit(float64(b.adminSite.CrossSite.Load()), "cross_site")
				emit(float64(b.adminSite.ForeignHost.Load()), "host")
			}
		}}
	t := stats.New(
		perListener("listener_connections", "Connections a listener accepted and has not closed yet.", stats.Gauge,
			func(s listener.Stats) int64 { return s.Open }),
		perListener("listener_backlogged_connections", "A listener's connections with bytes waiting for their client now.", stats.Gauge,
			func(s listener.Stats) int64 { return s.Backlogged }),
		perListener("listener_backlog_bytes", "Bytes waiting to be written to a listener's clients.", stats.Gauge,
			func(s listener.Stats) int64 { return s.BacklogBytes }),
		perListener("listener_slow_consumers_total", "Connections a listener closed because their client did not read.", stats.Counter,
			func(s listener.Stats) int64 { return s.SlowConsumers }),
		perListener("listener_packets_too_large_total", "Connections ended for a packet over mqtt.max_packet_size.", stats.Counter,
			func(s listener.Stats) int64 { return s.TooLarge }),
		perListener("listener_tls_failures_total", "TLS handshakes that failed or timed out.", stats.Counter,
			func(s listener.Stats) int64 { return s.TLSFailures }),
		perListener("listener_tls_plaintext_total", "TLS handshakes that failed because the client spoke plaintext (plain MQTT, say) to the TLS port; counted in listener_tls_failures_total too.", stats.Counter,
			func(s listener.Stats) int64 { return s.TLSPlaintext }),
		authResults, authEnded, adminRefused, passwordChecks, throttledAddrs, adminSite,
	)
	t.Add(b.adminActionsStats()...)
	t.Add(b.canaryStats()...)
	return t
}
