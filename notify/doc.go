// Package notify is presence-gated notify: a message published on
// presence/notify/{user} reaches the user's live sessions, on whichever
// nodes they are; when the user is offline, or goes offline and is still
// offline when presence.offline_grace ends, one webhook event (type
// "notify") is sent instead, so that the application can send a push.
//
// The decision is the Machine's (pure: messages held per user, deadlines,
// the sessions that returned), driven by the Stage's one goroutine, which
// reads the store, sends a message to the nodes that hold the user's
// sessions (a store command) and publishes it to this node's subscribers.
// The Hook tells the stage when a connection of a user subscribes to its
// notify topic here, which delivers what waits for it.
//
// docs/notify.md gives the rules, who may publish and subscribe, and the
// figures.
package notify
