package presence

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestOpenArgsValidate(t *testing.T) {
	ok := OpenArgs{User: "alice", ID: "c1", Node: "n1", Device: "phone", Status: Busy, Text: "hi", TTL: time.Second}
	for _, tc := range []struct {
		name string
		mod  func(*OpenArgs)
		want error
	}{
		{"valid", func(*OpenArgs) {}, nil},
		{"no device, no status", func(a *OpenArgs) { a.Device, a.Status = "", "" }, nil},
		{"user of 128 bytes", func(a *OpenArgs) { a.User = strings.Repeat("u", MaxUserBytes) }, nil},
		{"text of 256 bytes", func(a *OpenArgs) { a.Text = strings.Repeat("t", MaxTextBytes) }, nil},
		{"user with $ inside", func(a *OpenArgs) { a.User = "a$b" }, nil},
		{"unicode user", func(a *OpenArgs) { a.User = "zoë" }, nil},

		{"empty user", func(a *OpenArgs) { a.User = "" }, ErrBadName},
		{"user with /", func(a *OpenArgs) { a.User = "a/b" }, ErrBadName},
		{"user with +", func(a *OpenArgs) { a.User = "a+b" }, ErrBadName},
		{"user with #", func(a *OpenArgs) { a.User = "a#" }, ErrBadName},
		{"user with leading $", func(a *OpenArgs) { a.User = "$SYS" }, ErrBadName},
		{"user of 129 bytes", func(a *OpenArgs) { a.User = strings.Repeat("u", MaxUserBytes+1) }, ErrBadName},
		{"user with control char", func(a *OpenArgs) { a.User = "a\nb" }, ErrBadName},
		{"user not UTF-8", func(a *OpenArgs) { a.User = "a\xffb" }, ErrBadName},
		{"empty session id", func(a *OpenArgs) { a.ID = "" }, ErrBadName},
		{"session id too long", func(a *OpenArgs) { a.ID = strings.Repeat("c", MaxSessionIDBytes+1) }, ErrBadName},
		{"device too long", func(a *OpenArgs) { a.Device = strings.Repeat("d", MaxDeviceBytes+1) }, ErrBadName},
		{"device with control char", func(a *OpenArgs) { a.Device = "ph\x00one" }, ErrBadName},
		{"status offline", func(a *OpenArgs) { a.Status = Offline }, ErrBadStatus},
		{"unknown status", func(a *OpenArgs) { a.Status = "asleep" }, ErrBadStatus},
		{"text of 257 bytes", func(a *OpenArgs) { a.Text = strings.Repeat("t", MaxTextBytes+1) }, ErrBadPayload},
		{"ttl 0", func(a *OpenArgs) { a.TTL = 0 }, ErrBadTransition},
		{"negative ttl", func(a *OpenArgs) { a.TTL = -time.Second }, ErrBadTransition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ok
			tc.mod(&a)
			wantErr(t, "Validate", a.Validate(), tc.want)
			if tc.want != nil {
				// Open refuses the same arguments and changes nothing.
				var u User
				got, s, taken, err := u.Open(a, base)
				wantErr(t, "Open", err, tc.want)
				if !reflect.DeepEqual(got, u) || !reflect.DeepEqual(s, Session{}) || taken != nil {
					t.Fatalf("failed Open returned %+v, %+v, %v", got, s, taken)
				}
			}
		})
	}
}

func TestOpen(t *testing.T) {
	var u User
	a := OpenArgs{User: "alice", ID: "c1", Node: "n1", Device: "phone", Status: Away, Text: "hi", TTL: testTTL}
	u, s := mustOpen(t, u, a, base)
	want := Session{
		User: "alice", ID: "c1", Epoch: baseStamp, Node: "n1", Device: "phone",
		Status: Away, Text: "hi", State: Active,
		ConnectedAt: base, RenewedAt: base, ExpiresAt: at(testTTL),
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("Open session = %+v\nwant %+v", s, want)
	}
	wantUser := User{Name: "alice", LastEpoch: baseStamp, Sessions: []Session{want}}
	if !reflect.DeepEqual(u, wantUser) {
		t.Fatalf("Open user = %+v\nwant %+v", u, wantUser)
	}

	// Empty status means online.
	_, s = mustOpen(t, u, args("c2", "n1", ""), base)
	if s.Status != Online || s.Device != "" || s.Text != "" {
		t.Fatalf("Open with defaults = %+v, want online without device or text", s)
	}

	// A record belongs to one user.
	b := args("c3", "n1", "")
	b.User = "bob"
	got, _, _, err := u.Open(b, base)
	wantErr(t, "Open for another user", err, ErrBadName)
	if !reflect.DeepEqual(got, u) {
		t.Fatalf("Open for another user changed the record")
	}
}

