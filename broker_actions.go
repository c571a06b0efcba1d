package presenced

import "github.com/presenced/presenced/stats"

// adminActionsStats are presenced_admin_actions_total{action} and
// presenced_admin_actions_refused_total{action}: the operator's actions the
// admin API did, and refused (admin.ActionNames).
func (b *Broker) adminActionsStats() []stats.Stat {
	return []stats.Stat{
		{Name: "admin_actions_total", Kind: stats.Counter, Labels: []string{"action"},
			Help: "Operator actions the admin API did (answered 2xx), by action: kick (one session), kick_user (every session of a user), account_set, account_clear, forget, drain.",
			Read: b.adminActions.Read},
		{Name: "admin_actions_refused_total", Kind: stats.Counter, Labels: []string{"action"},
			Help: "Operator actions the admin API refused (answered 4xx: a bad user name, client id, reason code or body; nothing to act on; a user still online to forget), by action.",
			Read: b.adminActions.ReadRefused},
	}
}
