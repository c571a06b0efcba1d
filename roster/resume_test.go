package roster

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// delta is batch v of group "g" (following v-1), changing the members
// named, each to status st at version v.
func delta(v uint64, st presence.Status, users ...string) Delta {
	d := Delta{Group: "g", Version: v, Follows: v - 1, Changes: []Member{}, Counts: Counts{Total: len(users)}}
	for _, u := range users {
		d.Changes = append(d.Changes, Member{User: u, Status: st, Version: v})
	}
	return d
}

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		in string
		v  uint64
		ok bool
	}{
		{"1", 1, true},
		{"1796040000000000", 1796040000000000, true},
		{"18446744073709551615", 18446744073709551615, true},
		{"18446744073709551616", 0, false}, // overflow
		{"0", 0, false},
		{"007", 0, false},
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1e3", 0, false},
		{"12345678901234567890123", 0, false},
		{"v12", 0, false},
	} {
		v, ok := ParseVersion(c.in)
		if v != c.v || ok != c.ok {
			t.Errorf("ParseVersion(%q) = %d, %v; want %d, %v", c.in, v, ok, c.v, c.ok)
		}
	}
}

// What a subscriber holding a version is sent, for each place of that
// version against the log and the current version.
func TestResumeDecides(t *testing.T) {
	clk := testkit.NewClock(t0)
	l := NewDeltaLog(LogLimits{MaxAge: 5 * time.Minute, MaxDeltas: 100, MaxBytes: 1 << 20}, clk.Now)
	l.Append(delta(11, presence.Online, "ann"))
	l.Append(delta(12, presence.Away, "bob"))
	l.Append(delta(13, presence.Busy, "ann"))
	for _, c := range []struct {
		name      string
		held, cur uint64
		out       Outcome
		cause     Cause
		follows   uint64
		changes   string
	}{
		{"current", 13, 13, SendNothing, "", 0, ""},
		{"one behind", 12, 13, SendDelta, "", 12, "ann=busy@13 "},
		{"three behind, merged", 10, 13, SendDelta, "", 10, "ann=busy@13 bob=away@12 "},
		{"too old", 9, 13, SendSnapshot, CauseTooOld, 0, ""},
		{"future", 14, 13, SendSnapshot, CauseFuture, 0, ""},
		{"the log behind the current version", 12, 15, SendSnapshot, CauseCold, 0, ""},
	} {
		d, out, cause := l.Resume("g", c.held, c.cur)
		if out != c.out || cause != c.cause {
			t.Errorf("%s: %v %q, want %v %q", c.name, out, cause, c.out, c.cause)
			continue
		}
		if out == SendDelta && (d.Follows != c.follows || d.Version != c.cur || statuses(d.Changes) != c.changes) {
			t.Errorf("%s: delta %+v", c.name, d)
		}
	}
	if _, out, cause := l.Resume("other", 1, 2); out != SendSnapshot || cause != CauseCold {
		t.Errorf("a group without a log: %v %q", out, cause)
	}
}

