package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

const groupsAdminToken = "Groups-Admin-Token-1"

// groupsAdmin calls a node's admin API with the token.
func groupsAdmin(t *testing.T, addr, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+groupsAdminToken)
	resp, err := mnHTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// Three nodes share Redis (the real binary): a group made through one
// node's admin API rules visibility on every node; the group topic gives a
// snapshot then consecutive deltas on every node; a member removed through
// another node stops receiving within a second; the batch query answers
// for 1,000 users in one call.
func TestGroupsMultiNode(t *testing.T) {
	srv := redistest.Start(t)
	pwfile := filepath.Join(t.TempDir(), "passwd")
	pw := map[string]string{"alice": "alice-Secret-1", "bob": "bob-Secret-2", "carol": "carol-Secret-3", "ops": "ops-Secret-4"}
	writePasswordFile(t, pwfile, pw)
	env := []string{"PRESENCED_AUTH_PASSWORD_FILE=" + pwfile, "PRESENCED_PRESENCE_VISIBILITY=groups",
		"PRESENCED_PRESENCE_OBSERVERS=ops", "PRESENCED_ADMIN_TOKEN=" + groupsAdminToken}
	bin := mnBinary(t)
	a := mnStartTTL(t, bin, "ga", []string{srv.Addr()}, mnNodeTTL, env...)
	b := mnStartTTL(t, bin, "gb", []string{srv.Addr()}, mnNodeTTL, env...)
	c := mnStartTTL(t, bin, "gc", []string{srv.Addr()}, mnNodeTTL, env...)
	as := func(u string) []connectOpt { return []connectOpt{withUser(u), withPassword(pw[u])} }

	if code, body := groupsAdmin(t, a.admin, "PUT", "/api/v1/groups/team", map[string]any{"members": []string{"alice", "bob"}}); code != http.StatusNoContent {
		t.Fatalf("PUT team on A: %d %s", code, body)
	}
	if code, body := groupsAdmin(t, a.admin, "PUT", "/api/v1/groups/other", map[string]any{"members": []string{"carol"}}); code != http.StatusNoContent {
		t.Fatalf("PUT other on A: %d %s", code, body)
	}
	// Every node has the groups.
	for _, n := range []*mnProc{a, b, c} {
		testkit.Wait(t, time.Second, "node "+n.id+" has the team", func() error {
			code, body := groupsAdmin(t, n.admin, "GET", "/api/v1/groups", nil)
			return testkit.Why(code == 200 && bytes.Contains(body, []byte(`"team":2`)), string(body))
		})
	}

	ops := newObserver(t, c.mqtt, "presence/users/+", as("ops")...)
	bob := newObserver(t, c.mqtt, "presence/users/+", as("bob")...)
	watcher := newObserver(t, a.mqtt, "presence/groups/team", as("ops")...)
	watcherC := newObserver(t, c.mqtt, "presence/groups/team", as("ops")...)
	carol := newObserver(t, c.mqtt, "presence/users/+", as("carol")...)
	carolOn := carol.waitStatus("carol", presence.Online)
	alice := dial5(t, b.mqtt, "alice-1", "alice", withPassword(pw["alice"]))
	aliceOn := ops.waitStatus("alice", presence.Online)
	bob.waitStatus("alice", presence.Online)
	carolMarker(t, carol, carolOn.Version, "m1")
	if h := carol.history("alice"); len(h) != 0 {
		t.Errorf("carol received alice's presence: %+v", h)
	}

	// The group topic on A: the snapshot, then alice online in a delta.
	testkit.Wait(t, waitTimeout, "alice online on the team topic", func() error {
		msgs := watcher.groupMsgs(t, "team")
		return testkit.Why(len(msgs) > 0 && msgs[len(msgs)-1].Online == 2, fmt.Sprintf("%d messages", len(msgs)))
	})
	msgs := watcher.groupMsgs(t, "team")
	if msgs[0].Members == nil {
		t.Fatalf("the first message is not the snapshot: %+v", msgs[0])
	}
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Follows != msgs[i-1].Version || msgs[i].Version != msgs[i].Follows+1 {
			t.Fatalf("message %d: version %d follows %d, after %d", i, msgs[i].Version, msgs[i].Follows, msgs[i-1].Version)
		}
	}

	// bob removed through B: within a second he no longer receives alice.
	start := time.Now()
	if code, body := groupsAdmin(t, b.admin, "DELETE", "/api/v1/groups/team/members/bob", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE bob on B: %d %s", code, body)
	}
	testkit.Wait(t, time.Second, "bob out of the team on C", func() error {
		code, body := groupsAdmin(t, c.admin, "GET", "/api/v1/groups/team", nil)
		return testkit.Why(code == 200 && !bytes.Contains(body, []byte(`"user":"bob"`)), string(body))
	})
	t.Logf("bob's removal through B reached C in %v", time.Since(start).Round(time.Millisecond))
	if rc := alice.publish(t, "presence/set", `{"status":"away","text":"later"}`, 1, false); rc != 0 {
		t.Fatalf("alice's set: %#x", rc)
	}
	away := ctNext(ops, "alice", aliceOn.Version, "away", statusOf(presence.Away))
	bobLast, _ := bob.last("bob")
	if rc := bob.c.publish(t, "presence/set", `{"status":"idle","text":"m2"}`, 1, false); rc != 0 {
		t.Fatalf("bob's set: %#x", rc)
	}
	ctNext(bob, "bob", bobLast.Version, "m2", func(p presence.Aggregate) bool { return p.Text == "m2" })
	if last, _ := bob.last("alice"); last.Version >= away.Version {
		t.Errorf("bob, removed, received alice's %s v%d", last.Status, last.Version)
	}

	// The team topic is the same on A and C: every delta both got is the
	// same, byte for byte, and both end at the same version.
	testkit.Wait(t, waitTimeout, "A and C at the same version", func() error {
		x, y := watcher.groupMsgs(t, "team"), watcherC.groupMsgs(t, "team")
		return testkit.Why(len(x) > 0 && len(y) > 0 && x[len(x)-1].Version == y[len(y)-1].Version && x[len(x)-1].Total == 1,
			fmt.Sprintf("A %d messages, C %d", len(x), len(y)))
	})
	byVersion := func(o *observer) map[uint64]string {
		o.mu.Lock()
		defer o.mu.Unlock()
		out := map[uint64]string{}
		for _, r := range o.raw["presence/groups/team"] {
			var m groupMsg
			if json.Unmarshal([]byte(r), &m) == nil && m.Members == nil {
				out[m.Version] = r
			}
		}
		return out
	}
	da, dc := byVersion(watcher), byVersion(watcherC)
	same := 0
	for v, x := range da {
		if y, ok := dc[v]; ok {
			if x != y {
				t.Errorf("delta v%d differs: A %s, C %s", v, x, y)
			}
			same++
		}
	}
	if same == 0 {
		t.Errorf("no delta seen on both A and C: A %v, C %v", da, dc)
	}
	t.Logf("%d deltas seen on both A and C, all the same", same)

	// The batch query: 1,000 users in one call (alice known, the rest not).
	names := []string{"alice"}
	for i := range 999 {
		names = append(names, fmt.Sprintf("nobody%03d", i))
	}
	code, body := groupsAdmin(t, c.admin, "POST", "/api/v1/users/batch", map[string]any{"users": names})
	var batch struct {
		Users map[string]*presence.Aggregate `json:"users"`
	}
	if err := json.Unmarshal(body, &batch); code != 200 || err != nil || len(batch.Users) != 1000 {
		t.Fatalf("batch: %d %v, %d users", code, err, len(batch.Users))
	}
	if got := batch.Users["alice"]; got == nil || got.Status != presence.Away || len(got.Sessions) != 1 || got.Sessions[0].Node != "gb" {
		t.Fatalf("batch alice: %+v (want away, one session on node gb)", got)
	}
	if code, _ := groupsAdmin(t, c.admin, "POST", "/api/v1/users/batch", map[string]any{"users": append(names, "one-too-many")}); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("batch of 1001: %d", code)
	}
	ops.check()
}