func TestOpenEpochsIncrease(t *testing.T) {
	for _, tc := range []struct {
		name string
		step time.Duration
	}{
		{"frozen clock", 0},
		{"clock forward", time.Millisecond},
		{"clock backwards", -time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var u User
			var last uint64
			now := base
			for i := range 20 {
				var s Session
				// Reuse ids so that takeovers are among the opens.
				var taken *Session
				var err error
				u, s, taken, err = u.Open(args(fmt.Sprintf("c%d", i%3), "n1", ""), now)
				if err != nil {
					t.Fatal(err)
				}
				if s.Epoch <= last {
					t.Fatalf("open %d: epoch %d not above %d", i, s.Epoch, last)
				}
				if u.LastEpoch != s.Epoch {
					t.Fatalf("open %d: LastEpoch %d, session epoch %d", i, u.LastEpoch, s.Epoch)
				}
				if (taken != nil) != (i >= 3) {
					t.Fatalf("open %d: taken = %v", i, taken)
				}
				if tc.step == 0 && s.Epoch != baseStamp+uint64(i) {
					t.Fatalf("open %d at a frozen clock: epoch %d, want %d", i, s.Epoch, baseStamp+uint64(i))
				}
				last = s.Epoch
				now = now.Add(tc.step)
			}
			// Live sessions stay sorted by id.
			var ids []string
			for _, s := range u.Sessions {
				ids = append(ids, s.ID)
			}
			if want := []string{"c0", "c1", "c2"}; !reflect.DeepEqual(ids, want) {
				t.Fatalf("live ids %v, want %v", ids, want)
			}
		})
	}

	// Epochs are per user: another user's record starts from the wall clock.
	var bob User
	b := args("c1", "n1", "")
	b.User = "bob"
	_, s, _, err := bob.Open(b, base)
	if err != nil || s.Epoch != baseStamp {
		t.Fatalf("bob's first epoch = %d, %v; want %d", s.Epoch, err, baseStamp)
	}
}

func TestOpenSortsSessionsByID(t *testing.T) {
	var u User
	for _, id := range []string{"m", "b", "z", "a", "q"} {
		u, _ = mustOpen(t, u, args(id, "n1", ""), base)
	}
	var ids []string
	for _, s := range u.Sessions {
		ids = append(ids, s.ID)
	}
	if want := []string{"a", "b", "m", "q", "z"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("live ids %v, want %v", ids, want)
	}
}

