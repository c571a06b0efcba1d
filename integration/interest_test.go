package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/redis/go-redis/v9"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// Interest routing (issue 17): a node holds and hears only the users that
// someone there watches, plus the users of its own sessions. Each test runs
// two nodes in this process (the binary's composition, so that it can read
// their figures and mochi's retained store) on a real Redis Cluster of
// three masters, with presence.interest_linger set to itLinger.
const (
	// itLinger is the nodes' presence.interest_linger.
	itLinger = time.Second
	// itForget bounds how soon a node has forgotten a user after its last
	// watcher left: the linger, the interest worker's tick (a tenth of the
	// linger), and 2 s for the SUNSUBSCRIBE and the pump on a busy machine.
	itForget = itLinger + itLinger/10 + 2*time.Second
	// itSnapshot bounds how soon after its SUBACK the first subscriber of a
	// user the node did not hold gets the user's snapshot: a SSUBSCRIBE, an
	// HGETALL and a publish, on a busy machine under the race detector (2 s
	// before, and lateMargin more since a CI machine showed stalls of over a
	// second). The snapshot waits for no timer: this bounds the machine's
	// round trips, not a rule, and a snapshot that never came fails the
	// wait.
	itSnapshot = 2*time.Second + lateMargin
	// itFirehose bounds how soon a node becomes a firehose (a SSUBSCRIBE
	// per slot of the cluster, 16,384, and a SCAN of every master), and how
	// long it takes to stop being one (as many SUNSUBSCRIBEs) after the
	// linger.
	itFirehose = 30 * time.Second
)

