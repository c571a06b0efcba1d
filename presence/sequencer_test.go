package presence

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"
)

var seqT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ms(n int) time.Time { return seqT0.Add(time.Duration(n) * time.Millisecond) }

func sv(id string, epoch uint64, connected int) SessionView {
	return SessionView{ID: id, Epoch: epoch, Node: "n1", Status: Online, ConnectedAt: ms(connected),
		Conn: Conn{Username: "u-" + id, IP: "10.0.0.1", Port: 1883, Listener: "tcp", ProtoVer: 5}}
}

func xv(id string, epoch uint64, connected, ended int, r EndReason) EndedView {
	return EndedView{SessionView: sv(id, epoch, connected), Reason: r, EndedAt: ms(ended)}
}

func agg(v uint64, since, lastSeen int, live []SessionView, ended ...EndedView) Aggregate {
	a := Aggregate{User: "alice", Version: v, Since: ms(since), Sessions: live, Ended: ended, Status: Online}
	if len(live) == 0 {
		a.Status, a.LastSeen = Offline, ms(lastSeen)
	}
	return a
}

// brief writes events as "open a@1 t=5" / "end a@1 clean t=9" for tables.
func brief(evs []LifecycleEvent) string {
	var b []string
	for _, e := range evs {
		ms := e.At.Sub(seqT0).Milliseconds()
		switch e.Kind {
		case LifecycleConnected:
			b = append(b, fmt.Sprintf("open %s@%d t=%d v=%d", e.Session.ID, e.Session.Epoch, ms, e.Version))
		default:
			r := string(e.Reason)
			if r == "" {
				r = "?"
			}
			b = append(b, fmt.Sprintf("end %s@%d %s t=%d v=%d", e.Session.ID, e.Session.Epoch, r, ms, e.Version))
		}
	}
	return strings.Join(b, "; ")
}