func TestOpenTakeover(t *testing.T) {
	rules := NewRules(nil)
	var u User
	u, old := mustOpen(t, u, args("c1", "n1", "phone"), base)
	u, _, _ = u.Commit(rules, base)
	before := deepCopy(u)

	now := at(5 * time.Second)
	u2, s, taken, err := u.Open(args("c1", "n2", "phone"), now)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(u, before) {
		t.Fatalf("Open changed its receiver")
	}
	if taken == nil {
		t.Fatalf("Open over a live id took nothing over")
	}
	wantTaken := old
	wantTaken.State = Disconnected
	wantTaken.EndReason = EndTakeover
	wantTaken.EndedAt = now
	if !reflect.DeepEqual(*taken, wantTaken) {
		t.Fatalf("taken = %+v\nwant %+v", *taken, wantTaken)
	}
	if s.Epoch <= old.Epoch || s.Node != "n2" || s.State != Active {
		t.Fatalf("new session = %+v, want active on n2 with an epoch above %d", s, old.Epoch)
	}
	if !reflect.DeepEqual(u2.Sessions, []Session{s}) {
		t.Fatalf("live sessions = %+v, want only the new one", u2.Sessions)
	}
	if !reflect.DeepEqual(u2.Ended, []Session{wantTaken}) {
		t.Fatalf("Ended = %+v, want the taken-over session", u2.Ended)
	}
	// The user was never offline: no last-seen, no offline aggregate, no new since.
	if !u2.LastSeen.IsZero() {
		t.Fatalf("takeover set LastSeen to %v; the user never went offline", u2.LastSeen)
	}
	u3, p, changed := u2.Commit(rules, now)
	if !changed || p.Status != Online || !p.Since.Equal(base) || !p.LastSeen.IsZero() {
		t.Fatalf("commit after takeover = %+v (changed %v), want online since %v without last_seen", p, changed, base)
	}

	// The old epoch is stale for every write after the takeover.
	for name, op := range map[string]func() (User, error){
		"End": func() (User, error) {
			r, _, err := u3.End("c1", old.Epoch, EndClean, nil, now)
			return r, err
		},
		"UpdateSession": func() (User, error) {
			r, _, err := u3.UpdateSession("c1", old.Epoch, Update{Status: ptr(Busy)})
			return r, err
		},
		"Renew": func() (User, error) { return u3.Renew("c1", old.Epoch, now, time.Hour) },
	} {
		got, err := op()
		wantErr(t, name+" with the taken-over epoch", err, ErrStaleEpoch)
		if !reflect.DeepEqual(got, u3) {
			t.Fatalf("%s with a stale epoch changed the user", name)
		}
	}
}

// twoLive returns alice with live sessions c1 (node n1) and c2 (node n2), opened at base.
func twoLive(t *testing.T) (User, Session, Session) {
	t.Helper()
	var u User
	u, s1 := mustOpen(t, u, args("c1", "n1", "phone"), base)
	u, s2 := mustOpen(t, u, args("c2", "n2", "desk"), base)
	return u, s1, s2
}

func TestEndStale(t *testing.T) {
	u, s1, _ := twoLive(t)
	ended, _, err := u.End("c2", u.Sessions[1].Epoch, EndClean, nil, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		u      User
		id     string
		epoch  uint64
		reason EndReason
		want   error
	}{
		{"unknown id", u, "nope", s1.Epoch, EndClean, ErrStaleEpoch},
		{"older epoch", u, "c1", s1.Epoch - 1, EndClean, ErrStaleEpoch},
		{"newer epoch", u, "c1", s1.Epoch + 1, EndNetwork, ErrStaleEpoch},
		{"epoch of another session", u, "c1", u.Sessions[1].Epoch, EndClean, ErrStaleEpoch},
		{"already ended", ended, "c2", u.Sessions[1].Epoch, EndClean, ErrStaleEpoch},
		{"unknown reason", u, "c1", s1.Epoch, "bogus", ErrBadTransition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := deepCopy(tc.u)
			got, s, err := tc.u.End(tc.id, tc.epoch, tc.reason, ptr("words"), at(time.Second))
			wantErr(t, "End", err, tc.want)
			if !reflect.DeepEqual(got, tc.u) || !reflect.DeepEqual(tc.u, before) {
				t.Fatalf("End that failed changed the user:\n got %+v\nwant %+v", got, before)
			}
			if !reflect.DeepEqual(s, Session{}) {
				t.Fatalf("End that failed returned session %+v", s)
			}
		})
	}
}

