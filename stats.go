package presenced

import (
	"runtime"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/stats"
)

// Stats returns every figure of the plugin, read now: the same table as
// the metrics (Collector), by the same names. Its JSON (the admin API's
// /api/v1/stats) also carries the node, its state, the Go runtime's
// figures and, for one release, the names the figures had before.
func (p *Plugin) Stats() stats.Snapshot {
	s := p.table.Snapshot()
	s.Extra = map[string]any{"node": p.cfg.NodeID, "node_state": string(p.NodeState()), "runtime": ReadRuntimeStats()}
	return s
}

// Collector returns presence's metrics (every name begins presenced_) for
// a Prometheus registry: the table that Stats reads, and the two
// histograms. The binary serves them, with the Go runtime's and the
// process's, at /metrics on the admin port (admin.Metrics); an embedding
// program registers it in its own registry. Register it in one registry
// only.
func (p *Plugin) Collector() prometheus.Collector {
	return collectors{p.table, p.meters.storeOp, p.meters.publishDelay}
}

// collectors is several collectors as one.
type collectors []prometheus.Collector

func (cs collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}

// one is a figure without labels.
func one(kind stats.Kind, name, help string, read func() int64, legacy ...string) stats.Stat {
	s := stats.Stat{Name: name, Help: help, Kind: kind,
		Read: func(emit func(float64, ...string)) { emit(float64(read())) }}
	if len(legacy) > 0 {
		s.Legacy = map[string]string{"": legacy[0]}
	}
	return s
}

// gauge and counter are one of each kind.
func gauge(name, help string, read func() int64, legacy ...string) stats.Stat {
	return one(stats.Gauge, name, help, read, legacy...)
}

func counter(name, help string, read func() int64, legacy ...string) stats.Stat {
	return one(stats.Counter, name, help, read, legacy...)
}

// hidden is a legacy JSON name whose value no metric has.
func hidden(legacy string, read func() int64) stats.Stat {
	s := one(stats.Gauge, "legacy_"+legacy, "", read, legacy)
	s.Hidden = true
	return s
}

// byLabel is a figure with one label, one series per value.
func byLabel(kind stats.Kind, name, help, label string, values []string, read func(value string) int64, legacy map[string]string) stats.Stat {
	return stats.Stat{Name: name, Help: help, Kind: kind, Labels: []string{label}, Legacy: legacy,
		Read: func(emit func(float64, ...string)) {
			for _, v := range values {
				emit(float64(read(v)), v)
			}
		}}
}

// buildTable is the plugin's figures, read from the stages' counts.
func (p *Plugin) buildTable() *stats.Table {
	return stats.New(append(append(append(append(append(append(p.sessionStats(), p.publishStats()...), p.interestStats()...), p.connectionStats()...), p.limitStats()...), p.monitoringStats()...),
		append(append(append(append(p.consoleStats(), p.sparkplugStats()...), p.lifecycleStats()...), p.privacyStats()...), p.groupResumeStats()...)...)...)
}

