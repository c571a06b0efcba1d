package presence

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// live builds a live session for Aggregate: connected at base+conn seconds.
func live(id, device string, status Status, text string, conn int) Session {
	return Session{
		User: "alice", ID: id, Epoch: uint64(100 + conn), Node: "n1", Device: device,
		Status: status, Text: text, State: Active,
		ConnectedAt: at(time.Duration(conn) * time.Second), RenewedAt: base, ExpiresAt: at(time.Hour),
	}
}

func view(s Session) SessionView {
	return SessionView{ID: s.ID, Epoch: s.Epoch, Node: s.Node, Device: s.Device, Status: s.Status, ConnectedAt: s.ConnectedAt}
}

// withSessions returns alice with the given live sessions, sorted by id as a
// store keeps them.
func withSessions(acct Account, ss ...Session) User {
	ss = slices.Clone(ss)
	slices.SortFunc(ss, func(a, b Session) int { return strings.Compare(a.ID, b.ID) })
	return User{Name: "alice", Account: acct, Sessions: ss}
}

func TestAggregate(t *testing.T) {
	auth := NewRules([]string{"desk", "car"})
	seen := at(-time.Hour)

	phoneOnline := live("a-phone", "phone", Online, "from phone", 1)
	phoneBusy := live("a-phone", "phone", Busy, "phone busy", 1)
	deskBusy := live("b-desk", "desk", Busy, "desk busy", 2)
	deskDND := live("b-desk", "desk", DND, "desk dnd", 2)
	carBusy := live("c-car", "car", Busy, "car busy", 3)
	carDND := live("c-car", "car", DND, "car dnd", 3)
	tabletIdle := live("d-tablet", "tablet", Idle, "tablet idle", 4)
	laptopAway := live("e-laptop", "laptop", Away, "laptop away", 5)
	webDND := live("f-web", "web", DND, "web dnd", 6)
	webBusy := live("f-web", "web", Busy, "web busy", 6)

	for _, tc := range []struct {
		name     string
		u        User
		rules    Rules
		status   Status
		text     string
		lastSeen time.Time
	}{
		// Rule 1: offline.
		{"offline, never seen", User{Name: "alice"}, auth, Offline, "", time.Time{}},
		{"offline shows last seen and account text",
			User{Name: "alice", LastSeen: seen, Account: Account{Text: "on leave"}}, auth, Offline, "on leave", seen},
		{"offline last words beat account text",
			User{Name: "alice", LastSeen: seen, LastWords: "crashed", Account: Account{Text: "on leave"}}, auth, Offline, "crashed", seen},
		{"offline ignores account status",
			User{Name: "alice", LastSeen: seen, Account: Account{Status: DND}}, auth, Offline, "", seen},

		// Rule 2: the account setting overrides every session status.
		{"account away over online", withSessions(Account{Status: Away}, phoneOnline), auth, Away, "from phone", time.Time{}},
		{"account busy over online", withSessions(Account{Status: Busy}, phoneOnline), auth, Busy, "from phone", time.Time{}},
		{"account dnd over online", withSessions(Account{Status: DND}, phoneOnline), auth, DND, "from phone", time.Time{}},
		{"account away over session dnd", withSessions(Account{Status: Away}, webDND), auth, Away, "web dnd", time.Time{}},
		{"account away over authoritative dnd: text of the most available",
			withSessions(Account{Status: Away}, deskDND, tabletIdle), auth, Away, "tablet idle", time.Time{}},
		{"account text beats session text", withSessions(Account{Text: "hello"}, phoneOnline), auth, Online, "hello", time.Time{}},
		{"account text and status", withSessions(Account{Status: Busy, Text: "meeting"}, phoneOnline, tabletIdle), auth, Busy, "meeting", time.Time{}},
		{"account text beats authoritative text", withSessions(Account{Text: "hello"}, deskBusy, phoneOnline), auth, Busy, "hello", time.Time{}},
		{"account online is no override", withSessions(Account{Status: Online}, laptopAway), auth, Away, "laptop away", time.Time{}},

		// Rule 3: authoritative devices.
		{"authoritative busy beats another device online", withSessions(Account{}, phoneOnline, deskBusy), auth, Busy, "desk busy", time.Time{}},
		{"authoritative dnd beats online", withSessions(Account{}, phoneOnline, deskDND), auth, DND, "desk dnd", time.Time{}},
		{"authoritative dnd beats authoritative busy", withSessions(Account{}, deskBusy, carDND, phoneOnline), auth, DND, "car dnd", time.Time{}},
		{"authoritative dnd beats later authoritative busy", withSessions(Account{}, deskDND, carBusy), auth, DND, "desk dnd", time.Time{}},
		{"two authoritative busy: the later connected", withSessions(Account{}, deskBusy, carBusy), auth, Busy, "car busy", time.Time{}},
		{"non-authoritative busy loses to online", withSessions(Account{}, webBusy, phoneOnline), auth, Online, "from phone", time.Time{}},
		{"non-authoritative dnd loses to idle", withSessions(Account{}, webDND, tabletIdle), auth, Idle, "tablet idle", time.Time{}},
		{"no rules: desk busy loses to online", withSessions(Account{}, deskBusy, phoneOnline), NewRules(nil), Online, "from phone", time.Time{}},
		{"zero rules: desk dnd loses to away", withSessions(Account{}, deskDND, laptopAway), Rules{}, Away, "laptop away", time.Time{}},

		// Rule 4: the most available session.
		{"single session", withSessions(Account{}, phoneOnline), auth, Online, "from phone", time.Time{}},
		{"online over idle", withSessions(Account{}, tabletIdle, phoneOnline), auth, Online, "from phone", time.Time{}},
		{"idle over away", withSessions(Account{}, laptopAway, tabletIdle), auth, Idle, "tablet idle", time.Time{}},
		{"away over busy", withSessions(Account{}, laptopAway, webBusy), auth, Away, "laptop away", time.Time{}},
		{"busy over dnd", withSessions(Account{}, phoneBusy, webDND), auth, Busy, "phone busy", time.Time{}},
		{"only dnd", withSessions(Account{}, webDND), auth, DND, "web dnd", time.Time{}},
		{"tie: later connected wins",
			withSessions(Account{}, live("z-old", "", Online, "old", 1), live("a-new", "", Online, "new", 9)), auth, Online, "new", time.Time{}},
		{"tie: later connected wins whatever the id order",
			withSessions(Account{}, live("a-old", "", Away, "old", 1), live("z-new", "", Away, "new", 9)), auth, Away, "new", time.Time{}},
		{"tie at the same instant: greater id wins",
			withSessions(Account{}, live("a", "", Idle, "from a", 1), live("b", "", Idle, "from b", 1)), auth, Idle, "from b", time.Time{}},
		{"session without text", withSessions(Account{}, live("a", "", Online, "", 1), live("b", "", Away, "brb", 2)), auth, Online, "", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := deepCopy(tc.u)
			got := Derive(tc.u, tc.rules)
			want := Aggregate{User: "alice", Status: tc.status, Text: tc.text, LastSeen: tc.lastSeen}
			if len(tc.u.Sessions) > 0 {
				for _, s := range tc.u.Sessions {
					want.Sessions = append(want.Sessions, view(s))
				}
				slices.SortStableFunc(want.Sessions, func(a, b SessionView) int { return a.ConnectedAt.Compare(b.ConnectedAt) })
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Aggregate =\n %+v\nwant\n %+v", got, want)
			}
			if !reflect.DeepEqual(tc.u, before) {
				t.Fatalf("Aggregate changed the user")
			}
		})
	}
}

