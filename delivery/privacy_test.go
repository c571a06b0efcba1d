package delivery

import (
	"bytes"
	"math/rand"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

func TestChoose(t *testing.T) {
	pub, tp, truth, other := []byte("P"), []byte("TP"), []byte("T"), []byte("X")
	tests := []struct {
		payload                     []byte
		byTopic, retained, entitled bool
		want                        []byte
	}{
		{pub, true, true, true, truth},    // retained, on subscribe: the latest truth
		{pub, true, false, true, tp},      // live: the truth of its own version
		{truth, true, false, true, truth}, // a change of the truth alone, sent to the entitled
		{other, true, false, true, other}, // an older version queued: left
		{truth, true, false, false, pub},  // never a truth to the others
		{tp, true, true, false, pub},
		{other, true, false, false, other},
		{pub, true, true, false, pub},
		{pub, false, false, true, tp}, // a topic alias
		{truth, false, false, false, pub},
		{other, false, false, true, other},
		{pub, false, false, false, pub},
	}
	for i, tc := range tests {
		if got := Choose(pub, tp, truth, tc.payload, tc.byTopic, tc.retained, tc.entitled); !bytes.Equal(got, tc.want) {
			t.Errorf("%d: Choose(%s, topic %v, retained %v, entitled %v) = %s, want %s", i, tc.payload, tc.byTopic, tc.retained, tc.entitled, got, tc.want)
		}
	}
}

func TestPayloadUser(t *testing.T) {
	a := presence.Aggregate{User: `ann "the" bee`, Status: presence.Online, Sessions: []presence.SessionView{}}
	for in, want := range map[string]string{
		string(a.AppendJSON(nil)):             `ann "the" bee`,
		`{"user":"bob","status":"online"}`:    "bob",
		`{"status":"online","user":"bob"}`:    "",
		`{"user":"bob"`:                       "",
		`hello`:                               "",
		`{"user":"b\u0000b","status":"x"}`:    "b\x00b",
		`{"user":"bob\","status":"x"}`:        "",
		`{"user":"a","status":"x","user":"b"`: "a",
	} {
		if got := payloadUser([]byte(in)); got != want {
			t.Errorf("payloadUser(%s) = %q, want %q", in, got, want)
		}
	}
}

// FuzzPrivacyDelivery: over random aggregates, settings and viewers, what a
// delivery carries (Choose over the payloads the publisher keeps) is the
// truth only for the user and service accounts, and otherwise a public
// view that leaks nothing: no true status, session or exact last_seen.
func FuzzPrivacyDelivery(f *testing.F) {
	f.Add(int64(1), "alice", false, true, false, 0)
	f.Add(int64(2), "bob", false, true, true, 1)
	f.Add(int64(3), "", true, false, false, 2)
	f.Add(int64(4), "alice", true, false, true, 3)
	f.Fuzz(func(t *testing.T, seed int64, viewer string, service, byTopic, retained bool, queued int) {
		r := rand.New(rand.NewSource(seed))
		base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		tm := func() time.Time { return base.Add(time.Duration(r.Int63n(int64(48*time.Hour))) - 24*time.Hour) }
		statuses := []presence.Status{presence.Online, presence.Busy, presence.DND, presence.Offline}
		modes := []presence.LastSeenMode{"", presence.LastSeenQuarter, presence.LastSeenHidden}
		a := presence.Aggregate{User: "alice", Status: statuses[r.Intn(len(statuses))], Text: "secret", Version: r.Uint64() | 1,
			Since: tm(), LastSeen: tm(), Sessions: []presence.SessionView{},
			Privacy: presence.Privacy{Invisible: r.Intn(2) == 0, LastSeen: modes[r.Intn(len(modes))], Since: tm(), Seen: tm()}}
		if a.Status != presence.Offline {
			a.LastSeen = time.Time{}
			a.Sessions = []presence.SessionView{{ID: "phone", Epoch: 1, Node: "n1", Status: a.Status, ConnectedAt: tm()}}
		}
		if a.Privacy.IsZero() {
			return // shown as it is: nothing is kept
		}
		pub := a.Public()
		public, truth := pub.AppendJSON(nil), a.AppendJSON(nil)
		older := a // the truth published with the public view, before a change of the truth alone
		older.Text, older.Version = "older secret", a.Version-1
		truthAtPublic := older.AppendJSON(nil)
		payload := [][]byte{public, truth, truthAtPublic, []byte("other")}[((queued%4)+4)%4]
		entitled := presence.Entitled(viewer, service, a.User)
		got := Choose(public, truthAtPublic, truth, payload, byTopic, retained, entitled)
		if entitled != (service || viewer == "alice") {
			t.Fatalf("Entitled(%q, %v) = %v", viewer, service, entitled)
		}
		if entitled && byTopic && retained && !bytes.Equal(got, truth) {
			t.Fatalf("the entitled did not get the latest truth on subscribe: %s", got)
		}
		if entitled || bytes.Equal(got, []byte("other")) {
			return
		}
		if bytes.Equal(truth, public) {
			return
		}
		if bytes.Equal(got, truth) || bytes.Equal(got, truthAtPublic) {
			t.Fatalf("viewer %q got the truth %s", viewer, got)
		}
		seen, err := presence.ParseAggregate(got)
		if err != nil {
			t.Fatal(err)
		}
		if a.Privacy.Invisible && (seen.Status != presence.Offline || len(seen.Sessions) > 0 || seen.Text != "") {
			t.Fatalf("an invisible user shown: %s", got)
		}
		if !seen.LastSeen.IsZero() && a.Privacy.LastSeen == presence.LastSeenHidden {
			t.Fatalf("a hidden last_seen shown: %s", got)
		}
		if !seen.LastSeen.IsZero() && a.Privacy.LastSeen == presence.LastSeenQuarter && seen.LastSeen.UnixMilli()%(15*60*1000) != 0 {
			t.Fatalf("last_seen finer than a quarter: %s", got)
		}
	})
}