// The log is bounded by age, count and bytes, oldest first; a batch that
// does not follow the last one starts the log afresh; Forget drops it.
func TestDeltaLogBounds(t *testing.T) {
	clk := testkit.NewClock(t0)
	size := func(d Delta) int { b, _ := json.Marshal(d); return len(b) }
	one := size(delta(11, presence.Online, "ann"))

	l := NewDeltaLog(LogLimits{MaxAge: time.Minute, MaxDeltas: 3, MaxBytes: 1 << 20}, clk.Now)
	for v := uint64(11); v <= 15; v++ {
		l.Append(delta(v, presence.Online, "ann"))
	}
	if s := l.Stats(); s.Deltas != 3 || s.Groups != 1 || s.Bytes != 3*one {
		t.Fatalf("count bound: %+v", s)
	}
	if _, out, cause := l.Resume("g", 11, 15); out != SendSnapshot || cause != CauseTooOld {
		t.Fatalf("a version dropped by the count bound: %v %q", out, cause)
	}
	if _, out, _ := l.Resume("g", 12, 15); out != SendDelta {
		t.Fatalf("the oldest kept: %v", out)
	}

	// Age: the oldest two are older than a minute, the last is not.
	clk.Advance(50 * time.Second)
	l.Append(delta(16, presence.Away, "bob"))
	clk.Advance(20 * time.Second)
	if _, out, cause := l.Resume("g", 15, 16); out != SendDelta {
		t.Fatalf("a batch within the age bound: %v %q", out, cause)
	}
	if _, out, cause := l.Resume("g", 14, 16); out != SendSnapshot || cause != CauseTooOld {
		t.Fatalf("a batch past the age bound: %v %q", out, cause)
	}
	clk.Advance(time.Minute)
	l.Prune()
	if s := l.Stats(); s.Deltas != 0 || s.Groups != 0 || s.Bytes != 0 {
		t.Fatalf("after the age bound: %+v", s)
	}

	// Bytes: two batches fit, not three.
	l = NewDeltaLog(LogLimits{MaxAge: time.Minute, MaxDeltas: 100, MaxBytes: 2*one + one/2}, clk.Now)
	for v := uint64(11); v <= 13; v++ {
		l.Append(delta(v, presence.Online, "ann"))
	}
	if s := l.Stats(); s.Deltas != 2 || s.Bytes != 2*one {
		t.Fatalf("bytes bound: %+v", s)
	}

	// A gap: the log starts again from the batch after it.
	l.Append(delta(20, presence.Online, "ann"))
	if s := l.Stats(); s.Deltas != 1 {
		t.Fatalf("after a gap: %+v", s)
	}
	if _, out, cause := l.Resume("g", 13, 20); out != SendSnapshot || cause != CauseTooOld {
		t.Fatalf("across a gap: %v %q", out, cause)
	}
	l.Forget("g")
	if s := l.Stats(); s != (LogStats{}) {
		t.Fatalf("after Forget: %+v", s)
	}

	// Off: nothing kept.
	off := NewDeltaLog(LogLimits{}, clk.Now)
	off.Append(delta(11, presence.Online, "ann"))
	if s := off.Stats(); s.Deltas != 0 {
		t.Fatalf("a log that is off kept %+v", s)
	}
}

// Merge keeps the latest entry per member, the members who left and did
// not come back, and the last counts.
func TestMerge(t *testing.T) {
	a := delta(11, presence.Online, "ann", "bob")
	b := Delta{Group: "g", Version: 12, Follows: 11, Changes: []Member{}, Removed: []string{"ann", "cat"}}
	c := delta(13, presence.Away, "ann", "dan")
	c.Counts = Counts{Online: 3, Total: 3}
	m := Merge([]Delta{a, b, c})
	if m.Follows != 10 || m.Version != 13 || statuses(m.Changes) != "ann=away@13 bob=online@11 dan=away@13 " ||
		!slices.Equal(m.Removed, []string{"cat"}) || m.Online != 3 {
		t.Fatalf("merged %+v", m)
	}
}

// --- the resume property: whatever happens, a client ends with the
// latest snapshot, with no gap and no duplicate ---

// resumeNode is one node of the model: its mirror of the group topic and
// its log. A lagging node applies the batches some steps late.
type resumeNode struct {
	mirror  *Mirror
	log     *DeltaLog
	queue   []Delta // batches not applied yet
	lagging bool
}

// resumeClient is a subscriber: the state it rebuilt from what it received.
type resumeClient struct {
	state     *Snapshot
	on        int // the node it is connected to; -1: away
	gaps, dup int
	resumes   map[string]int
}

// receive applies a message to the client's state as the docs say an
// observer must: a snapshot replaces it; a delta applies when it follows the
// version held (a gap or a duplicate is counted).
func (c *resumeClient) receive(snap *Snapshot, d *Delta) {
	if snap != nil {
		s := *snap
		s.Members = slices.Clone(snap.Members)
		c.state = &s
		return
	}
	switch {
	case c.state == nil || d.Follows > c.state.Version:
		c.gaps++
	case d.Follows < c.state.Version:
		c.dup++
	default:
		m := NewMirror()
		m.Set(*c.state)
		s, _ := m.Apply(*d)
		c.state = &s
	}
}

