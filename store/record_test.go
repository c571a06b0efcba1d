package store

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/presenced/presenced/presence"
)

// TestRecordKeepsEveryField: a record holds every field of a
// presence.User but the aggregate it derives again, so a field added to
// User and forgotten here fails: each field is set to a value of its own
// (by reflection), packed and read back.
func TestRecordKeepsEveryField(t *testing.T) {
	var u presence.User
	v := reflect.ValueOf(&u).Elem()
	for i := range v.NumField() {
		if v.Type().Field(i).Name == "Current" {
			continue
		}
		fill(t, v.Field(i), i+1)
	}
	since := time.Unix(1_700_000_000, 5).UTC()
	r := pack(u, 7, since)
	if got := r.user(); !reflect.DeepEqual(got, u) {
		t.Fatalf("a record read back\n%+v\nwant\n%+v", got, u)
	}
	if r.version != 7 || !r.since().Equal(since) {
		t.Fatalf("version %d since %v, want 7 and %v", r.version, r.since(), since)
	}
}

// fill sets v (and, for a struct or a pointer, what it holds) to a value
// that is not zero, told apart by n.
func fill(t *testing.T, v reflect.Value, n int) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + string(rune('a'+n%26)))
	case reflect.Int, reflect.Int64, reflect.Int32:
		if v.Type() == reflect.TypeFor[time.Duration]() {
			v.SetInt(int64(n) * int64(time.Second))
			return
		}
		v.SetInt(int64(n))
	case reflect.Uint64, reflect.Uint32, reflect.Uint16, reflect.Uint8, reflect.Uint:
		v.SetUint(uint64(n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(t, s.Index(0), n+1)
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), n+1)
		v.Set(p)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(int64(n)*1000, 0).UTC()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), n+i+1)
			}
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, n+1)
		fill(t, e, n+2)
		m.SetMapIndex(k, e)
		v.Set(m)
	default:
		t.Fatalf("fill: a %s (%s) is not handled", v.Kind(), v.Type())
	}
}

