package presenced

import "github.com/presenced/presenced/stats"

// adminActionsStat is presenced_admin_actions_total{action}: the operator's
// actions the admin API did (admin.ActionNames).
func (b *Broker) adminActionsStat() stats.Stat {
	return stats.Stat{Name: "admin_actions_total", Kind: stats.Counter, Labels: []string{"action"},
		Help: "Operator actions the admin API did (answered 2xx), by action: kick (one session), kick_user (every session of a user), account_set, account_clear, forget, drain.",
		Read: b.adminActions.Read}
}
