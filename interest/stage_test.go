package interest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/testkit"
)

// fakeStore records what the stage asks of it; fail makes every call fail.
type fakeStore struct {
	mu                 sync.Mutex
	listened, unlisten []string
	all, allOff        int
	fail               bool
}

func (f *fakeStore) call(add func()) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("down")
	}
	add()
	return nil
}

func (f *fakeStore) Listen(_ context.Context, u []string) error {
	return f.call(func() { f.listened = append(f.listened, u...) })
}

func (f *fakeStore) Unlisten(_ context.Context, u []string) error {
	return f.call(func() { f.unlisten = append(f.unlisten, u...) })
}
func (f *fakeStore) ListenAll(context.Context) error   { return f.call(func() { f.all++ }) }
func (f *fakeStore) UnlistenAll(context.Context) error { return f.call(func() { f.allOff++ }) }

func (f *fakeStore) take() (listened, unlistened []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	listened, unlistened = f.listened, f.unlisten
	f.listened, f.unlisten = nil, nil
	return
}

// fakeGroups records the group topics watched and unwatched.
type fakeGroups struct{ watched, unwatched []string }

func (g *fakeGroups) Watch(_ *mqtt.Client, filter string) { g.watched = append(g.watched, filter) }
func (g *fakeGroups) Unwatch(group string)                { g.unwatched = append(g.unwatched, group) }

// rig is a stage on a fake store, a fake clock and fake clients.
type rig struct {
	t       testing.TB
	s       *Stage
	st      *fakeStore
	g       *fakeGroups
	clk     *testkit.Clock
	srv     *mqtt.Server
	viewers map[string][2]any // client id -> user, service
	mates   map[string][]string
	forgot  []string
	shown   []string
	nodes   []string
}

const linger = time.Minute

func newRig(t testing.TB, v Visibility) *rig {
	r := &rig{t: t, st: &fakeStore{}, g: &fakeGroups{}, clk: testkit.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)),
		srv: mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler)}), viewers: map[string][2]any{}, mates: map[string][]string{}}
	r.s = New(Options{Prefix: "presence", Visibility: v, Linger: linger, Now: r.clk.Now, Store: r.st, Groups: r.g,
		Viewer: func(cl *mqtt.Client) (string, bool) {
			v := r.viewers[cl.ID]
			u, _ := v[0].(string)
			svc, _ := v[1].(bool)
			return u, svc
		},
		Mates:  func(u string) []string { return r.mates[u] },
		Shown:  func() []string { return r.shown },
		Forget: func(u []string) { r.forgot = append(r.forgot, u...) },
		Nodes:  func(filter string) { r.nodes = append(r.nodes, filter) },
	})
	return r
}

// client connects a client with a session of user ("" an observer).
func (r *rig) client(id, user string, service bool) *mqtt.Client {
	a, b := net.Pipe()
	r.t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	cl := r.srv.NewClient(a, "t", id, false)
	r.viewers[id] = [2]any{user, service}
	(&Hook{Stage: r.s}).OnSessionEstablished(cl, packets.Packet{})
	return cl
}

func (r *rig) subscribe(cl *mqtt.Client, filters ...string) {
	pk := packets.Packet{}
	codes := make([]byte, len(filters))
	for _, f := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f})
		cl.State.Subscriptions.Add(f, packets.Subscription{Filter: f})
	}
	(&Hook{Stage: r.s}).OnSubscribed(cl, pk, codes)
}

func (r *rig) unsubscribe(cl *mqtt.Client, filters ...string) {
	pk := packets.Packet{}
	for _, f := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f})
		cl.State.Subscriptions.Delete(f)
	}
	(&Hook{Stage: r.s}).OnUnsubscribed(cl, pk)
}

