package presenced

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"time"

	"github.com/presenced/presenced/auth"
	"github.com/presenced/presenced/canary"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/slo"
	"github.com/presenced/presenced/stats"
)

// The canary (package canary, docs/slo.md): the binary's, since it
// connects to the broker's own TCP listener. NewBroker makes its secret
// and has the authentication admit it (canaryCredentials); Start starts it
// once the listeners serve, and stop stops it before they close.

// SLOObjective is the objective the canary's burn-rate alerts hold the
// detection SLI to (deploy/prometheus/alerts.yml): 99 % of the ends shown
// within their bound.
const SLOObjective = 0.99

// canaryState is the broker's canary: its secret, the accounting and the
// canary itself (nil while off).
type canaryState struct {
	secret []byte
	acct   *slo.Accounting
	c      *canary.Canary
}

// newCanaryState makes the canary's secret (32 random bytes, never written
// anywhere) and accounting when the canary is enabled.
func (b *Broker) newCanaryState() error {
	if !b.cfg.Canary.Enabled || b.cfg.Presence.Mode == "off" {
		return nil
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("canary secret: %w", err)
	}
	b.canary = &canaryState{secret: secret, acct: slo.New(slo.Options{Window: b.cfg.Canary.Window.D()})}
	return nil
}

// canaryCredentials are the broker's credentials with the canary's
// admitted: next unless the canary is on.
func (b *Broker) canaryCredentials(next *auth.Authenticator) auth.Credentials {
	if b.canary == nil {
		return next
	}
	return &canaryCredentials{next: next, secret: b.canary.secret}
}

// canaryCredentials admit the canary's connections by the process's secret
// (a synthetic user: its name begins with canary.UserPrefix; the observer:
// no username, a service account), and refuse any other credential that
// would authenticate a name the canary reserves.
type canaryCredentials struct {
	next   *auth.Authenticator
	secret []byte
}

// MethodCanary is the authentication method of the canary's connections.
const MethodCanary = "canary"

func (c *canaryCredentials) Enabled() bool { return c.next.Enabled() }

func (c *canaryCredentials) Authenticate(username string, password []byte, clientID string, peer *x509.Certificate) (auth.Identity, error) {
	return c.AuthenticateFrom("", username, password, clientID, peer)
}

func (c *canaryCredentials) AuthenticateFrom(remote, username string, password []byte, clientID string, peer *x509.Certificate) (auth.Identity, error) {
	if len(password) == len(c.secret) && subtle.ConstantTimeCompare(password, c.secret) == 1 {
		switch {
		case username == "":
			return auth.Identity{Method: MethodCanary, Observer: true}, nil
		case canary.IsUser(username):
			return auth.Identity{Method: MethodCanary, User: username}, nil
		}
	}
	id, err := c.next.AuthenticateFrom(remote, username, password, clientID, peer)
	if err == nil && canary.IsUser(id.User) {
		return auth.Identity{}, fmt.Errorf("%w: the names beginning %q are the canary's", auth.ErrDenied, canary.UserPrefix)
	}
	return id, err
}

// Current keeps the canary's connections: their secret lasts the process.
func (c *canaryCredentials) Current(id auth.Identity) bool {
	return id.Method == MethodCanary || c.next.Current(id)
}

// startCanary starts the canary (once the listeners serve).
func (b *Broker) startCanary() {
	if b.canary == nil || b.tcp == nil {
		return
	}
	k := b.cfg.Canary
	ends := make([]slo.Kind, len(k.Ends))
	for i, e := range k.Ends {
		ends[i] = slo.Kind(e)
	}
	var grace time.Duration
	if g := b.cfg.Presence.OfflineGrace; g != nil {
		grace = g.D()
	}
	var cfg *tls.Config
	if b.tls != nil {
		// Its own listener, on loopback: the certificate names the
		// service, not 127.0.0.1.
		cfg = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // loopback to this process
	}
	p := b.presence
	b.canary.c = canary.New(canary.Options{
		Node: b.cfg.NodeID, Addr: loopback(b.tcp.Address()), TLS: cfg, Prefix: b.cfg.Presence.TopicPrefix,
		Separator: b.cfg.Identity.Separator, Secret: b.canary.secret,
		Users: k.Users, Interval: k.Interval.D(), KeepAlive: k.KeepAlive.D(), Grace: grace, Ends: ends,
		Move: p.Move, Nodes: func(ctx context.Context) ([]string, error) { return p.upNodes(ctx) },
		Acct: b.canary.acct, Log: b.log.With("component", "canary"),
	})
	b.canary.c.Start()
}

// stopCanary stops the canary (before the listeners close).
func (b *Broker) stopCanary() {
	if b.canary != nil && b.canary.c != nil {
		b.canary.c.Stop()
	}
}

// loopback is addr with an unspecified host (":1883", "0.0.0.0:1883",
// "[::]:1883") made the loopback address.
func loopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if ip != nil && ip.To4() == nil {
			return net.JoinHostPort("::1", port)
		}
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// SLO is what GET /api/v1/slo answers.
type SLO struct {
	Node      string  `json:"node"`
	Objective float64 `json:"objective"`
	// Bound is this node's synthetic users' detection bound (1.5 ×
	// canary.keepalive + presence.offline_grace + 1 s); the other nodes'
	// ends are held to their own, which their plans carry.
	Bound float64 `json:"bound_seconds"`
	slo.Report
	Connections int64 `json:"canary_connections"`
	Watched     int64 `json:"watched_users"`
}