// sessionStats are the figures of the sessions and the store.
func (p *Plugin) sessionStats() []stats.Stat {
	t := &p.tracker.Stats
	st := p.store.Stats
	ends := func(reason string) int64 {
		r := presence.EndReason(reason)
		v := t.EndedBy[r.Index()].Load()
		switch r {
		case presence.EndTakeover:
			v = p.hook.Stats.Takeovers.Load()
		case presence.EndTimeout:
			v += st().Reaped
		case presence.EndNodeLost:
			v += st().Swept
		case presence.EndMissed: // the reaper's: dormant check-ins that did not come
			v += st().Missed
		}
		return v
	}
	reasons := make([]string, len(presence.EndReasons))
	for i, r := range presence.EndReasons {
		reasons[i] = string(r)
	}
	return []stats.Stat{
		gauge("sessions", "Sessions this node tracks (its MQTT connections with presence).", func() int64 { return int64(p.tracker.Len()) }, "tracked_sessions"),
		gauge("tracker_queue_depth", "Session writes waiting for the store or being written.", t.Depth.Load),
		gauge("tracker_retrying", "Session writes waiting to be tried again after a store failure.", t.Retrying.Load),
		gauge("feed_queue_depth", "Store events waiting for the pump (changes coalesce per user).", p.feed.Depth),
		counter("feed_ended_dropped_total", "Ended sessions a coalesced change no longer carries (it keeps the newest 64): the lifecycle outputs tell their ends with no reason.", p.feed.EndedDropped),
		counter("sessions_opened_total", "Sessions this node opened in the store.", t.Opened.Load, "sessions_opened"),
		byLabel(stats.Counter, "session_ends_total", "Sessions ended, by reason: the ends this node wrote to the store, the sessions its reaper ended (timeout; missed: a dormant device's check-in that did not come) and those of dead nodes it swept (node_lost); takeover counts presenced_takeovers_total.",
			"reason", reasons, ends, nil),
		hidden("sessions_ended", t.Ended.Load),
		counter("session_updates_total", "Session status or text updates this node wrote to the store.", t.Updated.Load, "sessions_updated"),
		counter("stale_writes_total", "Writes the store refused as stale (a session at an epoch no longer live).", t.Stale.Load, "stale_writes"),
		counter("stale_events_total", "Connection events of a replaced connection, ignored.", t.StaleEvents.Load, "stale_events"),
		counter("store_errors_total", "Store calls that failed (tried again).", t.Errors.Load, "store_errors"),
		counter("sessions_lost_total", "Sessions the store no longer had at renewal (opened again).", t.Lost.Load, "lost_sessions"),
		counter("idle_entered_total", "Sessions shown idle for want of activity (presence.idle_after).", t.IdleEntered.Load, "idle_entered"),
		counter("idle_left_total", "Sessions brought back from idle by activity.", t.IdleLeft.Load, "idle_left"),
		counter("redis_outages_total", "Times Redis became unreachable (0 with the memory store).", func() int64 { return st().Outages }, "redis_outages"),
		counter("redis_resets_total", "Times Redis was found to have lost this node's sessions.", func() int64 { return st().Resets }, "redis_resets"),
		counter("redis_reloads_total", "Reloads from Redis after a lost subscription: of the users this node listens to (every user for a firehose).", func() int64 { return st().Reloads }, "redis_reloads"),
		counter("redis_feed_messages_total", "Change and group batch messages this node received from Redis (the changes of the users it listens to).", func() int64 { return st().FeedMessages }),
		gauge("redis_channels", "Sharded channels this node is subscribed to (one per user heard, one per slot for a firehose, one per group watched).", func() int64 { return st().Channels }),
		counter("redis_resubscriptions_total", "Sharded subscriptions lost (a connection, a moved slot) and made again.", func() int64 { return st().Resubscriptions }),
		counter("redis_nodes_swept_total", "Dead node incarnations whose sessions this node swept.", func() int64 { return st().NodesLost }, "redis_nodes_lost"),
		hidden("redis_swept", func() int64 { return st().Swept }),
		counter("redis_feed_errors_total", "Feed messages and user records from Redis refused: undecodable, failing the checks of a client's input, on another user's channel, or with a version ahead of Redis's clock.", func() int64 { return st().FeedErrors }, "redis_feed_errors"),
		counter("redis_tombstones_total", "Users Redis lost altogether, recorded offline.", func() int64 { return st().Tombstones }, "redis_tombstones"),
	}
}

