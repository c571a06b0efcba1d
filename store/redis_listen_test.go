package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

// quietStore starts a Redis store that listens to nothing yet; hold, when
// set, runs before each pass of its subscriber (listener.beforePass).
func quietStore(t *testing.T, c redis.UniversalClient, node string, hold func(stop <-chan struct{})) (*Redis, *events) {
	t.Helper()
	col := &events{}
	r := NewRedis(RedisOptions{
		Client: c, Prefix: "t:" + t.Name() + ":", Node: node, Authoritative: []string{"desktop"},
		NodeTTL: 3 * time.Second, Retention: time.Hour, Report: col.report,
	})
	if hold != nil {
		r.ls.beforePass = func() { hold(r.stop) }
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(r.Stop)
	return r, col
}

// gate holds a subscriber's passes while closed (hold), and lets them run
// once opened.
type gate struct {
	mu   sync.Mutex
	open chan struct{} // closed while open
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) hold(stop <-chan struct{}) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	case <-stop:
	}
}

func (g *gate) close() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) release() {
	g.mu.Lock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
	g.mu.Unlock()
}

// users returns the users the collector saw a change of.
func (e *events) users() []string {
	var out []string
	for _, p := range e.All() {
		if !slices.Contains(out, p.User) {
			out = append(out, p.User)
		}
	}
	slices.Sort(out)
	return out
}

// groupBatches returns the GroupBatch events reported so far.
func (e *events) groupBatches() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Event
	for _, ev := range e.others {
		if ev.Kind == GroupBatch {
			out = append(out, ev)
		}
	}
	return out
}

// trio starts, on one server, a writer and a node named name that listen
// to nothing yet, and a firehose (ListenAll).
func trio(t *testing.T, srv *redistest.Server, name string) (w, x *Redis, colX *events, f *Redis, colF *events) {
	t.Helper()
	w, _ = quietStore(t, srv.Client(t), "writer", nil)
	x, colX = quietStore(t, srv.Client(t), name, nil)
	f, colF = quietStore(t, srv.Client(t), "firehose", nil)
	if err := f.ListenAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w, x, colX, f, colF
}

func waitMessages(t *testing.T, r *Redis, want int64, what string) {
	t.Helper()
	testkit.Wait(t, 10*time.Second, what, func() error {
		n := r.Stats().FeedMessages
		if n > want {
			t.Fatalf("%s: %d feed messages, want %d", what, n, want)
		}
		return testkit.Why(n == want, fmt.Sprintf("%d feed messages of %d", n, want))
	})
}