// SLO returns the SLO the canary measures (nil while it is off).
func (b *Broker) SLO() *SLO {
	if b.canary == nil {
		return nil
	}
	s := &SLO{Node: b.cfg.NodeID, Objective: SLOObjective, Bound: b.cfg.CanaryBound().Seconds(), Report: b.canary.acct.Report(time.Now())}
	if c := b.canary.c; c != nil {
		s.Connections, s.Watched = c.Stats.Connections.Load(), c.Stats.Watched.Load()
	}
	return s
}

// canaryStats are the canary's figures: zero while it is off.
func (b *Broker) canaryStats() []stats.Stat {
	counts := func() slo.Counts {
		if b.canary == nil {
			return slo.Counts{}
		}
		return b.canary.acct.Counts()
	}
	own := func(read func(*canary.Stats) int64) func() int64 {
		return func() int64 {
			if b.canary == nil || b.canary.c == nil {
				return 0
			}
			return read(&b.canary.c.Stats)
		}
	}
	perKind := func(name, help string, read func(slo.Counts) [4]int64) stats.Stat {
		return stats.Stat{Name: name, Help: help, Kind: stats.Counter, Labels: []string{"kind"},
			Read: func(emit func(float64, ...string)) {
				v := read(counts())
				for i, k := range slo.Kinds {
					emit(float64(v[i]), string(k))
				}
			}}
	}
	value := func(name, help string, kind stats.Kind, read func(slo.Counts) float64) stats.Stat {
		return stats.Stat{Name: name, Help: help, Kind: kind, Read: func(emit func(float64, ...string)) { emit(read(counts())) }}
	}
	quantiles := func(now time.Time) ([4]float64, float64) {
		if b.canary == nil {
			return [4]float64{-1, -1, -1, -1}, -1
		}
		return b.canary.acct.Quantiles(now)
	}
	return []stats.Stat{
		perKind("canary_ends_total", "Ends of the other nodes' synthetic users this node's canary observed (shown or missed), by end kind: clean, rst, silence, drain.",
			func(c slo.Counts) [4]int64 { return c.Ends }),
		perKind("canary_ends_late_total", "Of those, the ends shown later than their bound (1.5 × keep-alive + offline grace + 1 s) or never: the detection SLI's errors.",
			func(c slo.Counts) [4]int64 { return c.Late }),
		perKind("canary_ends_missed_total", "Of those, the ends never shown before the synthetic user's next session.",
			func(c slo.Counts) [4]int64 { return c.Missed }),
		{Name: "canary_detection_seconds_p99", Kind: stats.Gauge, Labels: []string{"kind"},
			Help: "The p99 of the detection latency (the end to the offline shown) over canary.window, by end kind; -1 with no end; a missed end counts as the time it was waited for (a lower bound).",
			Read: func(emit func(float64, ...string)) {
				d, _ := quantiles(time.Now())
				for i, k := range slo.Kinds {
					emit(d[i], string(k))
				}
			}},
		value("canary_connected_seconds_total", "Seconds the observed synthetic users were in fact connected (from their session shown online to its planned end).", stats.Counter,
			func(c slo.Counts) float64 { return c.Connected }),
		value("canary_false_offline_seconds_total", "Of those, the seconds they were shown offline: false offline.", stats.Counter,
			func(c slo.Counts) float64 { return c.FalseOff }),
		value("canary_propagations_total", "Synthetic sessions' opens shown here, each a propagation sample (the commit's version stamp to the message shown).", stats.Counter,
			func(c slo.Counts) float64 { return float64(c.Propagated) }),
		value("canary_propagation_seconds_total", "The sum of the propagation samples, in seconds.", stats.Counter,
			func(c slo.Counts) float64 { return c.Propagation }),
		value("canary_propagation_skewed_total", "Propagation samples below zero (a clock ahead of another), counted as zero.", stats.Counter,
			func(c slo.Counts) float64 { return float64(c.Skewed) }),
		{Name: "canary_propagation_seconds_p99", Kind: stats.Gauge,
			Help: "The p99 of the cross-node propagation over canary.window; -1 with no sample.",
			Read: func(emit func(float64, ...string)) { _, p := quantiles(time.Now()); emit(p) }},
		gauge("canary_connections", "The canary's connections open now (synthetic users and the observer).", own(func(s *canary.Stats) int64 { return s.Connections.Load() })),
		gauge("canary_watched_users", "Synthetic users of other nodes the observer follows now.", own(func(s *canary.Stats) int64 { return s.Watched.Load() })),
		counter("canary_sessions_total", "Synthetic sessions this node's canary connected.", own(func(s *canary.Stats) int64 { return s.Cycles.Load() })),
		counter("canary_connect_failures_total", "Synthetic sessions that could not connect (refused, or the listener did not answer).", own(func(s *canary.Stats) int64 { return s.ConnectFailed.Load() })),
		counter("canary_ends_carried_late_total", "Synthetic sessions ended more than a second after their plan (this node was slow or stopped).", own(func(s *canary.Stats) int64 { return s.Late.Load() })),
		counter("canary_drain_failures_total", "Drain ends the node could not carry out (it found no such client): the socket was reset instead.", own(func(s *canary.Stats) int64 { return s.MoveFailed.Load() })),
		counter("canary_observer_reconnects_total", "Observer connections lost and made again.", own(func(s *canary.Stats) int64 { return s.Reconnects.Load() })),
	}
}

// upNodes lists the nodes up or draining (this one's included).
func (p *Plugin) upNodes(ctx context.Context) ([]string, error) {
	all, err := p.NodeStates(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(all))
	for _, st := range all {
		if st.State != presence.NodeDown {
			out = append(out, st.Node)
		}
	}
	return out, nil
}