func TestEnd(t *testing.T) {
	endAt := at(7 * time.Second)
	for _, tc := range []struct {
		name          string
		both          bool // c2 is live too; else c1 is the only live session
		reason        EndReason
		lastWords     *string
		wantLastWords string
		wantLastSeen  time.Time
	}{
		{"last, network, will", false, EndNetwork, ptr("gone"), "gone", endAt},
		{"last, timeout, will", false, EndTimeout, ptr("gone"), "gone", endAt},
		{"last, kicked, will", false, EndKicked, ptr("gone"), "gone", endAt},
		{"last, node lost, will", false, EndNodeLost, ptr("gone"), "gone", endAt},
		{"last, clean, will", false, EndClean, ptr("gone"), "", endAt},
		{"last, network, no will", false, EndNetwork, nil, "", endAt},
		{"last, network, empty will", false, EndNetwork, ptr(""), "", endAt},
		{"not last, network, will", true, EndNetwork, ptr("gone"), "", time.Time{}},
		{"not last, clean", true, EndClean, nil, "", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var u User
			u, s1 := mustOpen(t, u, args("c1", "n1", "phone"), base)
			if tc.both {
				u, _ = mustOpen(t, u, args("c2", "n1", "desk"), base)
			}
			before := deepCopy(u)
			got, ended, err := u.End("c1", s1.Epoch, tc.reason, tc.lastWords, endAt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(u, before) {
				t.Fatalf("End changed its receiver")
			}
			want := s1
			want.State = tc.reason.State()
			want.EndReason = tc.reason
			want.EndedAt = endAt
			if !reflect.DeepEqual(ended, want) {
				t.Fatalf("ended = %+v\nwant %+v", ended, want)
			}
			if !reflect.DeepEqual(got.Ended, []Session{want}) {
				t.Fatalf("Ended = %+v, want [%+v]", got.Ended, want)
			}
			if wantLive := len(before.Sessions) - 1; len(got.Sessions) != wantLive {
				t.Fatalf("%d live sessions, want %d", len(got.Sessions), wantLive)
			}
			if got.LastWords != tc.wantLastWords {
				t.Fatalf("LastWords = %q, want %q", got.LastWords, tc.wantLastWords)
			}
			if !got.LastSeen.Equal(tc.wantLastSeen) {
				t.Fatalf("LastSeen = %v, want %v", got.LastSeen, tc.wantLastSeen)
			}
			scribble(got)
			if !reflect.DeepEqual(u, before) {
				t.Fatalf("mutating End's result changed its receiver")
			}
		})
	}
}

func TestLastSeenAndLastWordsLifecycle(t *testing.T) {
	u, s1, s2 := twoLive(t)
	// c1 ends: c2 is still live, so no last-seen and no last words.
	u, _, err := u.End("c1", s1.Epoch, EndNetwork, ptr("w1"), at(time.Second))
	if err != nil || !u.LastSeen.IsZero() || u.LastWords != "" {
		t.Fatalf("after first end: LastSeen %v, LastWords %q, err %v", u.LastSeen, u.LastWords, err)
	}
	// c2 ends: the user goes offline.
	u, _, err = u.End("c2", s2.Epoch, EndNetwork, ptr("w2"), at(2*time.Second))
	if err != nil || !u.LastSeen.Equal(at(2*time.Second)) || u.LastWords != "w2" {
		t.Fatalf("after last end: LastSeen %v, LastWords %q, err %v", u.LastSeen, u.LastWords, err)
	}
	// A new session clears the last words; LastSeen keeps the last offline time.
	u, s3 := mustOpen(t, u, args("c3", "n1", ""), at(3*time.Second))
	if u.LastWords != "" || !u.LastSeen.Equal(at(2*time.Second)) {
		t.Fatalf("after reopen: LastSeen %v, LastWords %q", u.LastSeen, u.LastWords)
	}
	// A takeover keeps the user online: LastSeen does not move.
	u, s3, taken, err := u.Open(args("c3", "n2", ""), at(3500*time.Millisecond))
	if err != nil || taken == nil || !u.LastSeen.Equal(at(2*time.Second)) {
		t.Fatalf("after takeover: LastSeen %v, taken %v, err %v", u.LastSeen, taken, err)
	}
	// Ending it cleanly leaves no last words.
	u, _, err = u.End("c3", s3.Epoch, EndClean, ptr("w3"), at(4*time.Second))
	if err != nil || !u.LastSeen.Equal(at(4*time.Second)) || u.LastWords != "" {
		t.Fatalf("after clean end: LastSeen %v, LastWords %q, err %v", u.LastSeen, u.LastWords, err)
	}
}

