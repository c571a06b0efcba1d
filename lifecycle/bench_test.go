package lifecycle

import (
	"testing"

	"github.com/presenced/presenced/presence"
)

// The CPU an event costs an output: one encoding (the publish through
// mochi aside).
func BenchmarkEncode(b *testing.B) {
	evs := goldenEvents()
	for _, d := range []struct {
		name string
		d    Dialect
	}{{"aws", AWS{}}, {"emqx", EMQX{}}} {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ev := evs["connected"]
				if i%2 == 1 {
					ev = evs["disconnected"]
				}
				if _, _, ok := d.d.Encode(ev); !ok {
					b.Fatal("not encoded")
				}
			}
		})
	}
}

// The CPU a committed change costs the raw mode: the sequencer's Apply over
// a user's open then end.
func BenchmarkSequencerApply(b *testing.B) {
	s := presence.NewSequencer(sample.ConnectedAt.Add(-1))
	b.ReportAllocs()
	var v uint64
	for i := 0; b.Loop(); i++ {
		v++
		open := presence.Aggregate{User: "u", Version: v, Sessions: []presence.SessionView{{ID: "c", Epoch: v, ConnectedAt: sample.ConnectedAt}}}
		s.Apply(open)
		v++
		s.Apply(presence.Aggregate{User: "u", Version: v, Ended: []presence.EndedView{{SessionView: open.Sessions[0], Reason: presence.EndClean}}})
	}
}