// publishStats are the figures of what observers are shown.
func (p *Plugin) publishStats() []stats.Stat {
	pb, pc, d := &p.publisher.Stats, &p.pacer.Stats, &p.delivery.Stats
	names := make([]string, len(statuses))
	for i, s := range statuses {
		names[i] = string(s)
	}
	users := byLabel(stats.Gauge, "users", "Users by the status this node shows observers (its retained presence).", "status", names,
		func(s string) int64 { return int64(p.publisher.Statuses()[presence.Status(s)]) }, map[string]string{"": "retained_users"})
	transitions := stats.Stat{Name: "status_transitions_total", Kind: stats.Counter, Labels: []string{"from", "to"},
		Help: "Status changes observers were shown by this node's retained publishes, from (none: the first this node showed of the user) to.",
		Read: p.meters.transitions}
	draining := func() int64 {
		if p.NodeState() == presence.NodeDraining {
			return 1
		}
		return 0
	}
	return []stats.Stat{
		users, transitions,
		gauge("publish_queue_depth", "Users whose shown change waits for the publish rate (presence.publish_rate).", pc.Queued.Load),
		gauge("publish_queue_depth_max", "The most users that ever waited for the publish rate at once.", pc.MaxQueued.Load),
		gauge("users_held", "Users with a change held back from observers now (offline grace, debounce, dwell).", pc.Holding.Load, "users_in_grace"),
		gauge("commits_unpublished", "Users with a committed change not yet published (timed for presenced_commit_to_publish_seconds).", func() int64 { return int64(p.meters.pending()) }),
		gauge("node_draining", "1 while this node drains, else 0.", draining),
		gauge("subscribers_lagging", "Subscribers missing presence now (sent again, with a backoff).", d.Lagging.Load, "subscribers_lagging"),
		counter("publishes_total", "Retained presence messages published.", pb.Published.Load, "published"),
		counter("publish_errors_total", "Retained publishes that failed.", pb.Errors.Load),
		counter("publishes_old_total", "Changes not published: their version was not above the one shown.", pb.Old.Load, "old_versions_dropped"),
		counter("offline_users_forgotten_total", "Offline users forgotten after the retention, their retained presence removed.", pb.Forgotten.Load, "offline_users_forgotten"),
		counter("changes_held_total", "Changes held back from observers by the pacing.", pc.Held.Load, "changes_held"),
		counter("blinks_hidden_total", "Held changes replaced before they were shown: blinks no observer saw.", pc.Hidden.Load, "blinks_hidden"),
		counter("held_released_total", "Held changes shown at their due time.", pc.Released.Load, "held_released"),
		counter("publish_coalesced_total", "Changes waiting for the publish rate replaced by a newer one.", pc.Coalesced.Load, "publish_queue_coalesced"),
		counter("deliveries_dropped_total", "Presence deliveries dropped for a subscriber's full queue (sent again later).", d.Dropped.Load, "dropped_full_queue"),
		counter("deliveries_inflight_full_total", "Presence deliveries mochi refused a subscriber whose unacknowledged-message store was full (mqtt.max_inflight_messages; sent again later).", d.InflightFull.Load, "inflight_full"),
		counter("deliveries_resent_total", "Presence messages sent again to subscribers that missed them.", d.Resent.Load, "resent"),
		counter("retained_repeats_refused_total", "Retained copies refused to a subscriber that had them live.", d.Repeats.Load, "retained_repeats_refused"),
		counter("slow_subscribers_disconnected_total", "Subscribers disconnected for falling too far behind.", d.SlowExpelled.Load, "slow_subscribers_disconnected"),
		byLabel(stats.Counter, "topic_access_refused_total", "Application-topic accesses refused (a wildcard first level, an anonymous publish, auth.acl_file), by access: read (a subscription or a delivery), write (a publish).", "access",
			[]string{"read", "write"}, func(a string) int64 {
				if a == "write" {
					return d.TopicWritesRefused.Load()
				}
				return d.TopicReadsRefused.Load()
			}, nil),
	}
}

// interestStats are the figures of the users this node needs.
func (p *Plugin) interestStats() []stats.Stat {
	i := &p.interest.Stats
	return []stats.Stat{
		gauge("interest_users_watched", "Users a subscription on this node (or the group topics' leader) may read now.", i.Watched.Load),
		gauge("interest_users_heard", "Users whose changes this node asks the store for: watched, or lingering.", i.Heard.Load),
		gauge("interest_firehose", "1 while this node hears every user (an unrestricted presence/users/+ or # subscriber), else 0.", i.Firehose.Load),
		counter("interest_listens_total", "Users this node began to hear (each loaded once heard).", i.Listens.Load),
		counter("interest_users_forgotten_total", "Users forgotten after presence.interest_linger without a watcher (or before it: interest_users_evicted_total).", i.Forgotten.Load),
		counter("interest_users_evicted_total", "Users forgotten before their presence.interest_linger ended, the longest lingering, because more than presence.interest_max_lingering lingered.", i.Evicted.Load),
		gauge("interest_users_lingering", "Users heard that nobody on this node needs now, kept for presence.interest_linger (at most presence.interest_max_lingering).", i.Lingering.Load),
		counter("interest_errors_total", "Store calls of the interest stage that failed (tried again).", i.Failures.Load),
	}
}

