package sparkplug

import (
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/puback"
)

// StaleProperty is the MQTT 5 user property a stale NDEATH that is
// delivered carries (drop_stale_deaths off): its value is the live birth's
// bdSeq. The Sparkplug payload itself is left untouched.
const StaleProperty = "sparkplug-stale-death"

// Options configure the hook.
type Options struct {
	// Server is the broker the hook is added to: the certificates are
	// published through its inline client (Options.InlineClient).
	Server *mqtt.Server
	// DropStaleDeaths drops a stale NDEATH instead of delivering it
	// flagged: a published one is acknowledged and dropped, a will is
	// rewritten to DiscardTopic.
	DropStaleDeaths bool
	// DiscardTopic is where a dropped will goes, since mochi cannot
	// suppress one (hooks.DiscardedWillTopic, which the delivery hooks
	// drop before any subscriber).
	DiscardTopic string
	Edges        EdgesOptions
	Now          func() time.Time
	Log          *slog.Logger
}

// Stats are the hook's counts, read with atomic loads.
type Stats struct {
	Births           atomic.Int64 // NBIRTHs seen
	DeviceBirths     atomic.Int64 // DBIRTHs seen
	Deaths           atomic.Int64 // NDEATHs seen, published or wills
	StaleDeaths      atomic.Int64 // NDEATHs whose bdSeq was not the live birth's
	StaleDropped     atomic.Int64 // of those, dropped (drop_stale_deaths)
	Certificates     atomic.Int64 // births retained under $sparkplug/certificates/
	CertificateFails atomic.Int64 // retained copies that failed
	Malformed        atomic.Int64 // NBIRTH and NDEATH payloads that could not be read (delivered as they are)
	WritesRefused    atomic.Int64 // publishes and wills under $sparkplug/ refused
	Untracked        atomic.Int64 // births of edge nodes not tracked: Max were, none dead
}

// Hook is the mochi hook of a Sparkplug aware server. Add it after
// presence's hooks: a will that presence already sent nowhere (a takeover,
// a drain) is no concern of it.
type Hook struct {
	mqtt.HookBase
	o Options

	mu    sync.Mutex // guards edges; never held across a publish
	edges *Edges

	Stats Stats
}

// New returns the hook.
func New(o Options) *Hook {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Edges.LogEvery <= 0 {
		o.Edges.LogEvery = time.Minute
	}
	return &Hook{o: o, edges: NewEdges(o.Edges)}
}

// ID implements mqtt.Hook.
func (h *Hook) ID() string { return "sparkplug" }

// Provides implements mqtt.Hook.
func (h *Hook) Provides(b byte) bool {
	switch b {
	case mqtt.OnPublish, mqtt.OnPublished, mqtt.OnWill, mqtt.OnDisconnect:
		return true
	}
	return false
}

// OnPublish refuses publishes under $sparkplug/ (the server's), records an
// NBIRTH's bdSeq, and judges an NDEATH. It returns at once for any other
// topic.
func (h *Hook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline {
		return pk, nil
	}
	if strings.HasPrefix(pk.TopicName, ReservedPrefix) {
		h.Stats.WritesRefused.Add(1)
		return refuse(cl, pk)
	}
	t, ok := ParseTopic(pk.TopicName)
	if !ok {
		return pk, nil
	}
	switch t.Type {
	case NBIRTH:
		h.birth(cl, t, pk.Payload)
	case NDEATH:
		d, stale := h.death(cl, t, pk.Payload)
		if !stale {
			return pk, nil
		}
		if h.o.DropStaleDeaths {
			h.Stats.StaleDropped.Add(1)
			return pk, packets.CodeSuccessIgnore // acknowledged, neither delivered nor retained
		}
		pk.Properties.User = append(pk.Properties.User, staleProperty(d))
	}
	return pk, nil
}

// OnPublished retains a copy of a birth once it has been delivered, so a
// host application subscribed to both reads the birth first.
func (h *Hook) OnPublished(cl *mqtt.Client, pk packets.Packet) {
	if cl.Net.Inline || pk.Ignore || !strings.HasPrefix(pk.TopicName, Namespace+"/") {
		return
	}
	t, ok := ParseTopic(pk.TopicName)
	if !ok || (t.Type != NBIRTH && t.Type != DBIRTH) {
		return
	}
	if t.Type == DBIRTH {
		h.Stats.DeviceBirths.Add(1)
	}
	if h.o.Server == nil {
		return
	}
	if err := h.o.Server.Publish(CertificateTopic(pk.TopicName), pk.Payload, true, 1); err != nil {
		h.Stats.CertificateFails.Add(1)
		h.o.Log.Warn("sparkplug certificate not retained", "topic", pk.TopicName, "err", err)
		return
	}
	h.Stats.Certificates.Add(1)
}

