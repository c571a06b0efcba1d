package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

// groupsNode starts a node (the binary's composition) with passwords for
// users, visibility groups and the groups file at file.
func groupsNode(t *testing.T, file string, users ...string) (*authNode, map[string]string) {
	t.Helper()
	pwfile := filepath.Join(t.TempDir(), "passwd")
	secrets := map[string]string{}
	for i, u := range users {
		secrets[u] = fmt.Sprintf("%s-Secret-%d", u, i)
	}
	writePasswordFile(t, pwfile, secrets)
	n := startAuthNode(t, func(c *configs.Config) {
		c.Auth.PasswordFile = pwfile
		c.Presence.Observers = []string{"ops"}
		c.Presence.Visibility = configs.VisibilityGroups
		c.Presence.GroupsFile = file
	})
	return n, secrets
}

// Under visibility groups, carol, who shares no group with alice, receives
// nothing of alice's by any filter, while bob, her team-mate, does. Bob
// removed from the team (groups file, reload) stops receiving at once; put
// back, he gets alice's current presence within a second.
func TestGroupsVisibility(t *testing.T) {
	file := filepath.Join(t.TempDir(), "groups.yaml")
	writeAtomic(t, file, []byte("groups:\n  team: [alice, bob]\n  other: [carol]\n"))
	n, pw := groupsNode(t, file, "alice", "bob", "carol", "ops")
	as := func(u string) []connectOpt { return []connectOpt{withUser(u), withPassword(pw[u])} }

	ops := newObserver(t, n.MQTTAddr(), "presence/users/+", as("ops")...)
	alice := dial5(t, n.MQTTAddr(), "alice-1", "alice", withPassword(pw["alice"]))
	aliceOn := ops.waitStatus("alice", presence.Online)

	bob := newObserver(t, n.MQTTAddr(), "presence/users/+", as("bob")...)
	bob.waitStatus("alice", presence.Online) // retained, on subscribe
	carol := newObserver(t, n.MQTTAddr(), "presence/users/+", as("carol")...)
	carolOn := carol.waitStatus("carol", presence.Online)
	for _, f := range []string{"presence/users/alice", "presence/groups/team", "#", "+/#"} {
		if got := subAck(t, carol.c, f); got != rcNotAuthorized {
			t.Errorf("carol's %s: SUBACK %#x, want %#x", f, got, rcNotAuthorized)
		}
	}
	for _, f := range []string{"presence/#", "presence/users/#", "presence/+/alice", "presence/groups/+"} {
		carol.subscribe(f) // granted as filters; every delivery is checked
	}

	// alice changes: bob and ops see it; carol's own change after it is
	// her marker: anything of alice's would have come before.
	if rc := alice.publish(t, "presence/set", `{"status":"busy","text":"alice's secret"}`, 1, false); rc != 0 {
		t.Fatalf("alice's presence/set: %#x", rc)
	}
	busy := ctNext(ops, "alice", aliceOn.Version, "busy", statusOf(presence.Busy))
	bob.waitFor("alice", "busy", statusOf(presence.Busy))
	carolMarker(t, carol, carolOn.Version, "m1")
	if h := carol.history("alice"); len(h) != 0 {
		t.Errorf("carol received alice's presence: %+v", h)
	}
	if raw := carol.rawTopics("alice", "team"); len(raw) != 0 {
		t.Errorf("carol received %v", raw)
	}

	// bob leaves the team: alice's next change reaches ops, not bob.
	writeAtomic(t, file, []byte("groups:\n  team: [alice]\n  other: [carol]\n"))
	removed := time.Now()
	if err := n.Reload(); err != nil {
		t.Fatal(err)
	}
	// The store reports the change; the node reads the group again.
	testkit.Wait(t, time.Second, "bob out of the team", func() error {
		return testkit.Why(!n.Presence().Groups().Member("team", "bob"), "still a member")
	})
	t.Logf("bob's removal applied %v after the reload", time.Since(removed).Round(time.Millisecond))
	if rc := alice.publish(t, "presence/set", `{"status":"away","text":"gone fishing"}`, 1, false); rc != 0 {
		t.Fatalf("alice's presence/set: %#x", rc)
	}
	away := ctNext(ops, "alice", busy.Version, "away", statusOf(presence.Away))
	bobLast, _ := bob.last("bob")
	if rc := bob.c.publish(t, "presence/set", `{"status":"idle","text":"m2"}`, 1, false); rc != 0 {
		t.Fatalf("bob's presence/set: %#x", rc)
	}
	ctNext(bob, "bob", bobLast.Version, "m2", func(p presence.Aggregate) bool { return p.Text == "m2" })
	if last, _ := bob.last("alice"); last.Version >= away.Version {
		t.Errorf("bob, removed from the team, received alice's %s v%d", last.Status, last.Version)
	}

	// bob back in the team: alice's current presence within a second.
	writeAtomic(t, file, []byte("groups:\n  team: [alice, bob]\n  other: [carol]\n"))
	start := time.Now()
	if err := n.Reload(); err != nil {
		t.Fatal(err)
	}
	bob.waitFor("alice", "alice's current presence", func(p presence.Aggregate) bool { return p.Version == away.Version })
	if d := time.Since(start); d > time.Second {
		t.Errorf("bob got alice's presence %v after he was added, want within 1s", d)
	}
	t.Logf("bob, added back, had alice's current presence after %v", time.Since(start).Round(time.Millisecond))
	ops.check()
	bob.check()
}

