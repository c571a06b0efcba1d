// Package roster will hold group views: group membership, retained group
// summaries on presence/groups/{group} and a snapshot API. It is empty until
// the rosters release; the presence/groups/ namespace is already reserved
// for the broker (hooks.Presence refuses client writes there).
package roster
