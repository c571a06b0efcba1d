// Package testkit holds what the tests of every package share: one way to
// wait for a condition (Wait), one to check that a condition holds for a
// while (During), one fake clock (Clock), one WebSocket client connection as
// a net.Conn (WSConn) and one collector of aggregates (Changes).
package testkit