func TestAggregateSessionOrder(t *testing.T) {
	// Stored by id; shown by connected_at, then id.
	u := withSessions(Account{},
		live("a", "", Online, "", 5),
		live("b", "", Online, "", 1),
		live("c", "", Online, "", 3),
		live("d", "", Online, "", 1),
		live("e", "", Online, "", 3),
	)
	var ids []string
	for _, v := range Derive(u, NewRules(nil)).Sessions {
		ids = append(ids, v.ID)
	}
	if want := []string{"b", "d", "c", "e", "a"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("session view order %v, want %v", ids, want)
	}
}

func TestRulesAuthoritative(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rules  Rules
		device string
		want   bool
	}{
		{"listed", NewRules([]string{"desk", "car"}), "desk", true},
		{"listed second", NewRules([]string{"desk", "car"}), "car", true},
		{"not listed", NewRules([]string{"desk"}), "phone", false},
		{"case matters", NewRules([]string{"desk"}), "Desk", false},
		{"empty list", NewRules([]string{}), "desk", false},
		{"nil list", NewRules(nil), "desk", false},
		{"zero rules", Rules{}, "desk", false},
		{"empty device", NewRules([]string{"desk"}), "", false},
		{"empty device even when listed", NewRules([]string{""}), "", false},
	} {
		if got := tc.rules.Authoritative(tc.device); got != tc.want {
			t.Errorf("%s: Authoritative(%q) = %v, want %v", tc.name, tc.device, got, tc.want)
		}
	}
}