// carolMarker has the observer's own user set a text and waits for it.
func carolMarker(t *testing.T, o *observer, after uint64, text string) {
	t.Helper()
	if rc := o.c.publish(t, "presence/set", `{"status":"online","text":"`+text+`"}`, 1, false); rc != 0 {
		t.Fatalf("marker %s: %#x", text, rc)
	}
	ctNext(o, "carol", after, text, func(p presence.Aggregate) bool { return p.Text == text })
}

// rawTopics returns the topics the observer received that name any of the
// given users or groups.
func (o *observer) rawTopics(names ...string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for topic := range o.raw {
		for _, n := range names {
			if strings.HasSuffix(topic, "/"+n) {
				out = append(out, topic)
			}
		}
	}
	return out
}

// groupMsgs returns the messages received on a group topic, decoded: the
// snapshot first (members), then deltas.
type groupMsg struct {
	roster.Delta
	Members []roster.Member `json:"members"`
}

func (o *observer) groupMsgs(t *testing.T, group string) []groupMsg {
	t.Helper()
	o.mu.Lock()
	raw := append([]string(nil), o.raw["presence/groups/"+group]...)
	o.mu.Unlock()
	out := make([]groupMsg, 0, len(raw))
	for _, r := range raw {
		var m groupMsg
		if err := json.Unmarshal([]byte(r), &m); err != nil {
			t.Fatalf("group message %q: %v", r, err)
		}
		out = append(out, m)
	}
	return out
}

