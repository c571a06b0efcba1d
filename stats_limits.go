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
		counter("wills_undelayed_total", "Delayed wills published at once: mqtt.max_delayed_wills were waiting.", l.WillsUndelayed.Load),
		counter("persistent_sessions_refused_total", "CONNECTs refused: their user holds mqtt.max_persistent_sessions_per_user persistent sessions.", l.PersistentRefused.Load),
		gauge("persistent_sessions", "Persistent sessions counted against mqtt.max_persistent_sessions_per_user.", func() int64 { return int64(p.limits.PersistentSessions()) }),
		counter("inflight_dropped_total", "Unacknowledged QoS 1/2 messages not kept: their session was at mqtt.max_inflight_bytes.", l.InflightDropped.Load),
		counter("retained_refused_total", "Retained messages outside the presence prefix refused for mqtt.max_retained* (MQTT 5 QoS 1/2: PUBACK 0x97; else not retained).", l.RetainedRefused.Load),
		gauge("retained_counted", "Retained messages outside the presence prefix, counted against mqtt.max_retained.", func() int64 { n, _ := p.limits.RetainedCounts(); return int64(n) }),
		gauge("retained_counted_bytes", "Their topic and payload bytes, counted against mqtt.max_retained_bytes.", func() int64 { _, b := p.limits.RetainedCounts(); return b }),
		counter("inflight_ended_total", "Connections ended for mqtt.max_inflight_bytes or mqtt.max_inflight_age.", l.InflightEnded.Load),
	}
}