// runResumeModel drives the model from ops: random presence and membership
// changes cut into batches by a Board, applied by two nodes (one of which
// may lag or restart), and a client that goes away and resumes on either
// node with the version it holds, garbage, or nothing.
func runResumeModel(t *testing.T, ops []byte, lim LogLimits) map[string]int {
	clk := testkit.NewClock(t0)
	idx := NewIndex()
	w := &world{a: map[string]presence.Aggregate{}}
	users := []string{"ann", "bob", "cat", "dan", "eve", "fay", "gus", "hal"}
	idx.Add("g", users[:4]...)
	board := NewBoard(idx, window, clk.Now, w.lookup)
	truth, _ := board.Watch("g")
	nodes := make([]*resumeNode, 2)
	for i := range nodes {
		nodes[i] = &resumeNode{mirror: NewMirror(), log: NewDeltaLog(lim, clk.Now)}
		nodes[i].mirror.Set(truth)
	}
	c := &resumeClient{on: 0, resumes: map[string]int{}}
	c.receive(&truth, nil)
	version := uint64(1)

	apply := func(n *resumeNode, i int) {
		for _, d := range n.queue {
			if _, ok := n.mirror.Apply(d); ok {
				n.log.Append(d)
				if c.on == i {
					c.receive(nil, &d)
				}
			}
		}
		n.queue = nil
	}
	var kept []Logged // the latest batches the store's group log keeps
	cut := func() {
		for _, d := range board.Cut() {
			truth, _ = board.Snapshot("g")
			kept = append(kept, Logged{Delta: d, At: clk.Now()})
			if len(kept) > lim.MaxDeltas {
				kept = kept[1:]
			}
			for i, n := range nodes {
				n.queue = append(n.queue, d)
				if !n.lagging {
					apply(n, i)
				}
			}
		}
	}
	resume := func(i int, how byte) {
		n := nodes[i]
		cur, _ := n.mirror.Get("g")
		var held uint64
		ok := false
		switch how % 4 {
		case 0, 1: // the version it holds
			held, ok = c.state.Version, true
		case 2: // garbage
			_, ok = ParseVersion(fmt.Sprintf("x%d", how))
		case 3: // a plain subscribe
		}
		c.on = i
		if !ok {
			c.resumes["snapshot"]++
			c.receive(&cur, nil)
			return
		}
		d, out, cause := n.log.Resume("g", held, cur.Version)
		switch out {
		case SendNothing:
			c.resumes["nothing"]++
		case SendDelta:
			c.resumes["delta"]++
			c.receive(nil, &d)
		default:
			c.resumes[string(cause)]++
			c.receive(&cur, nil)
		}
	}

	for k := 0; k+1 < len(ops); k += 2 {
		op, arg := ops[k], ops[k+1]
		u := users[int(arg)%len(users)]
		switch op % 9 {
		case 0, 1: // a member's presence changes
			version++
			st := []presence.Status{presence.Online, presence.Away, presence.Busy, presence.Offline}[int(arg/8)%4]
			board.Note(w.set(u, st, version))
		case 2: // someone joins or leaves
			if idx.Member("g", u) {
				board.Joined(idx.Remove("g", u))
			} else {
				board.Joined(idx.Add("g", u))
			}
		case 3, 4: // time passes; the batches due are cut
			clk.Advance(time.Duration(arg) * 10 * time.Millisecond)
			cut()
		case 5: // the client goes away
			c.on = -1
		case 6: // the client comes back, on either node
			if c.on < 0 {
				resume(int(arg)%2, arg/2)
			}
		case 7: // node 1 lags, or catches up
			nodes[1].lagging = !nodes[1].lagging
			if !nodes[1].lagging {
				apply(nodes[1], 1)
			}
		case 8: // node 1 restarts: it reads the snapshot again, and the
			// batches the store keeps (or not: a log empty)
			if !nodes[1].lagging {
				nodes[1] = &resumeNode{mirror: NewMirror(), log: NewDeltaLog(lim, clk.Now)}
				nodes[1].mirror.Set(truth)
				if arg%2 == 0 {
					nodes[1].log.Seed("g", truth.Version, kept)
				}
				if c.on == 1 {
					c.on = -1 // its connections dropped with it
				}
			}
		}
	}
	// The end: every batch cut and applied, the client back.
	clk.Advance(time.Hour)
	cut()
	for i, n := range nodes {
		n.lagging = false
		apply(n, i)
	}
	if c.on < 0 {
		resume(0, 0)
	}
	if c.gaps != 0 || c.dup != 0 {
		t.Fatalf("%d gaps, %d duplicates (resumes %v)", c.gaps, c.dup, c.resumes)
	}
	got, _ := json.Marshal(c.state)
	want, _ := json.Marshal(truth)
	if string(got) != string(want) {
		t.Fatalf("the client holds\n%s\nthe group is\n%s\n(resumes %v)", got, want, c.resumes)
	}
	return c.resumes
}

