// Package clock is the presence clock: every Options.Every this node
// publishes a small heartbeat, presence/clock (presence.Clock: the node,
// its incarnation, a sequence number, the highest presence version it has
// published, its time and the interval), not retained and at QoS 0, to its
// own subscribers (mochi's Server.Publish is local to the node). An
// observer that has heard one and then hears none for
// presence.StaleAfter(interval) knows that its link or its node died
// silently, and shows its view as stale instead of showing everyone as
// they were (docs/presence.md, "Is my view stale? presence/clock").
//
// The Stage owns one goroutine (Start, Stop) driven by a ticker that tests
// inject; it publishes through an Outlet that never waits on a socket
// (delivery.Outlet.Beat), and is told each published version with
// Published, which costs one atomic compare-and-swap.
package clock
