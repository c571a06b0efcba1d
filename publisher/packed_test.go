package publisher

import (
	"bytes"
	"testing"
	"time"
	"unsafe"

	"github.com/presenced/presenced/presence"
)

// packedSamples are aggregates whose payloads a view must write again
// byte for byte: every optional field, statuses without a code, times at
// the edges of what a view holds as Unix nanoseconds.
func packedSamples() []presence.Aggregate {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 123_456_789, time.UTC)
	one := []presence.SessionView{{ID: "phone", Epoch: 1_764_000_000_000_001, Node: "node-a", Device: "phone", Status: presence.Busy, ConnectedAt: t0}}
	return []presence.Aggregate{
		{User: "alice", Status: presence.Online, Version: 1, Since: t0, Sessions: one},
		{User: "bob", Status: presence.Offline, Version: 1 << 63, Since: t0, LastSeen: t0.Add(time.Second), Reason: presence.EndReason("keepalive_timeout")},
		{User: "carol", Status: presence.Dormant, Text: "asleep \"zzz\"\n", Version: 7, Since: t0, NextExpected: t0.Add(time.Hour), Link: "flaky"},
		{User: "dave", Status: presence.Status("custom"), Version: 9, Since: t0, Sessions: []presence.SessionView{
			{ID: "", Epoch: 0, Node: "", Device: "", Status: presence.Status("weird"), ConnectedAt: time.Time{}},
			{ID: "tab\u00e9", Epoch: 3, Node: "n", Device: "web", Status: presence.Idle, ConnectedAt: time.Unix(-5, 999_999_999)},
		}},
		{User: "erin", Status: presence.Online, Version: 2, Since: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), Sessions: one},       // before 1678: kept whole
		{User: "frank", Status: presence.Offline, Version: 3, Since: t0, LastSeen: time.Date(2300, 1, 1, 0, 0, 0, 5, time.UTC)},      // after 2262: kept whole
		{User: "grace", Status: presence.Offline, Version: 4, Since: time.Unix(0, 0).UTC(), LastSeen: time.Unix(0, 1_000_000).UTC()}, // the Unix epoch itself
		{User: "heidi", Status: presence.Online, Version: 5, Since: t0.In(time.FixedZone("x", 3600)), Sessions: one},                 // not UTC: payloads write UTC
	}
}

// TestViewWritesThePayloadAgain: what a view holds writes the published
// payload again byte for byte, and the fields Shown reads back are the
// aggregate's.
func TestViewWritesThePayloadAgain(t *testing.T) {
	for _, a := range packedSamples() {
		want := a.AppendJSON(nil)
		v := newView(a, want, nil, packRest(nil, a))
		if got := v.payload(a.User); !bytes.Equal(got, want) {
			t.Errorf("%s: payload\n got %s\nwant %s", a.User, got, want)
		}
		if got := v.aggregate(a.User, nil).AppendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("%s: aggregate\n got %s\nwant %s", a.User, got, want)
		}
		sh, want2 := v.shown(), a.Shown()
		if sh.Version != want2.Version || sh.Status != want2.Status || sh.Text != want2.Text || !sh.Since.Equal(want2.Since) || !sh.LastSeen.Equal(want2.LastSeen) {
			t.Errorf("%s: shown %+v, want %+v", a.User, sh, want2)
		}
	}
}

// TestViewIsCompact: a user online with one session, no text, no privacy
// setting, is held in a 64-byte view and a few dozen packed bytes, not its
// 260-byte payload (issue 23: bytes per user held on a node).
func TestViewIsCompact(t *testing.T) {
	if n := unsafe.Sizeof(view{}); n > 64 {
		t.Fatalf("a view is %d bytes, want at most 64", n)
	}
	a := packedSamples()[0]
	v := newView(a, a.AppendJSON(nil), nil, packRest(nil, a))
	if v.more != nil {
		t.Fatalf("a user with no text or privacy setting has more: %+v", v.more)
	}
	if n := len(v.rest); n > 48 {
		t.Fatalf("packed rest is %d bytes, want at most 48 (payload %d)", n, len(a.AppendJSON(nil)))
	}
}

// TestUnpackRestRefusesWhatPackRestDidNotWrite: a cut or grown packed form
// reads as not packRest's, never as something else, and never panics.
func TestUnpackRestRefusesWhatPackRestDidNotWrite(t *testing.T) {
	for _, a := range packedSamples() {
		b := packRest(nil, a)
		for n := range len(b) {
			var got presence.Aggregate
			if unpackRest(b[:n], &got, nil) {
				t.Fatalf("%s: the first %d of %d bytes read as whole", a.User, n, len(b))
			}
		}
		var got presence.Aggregate
		if unpackRest(append(b, 0), &got, nil) {
			t.Fatalf("%s: a byte too many read as whole", a.User)
		}
	}
}

// FuzzViewPayload holds a view to the payload it was made from: whatever
// the fields, payload writes presence.Aggregate.AppendJSON's bytes again;
// and unpackRest reads any bytes without panicking.
func FuzzViewPayload(f *testing.F) {
	f.Add("alice", "online", "", uint64(1), int64(1_764_000_000_123_456_789), int64(0), "", "", int64(0), "phone", uint64(1), "node-a", "phone", "busy", int64(1_764_000_000_000_000_000), []byte{0, 1, 5})
	f.Add("bob", "offline", "gone", uint64(1<<63), int64(-1), int64(1<<62), "server_shutdown", "flaky", int64(-1_000_000_123), "", uint64(0), "", "", "x", int64(0), []byte{7, 200, 1})
	f.Fuzz(func(t *testing.T, user, status, text string, version uint64, since, lastSeen int64, reason, link string, next int64,
		id string, epoch uint64, node, device, sstatus string, connected int64, junk []byte) {
		at := func(ns int64) time.Time {
			if ns == 0 {
				return time.Time{}
			}
			return time.Unix(ns/1e9, ns%1e9).UTC() // seconds and nanoseconds: any year
		}
		a := presence.Aggregate{User: user, Status: presence.Status(status), Text: text, Version: version, Since: at(since), LastSeen: at(lastSeen*1000 + 7),
			Reason: presence.EndReason(reason), Link: link, NextExpected: at(next)}
		if id != "" || connected != 0 {
			a.Sessions = []presence.SessionView{{ID: id, Epoch: epoch, Node: node, Device: device, Status: presence.Status(sstatus), ConnectedAt: at(connected)},
				{ID: device, Epoch: epoch + 1, Node: node, Device: id, Status: presence.Online, ConnectedAt: at(connected / 3)}}
		}
		want := a.AppendJSON(nil)
		if a.Version == 0 {
			return // never published: the publisher holds no view of version 0
		}
		v := newView(a, want, nil, packRest(nil, a))
		if got := v.payload(a.User); !bytes.Equal(got, want) {
			t.Fatalf("payload\n got %s\nwant %s", got, want)
		}
		var got presence.Aggregate
		unpackRest(junk, &got, make([]presence.SessionView, 1))
	})
}