func (r *rig) reconcile() {
	r.t.Helper()
	if err := r.s.reconcile(); err != nil {
		r.t.Fatalf("reconcile: %v", err)
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// A subscription to a user's topic makes the node hear (and load) the
// user and show it; unsubscribed, the user is forgotten a linger later,
// not before; a second subscription within the linger keeps it.
func TestInterestAppearsAndLingers(t *testing.T) {
	r := newRig(t, Open)
	cl := r.client("obs", "", false)
	r.subscribe(cl, "presence/users/ann")
	if !r.s.Shows("ann") || r.s.Shows("bob") {
		t.Fatalf("shows ann %v, bob %v", r.s.Shows("ann"), r.s.Shows("bob"))
	}
	r.reconcile()
	if l, _ := r.st.take(); !slices.Equal(l, []string{"ann"}) {
		t.Fatalf("listened %v, want [ann]", l)
	}
	r.unsubscribe(cl, "presence/users/ann")
	r.clk.Advance(linger - time.Second)
	r.reconcile()
	if _, u := r.st.take(); len(u) != 0 || len(r.forgot) != 0 {
		t.Fatalf("within the linger: unlistened %v, forgot %v", u, r.forgot)
	}
	r.subscribe(cl, "presence/users/ann") // back within the linger
	r.unsubscribe(cl, "presence/users/ann")
	r.clk.Advance(linger - time.Second)
	r.reconcile()
	if len(r.forgot) != 0 {
		t.Fatalf("forgot %v: the linger restarts with each release", r.forgot)
	}
	r.clk.Advance(2 * time.Second)
	r.reconcile()
	if _, u := r.st.take(); !slices.Equal(u, []string{"ann"}) || !slices.Equal(r.forgot, []string{"ann"}) {
		t.Fatalf("after the linger: unlistened %v, forgot %v", u, r.forgot)
	}
	if w, h := r.s.Watching("ann"); w || h {
		t.Fatalf("ann still watched %v, heard %v", w, h)
	}
}

// A session here makes no interest: its user is neither heard nor shown
// (the node writes the session's changes itself; the audit after a
// failover compares sessions, not versions), and a connection that
// subscribes to nothing leaves the stage no record. Watched, the user is
// heard and shown like any other.
func TestSessionsMakeNoInterest(t *testing.T) {
	r := newRig(t, Open)
	cl := r.client("bob-1", "bob", false)
	r.reconcile()
	if l, _ := r.st.take(); len(l) != 0 {
		t.Fatalf("a session alone listened to %v", l)
	}
	if r.s.Shows("bob") || len(r.s.clients) != 0 {
		t.Fatalf("a session alone: shows bob %v, %d client records", r.s.Shows("bob"), len(r.s.clients))
	}
	// Application topics read no presence: no record either.
	r.subscribe(cl, "client_test5/TopicA", "$share/g/jobs/+", "a/b/#")
	if len(r.s.clients) != 0 {
		t.Fatalf("application topics made %d client records", len(r.s.clients))
	}
	r.subscribe(cl, "presence/users/bob") // bob watches himself
	r.reconcile()
	if l, _ := r.st.take(); !slices.Equal(l, []string{"bob"}) || !r.s.Shows("bob") {
		t.Fatalf("watched: listened %v, shows %v", l, r.s.Shows("bob"))
	}
	(&Hook{Stage: r.s}).OnDisconnect(cl, nil, true)
	r.clk.Advance(linger)
	r.reconcile()
	if _, u := r.st.take(); !slices.Equal(u, []string{"bob"}) || len(r.s.clients) != 0 {
		t.Fatalf("after the linger: unlistened %v, %d client records", u, len(r.s.clients))
	}
}

// An unrestricted wildcard under visibility open is a firehose: every user
// is heard and shown; a linger after the last such subscriber, the node
// goes back to its interest and forgets every user nobody here watches.
func TestFirehose(t *testing.T) {
	r := newRig(t, Open)
	cl := r.client("obs", "", false)
	watcher := r.client("w", "", false)
	r.subscribe(watcher, "presence/users/ann")
	r.subscribe(cl, "presence/users/+")
	r.reconcile()
	if r.st.all != 1 || !r.s.Shows("anyone") || !r.s.Firehose() {
		t.Fatalf("firehose: ListenAll %d, shows %v", r.st.all, r.s.Shows("anyone"))
	}
	r.shown = []string{"ann", "bob", "cat"}
	r.unsubscribe(cl, "presence/users/+")
	if !r.s.Shows("bob") {
		t.Fatal("the firehose ended before its linger")
	}
	r.clk.Advance(linger)
	r.reconcile()
	if r.st.allOff != 1 || r.s.Firehose() || r.s.Shows("bob") || !r.s.Shows("ann") {
		t.Fatalf("after the linger: UnlistenAll %d, firehose %v, shows bob %v, ann %v", r.st.allOff, r.s.Firehose(), r.s.Shows("bob"), r.s.Shows("ann"))
	}
	if f := sorted(r.forgot); !slices.Equal(f, []string{"bob", "cat"}) {
		t.Fatalf("forgot %v, want bob and cat (ann is watched)", f)
	}
	// # and +/users/+ are firehoses too; a service account's wildcard
	// under visibility groups as well.
	for _, f := range []string{"#", "+/users/+", "presence/#"} {
		n := needOfFilter(r.s, f, "", false)
		if !n.fire {
			t.Errorf("%s is not a firehose under visibility open", f)
		}
	}
	// A shared subscription is read as mochi reads it: $share in any case,
	// the group's level dropped.
	for _, f := range []string{"$share/g/presence/users/+", "$SHARE/g/presence/users/+", "$Share/g/#"} {
		if n := needOfFilter(r.s, f, "", false); !n.fire {
			t.Errorf("%s is not a firehose under visibility open", f)
		}
	}
	if n := needOfFilter(r.s, "$SHARE/g/presence/users/ann", "", false); n.fire || len(n.users) != 1 {
		t.Errorf("$SHARE/g/presence/users/ann needs %+v, want ann only", n)
	}
}

// needOfFilter is what one filter needs.
func needOfFilter(s *Stage, filter, viewer string, service bool) need {
	return s.needOf(&client{filters: map[string]struct{}{filter: {}}, viewer: viewer, service: service})
}

// Under visibility groups a user's wildcard needs its group mates (and
// itself), recomputed when the groups change; a service account's is a
// firehose; under self, its own user only.
func TestWildcardUnderVisibility(t *testing.T) {
	r := newRig(t, ByGroups)
	r.mates["ann"] = []string{"bob", "cat"}
	cl := r.client("ann-1", "ann", false)
	r.subscribe(cl, "presence/users/+")
	for _, u := range []string{"ann", "bob", "cat"} {
		if !r.s.Shows(u) {
			t.Errorf("%s not shown to ann's wildcard", u)
		}
	}
	if r.s.Shows("dan") || r.s.Firehose() {
		t.Fatal("ann's wildcard made a firehose")
	}
	r.reconcile() // ann, bob and cat heard
	r.mates["ann"] = []string{"bob", "dan"}
	r.s.Regroup()
	if !r.s.Shows("dan") {
		t.Error("dan joined ann's group: not shown")
	}
	r.clk.Advance(linger)
	if err := r.s.reconcile(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(r.forgot, "cat") {
		t.Errorf("cat left ann's groups: not forgotten after the linger (forgot %v)", r.forgot)
	}
	if n := needOfFilter(r.s, "presence/users/+", "ops", true); !n.fire {
		t.Error("a service account's wildcard is not a firehose")
	}
	self := newRig(t, Private)
	if n := needOfFilter(self.s, "#", "ann", false); n.fire || len(n.users) != 1 {
		t.Errorf("visibility self: # of ann needs %+v, want ann only", n)
	}
	if n := needOfFilter(self.s, "presence/+/bob", "ann", false); len(n.users) != 1 {
		t.Errorf("presence/+/bob needs %+v, want bob", n.users)
	}
}

// Refused filters count for nothing; a persistent session keeps its
// interest after its connection ends, until it expires; a takeover keeps
// the interest (keyed by client id); connections that subscribe to nothing
// leave no record, through a takeover too.
func TestSubscriptionsLifecycle(t *testing.T) {
	r := newRig(t, Open)
	cl := r.client("p", "", false)
	(&Hook{Stage: r.s}).OnSubscribed(cl, packets.Packet{Filters: packets.Subscriptions{{Filter: "presence/users/ann"}, {Filter: "presence/users/bob"}}},
		[]byte{0x00, 0x87})
	if !r.s.Shows("ann") || r.s.Shows("bob") {
		t.Fatalf("granted ann shown %v, refused bob shown %v", r.s.Shows("ann"), r.s.Shows("bob"))
	}
	cl.State.Subscriptions.Add("presence/users/ann", packets.Subscription{Filter: "presence/users/ann"})
	(&Hook{Stage: r.s}).OnDisconnect(cl, nil, false) // persistent: kept
	if !r.s.Shows("ann") {
		t.Fatal("a persistent session's interest ended with its connection")
	}
	next := r.srv.NewClient(nil, "t", "p", false) // takes the session over, inheriting the filters
	next.State.Subscriptions.Add("presence/users/ann", packets.Subscription{Filter: "presence/users/ann"})
	(&Hook{Stage: r.s}).OnSessionEstablished(next, packets.Packet{})
	(&Hook{Stage: r.s}).OnClientExpired(cl) // the old client object: not the one kept
	if !r.s.Shows("ann") {
		t.Fatal("the taken-over session lost its interest")
	}
	(&Hook{Stage: r.s}).OnClientExpired(next)
	if r.s.Shows("ann") {
		t.Fatal("an expired session kept its interest")
	}
	// Connections without subscriptions, one taking the other over.
	a := r.client("ann-1", "ann", false)
	b := r.client("ann-1", "ann", false) // the same id: a takeover
	(&Hook{Stage: r.s}).OnDisconnect(a, nil, true)
	(&Hook{Stage: r.s}).OnDisconnect(b, nil, true)
	if len(r.s.clients) != 0 || r.s.Shows("ann") {
		t.Fatalf("%d client records, shows ann %v: want none", len(r.s.clients), r.s.Shows("ann"))
	}
}

// The node topics are told of each granted filter that can read a node
// topic, refused ones not, and of those a session inherits.
func TestNodeFilters(t *testing.T) {
	r := newRig(t, Open)
	a := r.client("a", "", false)
	r.subscribe(a, "presence/nodes/A", "presence/users/+", "presence/#", "presence/nodes/+/x", "#")
	slices.Sort(r.nodes)
	if want := []string{"#", "presence/#", "presence/nodes/A"}; !slices.Equal(r.nodes, want) {
		t.Fatalf("told %v, want %v", r.nodes, want)
	}
	r.nodes = nil
	(&Hook{Stage: r.s}).OnSubscribed(a, packets.Packet{Filters: []packets.Subscription{{Filter: "presence/nodes/B"}}}, []byte{0x87})
	if len(r.nodes) != 0 {
		t.Fatalf("a refused filter told: %v", r.nodes)
	}
}

// A group topic's first subscriber has the groups stage watch it; its
// last leaving, unwatch it a linger later. The node topics are told of
// each granted filter that can read them (the nodes stage then reads while
// one matches). The leader's members are shown.
func TestGroupsNodesAndLeader(t *testing.T) {
	r := newRig(t, Open)
	a, b := r.client("a", "", false), r.client("b", "", false)
	r.subscribe(a, "presence/groups/team", "presence/nodes/#")
	r.subscribe(b, "presence/groups/team")
	if len(r.g.watched) != 2 || !slices.Equal(r.nodes, []string{"presence/nodes/#"}) {
		t.Fatalf("watched %v, nodes %v", r.g.watched, r.nodes)
	}
	r.unsubscribe(a, "presence/groups/team", "presence/nodes/#")
	r.unsubscribe(b, "presence/groups/team")
	r.clk.Advance(linger)
	r.reconcile()
	if !slices.Equal(r.g.unwatched, []string{"team"}) || len(r.nodes) != 1 {
		t.Fatalf("unwatched %v, nodes %v", r.g.unwatched, r.nodes)
	}
	r.s.Lead([]string{"ann", "bob"})
	if !r.s.Shows("ann") || !r.s.Shows("bob") {
		t.Fatal("the leader's members are not shown")
	}
	r.s.Lead(nil)
	if r.s.Shows("ann") {
		t.Fatal("a node that no longer leads still shows the members")
	}
}

// A store that does not answer is asked again; what it was asked is not
// taken as done.
func TestStoreFailureRetried(t *testing.T) {
	r := newRig(t, Open)
	r.st.fail = true
	cl := r.client("obs", "", false)
	r.subscribe(cl, "presence/users/ann")
	if err := r.s.reconcile(); err == nil {
		t.Fatal("a failed listen reported done")
	}
	if _, heard := r.s.Watching("ann"); heard {
		t.Fatal("ann counted as heard after a failed listen")
	}
	r.st.fail = false
	r.reconcile()
	if l, _ := r.st.take(); !slices.Equal(l, []string{"ann"}) {
		t.Fatalf("listened %v after the store came back", l)
	}
}

// The program's inline subscriptions count as a service account's: a
// wildcard over the users is a firehose, an exact one needs its user.
func TestInlineFollow(t *testing.T) {
	r := newRig(t, ByGroups)
	r.s.Follow("1", "presence/users/ann")
	if !r.s.Shows("ann") || !r.s.following("1") {
		t.Fatal("an inline subscription to ann is not followed")
	}
	r.s.Follow("2", "presence/users/+")
	r.reconcile()
	if r.st.all != 1 {
		t.Fatal("an inline wildcard is not a firehose")
	}
	r.s.Unfollow("1", "presence/users/ann")
	r.s.Unfollow("2", "presence/users/+")
	if r.s.following("1") || r.s.following("2") || r.s.fire != 0 {
		t.Fatal("unfollowed subscriptions still count")
	}
}

// TestApplicationTopicsWakeNothing: a connection that never subscribed to
// presence unsubscribes and disconnects without waking the stage's worker
// (each wake is a thread switch on the packet path: an UNSUBSCRIBE of an
// application topic doubled the SUBSCRIBE/UNSUBSCRIBE round trip, issue
// 18); one that did wakes it.
func TestApplicationTopicsWakeNothing(t *testing.T) {
	r := newRig(t, Open)
	woken := func() bool {
		select {
		case <-r.s.wakeC:
			return true
		default:
			return false
		}
	}
	app := r.client("app-1", "ann", false)
	woken() // whatever the set-up did
	r.subscribe(app, "sensors/+/temp")
	r.unsubscribe(app, "sensors/+/temp")
	(&Hook{Stage: r.s}).OnDisconnect(app, nil, true)
	(&Hook{Stage: r.s}).OnClientExpired(app)
	if woken() {
		t.Fatal("application topics only: the stage was woken")
	}
	obs := r.client("obs-1", "bob", false)
	r.subscribe(obs, "presence/users/ann")
	woken()
	r.unsubscribe(obs, "presence/users/ann")
	if !woken() {
		t.Fatal("a presence filter given up: the stage was not woken")
	}
	r.subscribe(obs, "presence/users/ann")
	woken()
	(&Hook{Stage: r.s}).OnDisconnect(obs, nil, true)
	if !woken() {
		t.Fatal("a presence subscriber gone: the stage was not woken")
	}
}

// TestHoldFirehose: a stage's hold makes the node a firehose like an
// unrestricted subscriber; released, the firehose ends after the linger.
func TestHoldFirehose(t *testing.T) {
	r := newRig(t, Open)
	r.s.HoldFirehose()
	if !r.s.Shows("anyone") {
		t.Fatal("held: every user is shown")
	}
	r.s.ReleaseFirehose()
	r.s.ReleaseFirehose() // one too many: no effect
	r.s.mu.Lock()
	fire, idle := r.s.fire, r.s.fireIdle
	r.s.mu.Unlock()
	if fire != 0 || idle.IsZero() {
		t.Fatalf("released: fire %d, idle since %v", fire, idle)
	}
}

// No more than MaxLingering users linger: a client that subscribes to
// name after name and lets each go would otherwise make the node hear all
// of them for a linger. Past the bound the longest lingering are forgotten
// at the next pass (counted in Evicted); one of them
// subscribed to again is heard again; the rest still go a linger after
// their release, not counted as evicted.
func TestLingeringBounded(t *testing.T) {
	r := newRig(t, Open)
	r.s.o.MaxLingering = 3
	cl := r.client("obs", "", false)
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5"}
	for _, u := range users {
		r.subscribe(cl, "presence/users/"+u)
	}
	r.reconcile()
	if l, _ := r.st.take(); !slices.Equal(sorted(l), users) {
		t.Fatalf("listened %v", l)
	}
	for _, u := range users {
		r.unsubscribe(cl, "presence/users/"+u) // which wakes the worker: the pass below
		r.clk.Advance(time.Second)
	}
	if n := r.s.Stats.Lingering.Load(); n != 6 {
		t.Fatalf("lingering %d before the pass, want 6", n)
	}
	r.reconcile()
	if _, u := r.st.take(); !slices.Equal(sorted(u), users[:3]) || !slices.Equal(sorted(r.forgot), users[:3]) {
		t.Fatalf("over the bound: unlistened %v, forgot %v; want the three longest lingering %v", u, r.forgot, users[:3])
	}
	if e, l, h := r.s.Stats.Evicted.Load(), r.s.Stats.Lingering.Load(), r.s.Stats.Heard.Load(); e != 3 || l != 3 || h != 3 {
		t.Fatalf("evicted %d, lingering %d, heard %d; want 3, 3, 3", e, l, h)
	}
	r.subscribe(cl, "presence/users/u0") // evicted, wanted again: heard again
	r.reconcile()
	if l, _ := r.st.take(); !slices.Equal(l, []string{"u0"}) {
		t.Fatalf("listened %v, want [u0] again", l)
	}
	r.unsubscribe(cl, "presence/users/u0")
	r.forgot = nil
	r.clk.Advance(linger)
	r.reconcile()
	if _, u := r.st.take(); !slices.Equal(sorted(u), []string{"u0", "u3", "u4", "u5"}) {
		t.Fatalf("after the linger: unlistened %v", u)
	}
	if e, f := r.s.Stats.Evicted.Load(), r.s.Stats.Forgotten.Load(); e != 3 || f != 7 {
		t.Fatalf("evicted %d, forgotten %d; want 3 (the linger's are not evicted), 7", e, f)
	}
}

// A user needed again and let go again lingers from the second time on:
// the longest lingering are counted by their latest linger. The queue of
// lingers keeps no more than twice the users lingering (and a few) however
// often one user comes and goes, and is dropped once nobody lingers.
func TestLingerQueue(t *testing.T) {
	r := newRig(t, Open)
	r.s.o.MaxLingering = 2
	cl := r.client("obs", "", false)
	for _, u := range []string{"a", "b", "c"} {
		r.subscribe(cl, "presence/users/"+u)
	}
	r.reconcile()
	r.st.take()
	for _, u := range []string{"a", "b"} {
		r.unsubscribe(cl, "presence/users/"+u)
		r.clk.Advance(time.Second)
	}
	// a is needed again and let go again, after b: b lingers longest.
	r.subscribe(cl, "presence/users/a")
	r.clk.Advance(time.Second)
	r.unsubscribe(cl, "presence/users/a")
	r.clk.Advance(time.Second)
	r.unsubscribe(cl, "presence/users/c")
	r.reconcile()
	if _, u := r.st.take(); !slices.Equal(u, []string{"b"}) {
		t.Fatalf("over the bound by one: unlistened %v, want [b], whose linger began first", u)
	}
	// One user heard coming and going 10,000 times: one stale entry each.
	r.s.o.MaxLingering = DefaultMaxLingering
	r.subscribe(cl, "presence/users/d")
	r.reconcile()
	r.unsubscribe(cl, "presence/users/d")
	for range 10_000 {
		r.subscribe(cl, "presence/users/d")
		r.unsubscribe(cl, "presence/users/d")
		r.s.mu.Lock()
		n, idle := len(r.s.lq)-r.s.lqHead, len(r.s.idle)
		r.s.mu.Unlock()
		if n > 2*idle+64 {
			t.Fatalf("%d entries queued for %d users lingering", n, idle)
		}
	}
	r.reconcile()
	r.clk.Advance(linger)
	r.reconcile()
	if _, u := r.st.take(); !slices.Equal(sorted(u), []string{"a", "c", "d"}) {
		t.Fatalf("after the linger: unlistened %v, want [a c d]", u)
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if len(r.s.idle) != 0 || r.s.lq != nil || r.s.lqHead != 0 {
		t.Fatalf("nobody lingers, yet idle %d, queue %d (front %d)", len(r.s.idle), len(r.s.lq), r.s.lqHead)
	}
}

// BenchmarkChurnAtBound is a client churning subscriptions on a node
// holding its bound of lingering users (DefaultMaxLingering): each op
// subscribes to a name never seen, lets it go, and runs the stage's two
// passes (the first hears the name, the second forgets the longest
// lingering, one over the bound). A pass holds the stage's mu, which every
// presence SUBSCRIBE and UNSUBSCRIBE of the node takes.
func BenchmarkChurnAtBound(b *testing.B) {
	r := newRig(b, Open)
	cl := r.client("obs", "", false)
	filters := make([]string, DefaultMaxLingering)
	for i := range filters {
		filters[i] = "presence/users/u" + strconv.Itoa(i)
	}
	r.subscribe(cl, filters...)
	r.reconcile()
	r.unsubscribe(cl, filters...)
	r.reconcile()
	r.st.take()
	if n := r.s.Stats.Lingering.Load(); n != DefaultMaxLingering {
		b.Fatalf("%d lingering, want %d", n, DefaultMaxLingering)
	}
	for i := 0; b.Loop(); i++ {
		f := "presence/users/n" + strconv.Itoa(i)
		r.subscribe(cl, f)
		r.reconcile()
		r.unsubscribe(cl, f)
		r.reconcile()
		r.st.take()
		r.forgot = r.forgot[:0]
	}
	if n := r.s.Stats.Evicted.Load(); n == 0 {
		b.Fatal("nothing evicted")
	}
}
