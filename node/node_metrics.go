package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/presenced/presenced/listener"
)

// The node's own metrics, beside presence's (presenced.Plugin.Collector):
// its listeners', its authentication's and its admin port's counters, read
// when scraped.
var (
	mListenerOpen = prometheus.NewDesc("presenced_listener_connections",
		"Connections a listener accepted and has not closed yet.", []string{"listener"}, nil)
	mBacklogBytes = prometheus.NewDesc("presenced_listener_backlog_bytes",
		"Bytes waiting to be written to a listener's clients.", []string{"listener"}, nil)
	mSlowConsumers = prometheus.NewDesc("presenced_listener_slow_consumers_total",
		"Connections a listener closed because their client did not read.", []string{"listener"}, nil)
	mTooLarge = prometheus.NewDesc("presenced_listener_packets_too_large_total",
		"Connections ended for a packet over mqtt.max_packet_size.", []string{"listener"}, nil)
	mTLSFailures = prometheus.NewDesc("presenced_listener_tls_failures_total",
		"TLS handshakes that failed or timed out.", []string{"listener"}, nil)
	mAuth = prometheus.NewDesc("presenced_auth_connects_total",
		"CONNECTs the authentication decided, by result (accepted, anonymous, refused: bad credentials, client_id_denied).", []string{"result"}, nil)
	mAdminRefused = prometheus.NewDesc("presenced_admin_refused_total",
		"Admin requests refused for a missing or wrong bearer token.", nil, nil)
)

// collector is the node's collector.
type collector struct{ n *Node }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mListenerOpen, mBacklogBytes, mSlowConsumers, mTooLarge, mTLSFailures, mAuth, mAdminRefused} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	emit := func(d *prometheus.Desc, t prometheus.ValueType, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, float64(v), labels...)
	}
	n := c.n
	listen := func(name string, s listener.Stats) {
		emit(mListenerOpen, prometheus.GaugeValue, s.Open, name)
		emit(mBacklogBytes, prometheus.GaugeValue, s.BacklogBytes, name)
		emit(mSlowConsumers, prometheus.CounterValue, s.SlowConsumers, name)
		emit(mTooLarge, prometheus.CounterValue, s.TooLarge, name)
		emit(mTLSFailures, prometheus.CounterValue, s.TLSFailures, name)
	}
	if n.tcp != nil {
		listen("tcp", n.tcp.Stats())
	}
	if n.ws != nil {
		listen("ws", n.ws.Stats())
	}
	if n.Auth != nil {
		a := &n.Auth.Stats
		emit(mAuth, prometheus.CounterValue, a.Accepted.Load(), "accepted")
		emit(mAuth, prometheus.CounterValue, a.Anonymous.Load(), "anonymous")
		emit(mAuth, prometheus.CounterValue, a.Refused.Load(), "refused")
		emit(mAuth, prometheus.CounterValue, a.ClientIDDenied.Load(), "client_id_denied")
	}
	if n.adminToken != nil {
		emit(mAdminRefused, prometheus.CounterValue, n.adminToken.Refused.Load())
	}
}