// itStart starts node id on the cluster with the linger itLinger, the
// pacing off, and the defaults changed by edits.
func itStart(t *testing.T, cl *redistest.Cluster, id string, edits ...func(*configs.Config)) *testNode {
	t.Helper()
	cfg := configs.Defaults()
	cfg.NodeID = id
	cfg.MQTT.Addr, cfg.MQTT.WSAddr, cfg.Admin.Addr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Redis.Addrs, cfg.Redis.Cluster = cl.Addrs(), true
	cfg.Redis.NodeTTL = configs.Duration(mnNodeTTL)
	cfg.Redis.SweepInterval = configs.Duration(mnSweep)
	cfg.Presence.InterestLinger = configs.Duration(itLinger)
	pacingOff(&cfg)
	for _, edit := range edits {
		edit(&cfg)
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	return startConfigured(t, cfg)
}

// itStat reads one of a node's figures.
func itStat(n *testNode, name string) int64 { return n.Stats().Get(name) }

// itWaitStat waits until a node's figure is want.
func itWaitStat(t *testing.T, n *testNode, name string, want int64, within time.Duration) time.Duration {
	t.Helper()
	return testkit.Wait(t, within, fmt.Sprintf("%s's %s at %d", n.cfg.NodeID, name, want), func() error {
		got := itStat(n, name)
		return testkit.Why(got == want, fmt.Sprintf("%d", got))
	})
}

// itRetained returns what a node retains on a user's topic: what it holds
// of the user and gives a new subscriber at once (presence's own retained
// store since issue 23: mochi's holds none of it).
func itRetained(n *testNode, user string) (presence.Aggregate, bool) {
	if _, ok := n.Server.Topics.Retained.Get("presence/users/" + user); ok {
		panic("mochi retains presence/users/" + user)
	}
	payload, ok := n.Presence.Snapshot(user)
	if !ok || len(payload) == 0 {
		return presence.Aggregate{}, false
	}
	a, err := presence.ParseAggregate(payload)
	if err != nil {
		return presence.Aggregate{}, false
	}
	return a, true
}

// itStored reads a user's current aggregate from the store (through n).
func itStored(t *testing.T, n *testNode, user string) presence.Aggregate {
	t.Helper()
	a, err := itRead(n, user)
	if err != nil {
		t.Fatalf("the store's %s: %v", user, err)
	}
	return a
}

// itRead reads a user's current aggregate from the store (through n), or
// says why it could not.
func itRead(n *testNode, user string) (presence.Aggregate, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	u, _, err := n.Presence.User(ctx, user)
	return u.Current, err
}

// itWaitStored waits until the store holds a user's change that cond
// accepts, and returns it.
func itWaitStored(t *testing.T, n *testNode, user, what string, cond func(presence.Aggregate) bool) presence.Aggregate {
	t.Helper()
	var a presence.Aggregate
	testkit.Wait(t, waitTimeout, user+" "+what+" in the store", func() error {
		var err error
		if a, err = itRead(n, user); err != nil {
			return err // tried again: a read may meet a master being replaced
		}
		return testkit.Why(a.Version > 0 && cond(a), fmt.Sprintf("%s %q v%d", a.Status, a.Text, a.Version))
	})
	return a
}

// itSet publishes a presence/set for a device and fails unless accepted.
func itSet(t *testing.T, c *client5, status presence.Status, text string) {
	t.Helper()
	if rc := c.publish(t, "presence/set", fmt.Sprintf(`{"status":%q,"text":%q}`, status, text), 1, false); rc >= 0x80 {
		t.Fatalf("presence/set %s %q: reason %#x", status, text, rc)
	}
}

// hasText is a condition: the aggregate's text is text.
func hasText(text string) func(presence.Aggregate) bool {
	return func(p presence.Aggregate) bool { return p.Text == text }
}

// unsubscribe sends an UNSUBSCRIBE and waits for its UNSUBACK.
func (o *observer) unsubscribe(filter string) {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := o.c.Unsubscribe(ctx, &paho.Unsubscribe{Topics: []string{filter}}); err != nil {
		o.t.Fatalf("unsubscribe %s: %v", filter, err)
	}
}

// itMasters tells which master of a cluster holds a user's record.
type itMasters struct {
	t  *testing.T
	cc *redis.ClusterClient
}

func newItMasters(t *testing.T, cl *redistest.Cluster) itMasters {
	return itMasters{t: t, cc: cl.Client(t)}
}

// of returns the address of the master of user's record (the default key
// prefix).
func (m itMasters) of(user string) string {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := m.cc.MasterForKey(ctx, "presenced:{"+user+"}")
	if err != nil {
		m.t.Fatalf("the master of %s: %v", user, err)
	}
	return c.Options().Addr
}

// spread names perMaster users on each of the cluster's masters, prefix
// followed by a number, the masters taken by turns.
func (m itMasters) spread(prefix string, masters, perMaster int) []string {
	m.t.Helper()
	byMaster := map[string][]string{}
	var order []string
	for i := 0; ; i++ {
		if i > 10000 {
			m.t.Fatalf("no %d users of prefix %s on each of %d masters: %v", perMaster, prefix, masters, byMaster)
		}
		u := fmt.Sprintf("%s%03d", prefix, i)
		a := m.of(u)
		if _, ok := byMaster[a]; !ok {
			order = append(order, a)
		}
		if len(byMaster[a]) < perMaster {
			byMaster[a] = append(byMaster[a], u)
		}
		full := len(order) == masters
		for _, a := range order {
			full = full && len(byMaster[a]) == perMaster
		}
		if full {
			break
		}
	}
	var out []string
	for k := range perMaster {
		for _, a := range order {
			out = append(out, byMaster[a][k])
		}
	}
	return out
}

// sameMaster names a user (prefix followed by a number) whose record lives
// on the same master as user's.
func (m itMasters) sameMaster(prefix, user string) string {
	m.t.Helper()
	want := m.of(user)
	for i := range 1000 {
		u := fmt.Sprintf("%s%03d", prefix, i)
		if m.of(u) == want {
			return u
		}
	}
	m.t.Fatalf("no user of prefix %s on %s", prefix, want)
	return ""
}

// 1. Interest appears and disappears with the subscriptions. Two nodes, A
// and B; alice's device is on A, and nobody watches her:
//   - B does not hear her: her change does not reach B (a marker user on
//     the same master, committed after it and watched on B, arrives alone
//     on B's connection to that master), B hears only the marker, and
//     neither node holds her (A, where her session is, neither hears nor
//     shows her: a session makes no interest);
//   - a SUBSCRIBE to presence/users/alice on B makes B hear her and gives
//     the subscriber her current presence within itSnapshot of the SUBACK,
//     then her later change;
//   - the UNSUBSCRIBE, and a second subscriber's disconnect, make B forget
//     her within itForget;
//   - an unrestricted presence/users/+ on B makes B a firehose (within
//     itFirehose) that shows zed, a user nobody watches; it ends no sooner
//     than a linger after that subscriber left (within itFirehose more),
//     and B forgets zed.
func TestInterestFollowsSubscriptions(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	masters := newItMasters(t, cl)
	a := itStart(t, cl, "A")
	b := itStart(t, cl, "B")
	const alice = "it1-alice"
	marker := masters.sameMaster("it1-mark", alice)
	aliceDev := dial5(t, a.MQTTAddr(), alice+"-1", alice)
	markDev := dial5(t, a.MQTTAddr(), marker+"-1", marker)
	mk := newObserver(t, b.MQTTAddr(), "presence/users/"+marker)
	mk.waitStatus(marker, presence.Online)
	itWaitStored(t, a, alice, "online", statusOf(presence.Online))

	// alice's change, committed; then the marker's, on the same master.
	fed := itStat(b, "redis_feed_messages_total")
	itSet(t, aliceDev, presence.Away, "a1")
	itWaitStored(t, a, alice, "away a1", hasText("a1"))
	itSet(t, markDev, presence.Away, "m1")
	mk.waitFor(marker, "m1", hasText("m1"))
	if got := itStat(b, "redis_feed_messages_total") - fed; got != 1 {
		t.Errorf("B received %d messages for alice's change and the marker's, want 1 (the marker's): B heard alice, whom nobody there watches", got)
	}
	for _, c := range []struct {
		n              *testNode
		watched, heard int64
	}{{a, 0, 0}, {b, 1, 1}} { // A: nothing (sessions make no interest); B: the marker
		if w, h := itStat(c.n, "interest_users_watched"), itStat(c.n, "interest_users_heard"); w != c.watched || h != c.heard {
			t.Errorf("%s: interest_users_watched %d, interest_users_heard %d, want %d and %d", c.n.cfg.NodeID, w, h, c.watched, c.heard)
		}
		if p, ok := itRetained(c.n, alice); ok {
			t.Errorf("%s retains alice (v%d), whom nobody there watches", c.n.cfg.NodeID, p.Version)
		}
	}

	// The first subscriber on B gets the snapshot, then the next change.
	o := newObserver(t, b.MQTTAddr(), "presence/users/"+marker)
	want := itStored(t, a, alice)
	o.subscribe("presence/users/" + alice)
	subacked := time.Now()
	snap := o.waitFor(alice, "the snapshot", func(p presence.Aggregate) bool { return p.Version >= want.Version })
	took := time.Since(subacked)
	if snap.Version != want.Version || snap.Status != presence.Away || snap.Text != "a1" {
		t.Errorf("the first subscriber on B got %s %q v%d, want the store's %s %q v%d", snap.Status, snap.Text, snap.Version, want.Status, want.Text, want.Version)
	}
	if took > itSnapshot {
		t.Errorf("the snapshot came %v after the SUBACK, want within %v", took.Round(time.Millisecond), itSnapshot)
	}
	t.Logf("alice's snapshot reached the first subscriber on B %v after its SUBACK", took.Round(time.Millisecond))
	itWaitStat(t, b, "interest_users_heard", 2, waitTimeout)
	if w := itStat(b, "interest_users_watched"); w != 2 {
		t.Errorf("B watches %d users, want 2 (alice and the marker)", w)
	}
	if p, ok := itRetained(b, alice); !ok || p.Version != want.Version {
		t.Errorf("B retains alice: %v v%d, want v%d", ok, p.Version, want.Version)
	}
	fed = itStat(b, "redis_feed_messages_total")
	itSet(t, aliceDev, presence.Busy, "a2")
	busy := o.waitFor(alice, "busy a2", hasText("a2"))
	if stored := itStored(t, a, alice); busy.Version != stored.Version {
		t.Errorf("the subscriber on B has alice at v%d, the store at v%d", busy.Version, stored.Version)
	}
	if got := itStat(b, "redis_feed_messages_total") - fed; got < 1 {
		t.Errorf("B received %d messages for alice's change while watching her", got)
	}

	// The UNSUBSCRIBE: B forgets alice.
	left := time.Now()
	o.unsubscribe("presence/users/" + alice)
	itForgotten(t, b, alice, 1, "the UNSUBSCRIBE")
	t.Logf("B forgot alice %v after the UNSUBSCRIBE (linger %v)", time.Since(left).Round(time.Millisecond), itLinger)

	// A second subscriber, which disconnects: the interest comes and goes
	// again.
	o2 := newObserver(t, b.MQTTAddr(), "presence/users/"+alice)
	o2.waitFor(alice, "the snapshot again", func(p presence.Aggregate) bool { return p.Version == busy.Version })
	itWaitStat(t, b, "interest_users_heard", 2, waitTimeout)
	left = time.Now()
	o2.c.disconnect()
	itForgotten(t, b, alice, 1, "the subscriber's disconnect")
	t.Logf("B forgot alice %v after her subscriber's disconnect", time.Since(left).Round(time.Millisecond))

	// The firehose.
	const zed = "it1-zed"
	fh := newObserver(t, b.MQTTAddr(), "presence/users/+")
	fire := itWaitStat(t, b, "interest_firehose", 1, itFirehose)
	t.Logf("B a firehose %v after the SUBACK (%d channels)", fire.Round(time.Millisecond), itStat(b, "redis_channels"))
	dial5(t, a.MQTTAddr(), zed+"-1", zed)
	fh.waitStatus(zed, presence.Online)
	fh.waitFor(alice, "alice (loaded with every user)", func(p presence.Aggregate) bool { return p.Version == busy.Version })
	if _, ok := itRetained(b, zed); !ok {
		t.Errorf("B, a firehose, does not retain zed")
	}
	if h := itStat(b, "interest_users_heard"); h != 1 {
		t.Errorf("B, a firehose, listens to %d users one by one, want 1 (the marker)", h)
	}
	forgotten := itStat(b, "interest_users_forgotten_total")
	left = time.Now()
	fh.c.disconnect()
	testkit.Wait(t, itLinger+itFirehose, "B no longer a firehose, zed forgotten", func() error {
		_, held := itRetained(b, zed)
		fire := itStat(b, "interest_firehose")
		return testkit.Why(fire == 0 && !held, fmt.Sprintf("interest_firehose %d, zed retained %v", fire, held))
	})
	ended := time.Since(left)
	t.Logf("B ended the firehose %v after its subscriber left", ended.Round(time.Millisecond))
	if ended < itLinger {
		t.Errorf("B ended the firehose %v after its subscriber left, before the linger %v", ended, itLinger)
	}
	// The interest stage counts the users forgotten once the pump has taken
	// them, and the pump may drop zed's presence before that.
	testkit.Wait(t, waitTimeout, "the users forgotten at the firehose's end counted", func() error {
		got := itStat(b, "interest_users_forgotten_total") - forgotten
		return testkit.Why(got >= 2, fmt.Sprintf("interest_users_forgotten_total grew by %d at the firehose's end, want at least 2 (zed, alice)", got))
	})
	if _, ok := itRetained(b, marker); !ok {
		t.Errorf("B forgot the marker, which is watched there")
	}
	for _, x := range []*observer{mk, o, o2, fh} {
		x.check()
	}
}

// itForgotten waits until n no longer holds user: it hears heard users,
// and retains nothing of the user.
func itForgotten(t *testing.T, n *testNode, user string, heard int64, after string) {
	t.Helper()
	testkit.Wait(t, itForget, n.cfg.NodeID+" forgets "+user+" after "+after, func() error {
		h := itStat(n, "interest_users_heard")
		p, held := itRetained(n, user)
		return testkit.Why(h == heard && !held, fmt.Sprintf("interest_users_heard %d (want %d), retained %v v%d", h, heard, held, p.Version))
	})
}

// 2. Under visibility groups, a presence/users/+ subscriber's interest is
// its group mates. Node A starts first and leads the group topics (the
// leader shows every member: A watches all four); B starts after it. bob's
// wildcard subscription on B makes B hear exactly bob and his team-mate
// alice, not carol and dave of another group, nor is B a firehose; carol
// added to the team becomes heard on B and shown to bob, and her next
// change reaches him; taken out again, B forgets her after the linger.
func TestInterestGroupsWildcard(t *testing.T) {
	const alice, bob, carol, dave = "gw-alice", "gw-bob", "gw-carol", "gw-dave"
	cl := redistest.StartCluster(t, 3)
	pwfile := t.TempDir() + "/passwd"
	pw := map[string]string{alice: "alice-Secret-1", bob: "bob-Secret-2", carol: "carol-Secret-3", dave: "dave-Secret-4"}
	writePasswordFile(t, pwfile, pw)
	groupsOn := func(c *configs.Config) {
		c.Auth.PasswordFile = pwfile
		c.Presence.Visibility = configs.VisibilityGroups
	}
	ctx := context.Background()
	a := itStart(t, cl, "A", groupsOn)
	if err := a.Presence.SetGroups(ctx, map[string][]string{"team": {alice, bob}, "other": {carol, dave}}); err != nil {
		t.Fatal(err)
	}
	itWaitStat(t, a, "interest_users_watched", 4, waitTimeout) // A leads: every member
	b := itStart(t, cl, "B", groupsOn)
	testkit.Wait(t, waitTimeout, "B knows the groups", func() error {
		g := b.Presence.Groups()
		return testkit.Why(g.Member("team", bob) && g.Member("other", dave), "not yet")
	})
	for _, u := range []string{alice, dave} {
		dial5(t, a.MQTTAddr(), u+"-1", u, withPassword(pw[u]))
	}
	carolDev := dial5(t, a.MQTTAddr(), carol+"-1", carol, withPassword(pw[carol]))
	for _, u := range []string{alice, carol, dave} {
		itWaitStored(t, a, u, "online", statusOf(presence.Online))
	}
	bo := newObserver(t, b.MQTTAddr(), "presence/users/+", withUser(bob), withPassword(pw[bob]))
	bo.waitStatus(alice, presence.Online)
	bo.waitStatus(bob, presence.Online)

	holds := func(want ...string) error {
		for _, u := range []string{alice, bob, carol, dave} {
			_, held := itRetained(b, u)
			if held != slices.Contains(want, u) {
				return fmt.Errorf("B retains %s: %v", u, held)
			}
		}
		w, h, f := itStat(b, "interest_users_watched"), itStat(b, "interest_users_heard"), itStat(b, "interest_firehose")
		if w != int64(len(want)) || h != int64(len(want)) || f != 0 {
			return fmt.Errorf("B: watched %d, heard %d, firehose %d; want %d, %d, 0", w, h, f, len(want), len(want))
		}
		return nil
	}
	testkit.Wait(t, waitTimeout, "B holds alice and bob only", func() error { return holds(alice, bob) })

	// carol joins the team.
	joined := time.Now()
	if err := a.Presence.SetGroups(ctx, map[string][]string{"team": {alice, bob, carol}, "other": {carol, dave}}); err != nil {
		t.Fatal(err)
	}
	want := itStored(t, a, carol)
	bo.waitFor(carol, "carol's current presence", func(p presence.Aggregate) bool { return p.Version >= want.Version })
	t.Logf("carol, added to bob's team, shown to bob on B %v after the change", time.Since(joined).Round(time.Millisecond))
	testkit.Wait(t, waitTimeout, "B holds alice, bob and carol", func() error { return holds(alice, bob, carol) })
	itSet(t, carolDev, presence.Busy, "c1")
	bo.waitFor(carol, "busy c1", hasText("c1"))

	// carol leaves it: B forgets her.
	left := time.Now()
	if err := a.Presence.SetGroups(ctx, map[string][]string{"team": {alice, bob}, "other": {carol, dave}}); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, waitTimeout+itForget, "B forgets carol", func() error { return holds(alice, bob) })
	t.Logf("carol, out of bob's team, forgotten on B %v after the change", time.Since(left).Round(time.Millisecond))
	if h := bo.history(dave); len(h) != 0 {
		t.Errorf("bob received dave's presence: %+v", h)
	}
	bo.check()
}

