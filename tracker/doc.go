// Package tracker is the stage between the MQTT hook and the store. For
// every connection of this node that has a user, it holds what the store
// should say (presence.Wanted) and what the store was last told
// (presence.Written), and a few worker goroutines write the difference. A
// hook only changes the wanted state and marks the connection dirty, so
// nothing on the packet path waits on the store, and many changes of one
// connection coalesce into one write (the latest wins). Which write comes
// next is decided by presence.Plan, a pure function.
//
// Goroutines: one worker per shard, and a short-lived one per item waiting
// to retry after a store failure; Stop stops and waits for all of them.
// Lock order: Tracker.mu before slot.mu and acct.mu; no lock is held while
// the store is called.
package tracker
