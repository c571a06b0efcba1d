package presence

import (
	"reflect"
	"testing"
	"time"
)

const testEpoch = 42

// connecting returns a fresh session in Connecting, connected at base.
func connecting() Session {
	return NewSession("alice", "c1", testEpoch, "n1", base, testTTL)
}

// active returns the session of connecting, established at base+1s.
func active(t *testing.T) Session {
	t.Helper()
	s, err := connecting().Establish(testEpoch, at(time.Second))
	if err != nil {
		t.Fatalf("Establish: %v", err)
	}
	return s
}

// ended returns an active session ended for reason at base+2s.
func ended(t *testing.T, reason EndReason) Session {
	t.Helper()
	s, err := active(t).End(testEpoch, reason, at(2*time.Second))
	if err != nil {
		t.Fatalf("End(%s): %v", reason, err)
	}
	return s
}

func TestNewSession(t *testing.T) {
	got := NewSession("alice", "c1", 7, "n1", base, testTTL)
	want := Session{
		User: "alice", ID: "c1", Epoch: 7, Node: "n1",
		Status: Online, State: Connecting,
		ConnectedAt: base, RenewedAt: base, ExpiresAt: at(testTTL),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("NewSession = %+v\nwant %+v", got, want)
	}
}

func TestSessionLive(t *testing.T) {
	for _, tc := range []struct {
		state State
		want  bool
	}{
		{Connecting, true},
		{Active, true},
		{Disconnected, false},
		{Expired, false},
		{"", false},
	} {
		if got := (Session{State: tc.state}).Live(); got != tc.want {
			t.Errorf("Live() in %q = %v, want %v", tc.state, got, tc.want)
		}
	}
}

func TestSessionEstablish(t *testing.T) {
	now := at(time.Second)

	// Connecting → Active: only State and RenewedAt move.
	got, err := connecting().Establish(testEpoch, now)
	wantErr(t, "Establish from Connecting", err, nil)
	want := connecting()
	want.State = Active
	want.RenewedAt = now
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Establish = %+v\nwant %+v", got, want)
	}

	// Establish from Active has no transition and changes nothing.
	a := active(t)
	got, err = a.Establish(testEpoch, at(5*time.Second))
	wantErr(t, "Establish from Active", err, ErrBadTransition)
	if !reflect.DeepEqual(got, a) {
		t.Fatalf("failed Establish returned %+v, want the session unchanged %+v", got, a)
	}
}

func TestSessionRenew(t *testing.T) {
	for _, from := range []Session{connecting(), active(t)} {
		now := at(10 * time.Second)
		got, err := from.Renew(testEpoch, now, time.Minute)
		wantErr(t, "Heartbeat", err, nil)
		want := from
		want.RenewedAt = now
		want.ExpiresAt = at(10*time.Second + time.Minute)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Heartbeat from %s = %+v\nwant %+v", from.State, got, want)
		}
	}
}

