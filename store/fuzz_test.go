package store

import (
	"cmp"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/presenced/presenced/presence"
)

// Seeds of the fuzz targets are in testdata/fuzz/<FuzzName>.

// inPayloadRange reports whether every time of p can be written as an RFC
// 3339 time (years 0 to 9999), which is what ParseAggregate reads back.
// decodeChange and decodeUser refuse any other time, so every aggregate
// they accept must be in range.
func inPayloadRange(p presence.Aggregate) bool {
	ok := func(t time.Time) bool { return t.IsZero() || (t.Year() >= 0 && t.Year() <= 9999) }
	if !ok(p.Since) || !ok(p.LastSeen) || !ok(p.NextExpected) {
		return false
	}
	for _, s := range p.Sessions {
		if !ok(s.ConnectedAt) {
			return false
		}
	}
	return true
}

// wireMillis is a time as the store writes it, in milliseconds, 0 for none.
// The epoch itself is 0 too: the wire cannot tell it from none ("0" is
// none, and decodeChange refuses "-0" and "00"), so a comparison through the wire uses wireMillis.
func wireMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// sameTime compares times by instant; sameWireTime as the wire carries them.
func sameTime(a, b time.Time) bool     { return a.Equal(b) }
func sameWireTime(a, b time.Time) bool { return wireMillis(a) == wireMillis(b) }

// sameAggregate compares two aggregates, times with same.
func sameAggregate(a, b presence.Aggregate, same func(a, b time.Time) bool) bool {
	if a.User != b.User || a.Status != b.Status || a.Text != b.Text || a.Version != b.Version ||
		!same(a.Since, b.Since) || !same(a.LastSeen, b.LastSeen) || len(a.Sessions) != len(b.Sessions) {
		return false
	}
	for i, s := range a.Sessions {
		o := b.Sessions[i]
		if s.ID != o.ID || s.Epoch != o.Epoch || s.Node != o.Node || s.Device != o.Device || s.Status != o.Status || !same(s.ConnectedAt, o.ConnectedAt) {
			return false
		}
	}
	return true
}