// itRaceRounds is how many fresh users TestInterestFirstSubscriptionRace
// races a first subscription with.
const itRaceRounds = 160

// 3. A change racing a first subscription: no gap, no version backwards.
// In each round a fresh user's device connects to A and changes its status
// one to four times, a random 0-3 ms apart (and leaves, in a third of the
// rounds, once the store has it), while an observer on B, where nobody watches the user, subscribes
// to it after a random 0-20 ms. Whatever the interleaving, the observer's
// last message of the user is the store's final state (nothing fell between
// B starting to hear the user and loading it), and the versions it received
// never went down. The observer then unsubscribes, so that B forgets the
// users of earlier rounds (a linger after) while later rounds run.
func TestInterestFirstSubscriptionRace(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	a := itStart(t, cl, "A")
	b := itStart(t, cl, "B")
	o := newObserver(t, b.MQTTAddr(), "presence/users/it3-nobody")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	statuses := []presence.Status{presence.Away, presence.Busy, presence.Online}
	var raced, before, after int // rounds whose observer saw several versions, the first only, the last only
	start := time.Now()
	for i := range itRaceRounds {
		u := fmt.Sprintf("it3-u%03d", i)
		plan := itChurnPlan{user: u, leave: rng.IntN(3) == 0}
		for j := range 1 + rng.IntN(4) {
			plan.sets = append(plan.sets, itStep{status: statuses[rng.IntN(len(statuses))], text: fmt.Sprintf("r%d-%d", i, j),
				gap: time.Duration(rng.IntN(3000)) * time.Microsecond})
		}
		delay := time.Duration(rng.IntN(10000)) * time.Microsecond
		done := make(chan error, 1)
		go func() { done <- plan.run(t, a) }()
		time.Sleep(delay) // the fuzzed interleaving, not a wait
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		_, err := o.c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "presence/users/" + u, QoS: 1}}})
		cancel()
		churned := <-done // before any Fatalf: the goroutine uses t
		if err != nil {
			t.Fatalf("round %d: subscribe: %v", i, err)
		}
		if churned != nil {
			t.Fatalf("round %d: %v", i, churned)
		}
		final := itWaitStored(t, a, u, "final", plan.final)
		got := o.waitFor(u, fmt.Sprintf("round %d: the store's final v%d", i, final.Version), func(p presence.Aggregate) bool {
			return p.Version >= final.Version
		})
		if got.Version != final.Version || got.Status != final.Status || got.Text != final.Text || len(got.Sessions) != len(final.Sessions) {
			t.Errorf("round %d (%s, delay %v, %d sets, leave %v): the observer's last is %s %q v%d with %d sessions, the store's %s %q v%d with %d",
				i, u, delay, len(plan.sets), plan.leave, got.Status, got.Text, got.Version, len(got.Sessions), final.Status, final.Text, final.Version, len(final.Sessions))
		}
		switch h := o.history(u); {
		case len(h) > 1:
			raced++
		case h[0].Version == final.Version:
			after++
		default:
			before++
		}
		ctx, cancel = context.WithTimeout(context.Background(), waitTimeout)
		_, err = o.c.Unsubscribe(ctx, &paho.Unsubscribe{Topics: []string{"presence/users/" + u}})
		cancel()
		if err != nil {
			t.Fatalf("round %d: unsubscribe: %v", i, err)
		}
	}
	o.check()
	t.Logf("%d rounds in %v: the observer saw several versions in %d, the final one only in %d, (an error) an earlier one only in %d; B forgot %d users meanwhile",
		itRaceRounds, time.Since(start).Round(time.Millisecond), raced, after, before, itStat(b, "interest_users_forgotten_total"))
}

