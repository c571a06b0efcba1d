package store

import (
	"context"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// An end's last sign of life (presence.EndArgs.LastSign) is the user's
// last_seen, kept within the session's life, and the offline aggregate
// says why the user went (reason), the same way in both stores: in the
// change reported and in a read of the user.
func TestLastSignAndReason(t *testing.T) {
	type store interface {
		Open(context.Context, presence.OpenArgs) (presence.Session, error)
		End(context.Context, presence.EndArgs) error
		Get(context.Context, string) (presence.Aggregate, bool, error)
	}
	// run: now is the clock LastSign is read against; age lets a session
	// grow older than d.
	run := func(t *testing.T, s store, log *changeLog, now func() time.Time, age func(d time.Duration), slack time.Duration) {
		ctx := context.Background()
		offline := func(user string) presence.Aggregate {
			t.Helper()
			var got presence.Aggregate
			testkit.Wait(t, 10*time.Second, user+" offline reported", func() error {
				for _, a := range log.take() {
					if a.User == user && a.Status == presence.Offline {
						got = a
					}
				}
				return testkit.Why(got.Version != 0, "not yet")
			})
			read, ok, err := s.Get(ctx, user)
			if err != nil || !ok || read.Reason != got.Reason || !read.LastSeen.Equal(got.LastSeen) {
				t.Fatalf("%s: read %+v (%v %v), reported %+v", user, read, ok, err, got)
			}
			if len(got.Ended) == 0 {
				t.Fatalf("%s: the offline change names no end", user)
			}
			if !got.Since.Equal(got.LastSeen) {
				t.Errorf("%s: offline since %v, last seen %v", user, got.Since, got.LastSeen)
			}
			return got
		}
		open := func(user string) presence.Session {
			t.Helper()
			a, err := s.Open(ctx, presence.OpenArgs{User: user, ID: "phone", Node: "n1", TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		end := func(a presence.Session, r presence.EndReason, sign time.Time) {
			t.Helper()
			if err := s.End(ctx, presence.EndArgs{User: a.User, ID: a.ID, Epoch: a.Epoch, Reason: r, LastSign: sign}); err != nil {
				t.Fatal(err)
			}
		}
		within := func(what string, got, want time.Time) {
			t.Helper()
			if d := got.Sub(want); d < -slack || d > slack {
				t.Errorf("%s: %v, want %v (±%v)", what, got, want, slack)
			}
		}

		// A keep-alive timeout: the last packet came 300 ms before.
		alice, bob, carol, dave := open("alice"), open("bob"), open("carol"), open("dave")
		age(time.Second)
		sign := now().Add(-300 * time.Millisecond)
		end(alice, presence.EndTimeout, sign)
		a := offline("alice")
		if a.Reason != presence.EndTimeout {
			t.Errorf("alice: reason %q, want timeout", a.Reason)
		}
		within("alice's last seen", a.LastSeen, sign)
		if sil := presence.Silence(a); sil < 300*time.Millisecond-slack || sil > 300*time.Millisecond+slack {
			t.Errorf("alice: silence %v, want 300 ms", sil)
		}
		// A network end knows no earlier sign: last seen is the end.
		end(bob, presence.EndNetwork, time.Time{})
		b := offline("bob")
		if b.Reason != presence.EndNetwork || !b.LastSeen.Equal(b.Ended[len(b.Ended)-1].EndedAt) {
			t.Errorf("bob: reason %q last seen %v, want network at the end %v", b.Reason, b.LastSeen, b.Ended)
		}
		end(carol, presence.EndClean, time.Time{})
		if c := offline("carol"); c.Reason != presence.EndClean {
			t.Errorf("carol: reason %q, want clean", c.Reason)
		}
		// A sign before the session began is its connect.
		end(dave, presence.EndTimeout, dave.ConnectedAt.Add(-time.Hour))
		if d := offline("dave"); !d.LastSeen.Equal(dave.ConnectedAt.Truncate(time.Millisecond)) {
			t.Errorf("dave: last seen %v, want the connect %v", d.LastSeen, dave.ConnectedAt)
		}
		// Back online: no reason.
		open("alice")
		testkit.Wait(t, 10*time.Second, "alice online", func() error {
			g, _, err := s.Get(ctx, "alice")
			if err == nil && g.Status != presence.Offline && g.Reason != "" {
				t.Fatalf("online with reason %q", g.Reason)
			}
			return testkit.Why(err == nil && g.Status == presence.Online, "not yet")
		})
	}
	t.Run("memory", func(t *testing.T) {
		clk := testkit.NewClock(time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC))
		log := &changeLog{}
		m := NewMemory(presence.NewRules(nil), clk.Now, log.report)
		run(t, m, log, clk.Now, clk.Advance, 0)
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		log := &changeLog{}
		r := NewRedis(RedisOptions{Client: srv.Client(t), Prefix: "t:" + t.Name() + ":", Node: "n1",
			NodeTTL: 3 * time.Second, Retention: time.Hour, Report: log.report})
		if err := r.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Stop)
		if err := r.ListenAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		age := func(d time.Duration) { // Redis's own clock: wait for it to pass
			until := time.Now().Add(d)
			testkit.Wait(t, d+5*time.Second, "time to pass", func() error { return testkit.Why(!time.Now().Before(until), "not yet") })
		}
		run(t, r, log, time.Now, age, 50*time.Millisecond)
	})
}

// A change message's offline reason (rs) is read, and refused when it is
// not an end reason or on a status other than offline.
func TestDecodeChangeReason(t *testing.T) {
	ok := `{"u":"a","v":"5","st":"offline","tx":"","since":"1","ls":"1","ss":{},"rs":"timeout"}`
	p, _, err := decodeChange([]byte(ok))
	if err != nil || p.Reason != presence.EndTimeout {
		t.Fatalf("decoded %+v, %v", p, err)
	}
	for _, bad := range []string{
		`{"u":"a","v":"5","st":"offline","tx":"","since":"1","ls":"1","ss":{},"rs":"bored"}`,
		`{"u":"a","v":"5","st":"online","tx":"","since":"1","ls":"","ss":{},"rs":"clean"}`,
	} {
		if _, _, err := decodeChange([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