// validStrings reports whether every string of p is valid UTF-8.
func validStrings(p presence.Aggregate) bool {
	all := []string{p.User, string(p.Status), p.Text}
	for _, s := range p.Sessions {
		all = append(all, s.ID, s.Node, s.Device, string(s.Status))
	}
	for _, s := range all {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// wireMs writes a time as common.lua does: milliseconds, "" for none.
func wireMs(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// encodeChange writes p as common.lua publishes it on the change feed.
func encodeChange(t *testing.T, p presence.Aggregate) []byte {
	t.Helper()
	views := make([]map[string]string, 0, len(p.Sessions))
	for _, s := range p.Sessions {
		views = append(views, map[string]string{
			"id": s.ID, "e": strconv.FormatUint(s.Epoch, 10), "n": s.Node, "d": s.Device, "st": string(s.Status), "c": wireMs(s.ConnectedAt),
		})
	}
	var ss any = views
	if len(views) == 0 {
		ss = map[string]string{} // cjson writes an empty table as {}
	}
	m := map[string]any{
		"u": p.User, "v": strconv.FormatUint(p.Version, 10), "st": string(p.Status), "tx": p.Text,
		"since": wireMs(p.Since), "ls": wireMs(p.LastSeen), "ss": ss,
	}
	if !p.NextExpected.IsZero() {
		m["nx"] = wireMs(p.NextExpected) // dormant only (common.lua)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkAggregate checks what a decoded aggregate promises: a non-nil
// session list and a valid payload; and, when its strings are UTF-8 (as
// JSON decoding makes them, and as the writers of a user's hash keep them),
// the same value again when written as a feed message and decoded, and, for
// times a payload can carry, the same value back through the presence
// payload (AppendJSON, then ParseAggregate).
func checkAggregate(t *testing.T, what string, p presence.Aggregate, wantUTF8 bool) {
	t.Helper()
	if p.Sessions == nil {
		t.Fatalf("%s: nil session list", what)
	}
	if !json.Valid(p.AppendJSON(nil)) {
		t.Fatalf("%s: AppendJSON is not JSON: %s", what, p.AppendJSON(nil))
	}
	if !validStrings(p) {
		if wantUTF8 {
			t.Fatalf("%s: a string is not UTF-8: %+v", what, p)
		}
		return // AppendJSON writes U+FFFD for the bad bytes: nothing comes back the same
	}
	again, _, err := decodeChange(encodeChange(t, p))
	if err != nil || !sameAggregate(again, p, sameWireTime) {
		t.Fatalf("%s: written as a feed message and decoded again:\n%+v, %v\nwant %+v", what, again, err, p)
	}
	payload := p.AppendJSON(nil)
	if !inPayloadRange(p) {
		t.Fatalf("%s: accepted a time no payload can carry: %+v", what, p)
	}
	back, err := presence.ParseAggregate(payload)
	if err != nil || !sameAggregate(back, p, sameTime) {
		t.Fatalf("%s: the payload %s parses back as\n%+v, %v\nwant %+v", what, payload, back, err, p)
	}
}

// FuzzDecodeChange decodes feed messages. It never panics; a failure
// returns the zero aggregate; an accepted message gives an aggregate that
// checkAggregate accepts, whose version is the message's "v".
func FuzzDecodeChange(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		p, _, err := decodeChange(b)
		if err != nil {
			if !reflect.DeepEqual(p, presence.Aggregate{}) {
				t.Fatalf("failed decodeChange(%q) returned %+v", b, p)
			}
			return
		}
		var w struct {
			V string `json:"v"`
		}
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatalf("decodeChange accepted %q, which is not a JSON object: %v", b, err)
		}
		if v, err := strconv.ParseUint(w.V, 10, 64); err != nil || v != p.Version {
			t.Fatalf("decodeChange(%q): version %d, the message says %q", b, p.Version, w.V)
		}
		checkAggregate(t, "decodeChange("+strconv.Quote(string(b))+")", p, true)
	})
}

// parseHash reads a user's hash from the fuzzer's bytes: one field=value a
// line.
func parseHash(b string) map[string]string {
	h := make(map[string]string)
	for _, line := range strings.Split(b, "\n") {
		if f, v, ok := strings.Cut(line, "="); ok {
			h[f] = v
		}
	}
	return h
}

// FuzzDecodeUser decodes user hashes (HGETALL). It never panics; a hash
// without a version is no aggregate; an accepted one gives a record and its
// aggregate that agree: the record's name and account are the hash's, its
// Current is the aggregate, its live sessions are sorted by id and are the
// aggregate's views, sorted by connection time then id, and last seen is
// set only offline. The aggregate passes checkAggregate; its strings are
// UTF-8 when the user name and the hash's values are.
func FuzzDecodeUser(f *testing.F) {
	f.Fuzz(func(t *testing.T, user string, hash string) {
		h := parseHash(hash)
		u, p, ok, err := decodeUser(user, h)
		if err != nil || !ok {
			if ok || !reflect.DeepEqual(p, presence.Aggregate{}) {
				t.Fatalf("decodeUser(%q, %q) = ok %v, %+v, %v", user, h, ok, p, err)
			}
			if err == nil && h["v"] != "" {
				t.Fatalf("decodeUser(%q, %q): a version but no aggregate", user, h)
			}
			if u.Name != user || u.Account.Text != h["at"] || string(u.Account.Status) != h["as"] || u.LastWords != h["lw"] {
				t.Fatalf("decodeUser(%q, %q) record %+v", user, h, u)
			}
			return
		}
		what := "decodeUser(" + strconv.Quote(user) + ", " + strconv.Quote(hash) + ")"
		if u.Name != user || p.User != user || u.Account.Text != h["at"] || string(u.Account.Status) != h["as"] || u.LastWords != h["lw"] {
			t.Fatalf("%s: record %+v, aggregate of %q", what, u, p.User)
		}
		cur := p
		cur.Ended = nil // a read reports the last ended; Current does not keep them
		if !reflect.DeepEqual(u.Current, cur) {
			t.Fatalf("%s: Current %+v, aggregate %+v", what, u.Current, p)
		}
		if !reflect.DeepEqual(p.Ended, u.RecentlyEnded()) {
			t.Fatalf("%s: aggregate's ended %+v, the record's %+v", what, p.Ended, u.Ended)
		}
		if v, err := strconv.ParseUint(h["v"], 10, 64); err != nil || v != p.Version {
			t.Fatalf("%s: version %d, the hash says %q", what, p.Version, h["v"])
		}
		if p.Status != presence.Offline && p.Status != presence.Dormant && !p.LastSeen.IsZero() || !u.LastSeen.Equal(p.LastSeen) {
			t.Fatalf("%s: status %s, last seen %v (record %v)", what, p.Status, p.LastSeen, u.LastSeen)
		}
		if !slices.IsSortedFunc(u.Sessions, func(a, b presence.Session) int { return strings.Compare(a.ID, b.ID) }) {
			t.Fatalf("%s: live sessions not sorted by id", what)
		}
		if !slices.IsSortedFunc(p.Sessions, func(a, b presence.SessionView) int {
			if c := cmp.Compare(wireMillis(a.ConnectedAt), wireMillis(b.ConnectedAt)); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		}) {
			t.Fatalf("%s: views not sorted by connection time (ms), then id: %+v", what, p.Sessions)
		}
		if len(p.Sessions) != len(u.Sessions) {
			t.Fatalf("%s: %d views of %d live sessions", what, len(p.Sessions), len(u.Sessions))
		}
		for _, v := range p.Sessions {
			i := slices.IndexFunc(u.Sessions, func(s presence.Session) bool {
				return s.ID == v.ID && s.Epoch == v.Epoch && s.Node == v.Node && s.Device == v.Device && s.Status == v.Status &&
					sameWireTime(s.ConnectedAt, v.ConnectedAt)
			})
			if i < 0 {
				t.Fatalf("%s: view %+v is no live session", what, v)
			}
		}
		wantUTF8 := utf8.ValidString(user)
		for _, v := range h {
			wantUTF8 = wantUTF8 && utf8.ValidString(v)
		}
		checkAggregate(t, what, p, wantUTF8)
	})
}

// decodeFeed never panics; what it accepts as a node announcement is valid
// and encodes back to an announcement that decodes the same.
func FuzzDecodeFeed(f *testing.F) {
	f.Add([]byte(`{"nd":{"node":"A","state":"up","sessions":1,"incarnation":"x","at":"2025-03-01T12:00:00.000Z"}}`))
	f.Add([]byte(`{"nd":{"node":"A","state":"down","sessions":0,"incarnation":"x","at":"2025-03-01T12:00:00.000Z","reported_by":"B"}}`))
	f.Add([]byte(`{"nd":1}`))
	f.Add([]byte(`{"u":"amy","v":"1","st":"online","tx":"","since":"1","ls":"","ss":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeFeed(b)
		if err != nil || e.Kind != NodeAnnounced {
			return
		}
		if err := e.NodeStatus.Validate(); err != nil {
			t.Fatalf("decodeFeed(%q) accepted an invalid announcement: %v", b, err)
		}
		again, err := encodeNode(e.NodeStatus)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := decodeFeed(again)
		if err != nil || !e2.NodeStatus.Same(e.NodeStatus) || !e2.NodeStatus.At.Equal(e.NodeStatus.At.Truncate(time.Millisecond)) {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", b, e.NodeStatus, again, e2.NodeStatus, err)
		}
	})
}