// itChurnPlan is what a user's device does in a round of the race.
type itChurnPlan struct {
	user  string
	sets  []itStep
	leave bool // at the end, a clean DISCONNECT
}

type itStep struct {
	status presence.Status
	text   string
	gap    time.Duration // before the step
}

// final reports whether a state is the plan's last.
func (p itChurnPlan) final(a presence.Aggregate) bool {
	if p.leave {
		return a.Status == presence.Offline
	}
	last := p.sets[len(p.sets)-1]
	return a.Text == last.text && len(a.Sessions) == 1
}

// run connects the device to n and runs the plan; it reports what failed
// (it runs on a goroutine of its own). Before the device leaves, it waits
// until the store has the user: a session that ends before the node wrote
// it is never written (nobody could have seen it), and the round would
// have no final state to compare.
func (p itChurnPlan) run(t *testing.T, n *testNode) error {
	conn, err := net.DialTimeout("tcp", n.MQTTAddr(), waitTimeout)
	if err != nil {
		return err
	}
	c, ack, err := connect5(t, conn, p.user+"-1", p.user)
	if err != nil || ack.ReasonCode != 0 {
		return fmt.Errorf("connect %s: %v %v", p.user, ack, err)
	}
	for _, s := range p.sets {
		time.Sleep(s.gap) // the fuzzed interleaving
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		resp, err := c.Publish(ctx, &paho.Publish{Topic: "presence/set", QoS: 1,
			Payload: fmt.Appendf(nil, `{"status":%q,"text":%q}`, s.status, s.text)})
		cancel()
		if err != nil || resp == nil || resp.ReasonCode >= 0x80 {
			return fmt.Errorf("presence/set of %s: %v %v", p.user, resp, err)
		}
	}
	if p.leave {
		if _, err := testkit.Poll(waitTimeout, testkit.Tick, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			u, _, err := n.Presence.User(ctx, p.user)
			if err == nil && u.Current.Version == 0 {
				err = fmt.Errorf("%s not in the store", p.user)
			}
			return err
		}); err != nil {
			return err
		}
		c.disconnect()
	}
	return nil
}