func TestSequencer(t *testing.T) {
	type step struct {
		a    Aggregate
		want string
	}
	cases := []struct {
		name  string
		start int
		steps []step
	}{
		{"open then clean end", 0, []step{
			{agg(10, 1, 0, []SessionView{sv("a", 1, 1)}), "open a@1 t=1 v=10"},
			{agg(11, 5, 5, nil, xv("a", 1, 1, 5, EndClean)), "end a@1 clean t=5 v=11"},
		}},
		{"repeats and lower versions are ignored", 0, []step{
			{agg(10, 1, 0, []SessionView{sv("a", 1, 1)}), "open a@1 t=1 v=10"},
			{agg(10, 1, 0, []SessionView{sv("a", 1, 1)}), ""},
			{agg(9, 0, 0, nil), ""},
			{agg(11, 5, 5, nil, xv("a", 1, 1, 5, EndNetwork)), "end a@1 network t=5 v=11"},
			{agg(11, 5, 5, nil, xv("a", 1, 1, 5, EndNetwork)), ""},
		}},
		{"takeover reported: end before open, same instant", 0, []step{
			{agg(10, 1, 0, []SessionView{sv("a", 1, 1)}), "open a@1 t=1 v=10"},
			{agg(11, 1, 0, []SessionView{sv("a", 2, 4)}, xv("a", 1, 1, 4, EndTakeover)), "end a@1 takeover t=4 v=11; open a@2 t=4 v=11"},
		}},
		{"takeover without its ended view", 0, []step{
			{agg(10, 1, 0, []SessionView{sv("a", 1, 1)}), "open a@1 t=1 v=10"},
			{agg(12, 1, 0, []SessionView{sv("a", 3, 6)}), "end a@1 takeover t=6 v=12; open a@3 t=6 v=12"},
		}},
		{"reconnect after a network drop, coalesced", 0, []step{
			{agg(10, 1, 0, []SessionView{sv("a", 1, 1)}), "open a@1 t=1 v=10"},
			{agg(12, 7, 0, []SessionView{sv("a", 2, 7)}, xv("a", 1, 1, 3, EndNetwork)), "end a@1 network t=3 v=12; open a@2 t=7 v=12"},
		}},
		{"an ended session never seen opened: open then end", 0, []step{
			{agg(10, 1, 0, []SessionView{sv("a", 1, 1)}), "open a@1 t=1 v=10"},
			{agg(13, 1, 0, []SessionView{sv("a", 1, 1)}, xv("b", 2, 2, 3, EndClean)), "open b@2 t=2 v=13; end b@2 clean t=3 v=13"},
		}},
		{"vanished without a word: unknown reason at last seen", 0, []step{
			{agg(10, 1, 0, []SessionView{sv("a", 1, 1), sv("b", 2, 2)}), "open a@1 t=1 v=10; open b@2 t=2 v=10"},
			{agg(20, 9, 9, nil), "end a@1 ? t=9 v=20; end b@2 ? t=9 v=20"},
		}},
		{"vanished while the user stays online: at since, not before its open", 0, []step{
			{agg(10, 1, 0, []SessionView{sv("a", 1, 1)}), "open a@1 t=1 v=10"},
			{agg(11, 1, 0, []SessionView{sv("a", 1, 1), sv("b", 2, 4)}), "open b@2 t=4 v=11"},
			{agg(12, 1, 0, []SessionView{sv("a", 1, 1)}), "end b@2 ? t=4 v=12"},
		}},
		{"base state before start: no open, the end is told", 100, []step{
			{agg(10, 1, 0, []SessionView{sv("a", 1, 1)}, xv("z", 0, 0, 50, EndClean)), ""},
			{agg(11, 1, 0, []SessionView{sv("a", 1, 1), sv("b", 2, 150)}), "open b@2 t=150 v=11"},
			{agg(12, 200, 200, nil, xv("a", 1, 1, 200, EndTimeout), xv("b", 2, 150, 200, EndTimeout)), "end a@1 timeout t=200 v=12; end b@2 timeout t=200 v=12"},
		}},
		{"a reload repeats the record's ended list: nothing twice", 0, []step{
			{agg(10, 1, 0, []SessionView{sv("a", 1, 1)}), "open a@1 t=1 v=10"},
			{agg(11, 1, 0, []SessionView{sv("a", 2, 3)}, xv("a", 1, 1, 3, EndTakeover)), "end a@1 takeover t=3 v=11; open a@2 t=3 v=11"},
			{agg(12, 1, 0, []SessionView{sv("a", 2, 3)}, xv("a", 1, 1, 3, EndTakeover)), ""},
			{agg(14, 9, 9, nil, xv("a", 1, 1, 3, EndTakeover), xv("a", 2, 3, 9, EndKicked)), "end a@2 kicked t=9 v=14"},
		}},
		{"an old epoch's end after a newer epoch is ignored", 0, []step{
			{agg(10, 1, 0, []SessionView{sv("a", 5, 1)}), "open a@5 t=1 v=10"},
			{agg(11, 1, 0, []SessionView{sv("a", 5, 1)}, xv("a", 3, 0, 1, EndNetwork)), ""},
		}},
		{"ends before opens of one client, in time order across clients", 0, []step{
			{agg(10, 1, 0, []SessionView{sv("a", 1, 1), sv("b", 2, 2)}), "open a@1 t=1 v=10; open b@2 t=2 v=10"},
			{agg(20, 1, 0, []SessionView{sv("a", 4, 8), sv("b", 3, 5)}, xv("b", 2, 2, 5, EndTakeover), xv("a", 1, 1, 8, EndTakeover)),
				"end b@2 takeover t=5 v=20; open b@3 t=5 v=20; end a@1 takeover t=8 v=20; open a@4 t=8 v=20"},
		}},
		{"a client's order holds when times disagree", 0, []step{
			{agg(10, 1, 0, []SessionView{sv("a", 1, 5)}), "open a@1 t=5 v=10"},
			// a clock that went back: the end of epoch 1 after the open of 2
			{agg(11, 1, 0, []SessionView{sv("a", 2, 3)}, xv("a", 1, 5, 6, EndNetwork)), "end a@1 network t=6 v=11; open a@2 t=3 v=11"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := NewSequencer(ms(tc.start))
			for i, s := range tc.steps {
				if got := brief(q.Apply(s.a)); got != s.want {
					t.Fatalf("step %d:\n got %s\nwant %s", i, got, s.want)
				}
			}
		})
	}
}

func TestSequencerCarriesTheSession(t *testing.T) {
	q := NewSequencer(seqT0)
	a := sv("a", 1, 1)
	evs := q.Apply(agg(10, 1, 0, []SessionView{a}))
	if len(evs) != 1 || evs[0].Session != a || evs[0].User != "alice" || evs[0].Kind != LifecycleConnected {
		t.Fatalf("open: %+v", evs)
	}
	// A vanished session is described as last seen live (its latest status).
	b := a
	b.Status = Busy
	q.Apply(agg(11, 1, 0, []SessionView{b}))
	evs = q.Apply(agg(12, 9, 9, nil))
	if len(evs) != 1 || evs[0].Session != b || evs[0].Reason != "" || evs[0].Session.Conn.Username != "u-a" {
		t.Fatalf("vanished: %+v", evs)
	}
}

func TestSequencerForget(t *testing.T) {
	q := NewSequencer(seqT0)
	q.Apply(agg(10, 1, 0, []SessionView{sv("a", 1, 1)}))
	q.Apply(agg(11, 5, 5, nil, xv("a", 1, 1, 5, EndClean)))
	other := agg(10, 1, 0, []SessionView{sv("b", 1, 1)})
	other.User = "bob"
	q.Apply(other)
	if q.Len() != 2 {
		t.Fatalf("len %d", q.Len())
	}
	if n := q.Forget(ms(5)); n != 0 { // last seen at 5: not before 5
		t.Fatalf("forgot %d", n)
	}
	if n := q.Forget(ms(100)); n != 1 || q.Len() != 1 {
		t.Fatalf("forgot %d, holds %d", n, q.Len())
	}
	// Seen again: what its record still lists from before is not told again;
	// what is new is.
	got := brief(q.Apply(agg(12, 200, 0, []SessionView{sv("a", 3, 200)}, xv("a", 1, 1, 5, EndClean))))
	if got != "open a@3 t=200 v=12" {
		t.Fatalf("after forget: %s", got)
	}
}

func TestSequencerBoundsClients(t *testing.T) {
	q := NewSequencer(seqT0)
	v := uint64(1)
	for i := range 1000 {
		id := fmt.Sprintf("c%d", i)
		e := uint64(i + 1)
		evs := q.Apply(agg(v, i, 0, []SessionView{sv(id, e, i)}))
		v++
		evs = append(evs, q.Apply(agg(v, i, i, nil, xv(id, e, i, i, EndClean)))...)
		v++
		if len(evs) != 2 {
			t.Fatalf("client %d: %s", i, brief(evs))
		}
	}
	u := q.users["alice"]
	if len(u.clients) > maxSeqClients {
		t.Fatalf("holds %d client ids", len(u.clients))
	}
	// An end older than the pruned epochs is not told again.
	if evs := q.Apply(agg(v, 0, 0, nil, xv("c3", 4, 3, 3, EndClean))); len(evs) != 0 {
		t.Fatalf("old end told again: %s", brief(evs))
	}
}

func TestMergeEnded(t *testing.T) {
	mk := func(ids ...string) []EndedView {
		var out []EndedView
		for _, id := range ids {
			out = append(out, xv(id, 1, 0, 0, EndClean))
		}
		return out
	}
	ids := func(xs []EndedView) string {
		var b []string
		for _, x := range xs {
			b = append(b, x.ID)
		}
		return strings.Join(b, ",")
	}
	older, newer := mk("a", "b", "c"), mk("d", "e")
	for _, tc := range []struct {
		limit   int
		want    string
		dropped int
	}{{10, "a,b,c,d,e", 0}, {5, "a,b,c,d,e", 0}, {4, "b,c,d,e", 1}, {2, "d,e", 3}, {1, "e", 4}} {
		got, dropped := MergeEnded(older, newer, tc.limit)
		if ids(got) != tc.want || dropped != tc.dropped {
			t.Errorf("limit %d: %s (%d dropped), want %s (%d)", tc.limit, ids(got), dropped, tc.want, tc.dropped)
		}
		if len(got) > 0 {
			got[0].ID = "changed"
			if older[0].ID != "a" || newer[0].ID != "d" {
				t.Fatal("merged aliases its inputs")
			}
		}
	}
	if got, n := MergeEnded(nil, nil, 64); got != nil || n != 0 {
		t.Fatalf("empty: %v %d", got, n)
	}
}

// seqModel is a user's record as a store keeps it, for the property test:
// each operation commits an aggregate with the sessions it ended.
type seqModel struct {
	now     int
	epoch   uint64
	version uint64
	live    map[string]SessionView
	record  []EndedView // newest first, MaxEnded
	commits []Aggregate
	opened  map[string]bool      // "id@epoch" of every session opened
	ended   map[string]EndReason // and how each ended
}

func (m *seqModel) commit(ended []EndedView) {
	m.version++
	live := make([]SessionView, 0, len(m.live))
	for _, s := range m.live {
		live = append(live, s)
	}
	slices.SortFunc(live, func(a, b SessionView) int { return strings.Compare(a.ID, b.ID) })
	a := agg(m.version, 0, 0, live, ended...)
	if len(live) == 0 {
		a.LastSeen = ms(m.now)
	}
	for _, x := range ended {
		m.record = append([]EndedView{x}, m.record...)
		m.ended[key(x.ID, x.Epoch)] = x.Reason
	}
	if len(m.record) > MaxEnded {
		m.record = m.record[:MaxEnded]
	}
	m.commits = append(m.commits, a)
}

func key(id string, epoch uint64) string { return fmt.Sprintf("%s@%d", id, epoch) }

func (m *seqModel) end(id string, r EndReason) EndedView {
	s := m.live[id]
	delete(m.live, id)
	return EndedView{SessionView: s, Reason: r, EndedAt: ms(m.now)}
}

func (m *seqModel) step(op byte) {
	m.now += 1 + int(op>>6)
	ids := []string{"a", "b", "c"}
	id := ids[int(op)%3]
	switch (op >> 2) % 4 {
	case 0, 1: // open (a takeover when live)
		var ended []EndedView
		if _, ok := m.live[id]; ok {
			ended = append(ended, m.end(id, EndTakeover))
		}
		m.epoch++
		m.live[id] = sv(id, m.epoch, m.now)
		m.opened[key(id, m.epoch)] = true
		m.commit(ended)
	case 2: // end
		if _, ok := m.live[id]; !ok {
			return
		}
		m.commit([]EndedView{m.end(id, []EndReason{EndClean, EndNetwork, EndKicked}[int(op>>4)%3])})
	case 3: // a reap or a node lost: every live session at once
		if len(m.live) == 0 {
			return
		}
		var ended []EndedView
		for _, id := range ids {
			if _, ok := m.live[id]; ok {
				ended = append(ended, m.end(id, EndNodeLost))
			}
		}
		m.commit(ended)
	}
}

// reload is the user's record read at commit i: its aggregate with the
// record's ended list, oldest first.
func reloadAt(a Aggregate, record []EndedView) Aggregate {
	a.Ended = nil
	for i := len(record) - 1; i >= 0; i-- {
		a.Ended = append(a.Ended, record[i])
	}
	return a
}

// checkSequence checks the properties every stream must keep, and, when
// lossless, that every open and end was told with its reason.
func checkSequence(t *testing.T, m *seqModel, evs []LifecycleEvent, lossless bool) {
	t.Helper()
	opens, ends := map[string]int{}, map[string]int{}
	last := map[string]uint64{} // per client id: the epoch of its last event
	lastKind := map[string]LifecycleKind{}
	for i, e := range evs {
		k := key(e.Session.ID, e.Session.Epoch)
		if p, ok := last[e.Session.ID]; ok && (e.Session.Epoch < p || (e.Session.Epoch == p && e.Kind == LifecycleConnected && lastKind[e.Session.ID] == LifecycleDisconnected)) {
			t.Fatalf("event %d %s: inversion after epoch %d\n%s", i, k, p, brief(evs))
		}
		last[e.Session.ID], lastKind[e.Session.ID] = e.Session.Epoch, e.Kind
		switch e.Kind {
		case LifecycleConnected:
			if opens[k]++; opens[k] > 1 {
				t.Fatalf("open %s twice\n%s", k, brief(evs))
			}
			if !m.opened[k] {
				t.Fatalf("open %s of no session", k)
			}
		case LifecycleDisconnected:
			if ends[k]++; ends[k] > 1 {
				t.Fatalf("end %s twice\n%s", k, brief(evs))
			}
			if opens[k] == 0 {
				t.Fatalf("end %s before its open\n%s", k, brief(evs))
			}
			if r, ok := m.ended[k]; e.Reason != "" && e.Reason != EndTakeover && (!ok || r != e.Reason) {
				t.Fatalf("end %s as %q, ended as %q", k, e.Reason, r)
			}
		}
	}
	if !lossless {
		return
	}
	for k := range m.opened {
		if opens[k] != 1 {
			t.Fatalf("session %s opened %d times\n%s", k, opens[k], brief(evs))
		}
	}
	for k, r := range m.ended {
		if ends[k] != 1 {
			t.Fatalf("session %s ended %d times\n%s", k, ends[k], brief(evs))
		}
		var got EndReason
		for _, e := range evs {
			if e.Kind == LifecycleDisconnected && key(e.Session.ID, e.Session.Epoch) == k {
				got = e.Reason
			}
		}
		if got != r {
			t.Fatalf("session %s ended as %q, told %q", k, r, got)
		}
	}
}

// runSequence builds a user's history from ops and delivers it as the
// control bytes say: coalesced, repeated, out of order, reloaded or lost.
func runSequence(t *testing.T, ops, control []byte) {
	m := &seqModel{live: map[string]SessionView{}, opened: map[string]bool{}, ended: map[string]EndReason{}}
	records := [][]EndedView{} // the record's ended list after each commit
	for _, op := range ops {
		n := len(m.commits)
		m.step(op)
		if len(m.commits) > n {
			records = append(records, slices.Clone(m.record))
		}
	}
	q := NewSequencer(time.Time{})
	var evs []LifecycleEvent
	lossless := true
	ci := 0
	next := func() byte {
		if ci >= len(control) {
			return 0
		}
		ci++
		return control[ci-1]
	}
	for i := 0; i < len(m.commits); {
		c := next()
		switch c % 8 {
		case 1, 2: // coalesce the next k commits, as a feed does
			k := 1 + int(c>>3)%6
			a := m.commits[i]
			for j := i + 1; j < min(i+k, len(m.commits)); j++ {
				b := m.commits[j]
				var dropped int
				b.Ended, dropped = MergeEnded(a.Ended, b.Ended, MaxEndedCarried)
				if dropped > 0 {
					lossless = false
				}
				a = b
			}
			evs = append(evs, q.Apply(a)...)
			i = min(i+k, len(m.commits))
		case 3: // a repeat, or an older one late
			evs = append(evs, q.Apply(m.commits[i])...)
			if j := int(c>>3) % (i + 1); j <= i {
				evs = append(evs, q.Apply(m.commits[j])...)
			}
			i++
		case 4: // a reload in place of this commit
			evs = append(evs, q.Apply(reloadAt(m.commits[i], records[i]))...)
			i++
		case 5: // lost, made good later by a reload (or by nothing)
			lossless = false
			i++
			if c&8 != 0 && i < len(m.commits) {
				evs = append(evs, q.Apply(reloadAt(m.commits[i], records[i]))...)
				i++
			}
		default:
			evs = append(evs, q.Apply(m.commits[i])...)
			i++
		}
	}
	checkSequence(t, m, evs, lossless)
}

func TestSequencerProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	for range 3000 {
		ops := make([]byte, rng.Intn(60))
		control := make([]byte, rng.Intn(60))
		rng.Read(ops)
		rng.Read(control)
		runSequence(t, ops, control)
	}
}

func FuzzSequencer(f *testing.F) {
	f.Add([]byte{0, 1, 2, 8, 9, 10, 12, 4, 5}, []byte{0, 1, 2, 3, 4, 5})
	f.Add([]byte{0, 0, 0, 0, 12, 0, 8}, []byte{2, 2, 4, 5, 13, 3})
	f.Fuzz(func(t *testing.T, ops, control []byte) {
		if len(ops) > 500 {
			ops = ops[:500]
		}
		runSequence(t, ops, control)
	})
}
