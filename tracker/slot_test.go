package tracker

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

// A slot keeps presence.Wanted and presence.Written in a form of its own
// (wantState, haveState: issue 23) and gives back what it was given: all
// of a live connection's Wanted, an ended one's but its Status (its Reason
// in the same field), and all of a Written.
func TestSlotKeepsWantedAndWritten(t *testing.T) {
	words, at := "bye", time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	net := presence.Conn{Username: "ann", IP: "10.0.0.1", Port: 1883, Listener: "tcp", ProtoVer: 5, CleanStart: true, KeepAlive: 60, Expiry: 30}
	live := presence.Wanted{
		Conn: 7, User: "ann", Device: "phone", Status: presence.Away, Text: "lunch",
		Established: true, Live: true, AutoIdle: true, LastWords: &words, WillDelay: time.Second,
		Net: net, LastSign: at, Expect: time.Hour, Margin: time.Minute,
	}
	ended := live
	ended.Live, ended.Status, ended.Reason = false, "", presence.EndTimeout
	for _, w := range []presence.Wanted{live, ended, {}} {
		var s slot
		s.setWanted(w)
		if got := s.wanted(); !reflect.DeepEqual(got, w) {
			t.Errorf("wanted %+v, kept %+v", w, got)
		}
	}
	var s slot
	s.setWanted(live)
	s.live = false // Disconnect
	s.want.statusOr = string(presence.EndNetwork)
	s.setStatus(presence.Busy) // a late presence/set of the ended connection
	if got := s.wanted(); got.Reason != presence.EndNetwork || got.Status != "" {
		t.Errorf("ended, then set busy: reason %q, status %q; want network, none", got.Reason, got.Status)
	}

	for _, h := range []presence.Written{
		{},
		{Conn: 7, User: "ann", Epoch: 3, Open: true, Device: "phone", Status: presence.Idle, Text: "lunch"},
		{Conn: 7, User: "ann", Epoch: 3, Device: "phone"},
	} {
		var s slot
		s.setWritten(h)
		if got := s.written(); got != h {
			t.Errorf("written %+v, kept %+v", h, got)
		}
	}
}

// A slot keeps an ended connection's Reason where its Status was
// (wantState): that holds only while presence.Plan.Next reads no Status
// of an ended connection, whatever the store was told.
func TestPlanIgnoresStatusOnceEnded(t *testing.T) {
	p := presence.Plan{Node: "n1", TTL: time.Minute}
	words := "bye"
	for _, h := range []presence.Written{
		{},
		{Conn: 1, User: "ann", Epoch: 3, Open: true, Device: "phone", Status: presence.Away, Text: "x"},
		{Conn: 1, User: "ann", Epoch: 3, Open: true, Status: presence.Online},
		{Conn: 2, User: "ann", Epoch: 4, Open: true, Status: presence.Idle},
		{Conn: 2, User: "ben", Epoch: 4, Open: true},
		{Conn: 1, User: "ann", Epoch: 3},
	} {
		for _, reason := range []presence.EndReason{presence.EndClean, presence.EndTimeout, ""} {
			for _, est := range []bool{false, true} {
				for _, auto := range []bool{false, true} {
					w := presence.Wanted{Conn: 1, User: "ann", Device: "phone", Text: "x", Established: est, AutoIdle: auto,
						Reason: reason, LastWords: &words, WillDelay: time.Second}
					none := p.Next("id", w, h)
					for _, st := range []presence.Status{presence.Online, presence.Away, presence.DND} {
						w.Status = st
						if got := p.Next("id", w, h); !reflect.DeepEqual(got, none) {
							t.Errorf("ended (%s), written %+v: with status %s %+v, without %+v", reason, h, st, got, none)
						}
					}
				}
			}
		}
	}
}