// 4. Forgetting after the linger. Users f0, f1, f2 (one per master) have a
// device on A, s one on B; on B, observer o1 watches f0, f1 and s, and o2
// f1 and f2. Each time the last watcher of a user leaves B (o1's
// disconnect for f0 and s; o2's UNSUBSCRIBE for f1; o4's disconnect for s
// again), B drops it no sooner than the linger and within itForget: its
// retained message goes, interest_users_heard, interest_users_watched and
// redis_channels fall by one per user, interest_users_forgotten_total grows
// by one per user; a user still watched (f1 after o1 left, f2) is kept. s's
// session on B makes no interest: s is forgotten like the others while its
// device stays connected there. A fresh subscriber of a user forgotten (f0,
// s) gets its current presence, changed meanwhile, and only that.
func TestInterestForgetsAfterLinger(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	masters := newItMasters(t, cl)
	a := itStart(t, cl, "A")
	b := itStart(t, cl, "B")
	f := masters.spread("it4-f", 3, 1)
	const s = "it4-s"
	devs := map[string]*client5{}
	for _, u := range f {
		devs[u] = dial5(t, a.MQTTAddr(), u+"-1", u)
	}
	devs[s] = dial5(t, b.MQTTAddr(), s+"-1", s)
	o1 := newObserver(t, b.MQTTAddr(), "presence/users/"+f[0])
	o1.subscribe("presence/users/" + f[1])
	o1.subscribe("presence/users/" + s)
	o2 := newObserver(t, b.MQTTAddr(), "presence/users/"+f[1])
	o2.subscribe("presence/users/" + f[2])
	for _, u := range []string{f[0], f[1], s} {
		o1.waitStatus(u, presence.Online)
	}
	for _, u := range f[1:] {
		o2.waitStatus(u, presence.Online)
	}
	// held checks B's figures (each of watched, heard, channels) and which
	// of the users it retains.
	held := func(watched, heard, channels int64, retained ...string) error {
		w, h, c := itStat(b, "interest_users_watched"), itStat(b, "interest_users_heard"), itStat(b, "redis_channels")
		if w != watched || h != heard || c != channels {
			return fmt.Errorf("B: watched %d, heard %d, channels %d; want %d, %d, %d", w, h, c, watched, heard, channels)
		}
		for _, u := range append(slices.Clone(f), s) {
			if _, ok := itRetained(b, u); ok != slices.Contains(retained, u) {
				return fmt.Errorf("B retains %s: %v", u, ok)
			}
		}
		return nil
	}
	testkit.Wait(t, waitTimeout, "B holds f0, f1, f2 and s", func() error { return held(4, 4, 4, f[0], f[1], f[2], s) })

	// forgets waits until B has forgotten users, from the time their last
	// watcher left, and checks the figures then.
	forgets := func(users []string, after string, since time.Time, watched, heard, channels int64, kept ...string) {
		t.Helper()
		forgotten := itStat(b, "interest_users_forgotten_total")
		testkit.Wait(t, itForget, fmt.Sprintf("B forgets %v after %s", users, after), func() error {
			for _, u := range users {
				if p, ok := itRetained(b, u); ok {
					return fmt.Errorf("B retains %s %s v%d", u, p.Status, p.Version)
				}
			}
			h := itStat(b, "interest_users_heard")
			return testkit.Why(h == heard, fmt.Sprintf("heard %d", h))
		})
		took := time.Since(since)
		t.Logf("B forgot %v %v after %s (linger %v, bound %v)", users, took.Round(time.Millisecond), after, itLinger, itForget)
		if took < itLinger {
			t.Errorf("B forgot %v %v after %s, before the linger %v", users, took.Round(time.Millisecond), after, itLinger)
		}
		// The interest stage counts the users forgotten once the pump has
		// taken them, and the pump may drop their presence before that.
		var got int64
		testkit.Wait(t, waitTimeout, fmt.Sprintf("B's forgetting of %v counted", users), func() error {
			got = itStat(b, "interest_users_forgotten_total") - forgotten
			return testkit.Why(got >= int64(len(users)), fmt.Sprintf("grew by %d", got))
		})
		if got != int64(len(users)) {
			t.Errorf("interest_users_forgotten_total grew by %d when B forgot %v, want %d", got, users, len(users))
		}
		testkit.Wait(t, waitTimeout, fmt.Sprintf("B's figures after it forgot %v", users), func() error { return held(watched, heard, channels, kept...) })
	}

	left := time.Now()
	o1.c.disconnect()
	forgets([]string{f[0], s}, "o1's disconnect", left, 2, 2, 2, f[1], f[2])

	// s changes while B does not hold it, its device still on B; a fresh
	// subscriber gets its current presence.
	itSet(t, devs[s], presence.Away, "s-later")
	want := itWaitStored(t, b, s, "away", hasText("s-later"))
	o4 := newObserver(t, b.MQTTAddr(), "presence/users/"+s)
	itFirstIs(t, o4, s, want)
	testkit.Wait(t, waitTimeout, "B shows s again", func() error { return held(3, 3, 3, f[1], f[2], s) })

	left = time.Now()
	o2.unsubscribe("presence/users/" + f[1])
	forgets([]string{f[1]}, "o2's UNSUBSCRIBE", left, 2, 2, 2, f[2], s)

	// f0 changes while B does not hold it; a fresh subscriber gets it.
	itSet(t, devs[f[0]], presence.Away, "f0-later")
	want = itWaitStored(t, a, f[0], "away", hasText("f0-later"))
	o3 := newObserver(t, b.MQTTAddr(), "presence/users/"+f[0])
	itFirstIs(t, o3, f[0], want)
	testkit.Wait(t, waitTimeout, "B holds f0 again", func() error { return held(3, 3, 3, f[0], f[2], s) })

	// s's watcher leaves; its device, still connected to B, keeps nothing.
	left = time.Now()
	o4.c.disconnect()
	forgets([]string{s}, "its watcher left B", left, 2, 2, 2, f[0], f[2])
	if p := itStored(t, b, s); p.Status != presence.Away || p.Text != "s-later" {
		t.Errorf("s in the store after B forgot it: %s %q v%d, want away \"s-later\" (its device is still connected)", p.Status, p.Text, p.Version)
	}

	for _, o := range []*observer{o1, o2, o3, o4} {
		o.check()
	}
}

