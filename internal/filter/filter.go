package filter

import (
	"strings"

	mqtt "github.com/mochi-mqtt/server/v2"
)

// Unshared returns the filter of a shared subscription ($share/<group>/f),
// or filter itself. mochi (topics.go, IsSharedFilter and Subscribe) takes
// a first level equal to $SHARE in any case as shared, and drops it and
// the group's level: so does Unshared.
func Unshared(filter string) string {
	first, rest, ok := strings.Cut(filter, "/")
	if !ok || !strings.EqualFold(first, mqtt.SharePrefix) {
		return filter
	}
	if _, f, ok := strings.Cut(rest, "/"); ok {
		return f
	}
	return filter
}
