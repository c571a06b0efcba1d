package presenced

import (
	"runtime"
	"sync/atomic"

	"github.com/presenced/presenced/store"
)

// Stats is a snapshot of every stage's counters.
type Stats struct {
	Node            string `json:"node"`
	Connections     int64  `json:"connections"`
	TrackedSessions int    `json:"tracked_sessions"`
	RetainedUsers   int    `json:"retained_users"`
	TrackerDepth    int64  `json:"tracker_queue_depth"`
	TrackerRetrying int64  `json:"tracker_retrying"`
	FeedDepth       int64  `json:"feed_queue_depth"`
	Opened          int64  `json:"sessions_opened"`
	Ended           int64  `json:"sessions_ended"`
	Updated         int64  `json:"sessions_updated"`
	StaleWrites     int64  `json:"stale_writes"`
	StaleEvents     int64  `json:"stale_events"`
	StoreErrors     int64  `json:"store_errors"`
	LostSessions    int64  `json:"lost_sessions"`
	IdleEntered     int64  `json:"idle_entered"` // sessions shown idle for want of activity (presence.idle_after)
	IdleLeft        int64  `json:"idle_left"`    // sessions brought back from it
	Published       int64  `json:"published"`
	OldVersions     int64  `json:"old_versions_dropped"`
	SetAccepted     int64  `json:"set_accepted"`
	SetRejected     int64  `json:"set_rejected"`
	WritesDenied    int64  `json:"writes_denied"`
	WillsDiscarded  int64  `json:"wills_discarded"`
	WillsSuppressed int64  `json:"wills_suppressed"`
	BadIdentity     int64  `json:"bad_identity"`
	ClientIDTaken   int64  `json:"client_id_taken"`
	PerAddress      int64  `json:"refused_per_address"`
	KeepAliveCapped int64  `json:"keepalive_capped"`
	SessionsKicked  int64  `json:"sessions_kicked_over_limit"`
	SetLimited      int64  `json:"set_rate_limited"`
	FiltersRefused  int64  `json:"filters_refused"`
	Abandoned       int64  `json:"connections_abandoned"`
	Takeovers       int64  `json:"takeovers"`
	Battles         int64  `json:"takeover_battles"`
	BattleRefused   int64  `json:"takeover_battle_refused"`
	BattleEvicted   int64  `json:"takeover_battle_ids_evicted"`
	Forgotten       int64  `json:"offline_users_forgotten"`
	DroppedForQueue int64  `json:"dropped_full_queue"`
	Resent          int64  `json:"resent"`
	Repeats         int64  `json:"retained_repeats_refused"`
	SlowExpelled    int64  `json:"slow_subscribers_disconnected"`
	Lagging         int64  `json:"subscribers_lagging"`
	// The pacer (presence.offline_grace and the rest; publish_rate).
	Held            int64        `json:"changes_held"`            // changes held back
	HiddenBlinks    int64        `json:"blinks_hidden"`           // held changes replaced before shown: offline blinks no observer saw
	Released        int64        `json:"held_released"`           // held changes shown at their due time
	Holding         int64        `json:"users_in_grace"`          // users with a change held now
	PublishQueue    int64        `json:"publish_queue_depth"`     // users waiting for the publish rate now
	PublishQueueMax int64        `json:"publish_queue_depth_max"` // the most that ever waited
	Coalesced       int64        `json:"publish_queue_coalesced"` // waiting changes replaced by a newer one
	NodeState       string       `json:"node_state"`              // up, draining or down
	DrainRefused    int64        `json:"drain_refused"`           // CONNECTs refused while draining
	DrainMoved      int64        `json:"drain_moved"`             // connections asked to move by a drain
	Runtime         RuntimeStats `json:"runtime"`                 // the Go runtime's memory and goroutines
	store.Stats
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

// Stats returns every counter of the plugin (and the Redis store's, zero
// with the in-memory store).
func (p *Plugin) Stats() Stats {
	t, pb, h, d := &p.Tracker.Stats, &p.Publisher.Stats, &p.Hook.Stats, &p.Delivery.Counters
	s := Stats{
		Node:            p.cfg.NodeID,
		Connections:     atomic.LoadInt64(&p.srv.Info.ClientsConnected),
		TrackedSessions: p.Tracker.Len(),
		RetainedUsers:   p.Publisher.Users(),
		TrackerDepth:    t.Depth.Load(),
		TrackerRetrying: t.Retrying.Load(),
		FeedDepth:       p.feed.Depth(),
		Held:            p.Pacer.Stats.Held.Load(),
		HiddenBlinks:    p.Pacer.Stats.Hidden.Load(),
		Released:        p.Pacer.Stats.Released.Load(),
		Holding:         p.Pacer.Stats.Holding.Load(),
		PublishQueue:    p.Pacer.Stats.Queued.Load(),
		PublishQueueMax: p.Pacer.Stats.MaxQueued.Load(),
		Coalesced:       p.Pacer.Stats.Coalesced.Load(),
		Opened:          t.Opened.Load(),
		Ended:           t.Ended.Load(),
		Updated:         t.Updated.Load(),
		StaleWrites:     t.Stale.Load(),
		StaleEvents:     t.StaleEvents.Load(),
		StoreErrors:     t.Errors.Load(),
		LostSessions:    t.Lost.Load(),
		IdleEntered:     t.IdleEntered.Load(),
		IdleLeft:        t.IdleLeft.Load(),
		Published:       pb.Published.Load(),
		OldVersions:     pb.Old.Load(),
		SetAccepted:     h.SetAccepted.Load(),
		SetRejected:     h.SetRejected.Load(),
		WritesDenied:    h.WritesDenied.Load(),
		WillsDiscarded:  h.WillsDiscarded.Load(),
		WillsSuppressed: h.WillsSuppressed.Load() + p.Drainer.Stats.WillsCleared.Load(),
		BadIdentity:     h.BadIdentity.Load(),
		ClientIDTaken:   h.ClientIDTaken.Load(),
		PerAddress:      p.Limits.Stats.PerAddress.Load(),
		KeepAliveCapped: p.Limits.Stats.KeepAliveCapped.Load(),
		SessionsKicked:  h.SessionsKicked.Load(),
		SetLimited:      h.SetLimited.Load(),
		FiltersRefused:  p.Limits.Stats.FiltersRefused.Load(),
		Abandoned:       h.Abandoned.Load(),
		Takeovers:       h.Takeovers.Load(),
		Battles:         h.Battles.Load(),
		BattleRefused:   h.BattleRefused.Load(),
		BattleEvicted:   h.BattleEvicted.Load(),
		Forgotten:       pb.Forgotten.Load(),
		DroppedForQueue: d.Dropped.Load(),
		Resent:          d.Resent.Load(),
		Repeats:         d.Repeats.Load(),
		SlowExpelled:    d.SlowExpelled.Load(),
		Lagging:         d.Lagging.Load(),
		NodeState:       string(p.NodeState()),
		DrainRefused:    p.Drainer.Stats.Refused.Load(),
		DrainMoved:      p.Drainer.Stats.Moved.Load(),
		Runtime:         ReadRuntimeStats(),
	}
	s.Stats = p.store.Stats()
	return s
}
