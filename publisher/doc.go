// Package publisher is the last stage of presence: it turns committed
// aggregates, as the store's feed reports them, into retained
// presence/users/{user} messages. It publishes an aggregate only when its
// version is above the one already published for that user, so a late,
// duplicated or reloaded change can never move a status backwards, and it
// keeps what it published, which the admin API serves byte for byte.
//
// The publisher is called from one goroutine (the pump) and never blocks on
// a client: mochi queues each delivery, and a subscriber that cannot take
// one is the delivery hook's business (delivery.Delivery), which tells the pump
// what to send again, and to whom.
package publisher
