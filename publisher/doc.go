// Package publisher is the stage that decides what observers are shown,
// and when, and shows it. The Pacer stands between the store's feed and the
// Publisher: it holds back a change that would only blink (the offline
// grace, the disconnect debounce, flap control, the dwell) and paces what
// is ready at a rate per node, coalesced per user. The Publisher turns what
// the pacer lets out into presence/users/{user} messages, published live
// through one port (Broker: package delivery's Outlet), and its views are
// the retained store of those topics (Snapshots: delivery.Delivery delivers
// them on SUBSCRIBE; mochi keeps no retained message of them). It publishes an aggregate
// only when its version is above the one already published for that user,
// so a late, duplicated or reloaded change can never move a status
// backwards, and it keeps what it published: the payload, which the admin
// API serves byte for byte, and the values (Current), which the group
// topics read. Options.Published tells what it published to those who
// follow it (the group board, the figures).
//
// Both are called from one goroutine (the pump) and never block on a
// client: mochi queues each delivery, and a subscriber that cannot take one
// is the delivery hook's business (delivery.Delivery), which tells the
// pump what to send again, and to whom. Neither holds its lock while
// publishing.
package publisher