func TestEndedCapped(t *testing.T) {
	var u User
	const n = MaxEnded + 3
	for i := range n {
		var s Session
		u, s = mustOpen(t, u, args(fmt.Sprintf("c%02d", i), "n1", ""), at(time.Duration(i)*time.Second))
		var err error
		u, _, err = u.End(s.ID, s.Epoch, EndClean, nil, at(time.Duration(i)*time.Second+time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if want := min(i+1, MaxEnded); len(u.Ended) != want {
			t.Fatalf("after %d ends: %d ended, want %d", i+1, len(u.Ended), want)
		}
	}
	var ids []string
	for _, s := range u.Ended {
		ids = append(ids, s.ID)
	}
	want := []string{"c10", "c09", "c08", "c07", "c06", "c05", "c04", "c03"}
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("Ended ids %v, want newest first %v", ids, want)
	}
}

func TestUpdateSession(t *testing.T) {
	u, s1, s2 := twoLive(t)
	for _, tc := range []struct {
		name    string
		id      string
		epoch   uint64
		upd     Update
		want    error
		wantSes func(*Session)
	}{
		{"status", "c1", s1.Epoch, Update{Status: ptr(Busy)}, nil, func(s *Session) { s.Status = Busy }},
		{"text and device", "c2", s2.Epoch, Update{Text: ptr("x"), Device: ptr("tablet")}, nil, func(s *Session) { s.Text, s.Device = "x", "tablet" }},
		{"empty", "c1", s1.Epoch, Update{}, nil, func(*Session) {}},
		{"stale epoch", "c1", s1.Epoch + 100, Update{Status: ptr(Busy)}, ErrStaleEpoch, nil},
		{"epoch of the other session", "c1", s2.Epoch, Update{Status: ptr(Busy)}, ErrStaleEpoch, nil},
		{"unknown id", "c9", s1.Epoch, Update{Status: ptr(Busy)}, ErrStaleEpoch, nil},
		{"bad status", "c1", s1.Epoch, Update{Status: ptr(Offline)}, ErrBadStatus, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := deepCopy(u)
			got, s, err := u.UpdateSession(tc.id, tc.epoch, tc.upd)
			wantErr(t, "UpdateSession", err, tc.want)
			if !reflect.DeepEqual(u, before) {
				t.Fatalf("UpdateSession changed its receiver")
			}
			if tc.want != nil {
				if !reflect.DeepEqual(got, u) || !reflect.DeepEqual(s, Session{}) {
					t.Fatalf("failed UpdateSession returned %+v, %+v", got, s)
				}
				return
			}
			i, _ := u.find(tc.id)
			want := u.Sessions[i]
			tc.wantSes(&want)
			if !reflect.DeepEqual(s, want) {
				t.Fatalf("session = %+v\nwant %+v", s, want)
			}
			wantUser := deepCopy(u)
			wantUser.Sessions[i] = want
			if !reflect.DeepEqual(got, wantUser) {
				t.Fatalf("user = %+v\nwant %+v", got, wantUser)
			}
			scribble(got)
			if !reflect.DeepEqual(u, before) {
				t.Fatalf("mutating the result changed the receiver")
			}
		})
	}
}

func TestRenew(t *testing.T) {
	u, s1, _ := twoLive(t)
	now := at(20 * time.Second)
	for _, tc := range []struct {
		name  string
		id    string
		epoch uint64
		want  error
	}{
		{"live", "c1", s1.Epoch, nil},
		{"stale epoch", "c1", s1.Epoch - 1, ErrStaleEpoch},
		{"unknown id", "c3", s1.Epoch, ErrStaleEpoch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := deepCopy(u)
			got, err := u.Renew(tc.id, tc.epoch, now, time.Minute)
			wantErr(t, "Renew", err, tc.want)
			if !reflect.DeepEqual(u, before) {
				t.Fatalf("Renew changed its receiver")
			}
			wantUser := deepCopy(u)
			if tc.want == nil {
				wantUser.Sessions[0].RenewedAt = now
				wantUser.Sessions[0].ExpiresAt = now.Add(time.Minute)
			}
			if !reflect.DeepEqual(got, wantUser) {
				t.Fatalf("Renew = %+v\nwant %+v", got, wantUser)
			}
			if tc.want != nil {
				return // the receiver itself came back
			}
			scribble(got)
			if !reflect.DeepEqual(u, before) {
				t.Fatalf("mutating the result changed the receiver")
			}
		})
	}
}

