// Package testkit holds what the tests of every package share: one way to
// wait for a condition (Wait) and one collector of aggregates (Changes).
package testkit
