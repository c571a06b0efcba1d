package presence

import (
	"errors"
	"testing"
	"time"
)

// base is the fixed instant every test time is built from; tests never read
// the wall clock.
var base = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// baseStamp is NextStamp's wall component at base: ms × 1000.
var baseStamp = uint64(base.UnixMilli()) * 1000

// at returns base + d.
func at(d time.Duration) time.Time { return base.Add(d) }

func ptr[T any](v T) *T { return &v }

const testTTL = 30 * time.Second

// args returns valid OpenArgs for user alice.
func args(id, node, device string) OpenArgs {
	return OpenArgs{User: "alice", ID: id, Node: node, Device: device, TTL: testTTL}
}

// mustOpen opens a session or fails the test.
func mustOpen(t testing.TB, u User, a OpenArgs, now time.Time) (User, Session) {
	t.Helper()
	u2, s, taken, err := u.Open(a, now)
	if err != nil {
		t.Fatalf("Open(%+v): %v", a, err)
	}
	if taken != nil {
		t.Fatalf("Open(%+v) took over %+v, want no takeover", a, *taken)
	}
	return u2, s
}

// deepCopy copies u without sharing any backing array, independently of the
// package's own clone.
func deepCopy(u User) User {
	u.Sessions = copyOf(u.Sessions)
	u.Ended = copyOf(u.Ended)
	u.Current.Sessions = copyOf(u.Current.Sessions)
	return u
}

// copyOf copies s into a new backing array, keeping nil and empty apart.
func copyOf[T any](s []T) []T {
	if s == nil {
		return nil
	}
	c := make([]T, len(s))
	copy(c, s)
	return c
}

// scribble mutates every element of u's live sessions and appends to every
// slice of u, to show that a result can be changed where an operation may
// change it without touching the receiver it came from. Ended and Current's
// sessions are shared between a user and the results of its operations:
// they are never written in place (see User.clone), so scribble leaves their
// elements alone (issue 23: copying them on every operation was 13 % of the
// bytes a churning broker allocated).
func scribble(u User) {
	for i := range u.Sessions {
		u.Sessions[i].Status = "scribbled"
		u.Sessions[i].Text = "scribbled"
	}
	_ = append(u.Sessions, Session{ID: "appended"})
	_ = append(u.Ended, Session{ID: "appended"})
	_ = append(u.Current.Sessions, SessionView{ID: "appended"})
}

// wantErr checks err against want (nil: no error).
func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("%s: unexpected error %v", what, err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("%s: error %v, want errors.Is(_, %v)", what, err, want)
	}
}
