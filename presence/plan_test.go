package presence

import (
	"testing"
	"time"
)

func strp(s string) *string { return &s }

// The tracker's decision, step by step: every branch of Plan.Next and of
// Applied, without a store, a worker or a clock.
func TestPlanNext(t *testing.T) {
	plan := Plan{Node: "n1", TTL: time.Minute}
	const id = "alice-phone"
	open := Written{Conn: 1, User: "alice", Epoch: 7, Open: true, Status: Online}
	live := Wanted{Conn: 1, User: "alice", Status: Online, Established: true, Live: true}
	cases := []struct {
		name string
		w    Wanted
		h    Written
		want Write
	}{
		{"nothing written, not yet established", Wanted{Conn: 1, User: "alice", Live: true}, Written{}, Write{}},
		{"established: open", live, Written{},
			Write{Kind: WriteOpen, Open: OpenArgs{User: "alice", ID: id, Node: "n1", Status: Online, TTL: time.Minute}}},
		{"in step: nothing", live, open, Write{}},
		{"status changed: update", Wanted{Conn: 1, User: "alice", Status: Away, Text: "lunch", Device: "phone", Established: true, Live: true}, open,
			Write{Kind: WriteUpdate, Ref: SessionRef{User: "alice", ID: id, Epoch: 7}, Update: Update{Status: ptr(Away), Text: strp("lunch"), Device: strp("phone")}}},
		{"ended: end with its reason and last words", Wanted{Conn: 1, User: "alice", Established: true, Reason: EndNetwork, LastWords: strp("bye")}, open,
			Write{Kind: WriteEnd, End: EndArgs{User: "alice", ID: id, Epoch: 7, Reason: EndNetwork, LastWords: strp("bye")}}},
		{"ended for its keep-alive: end with its last sign of life", Wanted{Conn: 1, User: "alice", Established: true, Reason: EndTimeout, LastSign: time.Unix(1e9, 0)}, open,
			Write{Kind: WriteEnd, End: EndArgs{User: "alice", ID: id, Epoch: 7, Reason: EndTimeout, LastSign: time.Unix(1e9, 0)}}},
		{"ended before it was ever written: nothing", Wanted{Conn: 1, User: "alice", Reason: EndNetwork}, Written{}, Write{}},
		{"takeover before CONNACK: keep the old session", Wanted{Conn: 2, User: "alice", Live: true}, open, Write{}},
		{"takeover established: open (the store ends the old one)", Wanted{Conn: 2, User: "alice", Status: Online, Established: true, Live: true}, open,
			Write{Kind: WriteOpen, Open: OpenArgs{User: "alice", ID: id, Node: "n1", Status: Online, TTL: time.Minute}}},
		{"takeover by a connection that ended: end as takeover", Wanted{Conn: 2, User: "alice", Reason: EndNetwork}, open,
			Write{Kind: WriteEnd, End: EndArgs{User: "alice", ID: id, Epoch: 7, Reason: EndTakeover}}},
		{"takeover by another user: end the old one first", Wanted{Conn: 2, User: "bob", Established: true, Live: true}, open,
			Write{Kind: WriteEnd, End: EndArgs{User: "alice", ID: id, Epoch: 7, Reason: EndTakeover}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := plan.Next(id, tc.w, tc.h)
			if !sameWrite(got, tc.want) {
				t.Fatalf("Next = %+v\nwant   %+v", got, tc.want)
			}
		})
	}
}

func sameWrite(a, b Write) bool {
	eqs := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqst := func(x, y *Status) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.Kind == b.Kind && a.Open == b.Open && a.Ref == b.Ref &&
		a.End.User == b.End.User && a.End.ID == b.End.ID && a.End.Epoch == b.End.Epoch && a.End.Reason == b.End.Reason && eqs(a.End.LastWords, b.End.LastWords) && a.End.LastSign.Equal(b.End.LastSign) &&
		eqst(a.Update.Status, b.Update.Status) && eqs(a.Update.Text, b.Update.Text) && eqs(a.Update.Device, b.Update.Device)
}