// TestRecordLiveSessions: the live sessions the store itself makes (its
// user's, not ended) are held as liveSessions, and every other field of a
// Session comes back from one: a field added to Session and not to
// liveSession fails here (its node and listener come back from their codes,
// names.Name). A record of a user with nothing but live sessions points to
// nothing more. (Its last seen and since are in Local,
// as the store's clock makes them: in UTC they wait in more,
// TestRecordTimesElsewhere.)
func TestRecordLiveSessions(t *testing.T) {
	u := presence.User{Name: "ann", LastEpoch: 9, LastSeen: time.Unix(1_700_000_000, 0)}
	s := reflect.MakeSlice(reflect.TypeFor[[]presence.Session](), 2, 2)
	fill(t, s.Index(0), 1)
	fill(t, s.Index(1), 40)
	u.Sessions = s.Interface().([]presence.Session)
	for i := range u.Sessions { // what a live session of ann's has
		u.Sessions[i].User, u.Sessions[i].EndedAt, u.Sessions[i].EndReason = u.Name, time.Time{}, ""
	}
	u.Sessions[0].Status, u.Sessions[0].State = presence.Busy, presence.Active
	u.Sessions[1].Status, u.Sessions[1].State = presence.DND, presence.Connecting
	u.Sessions[0].ConnectedAt = u.Sessions[0].ConnectedAt.Local() // fill makes UTC times: a session in each location
	u.Sessions[0].RenewedAt = u.Sessions[0].RenewedAt.Local()
	u.Sessions[0].ExpiresAt = u.Sessions[0].ExpiresAt.Local()
	if !fits(u.Name, u.Sessions) {
		t.Fatal("ann's live sessions do not fit")
	}
	r := pack(u, 3, time.Unix(1_700_000_001, 0))
	if len(r.sessions) != 2 || r.more != nil {
		t.Fatalf("held as %d liveSessions, more %+v; want 2 and nothing more", len(r.sessions), r.more)
	}
	if got := r.user(); !reflect.DeepEqual(got, u) {
		t.Fatalf("a record read back\n%+v\nwant\n%+v", got, u)
	}
	if r.live() != 2 {
		t.Fatalf("live %d, want 2", r.live())
	}
	// What a liveSession cannot hold is kept as it is.
	for _, odd := range []func(*presence.Session){
		func(s *presence.Session) { s.User = "bob" },
		func(s *presence.Session) { s.EndedAt = time.Unix(1_700_000_002, 0).UTC() },
		func(s *presence.Session) { s.EndReason = presence.EndClean },
		func(s *presence.Session) { s.Status = "lunch" },
		func(s *presence.Session) { s.State = "limbo" },
		func(s *presence.Session) { s.Conn.Port = 70_000 },
		func(s *presence.Session) { s.Conn.Port = -1 },
		// Times that are no wall (wallOf), or walls of two locations.
		func(s *presence.Session) { s.ConnectedAt = s.ConnectedAt.In(time.FixedZone("CEST", 2*3600)) },
		func(s *presence.Session) { s.RenewedAt = s.RenewedAt.Local() },
		func(s *presence.Session) { s.ExpiresAt = time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(s *presence.Session) { s.ExpiresAt = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(s *presence.Session) { s.RenewedAt = time.Unix(0, 0).UTC() },
		func(s *presence.Session) { s.ConnectedAt = time.Time{}.In(time.FixedZone("CEST", 2*3600)) },
	} {
		v := u
		v.Sessions = append([]presence.Session(nil), u.Sessions...)
		odd(&v.Sessions[1])
		r := pack(v, 3, time.Time{})
		if r.sessions != nil || r.more == nil || r.live() != 2 || fits(v.Name, v.Sessions) {
			t.Fatalf("a session that does not fit: liveSessions %d, more %v, live %d", len(r.sessions), r.more != nil, r.live())
		}
		if got := r.user(); !reflect.DeepEqual(got, v) {
			t.Fatalf("read back\n%+v\nwant\n%+v", got, v)
		}
	}
	// No session and an empty list are told apart, as JSON does.
	for _, sessions := range [][]presence.Session{nil, {}} {
		v := presence.User{Name: "ann", Sessions: sessions}
		if got := pack(v, 0, time.Time{}).user(); !reflect.DeepEqual(got, v) {
			t.Fatalf("sessions %#v read back as %#v", sessions, got.Sessions)
		}
	}
}

// TestRecordSizes pins the layout TestMemoryBytesPerSession measures: a
// record in Go's 80-byte size class and a liveSession in the 144-byte
// one (176 while it held its node and listener as strings; 112 and 224
// while they held their times as time.Times).
func TestRecordSizes(t *testing.T) {
	if n := unsafe.Sizeof(record{}); n > 80 {
		t.Errorf("record is %d bytes, want at most 80", n)
	}
	if n := unsafe.Sizeof(liveSession{}); n > 144 {
		t.Errorf("liveSession is %d bytes, want at most 144", n)
	}
}

// TestRecordNamesWithoutCode: a session whose node or listener gets no
// code (the process's table of names full: nameCode says no) is kept as
// it is (recordMore.sessions), losing nothing, whether its record held
// liveSessions before or not; once they have codes again, a write holds
// it as liveSessions. A write asks nameCode once per name of a session.
// Not parallel: it swaps nameCode, which the package's other tests use (a
// full table cannot be made without them seeing it full).
func TestRecordNamesWithoutCode(t *testing.T) {
	code := nameCode
	t.Cleanup(func() { nameCode = code })
	at := time.Unix(1_700_000_000, 0)
	session := func(id, node, listener string) presence.Session {
		return presence.Session{User: "ann", ID: id, Epoch: 1, Node: node, Device: "phone", Status: presence.Online, State: presence.Active,
			ConnectedAt: at, RenewedAt: at, ExpiresAt: at.Add(time.Minute),
			Conn: presence.Conn{Username: "ann", IP: "10.0.0.1", Port: 1883, Listener: listener, ProtoVer: 5, KeepAlive: 30}}
	}
	u := presence.User{Name: "ann", LastEpoch: 2, LastSeen: at, Sessions: []presence.Session{
		session("a", "node-a", "tcp"), session("b", "node-b", "ws")}}
	for _, tc := range []struct {
		name   string
		refuse func(string) bool
	}{
		{"a node", func(n string) bool { return n == "node-b" }},
		{"a listener", func(n string) bool { return n == "ws" }},
		{"the first session's", func(n string) bool { return n == "node-a" }},
		{"every name", func(string) bool { return true }},
	} {
		calls := 0
		full := func(name string) (uint8, bool) {
			calls++
			if tc.refuse(name) {
				return 0, false
			}
			return code(name)
		}
		check := func(how string, r record, fit bool) {
			t.Helper()
			if held := r.sessions != nil && r.more == nil; held != fit || r.live() != 2 ||
				!fit && (r.more == nil || !reflect.DeepEqual(r.more.sessions, u.Sessions)) {
				t.Fatalf("%s, %s: liveSessions %d, more %+v, live %d; want held as liveSessions %v",
					tc.name, how, len(r.sessions), r.more, r.live(), fit)
			}
			if got := r.user(); !reflect.DeepEqual(got, u) {
				t.Fatalf("%s, %s: read back\n%+v\nwant\n%+v", tc.name, how, got, u)
			}
			if d, ok := r.due(); !ok || d != at.Add(time.Minute) {
				t.Fatalf("%s, %s: due %v %v, want %v", tc.name, how, d, ok, at.Add(time.Minute))
			}
		}
		nameCode = full
		check("packed", pack(u, 1, at), false)
		if fits(u.Name, u.Sessions) {
			t.Fatalf("%s: fits, want not", tc.name)
		}
		nameCode = code
		r := pack(u, 1, at)
		check("packed with codes", r, true)
		nameCode = full
		r = repack(r, u, 2, at)
		check("repacked", r, false)
		nameCode = code
		r = repack(r, u, 3, at)
		check("repacked with codes", r, true)
		nameCode = func(name string) (uint8, bool) { calls++; return code(name) }
		calls = 0
		r = repack(r, u, 4, at)
		check("repacked again", r, true)
		if calls != 2*len(u.Sessions) {
			t.Errorf("%s: a write of %d sessions asked nameCode %d times, want %d", tc.name, len(u.Sessions), calls, 2*len(u.Sessions))
		}
	}
}

// TestWall: a time wallOf takes reads back as it was but its monotonic
// clock reading, location included (==, not Equal); the others it tells.
func TestWall(t *testing.T) {
	now := time.Now() // with a monotonic clock reading, in Local
	for _, tc := range []struct {
		name string
		t    time.Time
		ok   bool
	}{
		{"zero", time.Time{}, true},
		{"Local", time.Unix(1_700_000_000, 123), true},
		{"Local, In", time.Date(2024, 2, 29, 12, 0, 0, 1, time.UTC).In(time.Local), true},
		{"UTC, Date", time.Date(2024, 2, 29, 12, 0, 0, 1, time.UTC), true},
		{"UTC, UTC()", time.Unix(1_700_000_000, 123).UTC(), true},
		{"now", now, true},
		{"now, UTC", now.UTC(), true},
		{"before the epoch", time.Date(1901, 12, 13, 20, 45, 52, 7, time.UTC), true},
		{"first", time.Unix(0, math.MinInt64), true},
		{"last", time.Unix(0, math.MaxInt64).UTC(), true},
		{"the epoch", time.Unix(0, 0), false},
		{"the epoch, UTC", time.Unix(0, 0).UTC(), false},
		{"before 1678", time.Unix(0, math.MinInt64).Add(-1), false},
		{"after 2262", time.Unix(0, math.MaxInt64).Add(1), false},
		{"year 1, Local", time.Time{}.Local(), false},
		{"fixed zone", time.Unix(1_700_000_000, 0).In(time.FixedZone("CEST", 2*3600)), false},
		{"a zone named UTC", time.Unix(1_700_000_000, 0).In(time.FixedZone("UTC", 0)), false},
	} {
		w, where, ok := wallOf(tc.t)
		if ok != tc.ok {
			t.Errorf("%s: %v is a wall %v, want %v", tc.name, tc.t, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if got := w.time(where == inUTC); got != tc.t.Round(0) {
			t.Errorf("%s: %v read back as %v (%v)", tc.name, tc.t, got, got.Location())
		}
	}
}

// TestRecordSessionTimes: a live session's times in Local or UTC, zero or
// not, are held as walls and read back as they were; a monotonic clock
// reading is dropped (a record reads back t.Round(0)); a time in another
// location, or times of two locations, keep the user's sessions as they
// are (recordMore.sessions), losing nothing.
func TestRecordSessionTimes(t *testing.T) {
	at := func(times ...time.Time) presence.User {
		s := presence.Session{User: "ann", ID: "a", Status: presence.Online, State: presence.Active,
			ConnectedAt: times[0], RenewedAt: times[1], ExpiresAt: times[2]}
		return presence.User{Name: "ann", Sessions: []presence.Session{s}}
	}
	local, utc := time.Unix(1_700_000_000, 1), time.Date(2023, 11, 14, 22, 13, 20, 2, time.UTC)
	now := time.Now()
	cest := time.FixedZone("CEST", 2*3600)
	for _, tc := range []struct {
		name string
		u    presence.User
		fit  bool
	}{
		{"Local", at(local, local.Add(time.Second), local.Add(time.Minute)), true},
		{"UTC", at(utc, utc.Add(time.Second), utc.Add(time.Minute)), true},
		{"zero", at(time.Time{}, time.Time{}, time.Time{}), true},
		{"Local and zero", at(local, time.Time{}, local.Add(time.Minute)), true},
		{"UTC and zero", at(time.Time{}, utc, time.Time{}), true},
		{"now", at(now, now, now.Add(time.Minute)), true},
		{"now, UTC", at(now.UTC(), now.UTC(), now.UTC().Add(time.Minute)), true},
		{"another location", at(local, local.In(cest), local), false},
		{"Local and UTC", at(local, utc, time.Time{}), false},
		{"now and another location", at(now, now.In(cest), now), false},
	} {
		r := pack(tc.u, 1, time.Time{})
		if fit := r.sessions != nil && r.more == nil; fit != tc.fit {
			t.Errorf("%s: held as liveSessions %v, want %v", tc.name, fit, tc.fit)
		}
		want := tc.u
		if tc.fit { // but their monotonic clock readings
			want.Sessions = append([]presence.Session(nil), tc.u.Sessions...)
			for i := range want.Sessions {
				s := &want.Sessions[i]
				s.ConnectedAt, s.RenewedAt, s.ExpiresAt = s.ConnectedAt.Round(0), s.RenewedAt.Round(0), s.ExpiresAt.Round(0)
			}
		}
		got := r.user()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read back\n%+v\nwant\n%+v", tc.name, got, want)
		}
		for i, s := range got.Sessions { // == as well: DeepEqual compares a Location's fields
			w := want.Sessions[i]
			if s.ConnectedAt != w.ConnectedAt || s.RenewedAt != w.RenewedAt || s.ExpiresAt != w.ExpiresAt {
				t.Errorf("%s: times read back %v %v %v, want %v %v %v", tc.name,
					s.ConnectedAt, s.RenewedAt, s.ExpiresAt, w.ConnectedAt, w.RenewedAt, w.ExpiresAt)
			}
		}
	}
}

// TestRecordTimesElsewhere: a record holds its user's last seen and its
// since inline when both are in Local (or zero); else both wait, as they
// are, in more, which a record without them points to no longer.
func TestRecordTimesElsewhere(t *testing.T) {
	local, utc := time.Unix(1_700_000_000, 1), time.Date(2023, 11, 14, 22, 13, 20, 2, time.UTC)
	now := time.Now()
	cest := time.Unix(1_700_000_000, 3).In(time.FixedZone("CEST", 2*3600))
	for _, tc := range []struct {
		name            string
		lastSeen, since time.Time
		inline          bool
	}{
		{"Local", local, local.Add(time.Second), true},
		{"zero", time.Time{}, time.Time{}, true},
		{"Local and zero", time.Time{}, local, true},
		{"now", now, now.Add(time.Second), true},
		{"UTC", utc, utc, false},
		{"last seen in UTC", utc, local, false},
		{"since in UTC", local, utc, false},
		{"since in UTC, last seen zero", time.Time{}, utc, false},
		{"another location", cest, local, false},
		{"before 1678", local, time.Date(1600, 1, 1, 0, 0, 0, 0, time.Local), false},
		{"the epoch", time.Unix(0, 0), local, false},
	} {
		u := presence.User{Name: "ann", LastEpoch: 1, LastSeen: tc.lastSeen}
		r := pack(u, 4, tc.since)
		if inline := r.more == nil; inline != tc.inline {
			t.Errorf("%s: inline %v, want %v", tc.name, inline, tc.inline)
		}
		wantSeen, wantSince := tc.lastSeen, tc.since
		if tc.inline {
			wantSeen, wantSince = wantSeen.Round(0), wantSince.Round(0)
		}
		if got := r.user(); got.LastSeen != wantSeen || !reflect.DeepEqual(got, presence.User{Name: "ann", LastEpoch: 1, LastSeen: wantSeen}) {
			t.Errorf("%s: read back %+v, want last seen %v", tc.name, got, wantSeen)
		}
		if r.lastSeen() != wantSeen || r.since() != wantSince {
			t.Errorf("%s: last seen %v since %v, want %v and %v", tc.name, r.lastSeen(), r.since(), wantSeen, wantSince)
		}
		// Written again with other times, or with more to hold: more
		// goes, or holds what it has to, and nothing is lost.
		for _, v := range []struct {
			lastSeen, since time.Time
			account         presence.Account
			times           bool // more holds them
		}{
			{local, local, presence.Account{}, false},
			{tc.lastSeen, tc.since, presence.Account{Status: presence.Away}, !tc.inline},
			{local, local, presence.Account{Status: presence.Away}, false},
			{tc.lastSeen, tc.since, presence.Account{}, !tc.inline},
		} {
			u := presence.User{Name: "ann", LastSeen: v.lastSeen, Account: v.account}
			r = repack(r, u, 5, v.since)
			times := v.times
			if (r.more != nil) != (times || v.account != presence.Account{}) || r.more != nil && r.more.times != times {
				t.Errorf("%s: repacked with %v %v %+v: more %+v", tc.name, v.lastSeen, v.since, v.account, r.more)
			}
			if got := r.user(); !got.LastSeen.Equal(v.lastSeen) || got.Account != v.account || !r.since().Equal(v.since) {
				t.Errorf("%s: repacked with %v %v %+v: read back %+v since %v", tc.name, v.lastSeen, v.since, v.account, got, r.since())
			}
		}
	}
	// The store's own: its clock's times (Local, here a monotonic clock
	// reading) keep a user's record without more.
	clock := time.Now()
	m := NewMemory(presence.Rules{}, func() time.Time { return clock }, NewFeed().Push)
	if _, err := m.Open(context.Background(), presence.OpenArgs{User: "ann", ID: "a", Node: "n", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	r := m.users["ann"]
	m.mu.Unlock()
	if r.more != nil || len(r.sessions) != 1 || r.sinceAt == 0 {
		t.Fatalf("the store's own record: more %+v, %d liveSessions, since %v", r.more, len(r.sessions), r.since())
	}
}

// TestRecordDue: a record's due time is the rule the reaper had kept an
// index of: the earlier of its live sessions' first expiry and its
// dormant session's due time.
func TestRecordDue(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1_700_000_000+int64(s), 0) }
	live := func(id string, exp int) presence.Session {
		return presence.Session{User: "ann", ID: id, State: presence.Active, Status: presence.Online, ExpiresAt: at(exp)}
	}
	odd := live("odd", 5)
	odd.Status = "lunch" // kept as it is (recordMore.sessions)
	sleeper := &presence.Session{User: "ann", ID: "s", ExpiresAt: at(7)}
	utc := func(s presence.Session) presence.Session { s.ExpiresAt = s.ExpiresAt.UTC(); return s }
	noExpiry := live("z", 0)
	noExpiry.ExpiresAt = time.Time{}
	early := live("e", 0)
	early.ExpiresAt = time.Unix(-1, 0)
	for _, tc := range []struct {
		name string
		u    presence.User
	}{
		{"none", presence.User{Name: "ann"}},
		{"one", presence.User{Name: "ann", Sessions: []presence.Session{live("a", 30)}}},
		{"earliest", presence.User{Name: "ann", Sessions: []presence.Session{live("a", 30), live("b", 10), live("c", 20)}}},
		{"kept as it is", presence.User{Name: "ann", Sessions: []presence.Session{live("a", 30), odd}}},
		{"dormant only", presence.User{Name: "ann", Dormant: sleeper}},
		{"dormant first", presence.User{Name: "ann", Sessions: []presence.Session{live("a", 30)}, Dormant: sleeper}},
		{"live first", presence.User{Name: "ann", Sessions: []presence.Session{live("a", 3)}, Dormant: sleeper}},
		{"UTC", presence.User{Name: "ann", Sessions: []presence.Session{utc(live("a", 30)), utc(live("b", 10))}}},
		{"UTC first", presence.User{Name: "ann", Sessions: []presence.Session{live("a", 30), utc(live("b", 10)), live("c", 20)}}},
		{"a zero expiry", presence.User{Name: "ann", Sessions: []presence.Session{live("a", 30), live("b", 10), noExpiry, live("c", 20)}}},
		{"a zero expiry last", presence.User{Name: "ann", Sessions: []presence.Session{live("a", 30), noExpiry}}},
		{"a zero expiry first", presence.User{Name: "ann", Sessions: []presence.Session{noExpiry, live("a", 30), live("b", 40)}}},
		{"before the epoch", presence.User{Name: "ann", Sessions: []presence.Session{live("a", 30), early, live("b", 40)}}},
		{"before the epoch, then a zero expiry", presence.User{Name: "ann", Sessions: []presence.Session{early, noExpiry}}},
	} {
		want, wok := tc.u.NextDeadline()
		if dd, dok := tc.u.DormantDeadline(); dok && (!wok || dd.Before(want)) {
			want, wok = dd, true
		}
		r := pack(tc.u, 1, time.Time{})
		if got, ok := r.due(); ok != wok || !got.Equal(want) || got != want { // == : in its location too
			t.Errorf("%s: due %v (%v) %v, want %v (%v) %v", tc.name, got, got.Location(), ok, want, want.Location(), wok)
		}
	}
}