// limits of the model's logs: small, so that the count, bytes and age
// bounds all come into play.
var modelLimits = LogLimits{MaxAge: 3 * time.Second, MaxDeltas: 6, MaxBytes: 1500}

// The resume property on random runs (the normal test run).
func TestResumeProperty(t *testing.T) {
	seen := map[string]int{}
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 22))
		ops := make([]byte, 400)
		for i := range ops {
			ops[i] = byte(r.UintN(256))
		}
		// Count what the runs went through, to know the property was put
		// to every case.
		for k, v := range runResumeModel(t, ops, modelLimits) {
			seen[k] += v
		}
	}
	for _, k := range []string{"delta", "nothing", "snapshot", string(CauseTooOld), string(CauseFuture), string(CauseCold)} {
		if seen[k] == 0 {
			t.Errorf("no run resumed with %q: %v", k, seen)
		}
	}
	t.Logf("resumes over 300 runs: %v", seen)
}

// FuzzResume: go test -fuzz FuzzResume ./roster/
func FuzzResume(f *testing.F) {
	f.Add([]byte{0, 1, 3, 30, 5, 0, 0, 2, 3, 30, 6, 0})
	f.Add([]byte{7, 0, 0, 1, 3, 30, 5, 0, 6, 1, 7, 0, 3, 30})
	f.Add([]byte{8, 0, 0, 3, 3, 200, 5, 1, 3, 250, 3, 250, 6, 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		runResumeModel(t, ops, modelLimits)
	})
}

// Seed keeps the run of batches that leads to the snapshot's version,
// within the bounds: a node that begins to watch a group serves resumes
// from the store's batches.
func TestDeltaLogSeed(t *testing.T) {
	clk := testkit.NewClock(t0)
	l := NewDeltaLog(LogLimits{MaxAge: time.Minute, MaxDeltas: 100, MaxBytes: 1 << 20}, clk.Now)
	at := func(ago time.Duration) time.Time { return t0.Add(-ago) }
	batches := []Logged{
		{delta(14, presence.Away, "bob"), at(time.Second)}, // after the snapshot read: left out
		{delta(11, presence.Online, "ann"), at(2 * time.Hour)},
		{delta(12, presence.Busy, "ann"), at(3 * time.Second)},
		{delta(13, presence.Online, "cat"), at(2 * time.Second)},
	}
	l.Seed("g", 13, batches)
	if _, out, _ := l.Resume("g", 11, 13); out != SendDelta {
		t.Fatalf("from 11: %v", out)
	}
	if _, _, cause := l.Resume("g", 10, 13); cause != CauseTooOld { // 11 is past the age bound
		t.Fatalf("from 10: %q", cause)
	}
	if s := l.Stats(); s.Deltas != 2 {
		t.Fatalf("seeded %+v", s)
	}
	// Batches that do not lead to the snapshot's version: no log.
	l.Seed("g", 20, batches)
	if _, _, cause := l.Resume("g", 13, 20); cause != CauseCold {
		t.Fatalf("a seed short of the snapshot: %q", cause)
	}
}
