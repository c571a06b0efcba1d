package delivery

import (
	"strings"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/internal/testkit"
)

func TestDefaultTopics(t *testing.T) {
	for _, c := range []struct {
		user, topic string
		write, want bool
	}{
		{"alice", "a/b", false, true},
		{"alice", "a/+", false, true},
		{"alice", "+", false, false},
		{"alice", "+/+", false, false},
		{"alice", "+/status", false, false},
		{"alice", "#", false, false},
		{"alice", "a/b", true, true},
		{"", "a/b", false, true},
		{"", "+/b", false, false},
		{"", "a/b", true, false},
	} {
		if got := (DefaultTopics{}).Allows(c.user, "c", c.topic, c.write); got != c.want {
			t.Errorf("DefaultTopics %q %s write %v: %v, want %v", c.user, c.topic, c.write, got, c.want)
		}
	}
}

func TestEverything(t *testing.T) {
	for f, want := range map[string]bool{
		"#": true, "+/#": true, "+/+/#": true, "+/+/+/+/#": true,
		"+": false, "+/+": false, "a/#": false, "+/a/#": false, "presence/users/+": false, "#/a": false, "": false,
	} {
		if got := everything(f); got != want {
			t.Errorf("everything(%q) = %v, want %v", f, got, want)
		}
	}
}

// With NodesPrivate, presence/nodes/... is read by service accounts only;
// without it, by everyone.
func TestGuardNodesPrivate(t *testing.T) {
	_, d, _, cls := newDeliveryServer(t, 2)
	user, svc := cls[0], cls[1]
	user.Properties.Username = []byte("alice")
	svc.Properties.Username = []byte("ops")
	h := hooks.New(hooks.Options{Prefix: "presence", Tracker: testkit.NopTracker{}, Log: nil,
		Service: func(cl *mqtt.Client) bool { return string(cl.Properties.Username) == "ops" }})
	for _, cl := range cls {
		h.OnSessionEstablish(cl, packets.Packet{})
	}
	for _, private := range []bool{false, true} {
		g := NewGuard(GuardOptions{Delivery: d, Viewers: h, NodesPrivate: private})
		for _, topic := range []string{"presence/nodes/A", "presence/nodes/#", "presence/nodes/+"} {
			if got := g.OnACLCheck(user, topic, false); got == private {
				t.Errorf("private %v: user reads %s: %v", private, topic, got)
			}
			if !g.OnACLCheck(svc, topic, false) {
				t.Errorf("private %v: service account refused %s", private, topic)
			}
		}
		if !g.OnACLCheck(user, "presence/users/alice", false) {
			t.Errorf("private %v: alice refused her own presence", private)
		}
	}
}

// grantsAll is an ACL file that grants every read and write.
type grantsAll struct{}

func (grantsAll) Allows(string, string, string, bool) bool { return true }

// With Private, the lifecycle outputs' topics are read by service accounts
// only (unless an ACL file grants the read) and written by nobody.
func TestGuardPrivate(t *testing.T) {
	_, d, _, cls := newDeliveryServer(t, 2)
	user, svc := cls[0], cls[1]
	user.Properties.Username = []byte("alice")
	svc.Properties.Username = []byte("ops")
	h := hooks.New(hooks.Options{Prefix: "presence", Tracker: testkit.NopTracker{}, Log: nil,
		Service: func(cl *mqtt.Client) bool { return string(cl.Properties.Username) == "ops" }})
	for _, cl := range cls {
		h.OnSessionEstablish(cl, packets.Packet{})
	}
	private := func(f string) bool { return f == "$aws/#" || strings.HasPrefix(f, "$aws/events/presence") }
	g := NewGuard(GuardOptions{Delivery: d, Viewers: h, Private: private})
	for _, f := range []string{"$aws/events/presence/#", "$aws/events/presence/connected/x", "$share/g/$aws/#"} {
		if g.OnACLCheck(user, f, false) {
			t.Errorf("a user reads %s", f)
		}
		if !g.OnACLCheck(svc, f, false) {
			t.Errorf("a service account is refused %s", f)
		}
	}
	for _, cl := range cls {
		if g.OnACLCheck(cl, "$aws/events/presence/connected/x", true) {
			t.Errorf("%s publishes to a lifecycle topic", cl.Properties.Username)
		}
	}
	if r, w := d.Stats.PrivateReadsRefused.Load(), d.Stats.PrivateWritesRefused.Load(); r != 3 || w != 2 {
		t.Errorf("refused reads %d writes %d, want 3 and 2", r, w)
	}
	if !g.OnACLCheck(user, "$aws/things/x", false) {
		t.Error("a topic beside the output is refused")
	}
	granted := NewGuard(GuardOptions{Delivery: d, Viewers: h, Private: private, Topics: grantsAll{}})
	if !granted.OnACLCheck(user, "$aws/events/presence/#", false) {
		t.Error("an ACL file's grant is not honoured")
	}
	if granted.OnACLCheck(user, "$aws/events/presence/connected/x", true) {
		t.Error("an ACL file lets a user publish to a lifecycle topic")
	}
}

// With Notify, presence/notify/{user} is read by that user and service
// accounts only; a wildcard filter is granted and each delivery checked
// with its topic name; refusals are counted.
func TestGuardNotify(t *testing.T) {
	_, d, _, cls := newDeliveryServer(t, 3)
	alice, bob, svc := cls[0], cls[1], cls[2]
	alice.Properties.Username = []byte("alice")
	bob.Properties.Username = []byte("bob")
	svc.Properties.Username = []byte("ops")
	h := hooks.New(hooks.Options{Prefix: "presence", Tracker: testkit.NopTracker{}, Log: nil,
		Service: func(cl *mqtt.Client) bool { return string(cl.Properties.Username) == "ops" }})
	for _, cl := range cls {
		h.OnSessionEstablish(cl, packets.Packet{})
	}
	g := NewGuard(GuardOptions{Delivery: d, Viewers: h, Notify: true})
	for _, c := range []struct {
		cl    *mqtt.Client
		topic string
		want  bool
	}{
		{alice, "presence/notify/alice", true},
		{alice, "presence/notify/+", true}, // a filter: each delivery is checked
		{alice, "$share/g/presence/notify/alice", true},
		{bob, "presence/notify/alice", false}, // a filter or a delivery
		{bob, "$share/g/presence/notify/alice", false},
		{svc, "presence/notify/alice", true},
		{svc, "presence/notify/+", true},
	} {
		if got := g.OnACLCheck(c.cl, c.topic, false); got != c.want {
			t.Errorf("%s reads %s: %v, want %v", c.cl.Properties.Username, c.topic, got, c.want)
		}
	}
	if n := d.Stats.NotifyReadsRefused.Load(); n != 2 {
		t.Errorf("NotifyReadsRefused %d, want 2", n)
	}
	// Off: the topic is one of the prefix's like any other.
	off := NewGuard(GuardOptions{Delivery: d, Viewers: h})
	if !off.OnACLCheck(bob, "presence/notify/alice", false) {
		t.Error("without Notify the rule applies")
	}
}