// A presence/set the hook hands over after its connection's Disconnect
// (before the end is written) changes nothing of the end: its reason is
// kept.
func TestTrackerSetAfterDisconnect(t *testing.T) {
	tr := New(&epochStore{}, Options{Node: "n1", TTL: time.Minute})
	var sc scratch
	drain := func() {
		for _, q := range tr.shards {
			if its := q.take(); len(its) > 0 {
				tr.syncItems(its, &sc)
			}
		}
	}
	tr.Connect(1, "e", "erin", "", nil, presence.Conn{})
	tr.Established(1, "e")
	drain()
	tr.Disconnect(1, "e", presence.EndTimeout)
	away, text := presence.Away, "gone"
	tr.Set(1, "e", "erin", presence.SetRequest{Scope: presence.ScopeSession, Status: &away, Text: &text})
	drain()
	if n := tr.Stats.EndedBy[presence.EndTimeout.Index()].Load(); n != 1 || tr.Stats.Ended.Load() != 1 || tr.Stats.Updated.Load() != 0 {
		t.Fatalf("%d ends as timeout, %d ends, %d updates; want the one end, as timeout", n, tr.Stats.Ended.Load(), tr.Stats.Updated.Load())
	}
	if tr.Len() != 0 {
		t.Fatalf("%d slots left", tr.Len())
	}
}

// endsStore is an epochStore that records the ends it is asked for and,
// with lose set, has lost every session renewed.
type endsStore struct {
	epochStore
	mu   sync.Mutex
	ends []presence.EndArgs
	lose bool
}

func (s *endsStore) Open(ctx context.Context, a presence.OpenArgs) (presence.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epochStore.Open(ctx, a)
}

func (s *endsStore) End(_ context.Context, a presence.EndArgs) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ends = append(s.ends, a)
	return nil
}

func (s *endsStore) Renew(_ context.Context, refs []presence.SessionRef, _ time.Duration) ([]presence.SessionRef, error) {
	if s.lose {
		return refs, nil
	}
	return nil, nil
}

// A connection of another user with the same bare id (a tracker used
// without the hook, whose ids are not scoped by user) takes the session
// over: the end written is of the first user's session, at its epoch, then
// the second user's is opened.
func TestTrackerTakeoverByAnotherUser(t *testing.T) {
	st := &endsStore{}
	tr := New(st, Options{Node: "n1", TTL: time.Minute})
	tr.Start()
	defer tr.Stop()
	tr.Connect(1, "x", "ann", "", nil, presence.Conn{})
	tr.Established(1, "x")
	waitIdle(t, tr)
	tr.Connect(2, "x", "ben", "", nil, presence.Conn{})
	tr.Established(2, "x")
	waitIdle(t, tr)
	want := []presence.EndArgs{{User: "ann", ID: "x", Epoch: 1, Reason: presence.EndTakeover}}
	st.mu.Lock()
	ends := st.ends
	st.mu.Unlock()
	if !reflect.DeepEqual(ends, want) {
		t.Fatalf("ends %+v, want %+v", ends, want)
	}
	if users := tr.Users(); len(users) != 1 || tr.Stats.Opened.Load() != 2 {
		t.Fatalf("users %v, %d opens; want ben's session open, two opens", users, tr.Stats.Opened.Load())
	}
	if _, ok := tr.Users()["ben"]; !ok {
		t.Fatalf("users %v, want ben", tr.Users())
	}
	if c, ok := tr.Holder("ben", "x", 2); !ok || c != 2 {
		t.Fatalf("holder of ben's x at 2: %d %v, want connection 2", c, ok)
	}
}

// A session the store lost and this node opens again (same connection)
// is logged opened again ("again"), not ended and opened; its end then
// tells how long it lasted since it was first logged opened.
func TestTrackerSessionLogOpenedAgain(t *testing.T) {
	st := &endsStore{}
	var buf lockedBuffer
	tr := New(st, Options{Node: "n1", TTL: time.Minute, Sessions: slog.New(slog.NewJSONHandler(&buf, nil))})
	tr.Start()
	defer tr.Stop()
	tr.Connect(1, "c", "cat", "tablet", nil, presence.Conn{})
	tr.Established(1, "c")
	waitIdle(t, tr)
	st.lose = true
	if err := tr.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, tr)
	tr.Disconnect(1, "c", presence.EndClean)
	waitIdle(t, tr)

	lines := buf.lines(t)
	want := []struct {
		msg   string
		again bool
		epoch float64
	}{{"session opened", false, 1}, {"session opened", true, 2}, {"session ended", false, 2}}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %v", len(lines), len(want), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l["msg"] != w.msg || l["epoch"] != w.epoch || l["user"] != "cat" || l["client_id"] != "c" {
			t.Errorf("line %d: %v, want %q of cat's c at epoch %v", i, l, w.msg, w.epoch)
		}
		if w.msg == "session opened" && l["again"] != w.again {
			t.Errorf("line %d: again %v, want %v", i, l["again"], w.again)
		}
	}
	if ms, ok := lines[2]["lasted_ms"].(float64); !ok || ms < 0 {
		t.Errorf("end: lasted_ms %v, want a count of milliseconds", lines[2]["lasted_ms"])
	}
	if r := lines[2]["reason"]; r != "clean" {
		t.Errorf("end: reason %v, want clean", r)
	}
}