// The leader of the group topics is SIGKILLed: the other node takes the
// lease once it runs out (node_ttl), reads the log back, and the team topic
// goes on from the version it had, with what changed meanwhile.
func TestGroupsLeaderFailover(t *testing.T) {
	srv := redistest.Start(t)
	env := []string{"PRESENCED_ADMIN_TOKEN=" + groupsAdminToken}
	bin := mnBinary(t)
	a := mnStartTTL(t, bin, "la", []string{srv.Addr()}, mnNodeTTL, env...)
	if code, body := groupsAdmin(t, a.admin, "PUT", "/api/v1/groups/team", map[string]any{"members": []string{"alice", "bob"}}); code != http.StatusNoContent {
		t.Fatalf("PUT team: %d %s", code, body)
	}
	a.p.waitLine(t, "group topics: this node leads") // the first node with a group leads
	b := mnStartTTL(t, bin, "lb", []string{srv.Addr()}, mnNodeTTL, env...)
	watcher := newObserver(t, b.mqtt, "presence/groups/team")
	alice := dial5(t, b.mqtt, "alice-1", "alice")
	testkit.Wait(t, waitTimeout, "alice online on the team topic", func() error {
		m := watcher.groupMsgs(t, "team")
		return testkit.Why(len(m) > 0 && m[len(m)-1].Online == 1, fmt.Sprintf("%d messages", len(m)))
	})
	before := watcher.groupMsgs(t, "team")
	last := before[len(before)-1].Version

	// The lease costs little: with nothing changing, over one node_ttl the
	// leader keeps it and the other node tries for it each a third of
	// node_ttl: about 6 scripts (no other script runs while nothing
	// changes).
	ctx := context.Background()
	evalsha := func() int64 {
		info, err := srv.Client(t).Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
				n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				return n
			}
		}
		return 0
	}
	e0 := evalsha()
	time.Sleep(mnNodeTTL) // a measuring window, not a wait for a condition
	if n := evalsha() - e0; n > 10 {
		t.Errorf("%d scripts in %v with nothing changing, want about 6 (the lease)", n, mnNodeTTL)
	} else {
		t.Logf("%d scripts in %v with nothing changing (the lease)", n, mnNodeTTL)
	}

	a.kill(t)
	killed := time.Now()
	if rc := alice.publish(t, "presence/set", `{"status":"away"}`, 1, false); rc != 0 {
		t.Fatalf("alice's set: %#x", rc)
	}
	dial5(t, b.mqtt, "bob-1", "bob")
	var msgs []groupMsg
	testkit.Wait(t, mnNodeTTL+5*time.Second, "the team topic going on", func() error {
		msgs = watcher.groupMsgs(t, "team")
		l := msgs[len(msgs)-1]
		return testkit.Why(l.Online == 2 && l.ByStatus[presence.Away] == 1, fmt.Sprintf("online %d", l.Online))
	})
	t.Logf("the team topic went on %v after the leader was killed (node_ttl %v)", time.Since(killed).Round(time.Millisecond), mnNodeTTL)
	b.p.waitLine(t, "group topics: this node leads")
	for i := len(before); i < len(msgs); i++ {
		if msgs[i].Members != nil {
			continue // a snapshot sent again is allowed; its version moves on
		}
		if msgs[i].Follows != msgs[i-1].Version || msgs[i].Version != msgs[i].Follows+1 || msgs[i].Version <= last {
			t.Fatalf("after the failover, message %d: version %d follows %d, after %d (last before the kill %d)", i, msgs[i].Version, msgs[i].Follows, msgs[i-1].Version, last)
		}
	}
}