// OnWill judges an NDEATH will: a stale one is dropped (rewritten to
// DiscardTopic: mochi cannot suppress a will) or flagged. A will under
// $sparkplug/ is sent nowhere.
func (h *Hook) OnWill(cl *mqtt.Client, will mqtt.Will) (mqtt.Will, error) {
	if strings.HasPrefix(will.TopicName, ReservedPrefix) {
		h.Stats.WritesRefused.Add(1)
		return h.discard(will), nil
	}
	t, ok := ParseTopic(will.TopicName)
	if !ok || t.Type != NDEATH {
		return will, nil
	}
	d, stale := h.death(cl, t, will.Payload)
	if !stale {
		return will, nil
	}
	if h.o.DropStaleDeaths {
		h.Stats.StaleDropped.Add(1)
		return h.discard(will), nil
	}
	will.User = append(will.User, staleProperty(d))
	return will, nil
}

// OnDisconnect marks the edge nodes whose birth the connection published
// dead from now.
func (h *Hook) OnDisconnect(cl *mqtt.Client, _ error, _ bool) {
	now := h.o.Now()
	h.mu.Lock()
	h.edges.Ended(cl, now)
	h.mu.Unlock()
}

// Edges reports how many edge nodes are tracked now, and how many were
// forgotten (dead long enough, or evicted for a new one) in all.
func (h *Hook) Edges() (tracked int, forgotten int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.edges.Len(), h.edges.Forgotten()
}

// birth records an NBIRTH's bdSeq.
func (h *Hook) birth(cl *mqtt.Client, t Topic, payload []byte) {
	h.Stats.Births.Add(1)
	p, err := Decode(payload)
	if err != nil {
		h.Stats.Malformed.Add(1)
		h.o.Log.Debug("sparkplug NBIRTH not readable", "topic", t.Group+"/"+t.Edge, "err", err)
	}
	now := h.o.Now()
	h.mu.Lock()
	tracked, _ := h.edges.Birth(t.Key(), cl, p.BdSeq, err == nil && p.HasBdSeq, now)
	h.mu.Unlock()
	if !tracked {
		h.Stats.Untracked.Add(1)
	}
}

// death judges an NDEATH and reports whether it is stale.
func (h *Hook) death(cl *mqtt.Client, t Topic, payload []byte) (Death, bool) {
	h.Stats.Deaths.Add(1)
	p, err := Decode(payload)
	if err != nil {
		h.Stats.Malformed.Add(1)
		h.o.Log.Debug("sparkplug NDEATH not readable", "group", t.Group, "edge", t.Edge, "err", err)
	}
	now := h.o.Now()
	h.mu.Lock()
	d := h.edges.Death(t.Key(), p.BdSeq, err == nil && p.HasBdSeq, now)
	h.mu.Unlock()
	if d.Verdict != DeathStale {
		return d, false
	}
	h.Stats.StaleDeaths.Add(1)
	if d.Log {
		h.o.Log.Info("stale sparkplug NDEATH", "group", t.Group, "edge", t.Edge, "bdseq", p.BdSeq, "live_bdseq", d.Live,
			"client", string(cl.Properties.Username)+"@"+cl.ID, "dropped", h.o.DropStaleDeaths, "held_back", d.Held)
	}
	return d, true
}

// discard is will sent nowhere.
func (h *Hook) discard(will mqtt.Will) mqtt.Will {
	will.TopicName = h.o.DiscardTopic
	will.Payload = nil
	will.Retain = false
	will.Qos = 0
	will.User = nil
	return will
}

// staleProperty flags a stale death delivered, with the live bdSeq.
func staleProperty(d Death) packets.UserProperty {
	return packets.UserProperty{Key: StaleProperty, Val: strconv.FormatUint(d.Live, 10)}
}

// refuse answers a refused publish the way its protocol version and QoS
// allow: QoS 0 dropped, MQTT 5 QoS 1/2 acknowledged with 0x87 (not
// authorized), MQTT 3.1.1 QoS 1/2 acknowledged and dropped (3.1.1 has no
// refusal in PUBACK).
func refuse(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Qos == 0 {
		return pk, packets.ErrRejectPacket
	}
	if cl.Properties.ProtocolVersion < 5 {
		return pk, packets.CodeSuccessIgnore
	}
	puback.Refuse(cl, pk, packets.ErrNotAuthorized)
	return pk, packets.ErrRejectPacket
}