func TestCommit(t *testing.T) {
	rules := NewRules([]string{"desk"})
	var u User

	// step applies op at base+sec and commits at the same instant.
	type result struct {
		changed bool
		version uint64
		status  Status
		since   time.Time
	}
	var last Aggregate
	step := func(name string, sec int, op func(User, time.Time) User, want result) {
		t.Helper()
		now := at(time.Duration(sec) * time.Second)
		before := deepCopy(u)
		next := op(u, now)
		committed, p, changed := next.Commit(rules, now)
		got := result{changed, p.Version, p.Status, p.Since}
		if got.changed != want.changed || got.version != want.version || got.status != want.status || !got.since.Equal(want.since) {
			t.Fatalf("%s: Commit = %+v, want %+v", name, got, want)
		}
		if !reflect.DeepEqual(committed.Current, p) {
			t.Fatalf("%s: Current = %+v, want the committed %+v", name, committed.Current, p)
		}
		if !changed {
			if !reflect.DeepEqual(committed, next) || !reflect.DeepEqual(p, last) {
				t.Fatalf("%s: an unchanged Commit changed the user or the presence", name)
			}
		} else if p.Version <= last.Version {
			t.Fatalf("%s: version %d not above %d", name, p.Version, last.Version)
		}
		if !reflect.DeepEqual(u, before) {
			t.Fatalf("%s changed the previous user", name)
		}
		u, last = committed, p
	}
	var s1, s2 Session
	open := func(id, device string, s *Session) func(User, time.Time) User {
		return func(u User, now time.Time) User {
			u, *s, _, _ = u.Open(args(id, "n1", device), now)
			return u
		}
	}
	w := baseStamp
	sec := func(n int) uint64 { return w + uint64(n)*1_000_000 }

	step("first commit of an unseen user", 0, func(u User, _ time.Time) User { return u },
		result{true, w, Offline, base})
	step("commit again", 0, func(u User, _ time.Time) User { return u },
		result{false, w, Offline, base})
	step("open", 1, open("c1", "phone", &s1),
		result{true, sec(1), Online, at(time.Second)})
	step("renew alone", 2, func(u User, now time.Time) User {
		u, _ = u.Renew("c1", s1.Epoch, now, time.Hour)
		return u
	}, result{false, sec(1), Online, at(time.Second)})
	step("session text: same status, same since", 3, func(u User, _ time.Time) User {
		u, _, _ = u.UpdateSession("c1", s1.Epoch, Update{Text: ptr("lunch")})
		return u
	}, result{true, sec(3), Online, at(time.Second)})
	step("second session online: same since", 4, open("c2", "desk", &s2),
		result{true, sec(4), Online, at(time.Second)})
	step("authoritative busy: new since", 5, func(u User, _ time.Time) User {
		u, _, _ = u.UpdateSession("c2", s2.Epoch, Update{Status: ptr(Busy)})
		return u
	}, result{true, sec(5), Busy, at(5 * time.Second)})
	step("account busy: same status, same since", 6, func(u User, _ time.Time) User {
		u, _ = u.SetAccount(AccountUpdate{Status: ptr(Busy)})
		return u
	}, result{true, sec(6), Busy, at(5 * time.Second)}) // text now from the most available session
	step("account dnd", 7, func(u User, _ time.Time) User {
		u, _ = u.SetAccount(AccountUpdate{Status: ptr(DND)})
		return u
	}, result{true, sec(7), DND, at(7 * time.Second)})
	step("account cleared, desk still busy", 8, func(u User, _ time.Time) User {
		u, _ = u.SetAccount(AccountUpdate{Status: ptr(Online)})
		return u
	}, result{true, sec(8), Busy, at(8 * time.Second)})
	step("end desk", 9, func(u User, now time.Time) User {
		u, _, _ = u.End("c2", s2.Epoch, EndClean, nil, now)
		return u
	}, result{true, sec(9), Online, at(9 * time.Second)})
	// The session ends at 10s; the commit happens at 12s: since is the last-seen.
	step("end last session: offline since last seen", 12, func(u User, _ time.Time) User {
		u, _, _ = u.End("c1", s1.Epoch, EndNetwork, ptr("bye"), at(10*time.Second))
		return u
	}, result{true, sec(12), Offline, at(10 * time.Second)})
	if last.Text != "bye" || !last.LastSeen.Equal(at(10*time.Second)) {
		t.Fatalf("offline presence %+v, want text bye and last seen %v", last, at(10*time.Second))
	}
	step("account text while offline: same since", 13, func(u User, _ time.Time) User {
		u, _ = u.SetAccount(AccountUpdate{Text: ptr("away for the week")})
		return u
	}, result{false, sec(12), Offline, at(10 * time.Second)}) // last words still shown
	step("nothing", 14, func(u User, _ time.Time) User { return u },
		result{false, sec(12), Offline, at(10 * time.Second)})
}