// Three nodes share Redis: 200 members of one group connect within about a
// second, spread over the nodes; a watcher on each node gets the snapshot,
// then a handful of deltas with consecutive versions, the same on every
// node, ending with all 200 online.
func TestGroupsMultiNodeBurst(t *testing.T) {
	const members = 200
	srv := redistest.Start(t)
	env := []string{"PRESENCED_ADMIN_TOKEN=" + groupsAdminToken}
	bin := mnBinary(t)
	nodes := []*mnProc{
		mnStartTTL(t, bin, "ba", []string{srv.Addr()}, mnNodeTTL, env...),
		mnStartTTL(t, bin, "bb", []string{srv.Addr()}, mnNodeTTL, env...),
		mnStartTTL(t, bin, "bc", []string{srv.Addr()}, mnNodeTTL, env...),
	}
	var users []string
	for i := range members {
		users = append(users, fmt.Sprintf("m%03d", i))
	}
	if code, body := groupsAdmin(t, nodes[0].admin, "PUT", "/api/v1/groups/team", map[string]any{"members": users}); code != http.StatusNoContent {
		t.Fatalf("PUT team: %d %s", code, body)
	}
	var watchers []*observer
	for _, n := range nodes {
		testkit.Wait(t, time.Second, "node "+n.id+" has the team", func() error {
			code, body := groupsAdmin(t, n.admin, "GET", "/api/v1/groups", nil)
			return testkit.Why(code == 200 && bytes.Contains(body, []byte(fmt.Sprintf(`"team":%d`, members))), string(body))
		})
		w := newObserver(t, n.mqtt, "presence/groups/team")
		testkit.Wait(t, waitTimeout, "the snapshot on "+n.id, func() error {
			return testkit.Why(len(w.groupMsgs(t, "team")) > 0, "nothing yet")
		})
		watchers = append(watchers, w)
	}
	start := time.Now()
	done := make(chan struct{}, 4)
	for k := range 4 { // four dialers side by side, each member on node i%3
		go func() {
			defer func() { done <- struct{}{} }()
			for i := k; i < members; i += 4 {
				dial5(t, nodes[i%3].mqtt, users[i]+"-phone", users[i])
			}
		}()
	}
	for range 4 {
		<-done
	}
	connected := time.Since(start)
	var last []groupMsg
	for i, w := range watchers {
		testkit.Wait(t, waitTimeout, "all online on "+nodes[i].id, func() error {
			m := w.groupMsgs(t, "team")
			return testkit.Why(m[len(m)-1].Online == members, fmt.Sprintf("online %d", m[len(m)-1].Online))
		})
		msgs := w.groupMsgs(t, "team")
		if msgs[0].Members == nil {
			t.Fatalf("%s: the first message is not the snapshot", nodes[i].id)
		}
		deltas := 0
		for j := 1; j < len(msgs); j++ {
			if msgs[j].Members != nil {
				continue // a snapshot sent again after a missed batch
			}
			deltas++
			if msgs[j].Version != msgs[j].Follows+1 || (msgs[j-1].Members == nil && msgs[j].Follows != msgs[j-1].Version) {
				t.Fatalf("%s: message %d: version %d follows %d after %d", nodes[i].id, j, msgs[j].Version, msgs[j].Follows, msgs[j-1].Version)
			}
		}
		if limit := int(connected/(250*time.Millisecond)) + 3; deltas > limit {
			t.Errorf("%s: %d deltas for %d members connecting in %v, want at most %d", nodes[i].id, deltas, members, connected.Round(time.Millisecond), limit)
		}
		t.Logf("%s: 1 snapshot and %d deltas for %d members connecting in %v", nodes[i].id, deltas, members, connected.Round(time.Millisecond))
		if i > 0 && msgs[len(msgs)-1].Version != last[len(last)-1].Version {
			t.Errorf("%s ends at version %d, %s at %d", nodes[i].id, msgs[len(msgs)-1].Version, nodes[0].id, last[len(last)-1].Version)
		}
		last = msgs
	}
}