func TestSetAccount(t *testing.T) {
	start := User{Name: "alice", Account: Account{Status: Away, Text: "old"}}
	long := strings.Repeat("x", MaxTextBytes)
	for _, tc := range []struct {
		name string
		upd  AccountUpdate
		want Account
		err  error
	}{
		{"nothing", AccountUpdate{}, Account{Status: Away, Text: "old"}, nil},
		{"busy", AccountUpdate{Status: ptr(Busy)}, Account{Status: Busy, Text: "old"}, nil},
		{"dnd", AccountUpdate{Status: ptr(DND)}, Account{Status: DND, Text: "old"}, nil},
		{"away again", AccountUpdate{Status: ptr(Away)}, Account{Status: Away, Text: "old"}, nil},
		{"online clears", AccountUpdate{Status: ptr(Online)}, Account{Status: "", Text: "old"}, nil},
		{"text", AccountUpdate{Text: ptr("new")}, Account{Status: Away, Text: "new"}, nil},
		{"empty text clears", AccountUpdate{Text: ptr("")}, Account{Status: Away}, nil},
		{"text of 256 bytes", AccountUpdate{Text: ptr(long)}, Account{Status: Away, Text: long}, nil},
		{"both", AccountUpdate{Status: ptr(Online), Text: ptr("")}, Account{}, nil},
		{"idle rejected", AccountUpdate{Status: ptr(Idle), Text: ptr("new")}, Account{Status: Away, Text: "old"}, ErrBadStatus},
		{"offline rejected", AccountUpdate{Status: ptr(Offline)}, Account{Status: Away, Text: "old"}, ErrBadStatus},
		{"empty status rejected", AccountUpdate{Status: ptr(Status(""))}, Account{Status: Away, Text: "old"}, ErrBadStatus},
		{"unknown status rejected", AccountUpdate{Status: ptr(Status("asleep"))}, Account{Status: Away, Text: "old"}, ErrBadStatus},
		{"text of 257 bytes", AccountUpdate{Status: ptr(Busy), Text: ptr(long + "x")}, Account{Status: Away, Text: "old"}, ErrBadPayload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := start.SetAccount(tc.upd)
			wantErr(t, "SetAccount", err, tc.err)
			if got.Account != tc.want {
				t.Fatalf("Account = %+v, want %+v", got.Account, tc.want)
			}
			if start.Account != (Account{Status: Away, Text: "old"}) {
				t.Fatalf("SetAccount changed its receiver")
			}
			got.Account = start.Account
			if !reflect.DeepEqual(got, start) {
				t.Fatalf("SetAccount changed more than the account: %+v", got)
			}
		})
	}
}

// threeExpiring returns alice with c1, c2, c3 on nodes n1, n2, n1, expiring at
// base+10s, base+20s and base+30s.
func threeExpiring(t *testing.T) User {
	t.Helper()
	var u User
	for i, id := range []string{"c1", "c2", "c3"} {
		a := args(id, []string{"n1", "n2", "n1"}[i], "")
		a.TTL = time.Duration(i+1) * 10 * time.Second
		u, _ = mustOpen(t, u, a, base)
	}
	return u
}

func liveIDs(u User) []string {
	ids := []string{}
	for _, s := range u.Sessions {
		ids = append(ids, s.ID)
	}
	return ids
}