// A watcher's first message is the group's snapshot; the deltas after it
// carry consecutive versions; 200 members connecting within a second reach
// it in a handful of messages, and the last counts say all 200 are online.
func TestGroupsTopic(t *testing.T) {
	const members = 200
	var users []string
	for i := range members {
		users = append(users, fmt.Sprintf("m%03d", i))
	}
	file := filepath.Join(t.TempDir(), "groups.yaml")
	writeAtomic(t, file, []byte("groups:\n  team: ["+strings.Join(users, ", ")+"]\n"))
	n := startNode(t, func(c *configs.Config) { c.Presence.GroupsFile = file })

	// m000 watches the team; so does a second watcher.
	watcher := newObserver(t, n.MQTTAddr(), "presence/groups/team", withUser("m000"))
	ops := newObserver(t, n.MQTTAddr(), "presence/groups/team", withUser("ops"))
	testkit.Wait(t, waitTimeout, "the snapshot", func() error {
		return testkit.Why(len(watcher.groupMsgs(t, "team")) > 0, "no message yet")
	})
	start := time.Now()
	var wg sync.WaitGroup
	for w := range 4 { // four dialers side by side
		wg.Go(func() {
			for i := 1 + w; i < members; i += 4 {
				dial5(t, n.MQTTAddr(), users[i]+"-phone", users[i])
			}
		})
	}
	wg.Wait()
	connected := time.Since(start)
	if connected > time.Second {
		t.Logf("the 199 connects took %v, more than the 1 s the scenario asks for (a loaded machine)", connected.Round(time.Millisecond))
	}
	var msgs []groupMsg
	testkit.Wait(t, waitTimeout, "all 200 online", func() error {
		msgs = watcher.groupMsgs(t, "team")
		last := msgs[len(msgs)-1]
		return testkit.Why(last.Online == members, fmt.Sprintf("online %d", last.Online))
	})
	if msgs[0].Members == nil || len(msgs[0].Members) != members || msgs[0].Version == 0 {
		t.Fatalf("first message is not the snapshot: %+v", msgs[0])
	}
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Members != nil || msgs[i].Follows != msgs[i-1].Version || msgs[i].Version != msgs[i].Follows+1 {
			t.Fatalf("message %d: version %d follows %d after version %d (members %d)", i, msgs[i].Version, msgs[i].Follows, msgs[i-1].Version, len(msgs[i].Members))
		}
	}
	deltas := len(msgs) - 1
	// 199 connects took `connected`; one batch per 250 ms window, plus the
	// one that may straddle each end.
	if limit := int(connected/(250*time.Millisecond)) + 3; deltas > limit {
		t.Errorf("%d deltas for %d members connecting in %v, want at most %d", deltas, members-1, connected.Round(time.Millisecond), limit)
	}
	t.Logf("%d members connected in %v; the watcher got 1 snapshot and %d deltas (vs %d per-user messages)", members-1, connected.Round(time.Millisecond), deltas, members-1)
	// The admin batch query answers for 1,000 users in one call.
	names := append([]string(nil), users...)
	for i := len(names); i < 1000; i++ {
		names = append(names, fmt.Sprintf("nobody%03d", i))
	}
	b, _ := json.Marshal(map[string]any{"users": names})
	resp, err := mnHTTP.Post("http://"+n.AdminAddr()+"/api/v1/users/batch", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var batch struct {
		Users map[string]*presence.Aggregate `json:"users"`
	}
	err = json.NewDecoder(resp.Body).Decode(&batch)
	resp.Body.Close()
	if err != nil || len(batch.Users) != 1000 || batch.Users["m001"] == nil || batch.Users["m001"].Status != presence.Online || batch.Users["nobody999"] != nil {
		t.Fatalf("batch query: %v, %d users", err, len(batch.Users))
	}
	// Every watcher sees the same: the second has the same last version.
	testkit.Wait(t, waitTimeout, "ops has the same messages", func() error {
		o := ops.groupMsgs(t, "team")
		return testkit.Why(len(o) > 0 && o[len(o)-1].Version == msgs[len(msgs)-1].Version, fmt.Sprintf("ops has %d messages", len(o)))
	})
}

// A token's groups claim puts its user in those groups; a later token of
// the same user that no longer claims a group takes the user out of it.
func TestGroupsJWTClaim(t *testing.T) {
	dir := t.TempDir()
	secret := []byte("an HS256 secret of well over thirty-two bytes, for the test only")
	secretFile := filepath.Join(dir, "hs256.key")
	writeAtomic(t, secretFile, secret)
	n := startAuthNode(t, func(c *configs.Config) {
		c.Auth.JWT.HS256SecretFile = secretFile
		c.Presence.Visibility = configs.VisibilityGroups
	})
	hour := time.Now().Add(time.Hour).Unix()
	token := func(user string, groups ...string) string {
		return hs256(t, secret, jwt.MapClaims{"sub": user, "groups": append([]string{}, groups...), "exp": hour})
	}
	bob := newObserver(t, n.MQTTAddr(), "presence/users/+", withPassword(token("bob", "team")))
	bob.waitStatus("bob", presence.Online)
	// The claim is in force for a connection's first SUBSCRIBE, right
	// after CONNACK.
	dan := dial5(t, n.MQTTAddr(), "dan-1", "", withPassword(token("dan", "team")))
	if got := subAck(t, dan, "presence/groups/team"); got != rcGrantedQoS1 {
		t.Fatalf("dan's presence/groups/team right after CONNACK: SUBACK %#x", got)
	}
	alice := dial5(t, n.MQTTAddr(), "alice-1", "", withPassword(token("alice", "team", "bad/name")))
	on := bob.waitStatus("alice", presence.Online) // introduced once the claim is written
	if g := n.Presence().Groups().GroupsOf("alice"); len(g) != 1 || g[0] != "team" {
		t.Fatalf("alice's groups %v, want [team] (an invalid name is ignored)", g)
	}
	// alice comes back with a token that claims no group: out of the team.
	alice.disconnect()
	bob.waitStatus("alice", presence.Offline)
	alice = dial5(t, n.MQTTAddr(), "alice-2", "", withPassword(token("alice")))
	testkit.Wait(t, time.Second, "alice out of the team", func() error {
		return testkit.Why(!n.Presence().Groups().Member("team", "alice"), "still a member")
	})
	if rc := alice.publish(t, "presence/set", `{"status":"busy"}`, 1, false); rc != 0 {
		t.Fatalf("alice's set: %#x", rc)
	}
	bobLast, _ := bob.last("bob")
	if rc := bob.c.publish(t, "presence/set", `{"status":"idle","text":"m"}`, 1, false); rc != 0 {
		t.Fatalf("bob's set: %#x", rc)
	}
	ctNext(bob, "bob", bobLast.Version, "m", func(p presence.Aggregate) bool { return p.Text == "m" })
	for _, p := range bob.history("alice") {
		if p.Version > on.Version && p.Status == presence.Busy {
			t.Fatalf("bob received alice's busy after she left the team: %+v", p)
		}
	}
}

