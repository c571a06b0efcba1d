package presenced

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/presenced/presenced/presence"
)

// Collector returns presence's metrics (every name begins presenced_) for
// a Prometheus registry: the counters every stage keeps, read when
// scraped, and the two histograms. The binary serves them, with the Go
// runtime's and the process's, at /metrics on the admin port
// (admin.Metrics); an embedding program registers it in its own registry.
// Register it in one registry only.
func (p *Plugin) Collector() prometheus.Collector { return collector{p} }

type collector struct{ p *Plugin }

// desc is one metric read at scrape time.
type desc struct {
	d    *prometheus.Desc
	kind prometheus.ValueType
}

func gauge(name, help string, labels ...string) desc {
	return desc{prometheus.NewDesc(name, help, labels, nil), prometheus.GaugeValue}
}

func counter(name, help string, labels ...string) desc {
	return desc{prometheus.NewDesc(name, help, labels, nil), prometheus.CounterValue}
}

// The metrics read at scrape time.
var (
	mSessions    = gauge("presenced_sessions", "Sessions this node tracks (its MQTT connections with presence).")
	mConnections = gauge("presenced_connections", "MQTT connections open on the broker (mochi's count).")
	mUsers       = gauge("presenced_users", "Users by the status this node shows observers (its retained presence).", "status")
	mTrackerQ    = gauge("presenced_tracker_queue_depth", "Session writes waiting for the store or being written.")
	mRetrying    = gauge("presenced_tracker_retrying", "Session writes waiting to be tried again after a store failure.")
	mFeedQ       = gauge("presenced_feed_queue_depth", "Store events waiting for the pump (changes coalesce per user).")
	mPublishQ    = gauge("presenced_publish_queue_depth", "Users whose shown change waits for the publish rate (presence.publish_rate).")
	mPublishQMax = gauge("presenced_publish_queue_depth_max", "The most users that ever waited for the publish rate at once.")
	mHolding     = gauge("presenced_users_held", "Users with a change held back from observers now (offline grace, debounce, dwell).")
	mPending     = gauge("presenced_commits_unpublished", "Users with a committed change not yet published (timed for presenced_commit_to_publish_seconds).")
	mDraining    = gauge("presenced_node_draining", "1 while this node drains, else 0.")

	mOpened      = counter("presenced_sessions_opened_total", "Sessions this node opened in the store.")
	mEnds        = counter("presenced_session_ends_total", "Sessions ended, by reason: the ends this node wrote to the store, the sessions its reaper ended (timeout) and those of dead nodes it swept (node_lost); takeover counts presenced_takeovers_total.", "reason")
	mUpdates     = counter("presenced_session_updates_total", "Session status or text updates this node wrote to the store.")
	mTransitions = counter("presenced_status_transitions_total", "Status changes observers were shown by this node's retained publishes, from (none: the first this node showed of the user) to.", "from", "to")
	mStale       = counter("presenced_stale_writes_total", "Writes the store refused as stale (a session at an epoch no longer live).")
	mStaleEv     = counter("presenced_stale_events_total", "Connection events of a replaced connection, ignored.")
	mStoreErrors = counter("presenced_store_errors_total", "Store calls that failed (tried again).")
	mLost        = counter("presenced_sessions_lost_total", "Sessions the store no longer had at renewal (opened again).")
	mPublished   = counter("presenced_publishes_total", "Retained presence messages published.")
	mPubErrors   = counter("presenced_publish_errors_total", "Retained publishes that failed.")
	mOld         = counter("presenced_publishes_old_total", "Changes not published: their version was not above the one shown.")
	mHeld        = counter("presenced_changes_held_total", "Changes held back from observers by the pacing.")
	mHidden      = counter("presenced_blinks_hidden_total", "Held changes replaced before they were shown: blinks no observer saw.")
	mCoalesced   = counter("presenced_publish_coalesced_total", "Changes waiting for the publish rate replaced by a newer one.")
	mTakeovers   = counter("presenced_takeovers_total", "Connections that took over a live connection with the same client id.")
	mBattles     = counter("presenced_takeover_battles_total", "Takeover battles detected (two clients taking one client id over in turn).")
	mRefusals    = counter("presenced_connect_refusals_total", "CONNECTs presence refused, by cause.", "cause")
	mKicked      = counter("presenced_sessions_kicked_total", "Oldest sessions ended for a user's session limit (presence.max_sessions_per_user).")
	mSetRejected = counter("presenced_status_sets_refused_total", "presence/set messages refused, by cause.", "cause")
	mSetAccepted = counter("presenced_status_sets_total", "presence/set messages accepted.")
	mDropped     = counter("presenced_deliveries_dropped_total", "Presence deliveries dropped for a subscriber's full queue (sent again later).")
	mSlow        = counter("presenced_slow_subscribers_disconnected_total", "Subscribers disconnected for falling too far behind.")
	mRedisOut    = counter("presenced_redis_outages_total", "Times Redis became unreachable (0 with the memory store).")
	mRedisReset  = counter("presenced_redis_resets_total", "Times Redis was found to have lost this node's sessions.")
	mRedisReload = counter("presenced_redis_reloads_total", "Full loads from Redis after a (re)subscription to the change feed.")
	mRedisLost   = counter("presenced_redis_nodes_swept_total", "Dead node incarnations whose sessions this node swept.")
	mRedisFeedEr = counter("presenced_redis_feed_errors_total", "Undecodable change feed messages.")
	mRedisTomb   = counter("presenced_redis_tombstones_total", "Users Redis lost altogether, recorded offline.")

	scraped = []desc{mSessions, mConnections, mUsers, mTrackerQ, mRetrying, mFeedQ, mPublishQ, mPublishQMax, mHolding, mPending, mDraining,
		mOpened, mEnds, mUpdates, mTransitions, mStale, mStaleEv, mStoreErrors, mLost, mPublished, mPubErrors, mOld,
		mHeld, mHidden, mCoalesced, mTakeovers, mBattles, mRefusals, mKicked, mSetRejected, mSetAccepted, mDropped, mSlow,
		mRedisOut, mRedisReset, mRedisReload, mRedisLost, mRedisFeedEr, mRedisTomb}
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range scraped {
		ch <- d.d
	}
	c.p.meters.storeOp.Describe(ch)
	c.p.meters.publishDelay.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	p, m := c.p, c.p.meters
	emit := func(d desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d.d, d.kind, v, labels...)
	}
	n := func(v int64) float64 { return float64(v) }
	t, pb, pc, h, d := &p.Tracker.Stats, &p.Publisher.Stats, &p.Pacer.Stats, &p.Hook.Stats, &p.Delivery.Counters

	emit(mSessions, float64(p.Tracker.Len()))
	emit(mConnections, n(atomic.LoadInt64(&p.srv.Info.ClientsConnected)))
	byStatus := p.Publisher.Statuses()
	for _, s := range statuses {
		emit(mUsers, float64(byStatus[s]), string(s))
	}
	emit(mTrackerQ, n(t.Depth.Load()))
	emit(mRetrying, n(t.Retrying.Load()))
	emit(mFeedQ, n(p.feed.Depth()))
	emit(mPublishQ, n(pc.Queued.Load()))
	emit(mPublishQMax, n(pc.MaxQueued.Load()))
	emit(mHolding, n(pc.Holding.Load()))
	emit(mPending, float64(m.pending()))
	draining := 0.0
	if p.NodeState() == presence.NodeDraining {
		draining = 1
	}
	emit(mDraining, draining)

	emit(mOpened, n(t.Opened.Load()))
	st := p.store.Stats()
	for i, r := range presence.EndReasons {
		v := t.EndedBy[i].Load()
		switch r {
		case presence.EndTakeover:
			v = h.Takeovers.Load()
		case presence.EndTimeout:
			v += st.Reaped
		case presence.EndNodeLost:
			v += st.Swept
		}
		emit(mEnds, n(v), string(r))
	}
	emit(mUpdates, n(t.Updated.Load()))
	for i := range len(statuses) + 1 {
		from := "none"
		if i < len(statuses) {
			from = string(statuses[i])
		}
		for j, to := range statuses {
			if v := m.shown[i][j].Load(); v > 0 {
				emit(mTransitions, n(v), from, string(to))
			}
		}
	}
	emit(mStale, n(t.Stale.Load()))
	emit(mStaleEv, n(t.StaleEvents.Load()))
	emit(mStoreErrors, n(t.Errors.Load()))
	emit(mLost, n(t.Lost.Load()))
	emit(mPublished, n(pb.Published.Load()))
	emit(mPubErrors, n(pb.Errors.Load()))
	emit(mOld, n(pb.Old.Load()))
	emit(mHeld, n(pc.Held.Load()))
	emit(mHidden, n(pc.Hidden.Load()))
	emit(mCoalesced, n(pc.Coalesced.Load()))
	emit(mTakeovers, n(h.Takeovers.Load()))
	emit(mBattles, n(h.Battles.Load()))
	for _, r := range []struct {
		cause string
		v     int64
	}{
		{"bad_identity", h.BadIdentity.Load()},
		{"client_id_taken", h.ClientIDTaken.Load()},
		{"per_address_limit", p.Limits.Stats.PerAddress.Load()},
		{"takeover_battle", h.BattleRefused.Load()},
		{"draining", p.Drainer.Stats.Refused.Load()},
	} {
		emit(mRefusals, n(r.v), r.cause)
	}
	emit(mKicked, n(h.SessionsKicked.Load()))
	emit(mSetAccepted, n(h.SetAccepted.Load()))
	emit(mSetRejected, n(h.SetRejected.Load()), "invalid")
	emit(mSetRejected, n(h.SetLimited.Load()), "rate_limited")
	emit(mDropped, n(d.Dropped.Load()))
	emit(mSlow, n(d.SlowExpelled.Load()))
	emit(mRedisOut, n(st.Outages))
	emit(mRedisReset, n(st.Resets))
	emit(mRedisReload, n(st.Reloads))
	emit(mRedisLost, n(st.NodesLost))
	emit(mRedisFeedEr, n(st.FeedErrors))
	emit(mRedisTomb, n(st.Tombstones))
	m.storeOp.Collect(ch)
	m.publishDelay.Collect(ch)
}