func TestSessionUpdate(t *testing.T) {
	a := active(t)
	a.Text = "before"
	a.Device = "phone"
	for _, tc := range []struct {
		name    string
		upd     Update
		want    func(*Session)
		wantErr error
	}{
		{"empty", Update{}, func(*Session) {}, nil},
		{"status", Update{Status: ptr(Away)}, func(s *Session) { s.Status = Away }, nil},
		{"status dnd", Update{Status: ptr(DND)}, func(s *Session) { s.Status = DND }, nil},
		{"text", Update{Text: ptr("lunch")}, func(s *Session) { s.Text = "lunch" }, nil},
		{"text cleared", Update{Text: ptr("")}, func(s *Session) { s.Text = "" }, nil},
		{"device", Update{Device: ptr("desk")}, func(s *Session) { s.Device = "desk" }, nil},
		{"all", Update{Status: ptr(Busy), Text: ptr("call"), Device: ptr("desk")}, func(s *Session) {
			s.Status, s.Text, s.Device = Busy, "call", "desk"
		}, nil},
		// A bad status rejects the whole update: the text is not applied either.
		{"offline", Update{Status: ptr(Offline), Text: ptr("x")}, func(*Session) {}, ErrBadStatus},
		{"unknown status", Update{Status: ptr(Status("asleep"))}, func(*Session) {}, ErrBadStatus},
		{"empty status", Update{Status: ptr(Status(""))}, func(*Session) {}, ErrBadStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.Update(testEpoch, tc.upd)
			wantErr(t, "Update", err, tc.wantErr)
			want := a
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Update = %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestEndReasons(t *testing.T) {
	for _, tc := range []struct {
		reason EndReason
		state  State
		clean  bool
	}{
		{EndClean, Disconnected, true},
		{EndTakeover, Disconnected, false},
		{EndKicked, Disconnected, false},
		{EndTimeout, Expired, false},
		{EndNetwork, Expired, false},
		{EndShutdown, Expired, false},
		{EndNodeLost, Expired, false},
		{EndDrain, Expired, false},
		{EndMissed, Expired, false},
	} {
		t.Run(string(tc.reason), func(t *testing.T) {
			if !tc.reason.Valid() {
				t.Errorf("%q.Valid() = false", tc.reason)
			}
			if got := tc.reason.State(); got != tc.state {
				t.Errorf("%q.State() = %s, want %s", tc.reason, got, tc.state)
			}
			if got := tc.reason.Clean(); got != tc.clean {
				t.Errorf("%q.Clean() = %v, want %v", tc.reason, got, tc.clean)
			}
			// From both live states.
			for _, from := range []Session{connecting(), active(t)} {
				now := at(3 * time.Second)
				got, err := from.End(testEpoch, tc.reason, now)
				wantErr(t, "End", err, nil)
				want := from
				want.State = tc.state
				want.EndReason = tc.reason
				want.EndedAt = now
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("End(%s) from %s = %+v\nwant %+v", tc.reason, from.State, got, want)
				}
				if got.Live() {
					t.Fatalf("ended session is still Live")
				}
			}
		})
	}
}

func TestEndUnknownReason(t *testing.T) {
	for _, r := range []EndReason{"", "bogus", "Clean"} {
		if r.Valid() {
			t.Errorf("%q.Valid() = true", r)
		}
		a := active(t)
		got, err := a.End(testEpoch, r, at(time.Minute))
		wantErr(t, "End("+string(r)+")", err, ErrBadTransition)
		if !reflect.DeepEqual(got, a) {
			t.Fatalf("End(%q) changed the session: %+v", r, got)
		}
	}
}

// sessionOps applies every operation of the state machine to s at epoch.
var sessionOps = []struct {
	name string
	op   func(s Session, epoch uint64) (Session, error)
}{
	{"Establish", func(s Session, e uint64) (Session, error) { return s.Establish(e, at(time.Hour)) }},
	{"Renew", func(s Session, e uint64) (Session, error) { return s.Renew(e, at(time.Hour), time.Minute) }},
	{"Update", func(s Session, e uint64) (Session, error) { return s.Update(e, Update{Status: ptr(Busy)}) }},
	{"Update empty", func(s Session, e uint64) (Session, error) { return s.Update(e, Update{}) }},
	{"End", func(s Session, e uint64) (Session, error) { return s.End(e, EndClean, at(time.Hour)) }},
	{"End bad reason", func(s Session, e uint64) (Session, error) { return s.End(e, "bogus", at(time.Hour)) }},
}

func TestSessionOpsOnEnded(t *testing.T) {
	for _, reason := range []EndReason{EndClean, EndTakeover, EndKicked, EndTimeout, EndNetwork, EndShutdown, EndNodeLost, EndDrain} {
		e := ended(t, reason)
		for _, op := range sessionOps {
			t.Run(string(reason)+"/"+op.name, func(t *testing.T) {
				got, err := op.op(e, testEpoch)
				wantErr(t, op.name, err, ErrNotLive)
				if !reflect.DeepEqual(got, e) {
					t.Fatalf("%s on an ended session changed it: %+v", op.name, got)
				}
			})
		}
	}
}

func TestSessionOpsStaleEpoch(t *testing.T) {
	for _, from := range []Session{connecting(), active(t), ended(t, EndNetwork)} {
		for _, epoch := range []uint64{0, testEpoch - 1, testEpoch + 1} {
			for _, op := range sessionOps {
				t.Run(string(from.State)+"/"+op.name, func(t *testing.T) {
					got, err := op.op(from, epoch)
					// The epoch is checked first, even on an ended session.
					wantErr(t, op.name, err, ErrStaleEpoch)
					if !reflect.DeepEqual(got, from) {
						t.Fatalf("%s with epoch %d changed the session: %+v", op.name, epoch, got)
					}
				})
			}
		}
	}
}

func TestSessionDue(t *testing.T) {
	a := active(t) // expires at base+ttl
	exp := at(testTTL)
	for _, tc := range []struct {
		name string
		s    Session
		now  time.Time
		want bool
	}{
		{"long before", a, base, false},
		{"1ns before", a, exp.Add(-time.Nanosecond), false},
		{"at", a, exp, true},
		{"after", a, exp.Add(time.Nanosecond), true},
		{"connecting at", connecting(), exp, true},
		{"ended after", ended(t, EndClean), exp.Add(time.Hour), false},
		{"expired after", ended(t, EndTimeout), exp.Add(time.Hour), false},
	} {
		if got := tc.s.Due(tc.now); got != tc.want {
			t.Errorf("%s: Due = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestUpdateMergeEmpty(t *testing.T) {
	away, busy := ptr(Away), ptr(Busy)
	t1, t2 := ptr("one"), ptr("two")
	d1, d2 := ptr("phone"), ptr("desk")
	for _, tc := range []struct {
		name         string
		first, later Update
		want         Update
	}{
		{"both empty", Update{}, Update{}, Update{}},
		{"later empty", Update{Status: away, Text: t1, Device: d1}, Update{}, Update{Status: away, Text: t1, Device: d1}},
		{"first empty", Update{}, Update{Status: busy, Text: t2, Device: d2}, Update{Status: busy, Text: t2, Device: d2}},
		{"later wins", Update{Status: away, Text: t1, Device: d1}, Update{Status: busy, Text: t2, Device: d2}, Update{Status: busy, Text: t2, Device: d2}},
		{"disjoint", Update{Status: away}, Update{Text: t2}, Update{Status: away, Text: t2}},
		{"device only", Update{Status: away, Text: t1}, Update{Device: d2}, Update{Status: away, Text: t1, Device: d2}},
	} {
		got := tc.first.Merge(tc.later)
		if got != tc.want { // pointer identity: Merge keeps the pointers it was given
			t.Errorf("%s: Merge = %+v, want %+v", tc.name, got, tc.want)
		}
	}

	for _, tc := range []struct {
		u    Update
		want bool
	}{
		{Update{}, true},
		{Update{Status: away}, false},
		{Update{Text: ptr("")}, false},
		{Update{Device: d1}, false},
	} {
		if got := tc.u.Empty(); got != tc.want {
			t.Errorf("%+v.Empty() = %v, want %v", tc.u, got, tc.want)
		}
	}
}