// A connection with no will, no check-in period, no last sign and no
// status text keeps no rare part (slotRare: issue 23); setting one makes
// it, and once none is set the part is dropped again.
func TestSlotRareFieldsKeptAside(t *testing.T) {
	var s slot
	s.setWanted(presence.Wanted{Conn: 1, User: "ann", Device: "phone", Status: presence.Online, Live: true})
	s.setWritten(presence.Written{Conn: 1, User: "ann", Epoch: 1, Open: true, Device: "phone", Status: presence.Online})
	if s.rare != nil {
		t.Fatalf("a plain connection keeps a rare part: %+v", *s.rare)
	}
	at := time.Date(2026, 12, 3, 16, 0, 0, 0, time.UTC)
	words := "bye"
	s.setRare(func(r *slotRare) { r.lastWords = &words })
	s.setRare(func(r *slotRare) { r.willDelay = time.Second })
	s.setRare(func(r *slotRare) { r.expect, r.margin = time.Hour, time.Minute })
	s.setRare(func(r *slotRare) { r.lastSign = at })
	s.setText("lunch")
	w := s.wanted()
	if w.LastWords != &words || w.WillDelay != time.Second || w.Expect != time.Hour || w.Margin != time.Minute || !w.LastSign.Equal(at) || w.Text != "lunch" {
		t.Fatalf("rare fields set one by one, wanted %+v", w)
	}
	kept := s.rare
	w.WillDelay = 2 * time.Second
	s.setWanted(w)
	if s.rare != kept || s.wanted().WillDelay != 2*time.Second {
		t.Errorf("setWanted with rare fields did not reuse the rare part, or lost a change")
	}
	h := s.written()
	h.Text = "lunch"
	s.setWritten(h)
	s.setWanted(presence.Wanted{Conn: 2, User: "ann", Live: true})
	if s.rare == nil || s.written().Text != "lunch" || s.wanted().Text != "" {
		t.Fatalf("setWanted without rare fields lost the written text, or kept the wanted: %+v", s.rare)
	}
	s.setHaveText("")
	if s.rare != nil {
		t.Errorf("nothing rare is set, yet the slot keeps %+v", *s.rare)
	}
}

// A listener with no code (names' table full) is kept whole in the rare
// part, and the slot gives back what it was given.
func TestSlotListenerWithoutCode(t *testing.T) {
	was := listenerCode
	t.Cleanup(func() { listenerCode = was })
	listenerCode = func(string) (uint8, bool) { return 0, false }
	w := presence.Wanted{Conn: 1, User: "ann", Live: true, Status: presence.Online,
		Net: presence.Conn{Username: "ann", IP: "10.0.0.2", Port: 8883, Listener: "tls-eu", ProtoVer: 5, KeepAlive: 30}}
	var s slot
	s.setWanted(w)
	if got := s.wanted(); !reflect.DeepEqual(got, w) {
		t.Fatalf("wanted %+v, kept %+v", w, got)
	}
	if s.rare == nil || s.rare.listener != "tls-eu" {
		t.Fatalf("the listener without a code is not in the rare part: %+v", s.rare)
	}
	listenerCode = was
	s.setWanted(w)
	if s.rare != nil || s.wanted().Net.Listener != "tls-eu" {
		t.Fatalf("with a code, the slot keeps a rare part %+v, or lost the listener", s.rare)
	}
}