func TestApplied(t *testing.T) {
	open := Written{Conn: 1, User: "alice", Epoch: 7, Open: true, Status: Online}
	end := Write{Kind: WriteEnd}
	opn := Write{Kind: WriteOpen, Open: OpenArgs{User: "alice", ID: "x", Device: "phone", Status: Away, Text: "t"}}
	upd := Write{Kind: WriteUpdate, Update: Update{Status: ptr(Busy), Text: strp("meeting")}}
	cases := []struct {
		name     string
		h        Written
		wr       Write
		o        Outcome
		want     Written
		wantMore bool
	}{
		{"end done", open, end, Done, Written{Conn: 1, User: "alice", Epoch: 7, Status: Online}, true},
		{"end stale: already over", open, end, Stale, Written{Conn: 1, User: "alice", Epoch: 7, Status: Online}, true},
		{"end failed: unchanged, stop", open, end, Failed, open, false},
		{"open done", Written{}, opn, Done, Written{Conn: 2, User: "alice", Epoch: 9, Open: true, Device: "phone", Status: Away, Text: "t"}, true},
		{"open refused: stop", Written{}, opn, Refused, Written{}, false},
		{"open failed: stop", open, opn, Failed, open, false},
		{"update done", open, upd, Done, Written{Conn: 1, User: "alice", Epoch: 7, Open: true, Status: Busy, Text: "meeting"}, true},
		{"update stale: the store ended it, open again", open, upd, Stale, Written{Conn: 1, User: "alice", Epoch: 7, Status: Online}, true},
		{"update refused: stop", open, upd, Refused, open, false},
		{"none", open, Write{}, Done, open, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, more := Applied(tc.h, 2, tc.wr, tc.o, 9)
			if got != tc.want || more != tc.wantMore {
				t.Fatalf("Applied = %+v, %v\nwant      %+v, %v", got, more, tc.want, tc.wantMore)
			}
		})
	}
}

// Running the loop to the end reaches the wanted state in the fewest
// writes: a takeover is one open, an end after changes is one end.
func TestPlanLoop(t *testing.T) {
	plan := Plan{Node: "n1", TTL: time.Minute}
	run := func(w Wanted, h Written) (Written, []WriteKind) {
		var kinds []WriteKind
		for more := true; more; {
			wr := plan.Next("c", w, h)
			if wr.Kind == WriteNone {
				break
			}
			kinds = append(kinds, wr.Kind)
			h, more = Applied(h, w.Conn, wr, Done, uint64(10+len(kinds)))
		}
		return h, kinds
	}
	h, kinds := run(Wanted{Conn: 1, User: "a", Status: Idle, Established: true, Live: true}, Written{})
	if len(kinds) != 1 || kinds[0] != WriteOpen || h.Status != Idle {
		t.Fatalf("first open: %v %+v", kinds, h)
	}
	h, kinds = run(Wanted{Conn: 2, User: "a", Status: Online, Established: true, Live: true}, h)
	if len(kinds) != 1 || kinds[0] != WriteOpen || h.Conn != 2 {
		t.Fatalf("takeover: %v %+v", kinds, h)
	}
	h, kinds = run(Wanted{Conn: 2, User: "a", Reason: EndClean}, h)
	if len(kinds) != 1 || kinds[0] != WriteEnd || h.Open || !Finished(Wanted{Conn: 2}, h) {
		t.Fatalf("end: %v %+v", kinds, h)
	}
}

func TestSweepDecision(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	grace := 2 * time.Second
	cases := []struct {
		name      string
		live      string
		doubt     bool
		seen, now time.Time
		want      Sweep
		wantSeen  time.Time
	}{
		{"its record names it", "i1", false, time.Time{}, t0, KeepIncarnation, time.Time{}},
		{"record gone", "", false, time.Time{}, t0, SweepIncarnation, time.Time{}},
		{"replaced, first seen now", "i2", false, time.Time{}, t0, WaitIncarnation, t0},
		{"replaced, within the grace", "i2", false, t0, t0.Add(grace - time.Millisecond), WaitIncarnation, t0},
		{"replaced, grace passed", "i2", false, t0, t0.Add(grace), SweepIncarnation, time.Time{}},
		{"replaced, the clock went back", "i2", false, t0, t0.Add(-time.Hour), WaitIncarnation, t0},
		// After a failover a gone record may be Redis's doing, not the node's.
		{"gone in doubt, first seen now", "", true, time.Time{}, t0, WaitIncarnation, t0},
		{"gone in doubt, within the grace", "", true, t0, t0.Add(grace - time.Millisecond), WaitIncarnation, t0},
		{"gone in doubt, grace passed", "", true, t0, t0.Add(grace), SweepIncarnation, time.Time{}},
		{"gone, first seen in doubt, doubt over", "", false, t0, t0.Add(time.Millisecond), WaitIncarnation, t0},
		{"its record back after doubt", "i1", true, t0, t0.Add(grace), KeepIncarnation, time.Time{}},
	}
	for _, tc := range cases {
		got, seen := SweepDecision("i1", tc.live, tc.doubt, tc.seen, tc.now, grace)
		if got != tc.want || !seen.Equal(tc.wantSeen) {
			t.Errorf("%s: %v, %v; want %v, %v", tc.name, got, seen, tc.want, tc.wantSeen)
		}
	}
}
