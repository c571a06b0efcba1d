package roster

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// world is the members' current presence, as the publisher holds it.
type world struct {
	mu sync.Mutex
	a  map[string]presence.Aggregate
}

func (w *world) set(user string, st presence.Status, version uint64) presence.Aggregate {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := presence.Aggregate{User: user, Status: st, Version: version}
	if st == presence.Offline {
		a.LastSeen = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	}
	w.a[user] = a
	return a
}

func (w *world) lookup(user string) (presence.Shown, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a, ok := w.a[user]
	return a.Shown(), ok
}

const window = 250 * time.Millisecond

// t0 is the boards' clock at start; v0 their groups' first version.
var (
	t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	v0 = FirstVersion(t0)
)

func newBoard(t *testing.T) (*Board, *Index, *world, *testkit.Clock) {
	t.Helper()
	clk := testkit.NewClock(t0)
	w := &world{a: map[string]presence.Aggregate{}}
	idx := NewIndex()
	return NewBoard(idx, window, clk.Now, w.lookup), idx, w, clk
}

func statuses(ms []Member) string {
	s := ""
	for _, m := range ms {
		s += fmt.Sprintf("%s=%s@%d ", m.User, m.Status, m.Version)
	}
	return s
}

// The snapshot holds every member at its current presence (a member never
// seen is offline at version 0), with the counts, at group version 1.
func TestBoardSnapshot(t *testing.T) {
	b, idx, w, _ := newBoard(t)
	idx.Add("team", "ann", "bob", "cat")
	w.set("ann", presence.Online, 5)
	w.set("bob", presence.Away, 7)
	if _, ok := b.Watch("nope"); ok {
		t.Fatal("a group that does not exist was watched")
	}
	s, ok := b.Watch("team")
	if !ok || s.Version != v0 || s.Group != "team" {
		t.Fatalf("snapshot %+v %v", s, ok)
	}
	if got := statuses(s.Members); got != "ann=online@5 bob=away@7 cat=offline@0 " {
		t.Fatalf("members %s", got)
	}
	want := Counts{Online: 2, Total: 3, ByStatus: map[presence.Status]int{presence.Online: 1, presence.Away: 1, presence.Offline: 1}}
	if fmt.Sprint(s.Counts) != fmt.Sprint(want) {
		t.Fatalf("counts %+v, want %+v", s.Counts, want)
	}
	if s.Members[2].LastSeen != nil || s.Members[0].LastSeen != nil {
		t.Fatalf("last_seen of an online or never seen member: %+v", s.Members)
	}
}

// Changes within a window are one batch, the latest per member; the next
// batch comes a window after the one before; versions are consecutive.
func TestBoardBatchesAndCoalesces(t *testing.T) {
	b, idx, w, clk := newBoard(t)
	idx.Add("team", "ann", "bob")
	b.Watch("team")
	clk.Advance(time.Second) // quiet for longer than a window: the first change is due at once
	b.Note(w.set("ann", presence.Online, 10))
	if d := b.Next(); d != 0 {
		t.Fatalf("next %v, want 0", d)
	}
	d1 := b.Cut()
	if len(d1) != 1 || d1[0].Version != v0+1 || d1[0].Follows != v0 || statuses(d1[0].Changes) != "ann=online@10 " {
		t.Fatalf("first batch %+v", d1)
	}
	// Within the window: held.
	b.Note(w.set("ann", presence.Away, 11))
	b.Note(w.set("bob", presence.Online, 3))
	b.Note(w.set("ann", presence.Busy, 12))
	b.Note(presence.Aggregate{User: "ann", Status: presence.Online, Version: 9}) // late: ignored
	clk.Advance(window - time.Millisecond)
	if got := b.Cut(); len(got) != 0 {
		t.Fatalf("a batch within the window: %+v", got)
	}
	if d := b.Next(); d != time.Millisecond {
		t.Fatalf("next %v, want 1ms", d)
	}
	clk.Advance(time.Millisecond)
	d2 := b.Cut()
	if len(d2) != 1 || d2[0].Version != v0+2 || d2[0].Follows != v0+1 || statuses(d2[0].Changes) != "ann=busy@12 bob=online@3 " {
		t.Fatalf("second batch %+v", d2)
	}
	if d2[0].Online != 2 || d2[0].Total != 2 {
		t.Fatalf("counts %+v", d2[0].Counts)
	}
	if b.Next() != window {
		t.Fatalf("next with nothing pending: %v", b.Next())
	}
	s, _ := b.Snapshot("team")
	if s.Version != v0+2 || statuses(s.Members) != "ann=busy@12 bob=online@3 " {
		t.Fatalf("snapshot after the batches: %+v", s)
	}
}

