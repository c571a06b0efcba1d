package presenced

import "github.com/presenced/presenced/stats"

// limitStats are the figures of the Limits hook's packet, will and
// unacknowledged-message bounds (hooks/limits_packets.go,
// hooks/limits_inflight.go).
func (p *Plugin) limitStats() []stats.Stat {
	l := &p.limits.Stats
	return []stats.Stat{
		counter("topics_refused_total", "PUBLISHes refused for a topic name over mqtt.max_topic_length (connection ended).", l.TopicsRefused.Load),
		counter("session_expiry_capped_total", "MQTT 5 DISCONNECTs whose session expiry was held to mqtt.max_session_expiry.", l.ExpiryCapped.Load),
		counter("wills_refused_total", "CONNECTs refused for their will topic ($..., a wildcard, or over mqtt.max_topic_length).", l.WillsRefused.Load),
		counter("will_delay_capped_total", "Wills whose delay was held to mqtt.max_will_delay.", l.WillDelayCapped.Load),
		counter("inflight_dropped_total", "Unacknowledged QoS 1/2 messages not kept: their session was at mqtt.max_inflight_bytes.", l.InflightDropped.Load),
		counter("inflight_ended_total", "Connections ended for mqtt.max_inflight_bytes or mqtt.max_inflight_age.", l.InflightEnded.Load),
	}
}