// A deleted group's topic keeps no retained snapshot: a new subscriber
// gets nothing; created again, it starts over.
func TestGroupsDelete(t *testing.T) {
	n := startNode(t, nil)
	ctx := context.Background()
	if err := n.Presence.SetGroups(ctx, map[string][]string{"team": {"ann"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, time.Second, "the team known", func() error { return testkit.Why(n.Presence.Groups().Has("team"), "not yet") })
	w1 := newObserver(t, n.MQTTAddr(), "presence/groups/team")
	testkit.Wait(t, waitTimeout, "the snapshot", func() error { return testkit.Why(len(w1.groupMsgs(t, "team")) == 1, "nothing yet") })
	if err := n.Presence.SetGroups(ctx, map[string][]string{}); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, time.Second, "the team deleted", func() error { return testkit.Why(!n.Presence.Groups().Has("team"), "still there") })
	// The node unwatches it right after reading it gone; a subscription
	// made once that is done gets no retained message. ann's own
	// presence, subscribed to after the group's on the same connection,
	// marks when the retained messages were delivered.
	testkit.Wait(t, time.Second, "the topic unwatched", func() error {
		watched := n.Presence.Groups().Watched("team")
		return testkit.Why(!watched, "still watched")
	})
	dial5(t, n.MQTTAddr(), "ann-1", "ann")
	w2 := newObserver(t, n.MQTTAddr(), "presence/groups/team")
	w2.subscribe("presence/users/ann")
	w2.waitStatus("ann", presence.Online)
	if m := w2.groupMsgs(t, "team"); len(m) != 0 {
		t.Fatalf("a deleted group's topic delivered %+v", m)
	}
}

// A SUBSCRIBE to a group topic never waits on the store: with Redis stopped
// (SIGSTOP) it gets its SUBACK within 100 ms, and the group's snapshot
// follows once Redis answers again, once: the next message is a delta that
// follows it. (Until issue 16 the group's first subscription on a node read
// the snapshot from the store on mochi's packet path, up to 5 s.)
func TestGroupsSubscribeWhileRedisStopped(t *testing.T) {
	rs := redistest.Start(t)
	file := filepath.Join(t.TempDir(), "groups.yaml")
	writeAtomic(t, file, []byte("groups:\n  team: [ann, bob]\n"))
	n := startNode(t, func(c *configs.Config) {
		c.Redis.Addrs = []string{rs.Addr()}
		c.Redis.NodeTTL = configs.Duration(10 * time.Second) // the stop below is far shorter: no reset
		c.Presence.GroupsFile = file
	})
	dial5(t, n.MQTTAddr(), "ann-1", "ann")
	ops := newObserver(t, n.MQTTAddr(), "presence/users/ann")
	ops.waitStatus("ann", presence.Online)
	watcher := newObserver(t, n.MQTTAddr(), "presence/users/nobody") // connected now: the CONNECT is not what is measured

	pid := rs.PID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP redis (pid %d): %v", pid, err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT redis (pid %d): %v", pid, err)
			}
		}
	}
	t.Cleanup(resume)
	start := time.Now()
	watcher.subscribe("presence/groups/team")
	suback := time.Since(start)
	resume()
	if suback > 100*time.Millisecond {
		t.Fatalf("SUBACK of a group topic took %v with Redis stopped, want at most 100 ms: the SUBSCRIBE waited on the store", suback)
	}
	t.Logf("SUBACK %v after the SUBSCRIBE, Redis stopped", suback.Round(time.Microsecond))

	testkit.Wait(t, waitTimeout, "the team's snapshot", func() error {
		return testkit.Why(len(watcher.groupMsgs(t, "team")) > 0, "nothing yet")
	})
	dial5(t, n.MQTTAddr(), "bob-1", "bob")
	var msgs []groupMsg
	testkit.Wait(t, waitTimeout, "bob online on the team topic", func() error {
		msgs = watcher.groupMsgs(t, "team")
		last := msgs[len(msgs)-1]
		return testkit.Why(last.Online == 2, fmt.Sprintf("%d messages, online %d", len(msgs), last.Online))
	})
	if msgs[0].Members == nil || len(msgs[0].Members) != 2 {
		t.Fatalf("the first message is not the team's snapshot: %+v", msgs[0])
	}
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Members != nil || msgs[i].Follows != msgs[i-1].Version || msgs[i].Version != msgs[i].Follows+1 {
			t.Fatalf("message %d: version %d follows %d after version %d (members %d): the snapshot came twice, or a delta does not follow it",
				i, msgs[i].Version, msgs[i].Follows, msgs[i-1].Version, len(msgs[i].Members))
		}
	}
}

