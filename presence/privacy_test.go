package presence

import (
	"errors"
	"math/rand"
	"slices"
	"testing"
	"time"
)

// aliceAt is alice live on one phone since base, or offline since d after
// it when gone.
func aliceAgg(status Status, lastSeen time.Time, pv Privacy) Aggregate {
	a := Aggregate{User: "alice", Status: status, Text: "at lunch", Version: 7, Since: at(0), LastSeen: lastSeen, Privacy: pv}
	if status == Offline {
		a.Since = lastSeen
		a.Reason = EndTimeout
		a.Sessions = []SessionView{}
	} else {
		a.Sessions = []SessionView{{ID: "phone", Epoch: 1, Node: "n1", Status: status, ConnectedAt: at(0)}}
		a.Link = LinkFlaky
	}
	return a
}

func TestPublic(t *testing.T) {
	seen := at(7*time.Minute + 23*time.Second + 456*time.Millisecond) // 12:07:23.456
	frozen := at(-3 * time.Hour)                                      // when alice turned invisible
	q := at(0)                                                        // 12:00 (a quarter)
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	inv := func(m LastSeenMode) Privacy {
		return Privacy{Invisible: true, LastSeen: m, Since: frozen, Seen: frozen}
	}
	tests := []struct {
		name            string
		in              Aggregate
		status          Status
		text            string
		since, lastSeen time.Time
		sessions        int
		reason          EndReason
		link            string
	}{
		{"visible online", aliceAgg(Online, time.Time{}, Privacy{}), Online, "at lunch", at(0), time.Time{}, 1, "", LinkFlaky},
		{"visible offline", aliceAgg(Offline, seen, Privacy{}), Offline, "at lunch", seen, seen, 0, EndTimeout, ""},
		{"exact spelt out", aliceAgg(Offline, seen, Privacy{LastSeen: LastSeenExact}), Offline, "at lunch", seen, seen, 0, EndTimeout, ""},
		{"quarter offline", aliceAgg(Offline, seen, Privacy{LastSeen: LastSeenQuarter}), Offline, "at lunch", q, q, 0, EndTimeout, ""},
		{"quarter online keeps since", aliceAgg(Busy, time.Time{}, Privacy{LastSeen: LastSeenQuarter}), Busy, "at lunch", at(0), time.Time{}, 1, "", LinkFlaky},
		{"hidden offline", aliceAgg(Offline, seen, Privacy{LastSeen: LastSeenHidden}), Offline, "at lunch", day, time.Time{}, 0, EndTimeout, ""},
		{"invisible online", aliceAgg(Online, time.Time{}, inv("")), Offline, "", frozen, frozen, 0, "", ""},
		{"invisible offline", aliceAgg(Offline, seen, inv("")), Offline, "", frozen, frozen, 0, "", ""},
		{"invisible quarter", aliceAgg(DND, time.Time{}, inv(LastSeenQuarter)), Offline, "", at(-3 * time.Hour), at(-3 * time.Hour), 0, "", ""},
		{"invisible hidden", aliceAgg(Online, time.Time{}, inv(LastSeenHidden)), Offline, "", day, time.Time{}, 0, "", ""},
		{"invisible never seen", aliceAgg(Online, time.Time{}, Privacy{Invisible: true, Since: frozen}), Offline, "", frozen, time.Time{}, 0, "", ""},
		{"invisible without a since", aliceAgg(Online, time.Time{}, Privacy{Invisible: true}), Offline, "", epoch, time.Time{}, 0, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.in.Public()
			if p.Status != tc.status || p.Text != tc.text || !p.Since.Equal(tc.since) || !p.LastSeen.Equal(tc.lastSeen) ||
				len(p.Sessions) != tc.sessions || p.Reason != tc.reason || p.Link != tc.link || p.Version != tc.in.Version {
				t.Fatalf("Public():\n got %+v\nwant status %s text %q since %v last_seen %v sessions %d reason %q link %q",
					p, tc.status, tc.text, tc.since, tc.lastSeen, tc.sessions, tc.reason, tc.link)
			}
			if !p.Privacy.IsZero() || p.Privacy != (Privacy{}) {
				t.Fatalf("Public() carries privacy %+v", p.Privacy)
			}
			if again := p.Public(); !SamePublic(again, p) {
				t.Fatalf("Public(Public()) = %+v, want %+v", again, p)
			}
		})
	}
}