// itFirstIs waits for a fresh subscriber's first presence of user, and
// fails the test unless it is the current one (want) and the only one.
func itFirstIs(t *testing.T, o *observer, user string, want presence.Aggregate) {
	t.Helper()
	o.waitFor(user, "its current presence", func(p presence.Aggregate) bool { return p.Version >= want.Version })
	h := o.history(user)
	if len(h) != 1 || h[0].Version != want.Version || h[0].Text != want.Text {
		var got []string
		for _, p := range h {
			got = append(got, fmt.Sprintf("%s %q v%d", p.Status, p.Text, p.Version))
		}
		t.Errorf("a fresh subscriber of %s got %v, want only the current %s %q v%d", user, got, want.Status, want.Text, want.Version)
	}
}

// itFeedUser is the Redis ACL user node B connects as in
// TestInterestAfterFeedLossAndFailover, so that the test can keep B's
// subscriptions down (and only B's) while changes are committed.
const itFeedUser, itFeedPassword = "nodeb", "nodeb-Secret-1"

// itACL sends ACL SETUSER itFeedUser with rules to every running node of
// the cluster.
func itACL(t *testing.T, cl *redistest.Cluster, rules ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, n := range cl.Nodes() {
		if n.PID() == 0 {
			continue // killed
		}
		args := append([]any{"ACL", "SETUSER", itFeedUser}, toAny(rules)...)
		if err := n.Client(t).Do(ctx, args...).Err(); err != nil {
			t.Fatalf("ACL SETUSER %s %v on %s: %v", itFeedUser, rules, n.Addr(), err)
		}
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// itCutFeed cuts node B's subscriptions and keeps them down: itFeedUser
// is disabled on every node (its open connections keep working, no new one
// authenticates), and its pub/sub connections are killed on every master
// (CLIENT KILL USER itFeedUser TYPE pubsub). It returns how many it killed
// and waits until B has noticed (redis_channels 0).
func itCutFeed(t *testing.T, cl *redistest.Cluster, b *testNode) int64 {
	t.Helper()
	itACL(t, cl, "off")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var killed int64
	for _, m := range cl.Masters() {
		n, err := m.Client(t).ClientKillByFilter(ctx, "USER", itFeedUser, "TYPE", "pubsub").Result()
		if err != nil {
			t.Fatalf("CLIENT KILL USER %s TYPE pubsub on %s: %v", itFeedUser, m.Addr(), err)
		}
		killed += n
	}
	itWaitStat(t, b, "redis_channels", 0, waitTimeout)
	return killed
}

// 5. A node holds only its interest after a feed reconnect and after a
// Redis failover. On a 3-master cluster with a replica each, node B's
// observer watches six users (two per master), whose devices are on A with
// three others' that nobody on B watches. Twice, B's sharded subscriptions
// are cut and kept down (its Redis user disabled, its pub/sub connections
// killed on every master) while every user's status changes:
//   - a feed reconnect: nothing else happens;
//   - a failover: the master of none of the shared keys is SIGKILLed, and
//     the changes are committed once its replica took over.
//
// The test checks that B received nothing while cut off (else it proves
// nothing; after the failover B audits, which may read the users it
// listens to through its other connections, so only the feed reconnect
// asks that the observer had nothing new), then lets B in again: B subscribes again
// (redis_resubscriptions_total grows), reloads (redis_reloads_total grows),
// the observer gets every change made while B was cut off, at the store's
// version, B hears and watches the same six users on six channels, and
// retains none of the three others. Changes after that arrive live. No
// version the observer got went down.
func TestInterestAfterFeedLossAndFailover(t *testing.T) {
	cl := redistest.StartClusterWithReplicas(t, 3, 1)
	itACL(t, cl, "reset", "on", ">"+itFeedPassword, "~*", "&*", "+@all")
	masters := newItMasters(t, cl)
	victim := foQuietMaster(t, cl)
	a := itStart(t, cl, "A")
	b := itStart(t, cl, "B", func(c *configs.Config) {
		c.Redis.Username, c.Redis.Password = itFeedUser, configs.Secret(itFeedPassword)
	})
	watched := masters.spread("it5-w", 3, 2)
	others := masters.spread("it5-u", 3, 1)
	devs := map[string]*client5{}
	for _, u := range append(slices.Clone(watched), others...) {
		devs[u] = dial5(t, a.MQTTAddr(), u+"-1", u)
	}
	o := newObserver(t, b.MQTTAddr(), "presence/users/"+watched[0])
	for _, u := range watched[1:] {
		o.subscribe("presence/users/" + u)
	}
	for _, u := range watched {
		o.waitStatus(u, presence.Online)
	}
	// holds checks that B hears, watches and retains the watched users
	// only, on one channel each.
	holds := func() error {
		w, h, c, f := itStat(b, "interest_users_watched"), itStat(b, "interest_users_heard"), itStat(b, "redis_channels"), itStat(b, "interest_firehose")
		if n := int64(len(watched)); w != n || h != n || c != n || f != 0 {
			return fmt.Errorf("B: watched %d, heard %d, channels %d, firehose %d; want %d, %d, %d, 0", w, h, c, f, n, n, n)
		}
		for _, u := range watched {
			if _, ok := itRetained(b, u); !ok {
				return fmt.Errorf("B does not retain %s, watched there", u)
			}
		}
		for _, u := range others {
			if p, ok := itRetained(b, u); ok {
				return fmt.Errorf("B retains %s (v%d), whom nobody there watches", u, p.Version)
			}
		}
		return nil
	}
	testkit.Wait(t, waitTimeout, "B holds the watched users only", holds)

	// round cuts B off, has every user change to status/text (after kill,
	// if any), lets B in again and checks.
	round := func(name string, status presence.Status, text string, kill func()) {
		t.Helper()
		before := b.Stats()
		killed := itCutFeed(t, cl, b)
		cut := time.Now()
		fed := itStat(b, "redis_feed_messages_total")
		if kill != nil {
			kill()
		}
		for _, u := range append(slices.Clone(watched), others...) {
			itSet(t, devs[u], status, text)
		}
		final := map[string]presence.Aggregate{}
		for _, u := range append(slices.Clone(watched), others...) {
			testkit.Wait(t, foPromote, name+": "+u+" "+text+" in the store", func() error {
				// Right after a promotion a read may still go to the dead
				// master (the slot map is read again lazily): try again.
				var err error
				if final[u], err = itRead(a, u); err != nil {
					return err
				}
				return testkit.Why(final[u].Text == text, fmt.Sprintf("%s %q", final[u].Status, final[u].Text))
			})
		}
		if kill == nil { // (after a failover, the audit may read them, see below)
			for _, u := range watched {
				if p, _ := o.last(u); p.Text == text {
					t.Fatalf("%s: inconclusive: the observer on B has %s's change v%d while B's subscriptions are down", name, u, p.Version)
				}
			}
		}
		if c, f := itStat(b, "redis_channels"), itStat(b, "redis_feed_messages_total"); c != 0 || f != fed {
			t.Fatalf("%s: inconclusive: B is not cut off: %d channels, %d messages received since the cut", name, c, f-fed)
		}
		let := time.Now()
		itACL(t, cl, "on")
		for _, u := range watched {
			o.waitFor(u, name+": the change made while B was cut off", func(p presence.Aggregate) bool { return p.Version >= final[u].Version })
			if p, _ := o.last(u); p.Version != final[u].Version || p.Text != text {
				t.Errorf("%s: the observer has %s at %s %q v%d, the store at %q v%d", name, u, p.Status, p.Text, p.Version, text, final[u].Version)
			}
		}
		shown := time.Since(let)
		testkit.Wait(t, waitTimeout, name+": B holds the watched users only", holds)
		after := b.Stats()
		resubs := after.Get("redis_resubscriptions_total") - before.Get("redis_resubscriptions_total")
		reloads := after.Get("redis_reloads_total") - before.Get("redis_reloads_total")
		t.Logf("%s: %d pub/sub connections of B killed; B cut off %v; every change shown %v after B was let in; B resubscribed %d times, reloaded %d times",
			name, killed, let.Sub(cut).Round(time.Millisecond), shown.Round(time.Millisecond), resubs, reloads)
		if resubs < 1 || reloads < 1 {
			t.Errorf("%s: redis_resubscriptions_total grew by %d, redis_reloads_total by %d; want both to grow", name, resubs, reloads)
		}
		// Live again.
		for _, u := range watched {
			itSet(t, devs[u], presence.Online, name+"-live")
		}
		for _, u := range watched {
			o.waitFor(u, name+": live again", hasText(name+"-live"))
		}
	}

	round("feed reconnect", presence.Away, "held-1", nil)
	cl.WaitReplicated(t, waitTimeout)
	round("failover", presence.Busy, "held-2", func() {
		t.Logf("killing %s, master of the users %v", victim.Addr(), itOn(masters, victim.Addr(), append(slices.Clone(watched), others...)))
		killed := time.Now()
		victim.Kill(t)
		_, at := cl.WaitPromoted(t, victim, foPromote)
		t.Logf("its replica took over %v after the kill", at.Sub(killed).Round(time.Millisecond))
	})
	testkit.Wait(t, waitTimeout, "B holds the watched users only, at the end", holds)
	o.check()
}

// itOn returns the users of users whose records the master at addr held.
func itOn(m itMasters, addr string, users []string) []string {
	var out []string
	for _, u := range users {
		if m.of(u) == addr {
			out = append(out, u)
		}
	}
	return out
}

// A client that subscribes to name after name and lets each go makes the
// node hear no more than presence.interest_max_lingering of them at once
// (issue 23's "nothing grows without bound"): with a linger of an hour and
// a bound of 100, 250 names subscribed and unsubscribed leave 100
// lingering, the 150 that lingered longest forgotten early and counted,
// and only the marker and those 100 heard (one sharded channel each).
func TestInterestLingeringBounded(t *testing.T) {
	const (
		names = 250
		bound = 100
		batch = 50
	)
	cl := redistest.StartCluster(t, 3)
	n := itStart(t, cl, "itlb-a", func(c *configs.Config) {
		c.Presence.InterestLinger = configs.Duration(time.Hour)
		c.Presence.InterestMaxLingering = bound
	})
	const marker = "itlb-marker"
	o := newObserver(t, n.MQTTAddr(), "presence/users/"+marker)
	itWaitStat(t, n, "interest_users_heard", 1, waitTimeout)
	for from := 0; from < names; from += batch {
		var subs []paho.SubscribeOptions
		var topics []string
		for i := from; i < from+batch; i++ {
			topic := fmt.Sprintf("presence/users/itlb-%03d", i)
			subs = append(subs, paho.SubscribeOptions{Topic: topic, QoS: 1})
			topics = append(topics, topic)
		}
		listens := itStat(n, "interest_listens_total")
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		if _, err := o.c.Subscribe(ctx, &paho.Subscribe{Subscriptions: subs}); err != nil {
			cancel()
			t.Fatalf("subscribe %d names: %v", batch, err)
		}
		// Heard before they are let go, as a client that waits for each
		// snapshot would have them (a name let go before the node listened
		// to it never lingers). The count of users heard cannot tell: the
		// batch before may not be evicted yet.
		testkit.Wait(t, itSnapshot+waitTimeout, fmt.Sprintf("names %d to %d heard", from, from+batch-1), func() error {
			got := itStat(n, "interest_listens_total") - listens
			return testkit.Why(got >= batch, fmt.Sprintf("%d listened to", got))
		})
		if _, err := o.c.Unsubscribe(ctx, &paho.Unsubscribe{Topics: topics}); err != nil {
			cancel()
			t.Fatalf("unsubscribe %d names: %v", batch, err)
		}
		cancel()
	}
	itWaitStat(t, n, "interest_users_evicted_total", names-bound, waitTimeout)
	if l, h, w := itStat(n, "interest_users_lingering"), itStat(n, "interest_users_heard"), itStat(n, "interest_users_watched"); l != bound || h != 1+bound || w != 1 {
		t.Errorf("lingering %d, heard %d, watched %d; want %d, %d, 1", l, h, w, bound, 1+bound)
	}
	if c := itStat(n, "redis_channels"); c != 1+bound {
		t.Errorf("%d sharded channels, want %d (the marker and the lingering)", c, 1+bound)
	}
	if f := itStat(n, "interest_users_forgotten_total"); f != names-bound {
		t.Errorf("forgotten %d, want %d (none lingered out within the hour)", f, names-bound)
	}
}
