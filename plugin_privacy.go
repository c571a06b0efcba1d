package presenced

import (
	"github.com/presenced/presenced/delivery"
	"github.com/presenced/presenced/stats"
)

// buildPrivacy makes the privacy hook (issue 22): the publisher retains and
// delivers the public view of a user with a privacy setting, and the hook
// gives the user and service accounts their truth per delivery. A change
// of the truth alone reaches them only with the Guard (WithACL, as the
// binary always has), which keeps a message to its targets.
func (p *Plugin) buildPrivacy() *delivery.Privacy {
	return delivery.NewPrivacy(delivery.PrivacyOptions{
		Prefix: p.cfg.Presence.TopicPrefix, Viewers: p.hook, Outlet: p.outlet, Guarded: p.acl != nil,
	})
}

// privacyStats are the figures of privacy (issue 22).
func (p *Plugin) privacyStats() []stats.Stat {
	h, pr := &p.hook.Stats, &p.privacy.Stats
	return []stats.Stat{
		counter("privacy_sets_refused_total", "presence/set messages refused for their privacy keys (a last_seen that is no mode, invisible or last_seen at session scope); also in status_sets_refused_total.", h.PrivacyRejected.Load),
		gauge("privacy_users", "Users with a privacy setting this node shows, whose truth it keeps for themselves and service accounts.", p.privacy.Users),
		counter("privacy_truth_deliveries_total", "Presence deliveries given the true view (to the user themself or a service account).", pr.Upgraded.Load),
		counter("privacy_public_deliveries_total", "Presence deliveries given the latest public view instead of the payload queued.", pr.Downgraded.Load),
		counter("privacy_private_changes_total", "Changes of users with a privacy setting that left their public view as it was: not published, sent to the entitled only.", p.publisher.Stats.Private.Load),
		counter("privacy_private_sent_total", "Deliveries of such changes to the entitled subscriptions.", pr.Sent.Load),
	}
}