// connectionStats are the figures of the connections' hooks.
func (p *Plugin) connectionStats() []stats.Stat {
	h, l, dr := &p.hook.Stats, &p.limits.Stats, &p.drain.Stats
	refusals := map[string]*atomic.Int64{
		"bad_identity": &h.BadIdentity, "client_id_taken": &h.ClientIDTaken, "per_address_limit": &l.PerAddress,
		"takeover_battle": &h.BattleRefused, "draining": &dr.Refused, "receive_maximum_zero": &l.ReceiveMaxZero,
		"bad_expect": &h.ExpectRefused,
	}
	sets := map[string]*atomic.Int64{"invalid": &h.SetRejected, "rate_limited": &h.SetLimited}
	return []stats.Stat{
		gauge("connections", "MQTT connections open on the broker (mochi's count).", func() int64 { return atomic.LoadInt64(&p.srv.Info.ClientsConnected) }),
		counter("takeovers_total", "Connections that took over a live connection with the same client id.", h.Takeovers.Load, "takeovers"),
		counter("takeover_battles_total", "Takeover battles detected (two clients taking one client id over in turn).", h.Battles.Load, "takeover_battles"),
		counter("takeover_battle_ids_evicted_total", "Client ids the takeover battle detector forgot for its bound.", h.BattleEvicted.Load, "takeover_battle_ids_evicted"),
		byLabel(stats.Counter, "connect_refusals_total", "CONNECTs presence refused, by cause.", "cause",
			[]string{"bad_identity", "client_id_taken", "per_address_limit", "takeover_battle", "draining", "receive_maximum_zero", "bad_expect"},
			func(c string) int64 { return refusals[c].Load() },
			map[string]string{"bad_identity": "bad_identity", "client_id_taken": "client_id_taken", "per_address_limit": "refused_per_address",
				"takeover_battle": "takeover_battle_refused", "draining": "drain_refused"}),
		counter("sessions_kicked_total", "Oldest sessions ended for a user's session limit (presence.max_sessions_per_user).", h.SessionsKicked.Load, "sessions_kicked_over_limit"),
		counter("status_sets_total", "presence/set messages accepted.", h.SetAccepted.Load, "set_accepted"),
		byLabel(stats.Counter, "status_sets_refused_total", "presence/set messages refused, by cause.", "cause", []string{"invalid", "rate_limited"},
			func(c string) int64 { return sets[c].Load() }, map[string]string{"invalid": "set_rejected", "rate_limited": "set_rate_limited"}),
		counter("writes_denied_total", "Publishes refused under the presence prefix (read-only but for presence/set).", h.WritesDenied.Load, "writes_denied"),
		counter("wills_discarded_total", "Wills under the presence prefix rewritten away (never delivered raw).", h.WillsDiscarded.Load, "wills_discarded"),
		counter("wills_suppressed_total", "Wills of connections taken over or moved by a drain, cleared (a takeover or a move is no death).",
			h.WillsSuppressed.Load, "wills_suppressed"),
		counter("keepalive_capped_total", "Connections held to the keep-alive ceiling (mqtt.max_keepalive).", l.KeepAliveCapped.Load, "keepalive_capped"),
		counter("filters_refused_total", "Topic filters refused for the subscription limits.", l.FiltersRefused.Load, "filters_refused"),
		counter("connections_abandoned_total", "Connections that ended before their CONNACK, cleaned up.", h.Abandoned.Load, "connections_abandoned"),
		counter("drain_moved_total", "Connections a drain asked to move.", dr.Moved.Load, "drain_moved"),
	}
}

// RuntimeStats are the Go runtime's figures that explain the process's
// memory: goroutines (mochi runs two per connection) and the memory
// classes of runtime.MemStats, in bytes.
type RuntimeStats struct {
	Goroutines   int    `json:"goroutines"`
	HeapInuse    uint64 `json:"heap_inuse"`    // spans with at least one object
	HeapAlloc    uint64 `json:"heap_alloc"`    // live and not yet swept objects
	HeapIdle     uint64 `json:"heap_idle"`     // spans with no object, returned or not
	HeapReleased uint64 `json:"heap_released"` // of HeapIdle, returned to the OS
	StackInuse   uint64 `json:"stack_inuse"`   // goroutine stacks
	Sys          uint64 `json:"sys"`           // all the runtime obtained from the OS
	GCSys        uint64 `json:"gc_sys"`        // GC metadata
	OtherSys     uint64 `json:"other_sys"`     // other runtime metadata
	NextGC       uint64 `json:"next_gc"`       // heap size at which the next GC starts
	NumGC        uint32 `json:"gc_count"`      // completed GC cycles
}

// ReadRuntimeStats reads the Go runtime's figures (runtime.ReadMemStats
// stops the world for a few microseconds).
func ReadRuntimeStats() RuntimeStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return RuntimeStats{
		Goroutines: runtime.NumGoroutine(),
		HeapInuse:  m.HeapInuse, HeapAlloc: m.HeapAlloc, HeapIdle: m.HeapIdle, HeapReleased: m.HeapReleased,
		StackInuse: m.StackInuse, Sys: m.Sys, GCSys: m.GCSys, OtherSys: m.OtherSys, NextGC: m.NextGC, NumGC: m.NumGC,
	}
}
