package lifecycle

import (
	"time"

	"github.com/presenced/presenced/presence"
)

// Sequencer derives lifecycle events from a user's aggregates: per client
// id in epoch order, each open and each end at most once, the end of an
// epoch before the open of the next: presence.Sequencer (the stage
// declares the little it needs, and its tests use fakes).
type Sequencer interface {
	Apply(a presence.Aggregate) []presence.LifecycleEvent
	Forget(before time.Time) int
}

var _ Sequencer = (*presence.Sequencer)(nil)
