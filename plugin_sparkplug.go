package presenced

import (
	"time"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/sparkplug"
	"github.com/presenced/presenced/stats"
)

// Sparkplug is the sparkplug section: a Sparkplug B aware server (package
// sparkplug, docs/sparkplug.md), off by default.
type Sparkplug struct {
	Enabled         bool
	DropStaleDeaths bool          // drop a stale NDEATH instead of delivering it flagged
	MaxEdgeNodes    int           // edge nodes tracked (default 10000)
	ForgetAfter     time.Duration // an edge node dead this long is forgotten (default 1h)
}

// yaml is s as the YAML layer writes it.
func (s Sparkplug) yaml() configs.SparkplugConfig {
	return configs.SparkplugConfig{Enabled: s.Enabled, DropStaleDeaths: s.DropStaleDeaths,
		MaxEdgeNodes: s.MaxEdgeNodes, ForgetAfter: configs.Duration(s.ForgetAfter)}
}

// sparkplugFrom maps the YAML layer's sparkplug section.
func sparkplugFrom(y configs.SparkplugConfig) Sparkplug {
	return Sparkplug{Enabled: y.Enabled, DropStaleDeaths: y.DropStaleDeaths, MaxEdgeNodes: y.MaxEdgeNodes, ForgetAfter: y.ForgetAfter.D()}
}

// buildSparkplug makes the Sparkplug aware server's hook. It is built
// either way, so that its figures read zero when it is off, and added to
// the server only when enabled (addHooks), after presence's hooks: a will
// presence sent nowhere (a takeover, a drain) never reaches it as an
// NDEATH. A stale NDEATH will it drops goes where presence's discarded
// wills go, which the delivery hooks drop before any subscriber.
func (p *Plugin) buildSparkplug() *sparkplug.Hook {
	c := p.cfg.Sparkplug
	return sparkplug.New(sparkplug.Options{
		Server: p.srv, DropStaleDeaths: c.DropStaleDeaths, DiscardTopic: hooks.DiscardedWillTopic,
		Edges: sparkplug.EdgesOptions{Max: c.MaxEdgeNodes, ForgetAfter: c.ForgetAfter, LogEvery: time.Minute},
		Now:   p.now, Log: p.logFor("sparkplug"),
	})
}

// sparkplugStats are the figures of the Sparkplug aware server (zero
// while it is off).
func (p *Plugin) sparkplugStats() []stats.Stat {
	s := &p.sparkplug.Stats
	return []stats.Stat{
		gauge("sparkplug_edge_nodes", "Sparkplug edge nodes whose bdSeq this node tracks (sparkplug.max_edge_nodes).", func() int64 { n, _ := p.sparkplug.Edges(); return int64(n) }),
		counter("sparkplug_births_total", "Sparkplug NBIRTH messages published on this node.", s.Births.Load),
		counter("sparkplug_device_births_total", "Sparkplug DBIRTH messages published on this node.", s.DeviceBirths.Load),
		counter("sparkplug_certificates_total", "Births retained under $sparkplug/certificates/.", s.Certificates.Load),
		counter("sparkplug_certificate_errors_total", "Births whose retained copy failed.", s.CertificateFails.Load),
		counter("sparkplug_deaths_total", "Sparkplug NDEATH messages seen (wills and publishes).", s.Deaths.Load),
		counter("sparkplug_stale_deaths_total", "NDEATHs whose bdSeq was not the live NBIRTH's: the death of an earlier connection.", s.StaleDeaths.Load),
		counter("sparkplug_stale_deaths_dropped_total", "Stale NDEATHs dropped (sparkplug.drop_stale_deaths).", s.StaleDropped.Load),
		counter("sparkplug_payloads_malformed_total", "NBIRTH and NDEATH payloads that could not be read (delivered as they are, judged unknown).", s.Malformed.Load),
		counter("sparkplug_writes_refused_total", "Publishes and wills under $sparkplug/ refused (the server's namespace).", s.WritesRefused.Load),
		counter("sparkplug_edge_nodes_untracked_total", "NBIRTHs of edge nodes not tracked: sparkplug.max_edge_nodes were, none dead.", s.Untracked.Load),
		counter("sparkplug_edge_nodes_forgotten_total", "Edge nodes forgotten: dead for sparkplug.forget_after, or the longest dead evicted for a new one.", func() int64 { _, f := p.sparkplug.Edges(); return f }),
	}
}
