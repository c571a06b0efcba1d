package presence

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// dormantUser returns a user of a sleeping device, its session dormant.
func dormantUser(t *testing.T) User {
	t.Helper()
	u, s := mustOpen(t, User{}, sleeper("s", time.Hour, time.Minute), base)
	u, _, err := u.End("s", s.Epoch, EndClean, nil, at(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if u.Dormant == nil || u.Dormant.ID != "s" {
		t.Fatalf("dormant session %+v after a clean end", u.Dormant)
	}
	return u
}

// TestDormantCopyOnWrite: User values share their dormant session, and no
// operation on one copy changes what another sees.
func TestDormantCopyOnWrite(t *testing.T) {
	u := dormantUser(t)
	want := *u.Dormant
	keep := u.Dormant

	if _, m, ok := u.Miss(at(2 * time.Hour)); !ok || m.EndReason != EndMissed {
		t.Fatalf("Miss = %+v, %v", m, ok)
	}
	if _, _, _, err := u.Open(sleeper("s", time.Hour, time.Minute), at(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if u.Dormant != keep || *u.Dormant != want {
		t.Fatalf("an operation on a copy changed the receiver's dormant session: %+v, want %+v", u.Dormant, want)
	}

	// a second clean end gives a new dormant session, not the old one changed
	v, s := mustOpen(t, u, sleeper("s", time.Hour, time.Minute), at(time.Minute))
	v, _, err := v.End("s", s.Epoch, EndClean, nil, at(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if v.Dormant == keep || *keep != want || v.Dormant.Epoch != s.Epoch {
		t.Fatalf("second sleep: %+v (first %+v, want it unchanged as %+v)", v.Dormant, keep, want)
	}

	// decoding into a copy leaves the shared session alone
	c := u
	if err := json.Unmarshal([]byte(`{"dormant":{"id":"other","epoch":9}}`), &c); err != nil {
		t.Fatal(err)
	}
	if *keep != want || c.Dormant.ID != "other" || c.Dormant.User != want.User {
		t.Fatalf("decoding into a copy: shared %+v (want %+v), copy's %+v", *keep, want, *c.Dormant)
	}
}

// TestDormantJSON: the record's JSON is as it was with an inline Dormant
// (omitzero: absent when none; else the session), and a zero dormant
// session reads as none.
func TestDormantJSON(t *testing.T) {
	u := dormantUser(t)
	none := u
	none.Dormant = nil
	b, err := json.Marshal(none)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`"dormant"`)) {
		t.Fatalf("no dormant session, JSON %s", b)
	}
	sb, err := json.Marshal(*u.Dormant)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append(bytes.TrimSuffix(b, []byte("}")), `,"dormant":`...), sb...), '}') // the last field
	got, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("JSON\n%s\nwant\n%s", got, want)
	}

	var back User
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	ws := *u.Dormant
	ws.Conn = Conn{} // not in the JSON
	if back.Dormant == nil || *back.Dormant != ws {
		t.Fatalf("round trip: %+v, want %+v", back.Dormant, ws)
	}
	if again, _ := json.Marshal(back); !bytes.Equal(again, got) {
		t.Fatalf("round trip JSON\n%s\nwant\n%s", again, got)
	}

	for _, in := range []string{`{"name":"alice"}`, `{"name":"alice","dormant":{}}`, `{"name":"alice","dormant":null}`, `{"name":"alice","dormant":{"user":"alice","epoch":3}}`} {
		var v User
		if err := json.Unmarshal([]byte(in), &v); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v, User{Name: "alice"}) {
			t.Errorf("%s read as %+v, want no dormant session", in, v)
		}
		if _, ok := v.DormantDeadline(); ok {
			t.Errorf("%s: a dormant deadline", in)
		}
	}
}

// TestSleepAllocatesOnlyWhenItKeeps: an end that leaves no dormant session
// (the usual one: no check-in period declared) allocates nothing in sleep;
// taking the parameter's address put every ended session on the heap (one
// more allocation in every end, BenchmarkMemoryCycle 8 → 9).
func TestSleepAllocatesOnlyWhenItKeeps(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	u := User{Name: "alice"}
	ended := Session{User: "alice", ID: "phone", Epoch: 1, State: Disconnected, EndReason: EndClean, EndedAt: t0}
	var got *Session
	if n := testing.AllocsPerRun(100, func() { got = u.sleep(ended) }); n != 0 || got != nil {
		t.Fatalf("sleep without a check-in period: %v allocations, dormant %v; want 0 and none", n, got)
	}
	ended.Expect = time.Hour
	if n := testing.AllocsPerRun(100, func() { got = u.sleep(ended) }); n != 1 || got == nil || got.ExpiresAt != t0.Add(time.Hour) {
		t.Fatalf("sleep with a check-in period: %v allocations, dormant %+v; want 1, due at %v", n, got, t0.Add(time.Hour))
	}
}
