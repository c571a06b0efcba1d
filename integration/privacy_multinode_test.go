package integration

import (
	"testing"
	"time"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/presence"
)

// Two nodes on one Redis: a privacy set on node A (presence/set) is
// enforced for the deliveries on node B, retained and live, and one made
// through B's admin API for those on A. The service account on B gets the
// truth.
func TestPrivacyMultiNode(t *testing.T) {
	srv := redistest.Start(t)
	node := func(id string) pvNode {
		return privacyNode(t, func(c *configs.Config) {
			c.NodeID = id
			c.Redis.Addrs = []string{srv.Addr()}
			c.Redis.NodeTTL = configs.Duration(3 * time.Second)
			c.Redis.SweepInterval = configs.Duration(500 * time.Millisecond)
			c.Admin.Token = groupsAdminToken
		})
	}
	a, b := node("pa"), node("pb")
	carolB := newObserver(t, b.MQTTAddr(), "presence/users/alice", b.as("carol")...)
	opsB := newObserver(t, b.MQTTAddr(), "presence/users/+", b.as("ops")...)
	teamB := newObserver(t, b.MQTTAddr(), "presence/groups/team", b.as("carol")...)
	alice := dial5(t, a.MQTTAddr(), "alice-phone", "alice", withPassword(a.pw["alice"]))
	on := carolB.waitStatus("alice", presence.Online)
	if rc := alice.publish(t, "presence/set", `{"scope":"account","invisible":true}`, 1, false); rc != 0 {
		t.Fatalf("privacy set on A: %#x", rc)
	}
	if rc := alice.publish(t, "presence/set", `{"scope":"account","status":"dnd","text":"secret-text"}`, 1, false); rc != 0 {
		t.Fatalf("dnd on A: %#x", rc)
	}
	truth := opsB.waitFor("alice", "the truth on B", func(p presence.Aggregate) bool { return p.Status == presence.DND && p.Text == "secret-text" })
	carolB.waitFor("alice", "offline on B", statusOf(presence.Offline))
	lateB := newObserver(t, b.MQTTAddr(), "presence/users/+", b.as("bob")...) // retained, on B
	lateB.waitStatus("alice", presence.Offline)
	// Alice's own connection on B (a second session) gets her truth there.
	selfB := newObserver(t, b.MQTTAddr(), "presence/users/alice", b.as("alice")...)
	selfB.waitFor("alice", "her truth on B", func(p presence.Aggregate) bool { return p.Status == presence.DND && p.Text == "secret-text" })

	// Through B's admin API: visible again, last_seen hidden; then alice
	// leaves on A: the others on A see no last_seen.
	carolA := newObserver(t, a.MQTTAddr(), "presence/users/alice", a.as("carol")...)
	code, body := groupsAdmin(t, b.AdminAddr(), "PUT", "/api/v1/users/alice/account", map[string]any{"invisible": false, "last_seen": "hidden"})
	if code != 200 {
		t.Fatalf("PUT account on B: %d %s", code, body)
	}
	vis := carolA.waitFor("alice", "dnd on A, visible again", statusOf(presence.DND))
	selfB.c.disconnect()
	alice.disconnect()
	gone := carolA.waitStatus("alice", presence.Offline)
	if !gone.LastSeen.IsZero() {
		t.Errorf("carol on A: last_seen %v, want null (hidden)", gone.LastSeen)
	}
	opsB.waitFor("alice", "the exact last_seen for the service account", func(p presence.Aggregate) bool {
		return p.Status == presence.Offline && !p.LastSeen.IsZero()
	})

	// No delivery to carol, bob or the group topic showed alice while
	// invisible, nor a last_seen once hidden.
	leaks := 0
	for name, o := range map[string]*observer{"carol on B": carolB, "bob on B": lateB, "carol on A": carolA} {
		o.check()
		for _, p := range o.history("alice") {
			if p.Version <= on.Version {
				continue
			}
			setting := "invisible"
			if p.Version >= vis.Version {
				setting = "hidden"
			}
			if why := pvLeak(setting, p.Status, p.Text, p.LastSeen, len(p.Sessions), truth); why != "" {
				leaks++
				t.Errorf("%s: %s: %+v", name, why, p)
			}
		}
	}
	for _, m := range teamB.groupMsgs(t, "team") {
		for _, mb := range append(m.Members, m.Changes...) {
			if mb.User == "alice" && mb.Version > on.Version && mb.Version <= truth.Version && (mb.Status != presence.Offline || mb.Text != "") {
				leaks++
				t.Errorf("the group topic on B showed invisible alice: %+v", mb)
			}
		}
	}
	t.Logf("two nodes: %d leaks", leaks)
}