// A node listening to one user hears that user's changes and no other's
// (counted in messages, not only in reports); after Unlisten it hears none;
// a firehose node hears every change; a node listening to nothing gets no
// message at all. Listen first reports the user's current aggregate.
func TestRedisListenHearsOnlyWhatItListensTo(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	w, l, colL, f, colF := trio(t, srv, "listener")
	a, err := w.Open(ctx, presence.OpenArgs{User: "alice", ID: "a", Node: "writer", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// Hear first, load second: alice's current aggregate is reported.
	if err := l.Listen(ctx, []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	if p, ok := colL.Last("alice"); !ok || p.Status != presence.Online {
		t.Fatalf("Listen did not report alice's current aggregate: %+v %v", p, ok)
	}
	if err := l.Listen(ctx, []string{"alice"}); err != nil { // idempotent
		t.Fatal(err)
	}
	if n := l.Stats().Channels; n != 1 {
		t.Fatalf("%d channels subscribed, want 1", n)
	}
	b, err := w.Open(ctx, presence.OpenArgs{User: "bob", ID: "b", Node: "writer", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	away, busy := presence.Away, presence.Busy
	for _, st := range []presence.Status{away, busy, away} {
		if err := w.Update(ctx, presence.SessionRef{User: "alice", ID: "a", Epoch: a.Epoch}, presence.Update{Status: &st}); err != nil {
			t.Fatal(err)
		}
		if err := w.Update(ctx, presence.SessionRef{User: "bob", ID: "b", Epoch: b.Epoch}, presence.Update{Status: &st}); err != nil {
			t.Fatal(err)
		}
	}
	// One connection, messages in order: alice's last change heard means
	// bob's, published before it, would have been heard too.
	waitMessages(t, l, 3, "alice's three changes")
	colL.WaitFor(t, 10*time.Second, "alice", "away", func(p presence.Aggregate) bool { return p.Status == presence.Away })
	if got := colL.users(); !slices.Equal(got, []string{"alice"}) {
		t.Fatalf("the listener reported %v, want only alice", got)
	}
	waitMessages(t, f, 1+1+6, "every change at the firehose") // alice's open (before Listen), bob's open, six updates
	if got := colF.users(); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Fatalf("the firehose reported %v", got)
	}
	if err := l.Unlisten(ctx, []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	if n := l.Stats().Channels; n != 0 {
		t.Fatalf("%d channels subscribed after Unlisten, want 0", n)
	}
	if err := w.End(ctx, presence.EndArgs{User: "alice", ID: "a", Epoch: a.Epoch, Reason: presence.EndClean}); err != nil {
		t.Fatal(err)
	}
	waitMessages(t, f, 9, "alice's end at the firehose")
	// A barrier: bob's change comes after alice's end on the listener's one
	// connection; it hears bob's and not alice's.
	if err := l.Listen(ctx, []string{"bob"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Update(ctx, presence.SessionRef{User: "bob", ID: "b", Epoch: b.Epoch}, presence.Update{Status: &busy}); err != nil {
		t.Fatal(err)
	}
	colL.WaitFor(t, 10*time.Second, "bob", "busy", func(p presence.Aggregate) bool { return p.Status == presence.Busy })
	waitMessages(t, l, 4, "bob's change, not alice's end")
	if p, _ := colL.Last("alice"); p.Status == presence.Offline {
		t.Fatal("the listener heard alice's end after Unlisten")
	}
	if n := w.Stats().FeedMessages; n != 0 {
		t.Fatalf("a node listening to nothing got %d messages", n)
	}
	t.Logf("listener %+v; firehose %+v", l.Stats(), f.Stats())
}

// No change goes over classic pub/sub: a PSUBSCRIBE of every channel (the
// server is this test's own) gets nothing from a commit of any kind (every
// script that commits, the batch path, the reaper, the sweep, a tombstone,
// a group's batch), while a firehose hears each by SPUBLISH. A classic
// PUBLISH anywhere on that path fails it. The scripts' sources say the
// same.
func TestRedisNoClassicPublishOnTheChangePath(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	prefix := "t:" + t.Name() + ":"
	raw := srv.Client(t)
	classic := raw.PSubscribe(ctx, "*")
	defer classic.Close()
	if _, err := classic.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	w, _ := quietStore(t, srv.Client(t), "writer", nil)
	dead, _ := quietStore(t, srv.Client(t), "dead", nil)
	f, colF := quietStore(t, srv.Client(t), "firehose", nil)
	if err := f.ListenAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.ListenGroups(ctx, []string{"team"}); err != nil {
		t.Fatal(err)
	}
	a, err := w.Open(ctx, presence.OpenArgs{User: "ann", ID: "a", Node: "writer", TTL: time.Hour}) // open
	if err != nil {
		t.Fatal(err)
	}
	away := presence.Away
	if err := w.Update(ctx, presence.SessionRef{User: "ann", ID: "a", Epoch: a.Epoch}, presence.Update{Status: &away}); err != nil { // update
		t.Fatal(err)
	}
	text := "out"
	if err := w.SetAccount(ctx, "ann", presence.AccountUpdate{Text: &text}); err != nil { // account
		t.Fatal(err)
	}
	epochs, errs := w.Batch(ctx, []presence.Write{ // the batch path: open, update, end
		{Kind: presence.WriteOpen, Open: presence.OpenArgs{User: "ben", ID: "b", Node: "writer", TTL: time.Hour}},
		{Kind: presence.WriteEnd, End: presence.EndArgs{User: "ann", ID: "a", Epoch: a.Epoch, Reason: presence.EndClean}},
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if _, errs := w.Batch(ctx, []presence.Write{{Kind: presence.WriteUpdate, Ref: presence.SessionRef{User: "ben", ID: "b", Epoch: epochs[0]}, Update: presence.Update{Status: &away}}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := w.End(ctx, presence.EndArgs{User: "ben", ID: "b", Epoch: epochs[0], Reason: presence.EndNetwork}); err != nil { // end
		t.Fatal(err)
	}
	if _, err := w.Open(ctx, presence.OpenArgs{User: "cid", ID: "c", Node: "writer", TTL: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, 10*time.Second, "cid reaped", func() error { // reap
		n, err := w.Reap(ctx)
		return testkit.Why(err == nil && n == 1, fmt.Sprint(n, err))
	})
	if _, err := dead.Open(ctx, presence.OpenArgs{User: "dov", ID: "d", Node: "dead", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	dead.halt()
	if err := raw.Del(ctx, prefix+"node:dead").Err(); err != nil {
		t.Fatal(err)
	}
	pastDeadline(t, raw, w, "dead", dead.Incarnation()) // as the record's expiry brings about
	if n, err := w.Sweep(ctx); n != 1 || err != nil {   // end_node
		t.Fatalf("sweep: %d %v", n, err)
	}
	if n, err := w.Tombstone(ctx, map[string]uint64{"eve": 5}); n != 1 || err != nil { // tombstone
		t.Fatalf("tombstone: %d %v", n, err)
	}
	if _, err := w.OpenGroup(ctx, roster.Snapshot{Group: "team", Version: 1, Members: []roster.Member{}}); err != nil {
		t.Fatal(err)
	}
	if ok, err := w.CommitBatch(ctx, roster.Delta{Group: "team", Version: 2, Follows: 1}); !ok || err != nil { // group_commit
		t.Fatalf("commit batch: %v %v", ok, err)
	}
	// ann: open, update, account, end; ben: open, update, end; cid: open,
	// reap; dov: open, end_node; eve: tombstone; team: a batch.
	const want = 4 + 3 + 2 + 2 + 1 + 1
	waitMessages(t, f, want, "every commit at the firehose")
	// The message counter moves when a message is read, the collector when
	// it is reported, just after: wait for the report too.
	testkit.Wait(t, 10*time.Second, "the group batch reported at the firehose", func() error {
		n := len(colF.groupBatches())
		return testkit.Why(n >= 1, fmt.Sprintf("%d group batches", n))
	})
	if n := len(colF.groupBatches()); n != 1 {
		t.Fatalf("%d group batches at the firehose, want 1", n)
	}
	// A classic message published now is queued after anything a commit
	// would have published classically.
	if err := raw.Publish(ctx, prefix+"barrier", "x").Err(); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := classic.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Channel == prefix+"barrier" {
			break
		}
		t.Errorf("classic PUBLISH on the change path: %s %s", msg.Channel, msg.Payload)
	}
	// The sources: no script that commits calls PUBLISH (group.lua, the
	// membership changes, is no change of presence).
	files, err := filepath.Glob("lua/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	publish := regexp.MustCompile(`'PUBLISH'`)
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(name) != "group.lua" && publish.Match(b) {
			t.Errorf("%s calls PUBLISH", name)
		}
	}
}

// A node hears a group's batches only while it listens to the group: not
// as a firehose of users, not after UnlistenGroups.
func TestRedisGroupBatchesOnlyToGroupListeners(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	w, g, colG, f, colF := trio(t, srv, "watcher")
	if err := g.ListenGroups(ctx, []string{"team"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.OpenGroup(ctx, roster.Snapshot{Group: "team", Version: 1, Members: []roster.Member{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.OpenGroup(ctx, roster.Snapshot{Group: "other", Version: 1, Members: []roster.Member{}}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []roster.Delta{{Group: "team", Version: 2, Follows: 1}, {Group: "other", Version: 2, Follows: 1}} {
		if ok, err := w.CommitBatch(ctx, d); !ok || err != nil {
			t.Fatalf("commit %s: %v %v", d.Group, ok, err)
		}
	}
	waitMessages(t, g, 1, "team's batch at its watcher")
	if err := g.UnlistenGroups(ctx, []string{"team"}); err != nil {
		t.Fatal(err)
	}
	if ok, err := w.CommitBatch(ctx, roster.Delta{Group: "team", Version: 3, Follows: 2}); !ok || err != nil {
		t.Fatalf("commit: %v %v", ok, err)
	}
	// Barriers: a user's change after the batches, on each node's one
	// connection.
	z, err := w.Open(ctx, presence.OpenArgs{User: "zed", ID: "z", Node: "writer", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Listen(ctx, []string{"zed"}); err != nil {
		t.Fatal(err)
	}
	away := presence.Away
	if err := w.Update(ctx, presence.SessionRef{User: "zed", ID: "z", Epoch: z.Epoch}, presence.Update{Status: &away}); err != nil {
		t.Fatal(err)
	}
	colF.WaitFor(t, 10*time.Second, "zed", "away", func(p presence.Aggregate) bool { return p.Status == presence.Away })
	colG.WaitFor(t, 10*time.Second, "zed", "away", func(p presence.Aggregate) bool { return p.Status == presence.Away })
	waitMessages(t, f, 2, "zed's two changes at the firehose, no batch")
	waitMessages(t, g, 2, "team's batch 2 and zed's change at the watcher")
	if n := len(colF.groupBatches()); n != 0 {
		t.Fatalf("a firehose of users got %d group batches", n)
	}
	got := colG.groupBatches()
	if len(got) != 1 || got[0].Delta == nil || got[0].Delta.Group != "team" || got[0].Delta.Version != 2 {
		t.Fatalf("the watcher got %+v, want team's batch 2 only", got)
	}
}

// A change committed while the subscription is down is not missed: the
// connection is killed, the subscriber held back while changes are
// committed (nothing is heard), and once it subscribes again it reads
// again the users it listens to (and only those) and reports each group
// it listens to as possibly missed; after that it hears changes live.
func TestRedisListenReloadsAfterALostConnection(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	gt := newGate()
	w, _ := quietStore(t, srv.Client(t), "writer", nil)
	l, colL := quietStore(t, srv.Client(t), "listener", gt.hold)
	sessions := map[string]presence.Session{}
	for _, u := range []string{"ann", "ben", "cat"} {
		s, err := w.Open(ctx, presence.OpenArgs{User: u, ID: u, Node: "writer", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		sessions[u] = s
	}
	if err := l.Listen(ctx, []string{"ann", "ben"}); err != nil {
		t.Fatal(err)
	}
	if err := l.ListenGroups(ctx, []string{"team"}); err != nil {
		t.Fatal(err)
	}
	before := l.Stats()
	gt.close()
	n, err := srv.Client(t).ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
	if err != nil || n == 0 {
		t.Fatalf("client kill: %d %v", n, err)
	}
	testkit.Wait(t, 10*time.Second, "the lost connection noticed", func() error {
		return testkit.Why(l.Stats().Channels == 0, fmt.Sprintf("%d channels", l.Stats().Channels))
	})
	away := presence.Away
	for _, u := range []string{"ann", "cat"} {
		if err := w.Update(ctx, presence.SessionRef{User: u, ID: u, Epoch: sessions[u].Epoch}, presence.Update{Status: &away}); err != nil {
			t.Fatal(err)
		}
	}
	// Held: nothing is subscribed, nothing heard.
	if _, err := testkit.Hold(300*time.Millisecond, 25*time.Millisecond, func() error {
		return testkit.Why(l.Stats().FeedMessages == before.FeedMessages, "a message while the subscription was down")
	}); err != nil {
		t.Fatal(err)
	}
	reported := colL.Len()
	gt.release()
	colL.WaitFor(t, 10*time.Second, "ann", "away, read again", func(p presence.Aggregate) bool { return p.Status == presence.Away })
	after := colL.All()[reported:]
	for _, p := range after {
		if p.User != "ann" && p.User != "ben" {
			t.Errorf("read again %s, whom the node does not listen to", p.User)
		}
	}
	st := l.Stats()
	if st.FeedMessages != before.FeedMessages || st.Reloads != before.Reloads+1 || st.Resubscriptions != before.Resubscriptions+1 || st.Channels != 3 {
		t.Fatalf("stats %+v, before %+v", st, before)
	}
	testkit.Wait(t, 10*time.Second, "team reported as possibly missed", func() error {
		for _, e := range colL.groupBatches() {
			if e.Delta == nil && e.Group == "team" {
				return nil
			}
		}
		return fmt.Errorf("group batches %+v", colL.groupBatches())
	})
	// Live again.
	if err := w.End(ctx, presence.EndArgs{User: "ben", ID: "ben", Epoch: sessions["ben"].Epoch, Reason: presence.EndClean}); err != nil {
		t.Fatal(err)
	}
	colL.WaitFor(t, 10*time.Second, "ben", "offline", func(p presence.Aggregate) bool { return p.Status == presence.Offline })
	waitMessages(t, l, before.FeedMessages+1, "ben's end, live")
	if slices.Contains(colL.users(), "cat") {
		t.Fatal("cat was reported")
	}
}

// On a 3-master cluster with replicas: a node listens to users spread over
// every master and hears all their changes, none of the others'. A master
// is killed and its replica takes over; changes of its users are committed
// while the node's subscription there is down (held back); the node
// subscribes again on the new master, reads again only the users it
// listens to, and hears the changes committed after, live.
func TestRedisListenClusterFailover(t *testing.T) {
	cl := redistest.StartClusterWithReplicas(t, 3, 1)
	ctx := context.Background()
	gt := newGate()
	w, _ := quietStore(t, cl.Client(t), "writer", nil)
	l, colL := quietStore(t, cl.Client(t), "listener", gt.hold)
	cc := cl.Client(t)
	masterOf := func(user string) string {
		c, err := cc.MasterForKey(ctx, "{"+user+"}")
		if err != nil {
			t.Fatal(err)
		}
		return c.Options().Addr
	}
	var listened, others []string
	byMaster := map[string][]string{}
	for i := range 30 {
		u := fmt.Sprintf("u%02d", i)
		if i%3 == 0 {
			others = append(others, u)
		} else {
			listened = append(listened, u)
			byMaster[masterOf(u)] = append(byMaster[masterOf(u)], u)
		}
	}
	if len(byMaster) != 3 {
		t.Fatalf("the listened users live on %d masters, want 3: %v", len(byMaster), byMaster)
	}
	if err := l.Listen(ctx, listened); err != nil {
		t.Fatal(err)
	}
	if n := l.Stats().Channels; n != int64(len(listened)) {
		t.Fatalf("%d channels, want %d", n, len(listened))
	}
	sessions := map[string]presence.Session{}
	for _, u := range append(slices.Clone(listened), others...) {
		s, err := w.Open(ctx, presence.OpenArgs{User: u, ID: u, Node: "writer", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		sessions[u] = s
	}
	for _, u := range listened {
		colL.WaitFor(t, 10*time.Second, u, "online", func(p presence.Aggregate) bool { return p.Status == presence.Online })
	}
	waitMessages(t, l, int64(len(listened)), "one open per user listened to")
	if got := colL.users(); !slices.Equal(got, listened) {
		t.Fatalf("the listener reported %v, want %v", got, listened)
	}
	// The master of the first listened user dies.
	victim := masterOf(listened[0])
	var dead *redistest.Server
	for _, n := range cl.Nodes() {
		if n.Addr() == victim {
			dead = n
		}
	}
	onDead := byMaster[victim]
	var othersOnDead []string
	for _, u := range others {
		if masterOf(u) == victim {
			othersOnDead = append(othersOnDead, u)
		}
	}
	before := l.Stats()
	gt.close()
	dead.Kill(t)
	promoted, _ := cl.WaitPromoted(t, dead, 30*time.Second)
	t.Logf("%s killed (users listened to there: %v, others: %v); %s took over", victim, onDead, othersOnDead, promoted.Addr())
	// Committed while the subscription there is down.
	away := presence.Away
	for _, u := range append(slices.Clone(onDead), othersOnDead...) {
		testkit.Wait(t, 30*time.Second, u+" updated on the new master", func() error {
			return w.Update(ctx, presence.SessionRef{User: u, ID: u, Epoch: sessions[u].Epoch}, presence.Update{Status: &away})
		})
	}
	heldAt := l.Stats().FeedMessages
	reported := colL.Len()
	gt.release()
	for _, u := range onDead {
		colL.WaitFor(t, 30*time.Second, u, "away, read again", func(p presence.Aggregate) bool { return p.Status == presence.Away })
	}
	testkit.Wait(t, 30*time.Second, "every channel subscribed again", func() error {
		n := l.Stats().Channels
		return testkit.Why(n == int64(len(listened)), fmt.Sprintf("%d of %d", n, len(listened)))
	})
	again := colL.All()[reported:]
	readAgain := map[string]bool{}
	for _, p := range again {
		if !slices.Contains(listened, p.User) {
			t.Errorf("read again %s, whom the node does not listen to", p.User)
		}
		readAgain[p.User] = true
	}
	for _, u := range onDead {
		if !readAgain[u] {
			t.Errorf("%s (listened to, on the dead master) was not read again", u)
		}
	}
	st := l.Stats()
	if st.Reloads <= before.Reloads || st.Resubscriptions <= before.Resubscriptions {
		t.Fatalf("stats %+v, before %+v", st, before)
	}
	if st.FeedMessages != heldAt {
		t.Fatalf("%d messages heard since the hold was released, before any new change", st.FeedMessages-heldAt)
	}
	t.Logf("read again after the failover: %d users; stats %+v", len(readAgain), st)
	// Live on the new master, and on the others.
	for _, u := range listened {
		if err := w.End(ctx, presence.EndArgs{User: u, ID: u, Epoch: sessions[u].Epoch, Reason: presence.EndClean}); err != nil {
			t.Fatalf("end %s: %v", u, err)
		}
	}
	for _, u := range others {
		if err := w.End(ctx, presence.EndArgs{User: u, ID: u, Epoch: sessions[u].Epoch, Reason: presence.EndClean}); err != nil {
			t.Fatalf("end %s: %v", u, err)
		}
	}
	for _, u := range listened {
		colL.WaitFor(t, 10*time.Second, u, "offline", func(p presence.Aggregate) bool { return p.Status == presence.Offline })
	}
	waitMessages(t, l, heldAt+int64(len(listened)), "one end per user listened to, live")
	for _, u := range colL.users() {
		if !slices.Contains(listened, u) {
			t.Fatalf("the listener reported %s", u)
		}
	}
}

// Stop stops every goroutine of the listener: the subscriber and the
// reader of each connection, including those of connections lost and
// replaced.
func TestRedisListenStopLeavesNoGoroutine(t *testing.T) {
	srv := redistest.Start(t)
	ignore := goleak.IgnoreCurrent()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	r := NewRedis(RedisOptions{Client: c, Prefix: "t:" + t.Name() + ":", Node: "n1", NodeTTL: 3 * time.Second, Retention: time.Hour, Report: func(Event) {}})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Listen(ctx, []string{"ann", "ben"}); err != nil {
		t.Fatal(err)
	}
	if err := r.ListenGroups(ctx, []string{"team"}); err != nil {
		t.Fatal(err)
	}
	if err := c.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, 10*time.Second, "subscribed again", func() error {
		st := r.Stats()
		return testkit.Why(st.Resubscriptions == 1 && st.Channels == 3, fmt.Sprintf("%+v", st))
	})
	r.Stop()
	if err := r.Listen(ctx, []string{"cat"}); err == nil {
		t.Fatal("Listen after Stop succeeded")
	}
	_ = c.Close()
	goleak.VerifyNone(t, ignore)
}