func TestReap(t *testing.T) {
	u := threeExpiring(t)
	u.LastWords = "" // as after any Open
	for _, tc := range []struct {
		name         string
		now          time.Time
		wantReaped   []string
		wantLive     []string
		wantLastSeen time.Time
	}{
		{"none due", at(10*time.Second - time.Nanosecond), nil, []string{"c1", "c2", "c3"}, time.Time{}},
		{"first due exactly", at(10 * time.Second), []string{"c1"}, []string{"c2", "c3"}, time.Time{}},
		{"two due", at(25 * time.Second), []string{"c1", "c2"}, []string{"c3"}, time.Time{}},
		{"all due", at(time.Hour), []string{"c1", "c2", "c3"}, []string{}, at(time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := deepCopy(u)
			got, reaped := u.Reap(tc.now)
			if !reflect.DeepEqual(u, before) {
				t.Fatalf("Reap changed its receiver")
			}
			var ids []string
			for i, s := range reaped {
				ids = append(ids, s.ID)
				if s.State != Expired || s.EndReason != EndTimeout || !s.EndedAt.Equal(tc.now) {
					t.Fatalf("reaped %+v, want expired by timeout at %v", s, tc.now)
				}
				// Ended is newest first: the last reaped comes first.
				if !reflect.DeepEqual(got.Ended[len(reaped)-1-i], s) {
					t.Fatalf("Ended = %+v does not hold reaped %+v in order", got.Ended, s)
				}
			}
			if !reflect.DeepEqual(ids, tc.wantReaped) {
				t.Fatalf("reaped %v, want %v", ids, tc.wantReaped)
			}
			if len(got.Ended) != len(tc.wantReaped) {
				t.Fatalf("%d ended, want %d", len(got.Ended), len(tc.wantReaped))
			}
			if live := liveIDs(got); !reflect.DeepEqual(live, tc.wantLive) {
				t.Fatalf("live %v, want %v", live, tc.wantLive)
			}
			if !got.LastSeen.Equal(tc.wantLastSeen) || got.LastWords != "" {
				t.Fatalf("LastSeen %v LastWords %q, want %v and none", got.LastSeen, got.LastWords, tc.wantLastSeen)
			}
			if tc.wantReaped == nil && !reflect.DeepEqual(got, u) {
				t.Fatalf("Reap with nothing due changed the user")
			}
			if len(got.Ended) == len(u.Ended) {
				return // nothing ended: the receiver itself came back
			}
			scribble(got)
			if !reflect.DeepEqual(u, before) {
				t.Fatalf("mutating the result changed the receiver")
			}
		})
	}
}

func TestEndNode(t *testing.T) {
	u := threeExpiring(t)
	now := at(time.Second)
	for _, tc := range []struct {
		name         string
		node         string
		reason       EndReason
		wantEnded    []string
		wantLive     []string
		wantLastSeen time.Time
	}{
		{"unknown node", "n9", EndNodeLost, nil, []string{"c1", "c2", "c3"}, time.Time{}},
		{"n1 lost", "n1", EndNodeLost, []string{"c1", "c3"}, []string{"c2"}, time.Time{}},
		{"n2 shut down", "n2", EndShutdown, []string{"c2"}, []string{"c1", "c3"}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := deepCopy(u)
			got, ended := u.EndNode(tc.node, tc.reason, now)
			if !reflect.DeepEqual(u, before) {
				t.Fatalf("EndNode changed its receiver")
			}
			var ids []string
			for _, s := range ended {
				ids = append(ids, s.ID)
				if s.State != Expired || s.EndReason != tc.reason || !s.EndedAt.Equal(now) || s.Node != tc.node {
					t.Fatalf("ended %+v, want expired by %s at %v on %s", s, tc.reason, now, tc.node)
				}
			}
			if !reflect.DeepEqual(ids, tc.wantEnded) {
				t.Fatalf("ended %v, want %v", ids, tc.wantEnded)
			}
			if live := liveIDs(got); !reflect.DeepEqual(live, tc.wantLive) {
				t.Fatalf("live %v, want %v", live, tc.wantLive)
			}
			if !got.LastSeen.Equal(tc.wantLastSeen) {
				t.Fatalf("LastSeen %v, want %v", got.LastSeen, tc.wantLastSeen)
			}
			if tc.wantEnded == nil && !reflect.DeepEqual(got, u) {
				t.Fatalf("EndNode of a node without sessions changed the user")
			}
			if len(got.Ended) == len(u.Ended) {
				return // nothing ended: the receiver itself came back
			}
			scribble(got)
			if !reflect.DeepEqual(u, before) {
				t.Fatalf("mutating the result changed the receiver")
			}
		})
	}

	// Both nodes gone: the user is offline, seen last when the second went.
	u, _ = u.EndNode("n1", EndNodeLost, now)
	u, _ = u.EndNode("n2", EndNodeLost, at(2*time.Second))
	if len(u.Sessions) != 0 || !u.LastSeen.Equal(at(2*time.Second)) {
		t.Fatalf("after both nodes: live %v, LastSeen %v", liveIDs(u), u.LastSeen)
	}
}

