package presence

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Limits on names and texts.
const (
	MaxUserBytes      = 128
	MaxDeviceBytes    = 64
	MaxSessionIDBytes = 256
	MaxTextBytes      = 256
	MaxSetPayload     = 1024
)

func validLabel(kind, s string, max int, topicLevel bool) error {
	if s == "" {
		return fmt.Errorf("%w: empty %s", ErrBadName, kind)
	}
	if len(s) > max {
		return fmt.Errorf("%w: %s is %d bytes, at most %d", ErrBadName, kind, len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrBadName, kind)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s %q has a control character", ErrBadName, kind, s)
		}
		if topicLevel && (r == '/' || r == '+' || r == '#') {
			return fmt.Errorf("%w: %s %q has %q, which cannot stand in a topic level", ErrBadName, kind, s, r)
		}
	}
	if topicLevel && s[0] == '$' {
		return fmt.Errorf("%w: %s %q starts with $", ErrBadName, kind, s)
	}
	return nil
}

// ValidUser checks a user name: it becomes one topic level of presence/users/{user}.
func ValidUser(s string) error { return validLabel("user", s, MaxUserBytes, true) }

// ValidDevice checks a device label.
func ValidDevice(s string) error { return validLabel("device", s, MaxDeviceBytes, false) }

// ValidSessionID checks a session id (the MQTT client id).
func ValidSessionID(s string) error { return validLabel("session id", s, MaxSessionIDBytes, false) }