// A member who changes all the time delays the others by at most a window:
// every batch comes a window after the one before, with everyone's latest.
func TestBoardBusyMemberDelaysNobody(t *testing.T) {
	b, idx, w, clk := newBoard(t)
	idx.Add("team", "ann", "bob")
	b.Watch("team")
	clk.Advance(time.Second)
	var v uint64 = 100
	sts := []presence.Status{presence.Online, presence.Away}
	batches := 0
	var bobAt time.Time
	start := clk.Now()
	for i := range 200 { // 2 s of ann changing every 10 ms; bob once, at 0.5 s
		v++
		b.Note(w.set("ann", sts[i%2], v))
		if i == 50 {
			b.Note(w.set("bob", presence.Online, 7))
			bobAt = clk.Now()
		}
		for _, d := range b.Cut() {
			batches++
			for _, m := range d.Changes {
				if m.User == "bob" {
					if lag := clk.Now().Sub(bobAt); lag > window {
						t.Fatalf("bob's change waited %v, more than the window", lag)
					}
				}
			}
		}
		clk.Advance(10 * time.Millisecond)
	}
	if max := int(clk.Now().Sub(start)/window) + 1; batches > max {
		t.Fatalf("%d batches in %v, at most %d", batches, clk.Now().Sub(start), max)
	}
	s, _ := b.Snapshot("team")
	if s.Members[1].Status != presence.Online {
		t.Fatalf("bob never shown: %+v", s.Members)
	}
}

// 200 members connecting within one second reach a watcher in at most a
// handful of batches (one per window), all 200 shown.
func TestBoardMorningBurst(t *testing.T) {
	b, idx, w, clk := newBoard(t)
	var users []string
	for i := range 200 {
		users = append(users, fmt.Sprintf("u%03d", i))
	}
	idx.Add("team", users...)
	b.Watch("team")
	clk.Advance(time.Second)
	var deltas []Delta
	for i, u := range users { // one every 5 ms: 1 s
		b.Note(w.set(u, presence.Online, uint64(i+1)))
		deltas = append(deltas, b.Cut()...)
		clk.Advance(5 * time.Millisecond)
	}
	clk.Advance(window)
	deltas = append(deltas, b.Cut()...)
	if len(deltas) > 6 {
		t.Fatalf("%d batches for 200 members in 1 s", len(deltas))
	}
	seen := map[string]bool{}
	for i, d := range deltas {
		if d.Version != v0+uint64(i+1) || d.Follows != v0+uint64(i) {
			t.Fatalf("batch %d: version %d follows %d", i, d.Version, d.Follows)
		}
		for _, m := range d.Changes {
			seen[m.User] = true
		}
	}
	last := deltas[len(deltas)-1]
	if len(seen) != 200 || last.Online != 200 || last.Total != 200 {
		t.Fatalf("%d members shown, online %d of %d", len(seen), last.Online, last.Total)
	}
}

// A member who joins enters with its current presence; one who leaves is
// in Removed; a join and a leave within one window leave nothing to send.
func TestBoardMembership(t *testing.T) {
	b, idx, w, clk := newBoard(t)
	idx.Add("team", "ann")
	w.set("ann", presence.Online, 1)
	w.set("dan", presence.DND, 4)
	b.Watch("team")
	clk.Advance(time.Second)
	b.Joined(idx.Add("team", "dan"))
	d := b.Cut()
	if len(d) != 1 || statuses(d[0].Changes) != "dan=dnd@4 " || d[0].Total != 2 || d[0].Online != 2 {
		t.Fatalf("join: %+v", d)
	}
	clk.Advance(window)
	b.Joined(idx.Remove("team", "ann"))
	b.Note(w.set("ann", presence.Away, 2)) // after leaving: not the group's business
	d = b.Cut()
	if len(d) != 1 || !slices.Equal(d[0].Removed, []string{"ann"}) || len(d[0].Changes) != 0 || d[0].Total != 1 {
		t.Fatalf("leave: %+v", d)
	}
	clk.Advance(window)
	b.Joined(idx.Add("team", "eve"))
	b.Joined(idx.Remove("team", "eve"))
	if d := b.Cut(); len(d) != 0 {
		t.Fatalf("a join and leave in one window sent %+v", d)
	}
	if s, _ := b.Snapshot("team"); s.Version != v0+2 || statuses(s.Members) != "dan=dnd@4 " {
		t.Fatalf("snapshot %+v", s)
	}
}

// The counts are kept incrementally and match a rebuild; Repair finds and
// fixes counts that went wrong.
func TestBoardRepair(t *testing.T) {
	b, idx, w, clk := newBoard(t)
	idx.Add("team", "ann", "bob", "cat")
	b.Watch("team")
	sts := []presence.Status{presence.Online, presence.Away, presence.Offline, presence.DND}
	for i := range 40 {
		clk.Advance(window)
		u := []string{"ann", "bob", "cat"}[i%3]
		b.Note(w.set(u, sts[i%4], uint64(i+1)))
		b.Cut()
	}
	if n := b.Repair(); n != 0 {
		t.Fatalf("repair found %d wrong groups after ordinary changes", n)
	}
	b.mu.Lock()
	b.groups["team"].counts[presence.Online] += 5
	b.mu.Unlock()
	if n := b.Repair(); n != 1 {
		t.Fatalf("repair found %d wrong groups, want 1", n)
	}
	s, _ := b.Snapshot("team")
	total := 0
	for _, n := range s.ByStatus {
		total += n
	}
	if total != 3 || b.Stats().Repaired != 1 {
		t.Fatalf("after repair: %+v, stats %+v", s.Counts, b.Stats())
	}
}