// SUBSCRIBEs to a group topic go on while its batches are published: a
// SUBSCRIBE holds the delivery's fence for reading while the hooks note
// the group watched, and the group stage takes its own lock inside the
// fence, never the other way round, so neither waits on the other for
// good (the stage once held its lock while it waited for the fence, and a
// SUBSCRIBE arriving then hung the node). Every SUBACK comes back, every
// watcher ends at the group log's version.
func TestGroupsSubscribeDuringBatches(t *testing.T) {
	const members, watchers, rounds = 40, 8, 25
	var users []string
	for i := range members {
		users = append(users, fmt.Sprintf("b%03d", i))
	}
	file := filepath.Join(t.TempDir(), "groups.yaml")
	writeAtomic(t, file, []byte("groups:\n  team: ["+strings.Join(users, ", ")+"]\n"))
	n := startNode(t, func(c *configs.Config) {
		c.Presence.GroupsFile = file
		c.Presence.GroupBatch = configs.Duration(10 * time.Millisecond) // a batch every 10 ms
		c.MQTT.MaxConnectionsPerAddress = 1000
		pacingOff(c)
	})
	stop := make(chan struct{})
	var churn sync.WaitGroup
	for w := range 4 { // members connecting and dropping, all along
		churn.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				u := users[(i*4+w)%members]
				c := dial5(t, n.MQTTAddr(), u+"-phone", u)
				c.drop()
			}
		})
	}
	var obs []*observer
	for i := range watchers {
		obs = append(obs, newObserver(t, n.MQTTAddr(), "presence/groups/team", withUser(users[i])))
	}
	var subs sync.WaitGroup
	for i := range watchers { // new subscribers, one after another, all along
		subs.Go(func() {
			for range rounds {
				o := newObserver(t, n.MQTTAddr(), "presence/groups/team", withUser(users[i])) // fails the test without a SUBACK within waitTimeout
				if _, err := testkit.Poll(waitTimeout, testkit.Tick, func() error {
					msgs := o.groupMsgs(t, "team")
					return testkit.Why(len(msgs) > 0 && msgs[0].Members != nil, fmt.Sprintf("%d messages, the first no snapshot", len(msgs)))
				}); err != nil {
					t.Errorf("a new watcher's snapshot: %v", err)
					return
				}
				o.c.disconnect()
			}
		})
	}
	subs.Wait()
	close(stop)
	churn.Wait()
	// Every watcher ends at the same version as the group's log.
	testkit.Wait(t, waitTimeout, "every watcher at the log's version", func() error {
		snap, ok := n.Presence.Groups().Snapshot("team")
		if !ok {
			return fmt.Errorf("no team")
		}
		for i, o := range obs {
			msgs := o.groupMsgs(t, "team")
			if len(msgs) == 0 || msgs[len(msgs)-1].Version != snap.Version {
				return fmt.Errorf("watcher %d: %d messages, the log at %d", i, len(msgs), snap.Version)
			}
		}
		return nil
	})
}
