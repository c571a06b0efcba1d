package hooks

import "testing"

// Presence's own retained messages are never counted against the retained
// limits; a topic that only starts with the prefix's letters is.
func TestRetainCounted(t *testing.T) {
	l := NewLimits(LimitsOptions{Retained: RetainedLimits{Prefix: "presence", Max: 1}})
	for topic, want := range map[string]bool{"presence": false, "presence/users/a": false, "presences/x": true, "a/presence": true} {
		if got := l.retainCounted(topic); got != want {
			t.Errorf("retainCounted(%q) = %v, want %v", topic, got, want)
		}
	}
}
