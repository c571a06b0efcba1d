// Package loglimit lets one log line through per interval and counts the
// rest, so that a client repeating what gets refused cannot flood the log.
package loglimit