func TestPublicDormantNextExpected(t *testing.T) {
	a := Aggregate{User: "s", Status: Dormant, Version: 1, Since: at(time.Minute), LastSeen: at(time.Minute), NextExpected: at(61 * time.Minute),
		Sessions: []SessionView{}, Privacy: Privacy{LastSeen: LastSeenQuarter}}
	p := a.Public()
	if !p.NextExpected.Equal(at(75*time.Minute)) || !p.LastSeen.Equal(at(0)) || !p.Since.Equal(at(0)) {
		t.Fatalf("quarter dormant: %+v", p)
	}
	a.Privacy.LastSeen = LastSeenHidden
	if p := a.Public(); !p.NextExpected.IsZero() || !p.LastSeen.IsZero() {
		t.Fatalf("hidden dormant: %+v", p)
	}
}

func TestSetAccountAtPrivacy(t *testing.T) {
	u := User{Name: "alice"}
	u, sess := mustOpen(t, u, args("phone", "n1", ""), at(0))
	u, _, _ = u.Commit(Rules{}, at(0))
	on, off, q, bad := true, false, LastSeenQuarter, LastSeenMode("fuzzy")
	if _, err := u.SetAccountAt(AccountUpdate{LastSeen: &bad}, at(time.Second)); !errors.Is(err, ErrBadPrivacy) || !errors.Is(err, ErrBadPayload) {
		t.Fatalf("bad mode: %v", err)
	}
	now := at(90*time.Second + 1234567) // sub-millisecond: kept to the millisecond
	u2, err := u.SetAccountAt(AccountUpdate{Invisible: &on, LastSeen: &q}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := Privacy{Invisible: true, LastSeen: LastSeenQuarter, Since: at(90*time.Second + time.Millisecond), Seen: at(90*time.Second + time.Millisecond)}
	if !u2.Account.Privacy.Equal(want) {
		t.Fatalf("live turned invisible: %+v, want %+v", u2.Account.Privacy, want)
	}
	if u.Account.Privacy != (Privacy{}) {
		t.Fatal("SetAccountAt changed its receiver")
	}
	// Turning invisible again changes nothing; a commit moves the version.
	u3, err := u2.SetAccountAt(AccountUpdate{Invisible: &on}, at(time.Hour))
	if err != nil || !u3.Account.Privacy.Equal(want) {
		t.Fatalf("invisible twice: %+v %v", u3.Account.Privacy, err)
	}
	u3, p, changed := u3.Commit(Rules{}, at(time.Hour))
	if !changed || p.Privacy != u3.Account.Privacy || p.Status != Online {
		t.Fatalf("a privacy change is a new version: changed %v, %+v", changed, p)
	}
	// Visible again: the fixed times go.
	u4, _ := u3.SetAccountAt(AccountUpdate{Invisible: &off}, at(2*time.Hour))
	if u4.Account.Privacy != (Privacy{LastSeen: LastSeenQuarter}) {
		t.Fatalf("visible: %+v", u4.Account.Privacy)
	}
	// Offline, then invisible: what others were shown then.
	u5, _, err := u4.End("phone", sess.Epoch, EndClean, nil, at(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	u5, _, _ = u5.Commit(Rules{}, at(3*time.Hour))
	u6, _ := u5.SetAccountAt(AccountUpdate{Invisible: &on}, at(4*time.Hour))
	if pv := u6.Account.Privacy; !pv.Seen.Equal(at(3*time.Hour)) || !pv.Since.Equal(at(3*time.Hour)) {
		t.Fatalf("offline turned invisible: %+v", pv)
	}
	// Exact is stored as "".
	ex := LastSeenExact
	u7, _ := u6.SetAccountAt(AccountUpdate{LastSeen: &ex}, at(5*time.Hour))
	if u7.Account.Privacy.LastSeen != "" {
		t.Fatalf("exact: %+v", u7.Account.Privacy)
	}
}

func TestParseSetRequestPrivacy(t *testing.T) {
	ok := map[string]SetRequest{
		`{"scope":"account","invisible":true}`:                        {Scope: ScopeAccount, Invisible: ptr(true)},
		`{"scope":"account","invisible":false,"last_seen":"quarter"}`: {Scope: ScopeAccount, Invisible: ptr(false), LastSeen: ptr(LastSeenQuarter)},
		`{"scope":"account","last_seen":"hidden","status":"busy"}`:    {Scope: ScopeAccount, LastSeen: ptr(LastSeenHidden), Status: ptr(Busy)},
		`{"scope":"account","last_seen":null,"invisible":null}`:       {Scope: ScopeAccount},
	}
	for in, want := range ok {
		r, err := ParseSetRequest([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if r.Scope != want.Scope || !eqPtr(r.Invisible, want.Invisible) || !eqPtr(r.LastSeen, want.LastSeen) || !eqPtr(r.Status, want.Status) {
			t.Fatalf("%s: %+v, want %+v", in, r, want)
		}
		upd := r.AccountUpdate()
		if !eqPtr(upd.Invisible, want.Invisible) || !eqPtr(upd.LastSeen, want.LastSeen) {
			t.Fatalf("%s: AccountUpdate %+v", in, upd)
		}
		if (r.Invisible != nil || r.LastSeen != nil) && r.OnlyActivity() {
			t.Fatalf("%s: only activity", in)
		}
	}
	privacyErr := []string{
		`{"invisible":true}`,
		`{"scope":"session","last_seen":"quarter"}`,
		`{"scope":"account","last_seen":"fuzzy"}`,
		`{"scope":"account","last_seen":""}`,
		`{"scope":"account","last_seen":"Quarter"}`,
	}
	for _, in := range privacyErr {
		if _, err := ParseSetRequest([]byte(in)); !errors.Is(err, ErrBadPrivacy) || !errors.Is(err, ErrBadPayload) {
			t.Fatalf("%s: %v, want a privacy refusal", in, err)
		}
	}
	other := []string{
		`{"scope":"account","invisible":"yes"}`,
		`{"scope":"account","invisible":1}`,
		`{"scope":"account","last_seen":true}`,
		`{"scope":"account","Invisible":true}`,
		`{"scope":"account","invisible":true,"invisible":false}`,
		`{"scope":"account","lastseen":"hidden"}`,
	}
	for _, in := range other {
		if _, err := ParseSetRequest([]byte(in)); !errors.Is(err, ErrBadPayload) {
			t.Fatalf("%s: %v, want a refusal", in, err)
		}
	}
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// leaks says what a public view shows that its privacy forbids, "" for
// nothing: the pure view's one rule, checked on any aggregate.
func leaks(in, pub Aggregate) string {
	pv := in.Privacy
	if pub.Privacy != (Privacy{}) {
		return "privacy in the public view"
	}
	if len(pub.Ended) > 0 && !pv.IsZero() {
		return "ended sessions"
	}
	if pv.Invisible {
		switch {
		case pub.Status != Offline:
			return "status " + string(pub.Status)
		case len(pub.Sessions) > 0:
			return "sessions"
		case pub.Text != "" || pub.Reason != "" || pub.Link != "" || !pub.NextExpected.IsZero():
			return "text, reason, link or next_expected"
		}
		// Nothing of the true aggregate but its name and version.
		if !pub.LastSeen.IsZero() && !pub.LastSeen.Equal(pv.Seen) && !pub.LastSeen.Equal(floor(pv.Seen, quarterHour)) {
			return "last_seen not the one fixed"
		}
		if !pub.Since.Equal(pv.Since) && !pub.Since.Equal(floor(pv.Since, quarterHour)) && !pub.Since.Equal(floor(pv.Since, 24*time.Hour)) && !pub.Since.Equal(epoch) {
			return "since not the one fixed"
		}
	}
	switch pv.mode() {
	case LastSeenQuarter:
		if !pub.LastSeen.IsZero() && mod(pub.LastSeen.UnixMilli(), quarterHour.Milliseconds()) != 0 {
			return "last_seen finer than a quarter"
		}
		if (pub.Status == Offline || pub.Status == Dormant) && mod(pub.Since.UnixMilli(), quarterHour.Milliseconds()) != 0 {
			return "offline since finer than a quarter"
		}
	case LastSeenHidden:
		if !pub.LastSeen.IsZero() || !pub.NextExpected.IsZero() {
			return "last_seen or next_expected shown"
		}
		if (pub.Status == Offline || pub.Status == Dormant) && mod(pub.Since.UnixMilli(), (24*time.Hour).Milliseconds()) != 0 {
			return "offline since finer than a day"
		}
	}
	visible := in
	visible.Privacy = Privacy{}
	if pv.IsZero() && !SamePublic(visible, pub) {
		return "a visible user's view changed"
	}
	return ""
}

// randomAggregate builds an aggregate, true or not, from r.
func randomAggregate(r *rand.Rand) Aggregate {
	statuses := []Status{Online, Idle, Away, Busy, DND, Offline, Dormant}
	modes := []LastSeenMode{"", LastSeenExact, LastSeenQuarter, LastSeenHidden}
	tm := func() time.Time {
		if r.Intn(5) == 0 {
			return time.Time{}
		}
		return base.Add(time.Duration(r.Int63n(int64(72*time.Hour))) - 36*time.Hour)
	}
	a := Aggregate{User: "u", Status: statuses[r.Intn(len(statuses))], Text: []string{"", "t"}[r.Intn(2)], Version: r.Uint64(),
		Since: tm(), LastSeen: tm(), NextExpected: tm(), Reason: []EndReason{"", EndClean}[r.Intn(2)], Link: []string{"", LinkFlaky}[r.Intn(2)],
		Privacy: Privacy{Invisible: r.Intn(2) == 0, LastSeen: modes[r.Intn(len(modes))], Since: tm(), Seen: tm()}}
	for range r.Intn(3) {
		a.Sessions = append(a.Sessions, SessionView{ID: "s", Status: Online, ConnectedAt: tm()})
	}
	if r.Intn(2) == 0 {
		a.Ended = []EndedView{{}}
	}
	return a
}

// FuzzPublic: over random aggregates, settings and viewers, the public view
// leaks nothing, and the per-delivery decision gives the true view to the
// user and service accounts only.
func FuzzPublic(f *testing.F) {
	for _, s := range []int64{1, 2, 3, 42, 2026} {
		f.Add(s, "u", false)
	}
	f.Add(int64(7), "", true)
	f.Add(int64(8), "v", false)
	f.Fuzz(func(t *testing.T, seed int64, viewer string, service bool) {
		r := rand.New(rand.NewSource(seed))
		a := randomAggregate(r)
		pub := a.Public()
		if why := leaks(a, pub); why != "" {
			t.Fatalf("leak (%s):\n in %+v\npub %+v", why, a, pub)
		}
		if !SamePublic(pub.Public(), pub) {
			t.Fatalf("Public is not idempotent: %+v", pub)
		}
		// The decision: who is entitled to the true view.
		got := Entitled(viewer, service, a.User)
		want := service || viewer == a.User
		if got != want {
			t.Fatalf("Entitled(%q, %v, %q) = %v", viewer, service, a.User, got)
		}
		seenBy := pub
		if got {
			seenBy = a
		}
		if !got {
			if why := leaks(a, seenBy); why != "" {
				t.Fatalf("viewer %q got a leak (%s)", viewer, why)
			}
		}
		if a.Privacy.Invisible && !got && (seenBy.Status != Offline || slices.ContainsFunc(seenBy.Sessions, func(SessionView) bool { return true })) {
			t.Fatalf("viewer %q sees an invisible user", viewer)
		}
	})
}
