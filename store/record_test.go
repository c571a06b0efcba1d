package store

import (
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
	if r.version != 7 || !r.since.Equal(since) {
		t.Fatalf("version %d since %v, want 7 and %v", r.version, r.since, since)
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
// liveSession fails here. A record of a user with nothing but live
// sessions points to nothing more.
func TestRecordLiveSessions(t *testing.T) {
	u := presence.User{Name: "ann", LastEpoch: 9, LastSeen: time.Unix(1_700_000_000, 0).UTC()}
	s := reflect.MakeSlice(reflect.TypeFor[[]presence.Session](), 2, 2)
	fill(t, s.Index(0), 1)
	fill(t, s.Index(1), 40)
	u.Sessions = s.Interface().([]presence.Session)
	for i := range u.Sessions { // what a live session of ann's has
		u.Sessions[i].User, u.Sessions[i].EndedAt, u.Sessions[i].EndReason = u.Name, time.Time{}, ""
	}
	u.Sessions[0].Status, u.Sessions[0].State = presence.Busy, presence.Active
	u.Sessions[1].Status, u.Sessions[1].State = presence.DND, presence.Connecting
	r := pack(u, 3, time.Unix(1_700_000_001, 0).UTC())
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
	} {
		v := u
		v.Sessions = append([]presence.Session(nil), u.Sessions...)
		odd(&v.Sessions[1])
		r := pack(v, 3, time.Time{})
		if r.sessions != nil || r.more == nil || r.live() != 2 {
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
// record in Go's 112-byte size class and a liveSession in the 224-byte
// one.
func TestRecordSizes(t *testing.T) {
	if n := unsafe.Sizeof(record{}); n > 112 {
		t.Errorf("record is %d bytes, want at most 112", n)
	}
	if n := unsafe.Sizeof(liveSession{}); n > 224 {
		t.Errorf("liveSession is %d bytes, want at most 224", n)
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
	} {
		want, wok := tc.u.NextDeadline()
		if dd, dok := tc.u.DormantDeadline(); dok && (!wok || dd.Before(want)) {
			want, wok = dd, true
		}
		r := pack(tc.u, 1, time.Time{})
		if got, ok := r.due(); ok != wok || !got.Equal(want) {
			t.Errorf("%s: due %v %v, want %v %v", tc.name, got, ok, want, wok)
		}
	}
}