func TestCommitVersionsFrozenClock(t *testing.T) {
	rules := NewRules(nil)
	var u User
	var s Session
	u, s = mustOpen(t, u, args("c1", "n1", ""), base)
	var last uint64
	statuses := []Status{Idle, Away, Busy, DND, Online}
	for i := range 50 {
		var p Aggregate
		var changed bool
		u, _, _ = u.UpdateSession("c1", s.Epoch, Update{Status: ptr(statuses[i%len(statuses)])})
		u, p, changed = u.Commit(rules, base)
		if !changed {
			t.Fatalf("change %d: Commit reported no change", i)
		}
		if want := baseStamp + uint64(i); p.Version != want {
			t.Fatalf("change %d: version %d, want %d", i, p.Version, want)
		}
		if p.Version <= last {
			t.Fatalf("change %d: version %d not above %d", i, p.Version, last)
		}
		last = p.Version
	}
	// A clock that went back still moves the version on.
	u, _, _ = u.UpdateSession("c1", s.Epoch, Update{Text: ptr("x")})
	if _, p, _ := u.Commit(rules, at(-time.Hour)); p.Version != last+1 {
		t.Fatalf("version with the clock back = %d, want %d", p.Version, last+1)
	}
}

func TestCommitOfflineSinceWithoutLastSeen(t *testing.T) {
	// A record that never had a session: offline since the first commit.
	u := User{Name: "alice", Account: Account{Text: "hi"}}
	u, p, changed := u.Commit(NewRules(nil), at(time.Minute))
	if !changed || p.Status != Offline || !p.Since.Equal(at(time.Minute)) || !p.LastSeen.IsZero() || p.Text != "hi" {
		t.Fatalf("Commit = %+v, %v", p, changed)
	}
	if !reflect.DeepEqual(u.Current, p) {
		t.Fatalf("Current = %+v, want %+v", u.Current, p)
	}
}

// Every field of the session list is part of what observers see: a change of
// any of them alone is a new version (with the same since).
func TestCommitSessionListChanges(t *testing.T) {
	rules := NewRules(nil)
	var u User
	u, s1 := mustOpen(t, u, args("c1", "n1", "phone"), base)
	u, s2 := mustOpen(t, u, args("c2", "n1", "desk"), at(time.Second))
	u, first, _ := u.Commit(rules, at(time.Second))
	now := at(time.Minute)
	for _, tc := range []struct {
		name    string
		op      func(User) (User, error)
		changed bool
	}{
		{"older session's status, not deciding", func(u User) (User, error) {
			u, _, err := u.UpdateSession("c1", s1.Epoch, Update{Status: ptr(Idle)})
			return u, err
		}, true},
		{"device", func(u User) (User, error) {
			u, _, err := u.UpdateSession("c1", s1.Epoch, Update{Device: ptr("tablet")})
			return u, err
		}, true},
		{"text of a session that does not decide", func(u User) (User, error) {
			u, _, err := u.UpdateSession("c1", s1.Epoch, Update{Text: ptr("unseen")})
			return u, err
		}, false},
		{"renew", func(u User) (User, error) { return u.Renew("c2", s2.Epoch, now, time.Hour) }, false},
		{"takeover: new epoch and node", func(u User) (User, error) {
			u, _, _, err := u.Open(args("c1", "n2", "phone"), at(-time.Second)) // older than c2: c2 still decides
			return u, err
		}, true},
		{"takeover at the same instant on the same node: only the epoch moves", func(u User) (User, error) {
			u, _, _, err := u.Open(args("c1", "n1", "phone"), base)
			return u, err
		}, true},
		{"same status set again", func(u User) (User, error) {
			u, _, err := u.UpdateSession("c2", s2.Epoch, Update{Status: ptr(Online)})
			return u, err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, err := tc.op(u)
			if err != nil {
				t.Fatal(err)
			}
			_, p, changed := next.Commit(rules, now)
			if changed != tc.changed {
				t.Fatalf("changed = %v, want %v", changed, tc.changed)
			}
			wantVersion := first.Version
			if tc.changed {
				wantVersion = NextStamp(first.Version, now)
			}
			if p.Version != wantVersion || p.Status != Online || !p.Since.Equal(at(time.Second)) {
				t.Fatalf("Commit = version %d %s since %v, want version %d online since %v", p.Version, p.Status, p.Since, wantVersion, at(time.Second))
			}
		})
	}
}