func TestNextDeadline(t *testing.T) {
	var empty User
	if d, ok := empty.NextDeadline(); ok || !d.IsZero() {
		t.Fatalf("NextDeadline of no session = %v, %v", d, ok)
	}
	u := threeExpiring(t)
	if d, ok := u.NextDeadline(); !ok || !d.Equal(at(10*time.Second)) {
		t.Fatalf("NextDeadline = %v, %v; want %v", d, ok, at(10*time.Second))
	}
	u, _ = u.Reap(at(10 * time.Second))
	if d, ok := u.NextDeadline(); !ok || !d.Equal(at(20*time.Second)) {
		t.Fatalf("NextDeadline after reap = %v, %v; want %v", d, ok, at(20*time.Second))
	}
}

// TestOperationsLeaveReceiver runs every changing operation and checks that
// neither the call nor scribbling over its result touches the receiver.
func TestOperationsLeaveReceiver(t *testing.T) {
	rules := NewRules([]string{"desk"})
	u, s1, s2 := twoLive(t)
	u, _, _ = u.End("c2", s2.Epoch, EndNetwork, nil, at(time.Second))
	u, s2 = mustOpen(t, u, args("c2", "n2", "desk"), at(2*time.Second))
	u, _, _ = u.Commit(rules, at(2*time.Second))
	if len(u.Sessions) != 2 || len(u.Ended) != 1 || len(u.Current.Sessions) != 2 {
		t.Fatalf("setup: %+v", u)
	}
	now := at(3 * time.Second)
	for _, tc := range []struct {
		name string
		op   func(User) User
	}{
		{"Open", func(u User) User { r, _, _, _ := u.Open(args("c0", "n1", ""), now); return r }},
		{"Open takeover", func(u User) User { r, _, _, _ := u.Open(args("c1", "n1", ""), now); return r }},
		{"End", func(u User) User { r, _, _ := u.End("c1", s1.Epoch, EndClean, nil, now); return r }},
		{"UpdateSession", func(u User) User { r, _, _ := u.UpdateSession("c2", s2.Epoch, Update{Status: ptr(DND)}); return r }},
		{"Renew", func(u User) User { r, _ := u.Renew("c1", s1.Epoch, now, time.Hour); return r }},
		{"SetAccount", func(u User) User { r, _ := u.SetAccount(AccountUpdate{Status: ptr(Busy)}); return r }},
		{"Reap", func(u User) User { r, _ := u.Reap(at(time.Hour)); return r }},
		{"EndNode", func(u User) User { r, _ := u.EndNode("n1", EndNodeLost, now); return r }},
		{"Commit", func(u User) User {
			r, _ := u.SetAccount(AccountUpdate{Status: ptr(DND)})
			r, _, _ = r.Commit(rules, now)
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := deepCopy(u)
			got := tc.op(u)
			if reflect.DeepEqual(got, u) {
				t.Fatalf("%s changed nothing; the test needs an operation that changes the user", tc.name)
			}
			if !reflect.DeepEqual(u, before) {
				t.Fatalf("%s changed its receiver", tc.name)
			}
			scribble(got)
			if !reflect.DeepEqual(u, before) {
				t.Fatalf("mutating %s's result changed its receiver", tc.name)
			}
		})
	}
}
