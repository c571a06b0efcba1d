package presenced

import (
	"context"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/notify"
	"github.com/presenced/presenced/stats"
	"github.com/presenced/presenced/store"
)

// Presence-gated notify (package notify, docs/notify.md): the wiring of
// its stage to the presence hook (who may publish), the store (the user's
// sessions, the command to another node), the interest stage (the node
// hears a user while a message waits) and the webhooks (the push).

// WithPusher sends notify's pushes (webhook events of type "notify") to
// pusher instead of the webhooks' hub (the webhooks section: every
// endpoint whose events name "notify"). With neither, a push is counted
// (presenced_notify_dropped_total{reason="no_webhook"}) and lost.
func WithPusher(pusher notify.Pusher) Option { return func(p *Plugin) { p.pusher = pusher } }

// buildNotify builds the notify stage when notify.enabled (after the
// stages and the webhooks), has the presence hook hand it the messages,
// and adds its figures.
func (p *Plugin) buildNotify() {
	c := p.cfg.Notify
	if !c.Enabled {
		return
	}
	pusher := p.pusher
	if pusher == nil && p.webhooks != nil {
		pusher = p.webhooks
	}
	var sender notify.Sender
	if cmd, ok := p.store.(store.Commander); ok {
		sender = notifySender{cmd}
	}
	p.notify = notify.New(notify.Options{
		Node: p.cfg.NodeID, Prefix: p.cfg.Presence.TopicPrefix, Grace: off(p.cfg.Presence.OfflineGrace),
		MaxPerUser: c.MaxPendingPerUser, MaxPending: c.MaxPending, Queue: c.Queue,
		Now: p.now, Log: p.logFor("notify"), Store: p.store, Sender: sender,
		Local:  notify.Broker{Server: p.srv, Viewer: p.hook.Viewer},
		Follow: notifyFollow{p}, Pusher: pusher,
	})
	p.hook.SetNotify(p.notifyPublish)
	p.table.Add(p.notifyStats()...)
}

// notifyPublish is the presence hook's Options.Notify: a service account
// may publish on a user's notify topic, and a connection the ACL file
// (WithTopics) grants write on that topic; nobody else.
func (p *Plugin) notifyPublish(cl *mqtt.Client, service bool, user string, pk packets.Packet) hooks.NotifyVerdict {
	if !service {
		who, _ := p.hook.Viewer(cl)
		if p.topics == nil || who == "" || !p.topics.Allows(who, hooks.ClientID(cl), pk.TopicName, true) {
			return hooks.NotifyDenied
		}
	}
	if len(pk.Payload) > p.cfg.Notify.MaxPayload {
		return hooks.NotifyTooLarge
	}
	if !p.notify.Publish(user, pk.Payload, pk.FixedHeader.Qos) {
		return hooks.NotifyBusy
	}
	return hooks.NotifyTaken
}

// notifyCommand hands a notify command another node sent to the stage (on
// the store listener's goroutine, from push: it returns at once).
func (p *Plugin) notifyCommand(c *store.Command) {
	if p.notify == nil || c.Node != p.cfg.NodeID {
		return
	}
	p.notify.Deliver(notify.Message{ID: c.Msg, User: c.User, Payload: c.Payload, QoS: c.QoS, QueuedAt: c.At})
}

// notifySender sends a message to another node as a store command.
type notifySender struct{ cmd store.Commander }

func (s notifySender) SendNotify(ctx context.Context, node string, m notify.Message) error {
	_, err := s.cmd.SendCommand(ctx, store.Command{Op: store.CommandNotify, Node: node, User: m.User,
		Msg: m.ID, Payload: m.Payload, QoS: m.QoS, At: m.QueuedAt})
	return err
}

// notifyFollow has the node hear a user while a message waits for it, as
// an inline subscription to the user's presence topic would (one follow
// id per user: interest recounts a follow's filters on each change).
type notifyFollow struct{ p *Plugin }

func (f notifyFollow) Follow(user string) {
	f.p.interest.Follow("notify/"+user, f.p.publisher.Topic(user))
}

func (f notifyFollow) Unfollow(user string) {
	f.p.interest.Unfollow("notify/"+user, f.p.publisher.Topic(user))
}

// notifyStats are notify's figures (none while it is off).
func (p *Plugin) notifyStats() []stats.Stat {
	n := p.notify
	if n == nil {
		return nil
	}
	s, h := &n.Stats, &p.hook.Stats
	reasons := []string{"evicted", "max_pending", "queue_full", "unreceived", "no_webhook"}
	dropped := map[string]func() int64{"evicted": s.Evicted.Load, "max_pending": s.Refused.Load, "queue_full": s.QueueFull.Load,
		"unreceived": s.Unreceived.Load, "no_webhook": s.NoPusher.Load}
	return []stats.Stat{
		counter("notify_messages_total", "Messages published on presence/notify/{user} on this node and taken.", h.NotifyTaken.Load),
		counter("notify_refused_total", "Publishes on presence/notify/... refused on this node: not a service account nor granted by the ACL file, not a user's topic, over notify.max_payload, or the stage busy.", h.NotifyRefused.Load),
		counter("notify_reads_refused_total", "Subscriptions to (or deliveries of) another user's presence/notify/{user} refused.", p.delivery.Stats.NotifyReadsRefused.Load),
		counter("notify_received_total", "Messages another node sent here for the user's sessions on this node.", s.Received.Load),
		counter("notify_delivered_total", "Messages published to this node's subscribers of a user's notify topic.", s.Delivered.Load),
		counter("notify_forwarded_total", "Messages sent to another node that holds a session of the user.", s.Forwarded.Load),
		counter("notify_held_total", "Messages that waited for their user: offline within presence.offline_grace, or a session here not subscribed yet.", s.Held.Load),
		counter("notify_returned_total", "Messages that waited and were delivered to a session that came back.", s.Returned.Load),
		counter("notify_pushes_total", "Push events (type notify) handed to the webhooks: the user offline, or still offline at the grace's end.", s.Pushed.Load),
		gauge("notify_waiting", "Messages waiting on this node now.", s.Waiting.Load),
		byLabel(stats.Counter, "notify_dropped_total", "Messages dropped, by reason: evicted (over notify.max_pending_per_user, the oldest), max_pending, queue_full, unreceived (at the deadline the user was online but no session that came back had subscribed), no_webhook (a push with no webhooks configured).",
			"reason", reasons, func(r string) int64 { return dropped[r]() }, nil),
		counter("notify_failures_total", "Store reads and sends of notify that failed.", s.Failures.Load),
	}
}
