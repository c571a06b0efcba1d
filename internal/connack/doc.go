// Package connack answers a CONNECT that a hook refuses, for the hooks of
// package hooks and package auth alike: a hook that returns an error from
// OnConnect makes mochi close the connection without a CONNACK of its own,
// so the hook writes the one that says why first.
package connack