// Unwatched groups cost nothing: a member change touches only kept groups.
func TestBoardOnlyWatched(t *testing.T) {
	b, idx, w, clk := newBoard(t)
	idx.Add("a", "ann")
	idx.Add("b", "ann")
	b.Watch("a")
	clk.Advance(time.Second)
	b.Note(w.set("ann", presence.Online, 1))
	d := b.Cut()
	if len(d) != 1 || d[0].Group != "a" {
		t.Fatalf("batches %+v", d)
	}
	b.Unwatch("a")
	clk.Advance(time.Second)
	b.Note(w.set("ann", presence.Away, 2))
	if d := b.Cut(); len(d) != 0 || b.Stats().Groups != 0 {
		t.Fatalf("batches of unwatched groups: %+v", d)
	}
}

// A mirror fed the board's batches holds the board's snapshot; a gap or a
// repeat is refused; a board loaded from a snapshot goes on from its
// version.
func TestMirrorFollowsBoard(t *testing.T) {
	b, idx, w, clk := newBoard(t)
	idx.Add("team", "ann", "bob", "cat")
	s, _ := b.Watch("team")
	m := NewMirror()
	if !m.Set(s) || m.Set(s) {
		t.Fatal("Set: the first must take, the same version again must not")
	}
	var all []Delta
	sts := []presence.Status{presence.Online, presence.Away, presence.Offline}
	for i := range 30 {
		clk.Advance(window)
		b.Note(w.set([]string{"ann", "bob", "cat"}[i%3], sts[i%3], uint64(i+1)))
		if i == 10 {
			b.Joined(idx.Remove("team", "cat"))
		}
		if i == 20 {
			b.Joined(idx.Add("team", "dan"))
		}
		for _, d := range b.Cut() {
			got, ok := m.Apply(d)
			want, _ := b.Snapshot("team")
			if !ok || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after v%d: mirror %+v, board %+v", d.Version, got, want)
			}
			all = append(all, d)
		}
	}
	if _, ok := m.Apply(all[len(all)-1]); ok {
		t.Fatal("a repeated delta applied")
	}
	gap := all[len(all)-1]
	gap.Follows, gap.Version = gap.Version+1, gap.Version+2
	if _, ok := m.Apply(gap); ok {
		t.Fatal("a delta after a gap applied")
	}
	// A new board (another leader) loads the published snapshot and
	// continues from its version.
	cur, _ := m.Get("team")
	b2 := NewBoard(idx, window, clk.Now, w.lookup)
	b2.Load(cur)
	clk.Advance(window)
	b2.Note(w.set("ann", presence.DND, 1000))
	d := b2.Cut()
	if len(d) != 1 || d[0].Follows != cur.Version {
		t.Fatalf("after Load: %+v, want a batch following v%d", d, cur.Version)
	}
	if _, ok := m.Apply(d[0]); !ok {
		t.Fatal("the new board's batch does not follow the mirror")
	}
}

// A 10,000-member group: the snapshot's size, and the cost of one member
// change through the leader's board and a node's mirror (the batch is one
// change: the worst case per change).
func BenchmarkGroup10k(b *testing.B) {
	board, w, clk, users, s := group10k()
	js, _ := json.Marshal(s)
	m := NewMirror()
	m.Set(s)
	v := uint64(100000)
	b.ResetTimer()
	for i := range b.N {
		v++
		clk.Advance(window)
		board.Note(w.set(users[i%len(users)], presence.Away, v))
		for _, d := range board.Cut() {
			if _, ok := m.Apply(d); !ok {
				b.Fatal("gap")
			}
		}
	}
	b.ReportMetric(float64(len(js)), "snapshot-bytes")
}

// Encoding a 10,000-member snapshot, as a node does to retain it after each
// batch.
func BenchmarkSnapshot10kJSON(b *testing.B) {
	_, _, _, _, s := group10k()
	b.ResetTimer()
	for range b.N {
		if _, err := json.Marshal(s); err != nil {
			b.Fatal(err)
		}
	}
}

// group10k is a board keeping one group of 10,000 members, all online.
func group10k() (*Board, *world, *testkit.Clock, []string, Snapshot) {
	board, idx, w, clk := newBoard(&testing.T{})
	users := make([]string, 10000)
	for i := range users {
		users[i] = fmt.Sprintf("member-%05d", i)
		w.set(users[i], presence.Online, uint64(i+1))
	}
	idx.Add("big", users...)
	s, _ := board.Watch("big")
	return board, w, clk, users, s
}
