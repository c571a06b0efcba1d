package presenced

import (
	"testing"
	"time"

	"github.com/presenced/presenced/admin"
	"github.com/presenced/presenced/presence"
)

// fakeNodeOutlet records what the nodes stage announces.
type fakeNodeOutlet struct{ announced []string }

func (f *fakeNodeOutlet) Announce(topic string, _ []byte) error {
	f.announced = append(f.announced, topic)
	return nil
}
func (f *fakeNodeOutlet) Retain(string, []byte)  {}
func (f *fakeNodeOutlet) Clear(string)           {}
func (f *fakeNodeOutlet) Subscribed(string) bool { return false }

// TestNodeOutletTellsEvents: a node state the nodes stage shows is
// announced on its topic as before, and reaches the events streams as a
// node event.
func TestNodeOutletTellsEvents(t *testing.T) {
	ev := admin.NewEvents()
	out := &fakeNodeOutlet{}
	o := nodeOutlet{out, ev}
	st := presence.NodeStatus{Node: "b", State: presence.NodeDraining, Incarnation: "i1", At: time.Unix(1, 0)}
	b, _ := st.MarshalJSON()
	if err := o.Announce("presence/nodes/b", b); err != nil { // nobody reads: nothing built
		t.Fatal(err)
	}
	got, _, stop, ok := ev.Subscribe()
	if !ok {
		t.Fatal("Subscribe refused")
	}
	defer stop()
	if err := o.Announce("presence/nodes/b", b); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-got:
		if e.Kind != "node" || string(e.Data) != string(b) {
			t.Fatalf("event %s %s, want node %s", e.Kind, e.Data, b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no node event")
	}
	if len(out.announced) != 2 {
		t.Fatalf("announced %v, want the topic twice", out.announced)
	}
}
