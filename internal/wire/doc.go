// Package wire says whether a write to an MQTT client can block, for the
// hooks that write to a client themselves (a DISCONNECT, a SUBACK inside
// the delivery fence): a hook must never hold a lock that many clients
// share across a write that may block on a client that does not read.
package wire
