// Package canary measures the presence SLO in production (opt-in, the
// canary section; docs/slo.md): on each node it connects a few synthetic
// users to the node's own MQTT listener over loopback TCP, on a schedule,
// and ends them every way a device goes: a clean DISCONNECT, a TCP RST
// (SO_LINGER 0), silence (the keep-alive finds it) and a drain of that one
// client. Each session's client id carries its plan (how and when it will
// end, and the bound its end is held to), so that an observer on another
// node reads it from the presence payload it is shown. The observer (one
// MQTT connection per node, a service account) follows the other nodes'
// synthetic users (its own node's when it is alone) and turns what it was
// shown, and when, into the SLIs of package slo.
//
// Goroutines: one per synthetic user (its cycles; it reads and pings its
// own connection) and the observer's (its connection, the node list, the
// watcher's ticks); Start starts them, Stop closes every connection and
// waits for them. The canary holds users+1 connections per node.
package canary
