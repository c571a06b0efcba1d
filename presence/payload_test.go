package presence

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// refLayout is the payload time format, written out independently of TimeLayout.
const refLayout = "2006-01-02T15:04:05.000Z"

// refPresence is the payload as encoding/json would write it from plain fields.
type refPresence struct {
	User     string    `json:"user"`
	Status   string    `json:"status"`
	Text     string    `json:"text"`
	Version  uint64    `json:"version"`
	Since    *string   `json:"since"`
	LastSeen *string   `json:"last_seen"`
	Sessions []refView `json:"sessions"`
}

type refView struct {
	ID          string  `json:"id"`
	Epoch       uint64  `json:"epoch"`
	Node        string  `json:"node"`
	Device      string  `json:"device"`
	Status      string  `json:"status"`
	ConnectedAt *string `json:"connected_at"`
}

func refTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(refLayout)
	return &s
}

func reference(p Aggregate) refPresence {
	r := refPresence{
		User: p.User, Status: string(p.Status), Text: p.Text, Version: p.Version,
		Since: refTime(p.Since), LastSeen: refTime(p.LastSeen), Sessions: []refView{},
	}
	for _, s := range p.Sessions {
		r.Sessions = append(r.Sessions, refView{
			ID: s.ID, Epoch: s.Epoch, Node: s.Node, Device: s.Device, Status: string(s.Status),
			ConnectedAt: refTime(s.ConnectedAt),
		})
	}
	return r
}

// decodeAny decodes a JSON document exactly (numbers kept as json.Number).
func decodeAny(t testing.TB, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if d.More() {
		t.Fatalf("data after the document: %s", b)
	}
	return v
}

var trickyTexts = []string{
	"",
	"plain",
	`she said "hi"`,
	`back\slash \\ \"`,
	"tab\there\nnewline\rreturn",
	"\x00\x01\x07\x08\x0b\x0c\x1b\x1f",
	"\x7f del",
	"bad \xff\xfe utf-8",
	"truncated \xe2\x82",
	"surrogate \xed\xa0\x80",
	"line\u2028para\u2029end",
	"<script>&amp;</script>",
	"zoë 日本語 😀",
	"\ufffd literal replacement",
	strings.Repeat("x", MaxTextBytes),
}

func samplePresence(text string) Aggregate {
	return Aggregate{
		User: "alice", Status: Busy, Text: text, Version: 1796040000000123,
		Since:    base.Add(123456789 * time.Nanosecond),
		LastSeen: time.Time{},
		Sessions: []SessionView{
			{ID: "c1", Epoch: 1796040000000000, Node: "n1", Device: "phone", Status: Online, ConnectedAt: base},
			{ID: text, Epoch: 7, Node: text, Device: text, Status: DND, ConnectedAt: at(time.Second)},
		},
	}
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	kolkata := time.FixedZone("IST", 5*3600+1800)
	var cases []Aggregate
	for _, text := range trickyTexts {
		cases = append(cases, samplePresence(text))
	}
	cases = append(cases,
		Aggregate{},
		Aggregate{User: "bob", Status: Offline, Text: "gone", Version: 1, Since: base.In(kolkata), LastSeen: at(-time.Hour).In(kolkata)},
		Aggregate{User: "bob", Status: Online, Sessions: []SessionView{}},
		Aggregate{User: "bob\xff", Status: Status("we\"ird"), Sessions: []SessionView{{ID: "x"}}},
	)
	for i, p := range cases {
		got := p.AppendJSON(nil)
		if !json.Valid(got) {
			t.Fatalf("case %d: AppendJSON is not valid JSON: %s", i, got)
		}
		want, err := json.Marshal(reference(p))
		if err != nil {
			t.Fatal(err)
		}
		if g, w := decodeAny(t, got), decodeAny(t, want); !reflect.DeepEqual(g, w) {
			t.Fatalf("case %d (text %q):\nAppendJSON    %s\nencoding/json %s", i, p.Text, got, want)
		}
		// The field order is the documented one.
		for j, key := range []string{`{"user":`, `,"status":`, `,"text":`, `,"version":`, `,"since":`, `,"last_seen":`, `,"sessions":[`} {
			if k := bytes.Index(got, []byte(key)); k < 0 || (j == 0 && k != 0) {
				t.Fatalf("case %d: key %s missing or misplaced in %s", i, key, got)
			}
		}
	}
}

func TestAppendJSONExact(t *testing.T) {
	kolkata := time.FixedZone("IST", 5*3600+1800)
	p := Aggregate{
		User: "alice", Status: Online, Text: "say \"hi\"\n\x01\xff\u2028\u2029", Version: 1796040000000123,
		Since: base.Add(123456789 * time.Nanosecond), // sub-ms is cut, not rounded
		Sessions: []SessionView{
			{ID: "c1", Epoch: 5, Node: "n1", Device: "phone", Status: Idle, ConnectedAt: at(time.Hour).In(kolkata)},
			{ID: "c2", Epoch: 6, Node: "n2", Device: "", Status: Online, ConnectedAt: at(999 * time.Microsecond)},
		},
	}
	const want = `{"user":"alice","status":"online","text":"say \"hi\"\n\u0001\ufffd\u2028\u2029","version":1796040000000123,` +
		`"since":"2026-11-30T12:00:00.123Z","last_seen":null,"sessions":[` +
		`{"id":"c1","epoch":5,"node":"n1","device":"phone","status":"idle","connected_at":"2026-11-30T13:00:00.000Z"},` +
		`{"id":"c2","epoch":6,"node":"n2","device":"","status":"online","connected_at":"2026-11-30T12:00:00.000Z"}]}`
	if got := string(p.AppendJSON(nil)); got != want {
		t.Fatalf("AppendJSON =\n%s\nwant\n%s", got, want)
	}

	// Appends to what is in the buffer.
	if got := string(p.AppendJSON([]byte("prefix:"))); got != "prefix:"+want {
		t.Fatalf("AppendJSON to a buffer = %s", got)
	}
	// MarshalJSON is the same document, also through json.Marshal.
	m, err := p.MarshalJSON()
	if err != nil || string(m) != want {
		t.Fatalf("MarshalJSON = %s, %v", m, err)
	}
	m, err = json.Marshal(p)
	if err != nil || string(m) != want {
		t.Fatalf("json.Marshal = %s, %v", m, err)
	}

	// Offline with a last-seen, no sessions.
	off := Aggregate{User: "bob", Status: Offline, Version: 2, Since: at(-time.Hour), LastSeen: at(-time.Hour)}
	const wantOff = `{"user":"bob","status":"offline","text":"","version":2,"since":"2026-11-30T11:00:00.000Z","last_seen":"2026-11-30T11:00:00.000Z","sessions":[]}`
	if got := string(off.AppendJSON(nil)); got != wantOff {
		t.Fatalf("AppendJSON offline =\n%s\nwant\n%s", got, wantOff)
	}
	// Zero since is null too.
	if got := string((Aggregate{}).AppendJSON(nil)); got != `{"user":"","status":"","text":"","version":0,"since":null,"last_seen":null,"sessions":[]}` {
		t.Fatalf("AppendJSON of zero = %s", got)
	}
}

func TestParsePresenceRoundTrip(t *testing.T) {
	for i, p := range []Aggregate{
		samplePresence("hello \"there\" \u2028"),
		{User: "bob", Status: Offline, Text: "bye", Version: 9, Since: at(-time.Hour), LastSeen: at(-time.Hour), Sessions: []SessionView{}},
		{User: "carol", Status: Online, Version: 1, Since: at(1500 * time.Millisecond), Sessions: []SessionView{
			{ID: "c", Epoch: 3, Node: "n", Device: "d", Status: Away, ConnectedAt: at(time.Millisecond)},
		}},
	} {
		// Times are carried in UTC to the millisecond.
		p.Since = p.Since.Truncate(time.Millisecond)
		got, err := ParseAggregate(p.AppendJSON(nil))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got.Since.Location() != time.UTC || (!got.LastSeen.IsZero() && got.LastSeen.Location() != time.UTC) {
			t.Fatalf("case %d: times not in UTC: %v, %v", i, got.Since, got.LastSeen)
		}
		if !got.Since.Equal(p.Since) || !got.LastSeen.Equal(p.LastSeen) {
			t.Fatalf("case %d: times %v %v, want %v %v", i, got.Since, got.LastSeen, p.Since, p.LastSeen)
		}
		if got.User != p.User || got.Status != p.Status || got.Text != p.Text || got.Version != p.Version {
			t.Fatalf("case %d: got %+v\nwant %+v", i, got, p)
		}
		if !got.sameAs(p) || len(got.Sessions) != len(p.Sessions) || got.Sessions == nil {
			t.Fatalf("case %d: sessions %+v, want %+v", i, got.Sessions, p.Sessions)
		}
		// And the same bytes come out again.
		if a, b := got.AppendJSON(nil), p.AppendJSON(nil); !bytes.Equal(a, b) {
			t.Fatalf("case %d: re-encoded\n%s\nwant\n%s", i, a, b)
		}
	}
	// A session-less payload decodes to an empty, non-nil list.
	got, err := ParseAggregate([]byte(`{"user":"a","status":"offline","text":"","version":1,"since":null,"last_seen":null,"sessions":null}`))
	if err != nil || got.Sessions == nil || len(got.Sessions) != 0 || !got.LastSeen.IsZero() {
		t.Fatalf("ParsePresence with null sessions = %+v, %v", got, err)
	}
}

func TestParsePresenceInvalid(t *testing.T) {
	for _, b := range []string{
		``,
		`not json`,
		`[]`,
		`{"user":"a","extra":1}`,
		`{"user":1}`,
		`{"since":"yesterday"}`,
	} {
		if _, err := ParseAggregate([]byte(b)); !errors.Is(err, ErrBadPayload) {
			t.Errorf("ParsePresence(%q) error %v, want ErrBadPayload", b, err)
		}
	}
}

// flatSet is a SetRequest with its pointers followed, for comparison.
type flatSet struct {
	Scope                         Scope
	Status                        Status
	Text, Device                  string
	HasStatus, HasText, HasDevice bool
	Activity                      bool
}

func flatten(r SetRequest) flatSet {
	f := flatSet{Scope: r.Scope, Activity: r.Activity}
	if r.Status != nil {
		f.Status, f.HasStatus = *r.Status, true
	}
	if r.Text != nil {
		f.Text, f.HasText = *r.Text, true
	}
	if r.Device != nil {
		f.Device, f.HasDevice = *r.Device, true
	}
	return f
}

func sessionSet(status Status) flatSet {
	return flatSet{Scope: ScopeSession, Status: status, HasStatus: true}
}

func accountSet(status Status) flatSet {
	return flatSet{Scope: ScopeAccount, Status: status, HasStatus: true}
}

// padTo pads a JSON object with spaces to n bytes.
func padTo(s string, n int) string { return s + strings.Repeat(" ", n-len(s)) }

var validSetPayloads = []struct {
	name    string
	payload string
	want    flatSet
}{
	{"empty object", `{}`, flatSet{Scope: ScopeSession}},
	{"empty object with space", " \n{ }\t", flatSet{Scope: ScopeSession}},
	{"online", `{"status":"online"}`, sessionSet(Online)},
	{"idle", `{"status":"idle"}`, sessionSet(Idle)},
	{"away", `{"status":"away"}`, sessionSet(Away)},
	{"busy", `{"status":"busy"}`, sessionSet(Busy)},
	{"dnd", `{"status":"dnd"}`, sessionSet(DND)},
	{"null status is absent", `{"status":null}`, flatSet{Scope: ScopeSession}},
	{"text", `{"text":"at lunch"}`, flatSet{Scope: ScopeSession, Text: "at lunch", HasText: true}},
	{"empty text", `{"text":""}`, flatSet{Scope: ScopeSession, HasText: true}},
	{"escaped text", `{"text":"a\"b\\c\/\u00e9\ud83d\ude00"}`, flatSet{Scope: ScopeSession, Text: "a\"b\\c/é😀", HasText: true}},
	{"emoji text with joiner and variation selector", `{"text":"👩\u200d💻 ❤\ufe0f"}`, flatSet{Scope: ScopeSession, Text: "👩\u200d💻 ❤\ufe0f", HasText: true}},
	{"lone surrogate becomes U+FFFD", `{"text":"\ud800"}`, flatSet{Scope: ScopeSession, Text: "\ufffd", HasText: true}},
	{"device", `{"device":"phone"}`, flatSet{Scope: ScopeSession, Device: "phone", HasDevice: true}},
	{"device with a space", `{"device":"my phone"}`, flatSet{Scope: ScopeSession, Device: "my phone", HasDevice: true}},
	{"session scope", `{"scope":"session","status":"idle"}`, sessionSet(Idle)},
	{"session scope only", `{"scope":"session"}`, flatSet{Scope: ScopeSession}},
	{"all session fields", `{"status":"busy","text":"call","device":"desk","scope":"session"}`,
		flatSet{Scope: ScopeSession, Status: Busy, HasStatus: true, Text: "call", HasText: true, Device: "desk", HasDevice: true}},
	{"account away", `{"scope":"account","status":"away"}`, accountSet(Away)},
	{"account busy", `{"scope":"account","status":"busy"}`, accountSet(Busy)},
	{"account dnd", `{"scope":"account","status":"dnd"}`, accountSet(DND)},
	{"account online clears", `{"scope":"account","status":"online"}`, accountSet(Online)},
	{"account text", `{"scope":"account","text":"on leave"}`, flatSet{Scope: ScopeAccount, Text: "on leave", HasText: true}},
	{"account text cleared", `{"text":"","scope":"account"}`, flatSet{Scope: ScopeAccount, HasText: true}},
	{"text of 256 bytes", `{"text":"` + strings.Repeat("x", 256) + `"}`, flatSet{Scope: ScopeSession, Text: strings.Repeat("x", 256), HasText: true}},
	{"text of 256 bytes in 2-byte runes", `{"text":"` + strings.Repeat("é", 128) + `"}`, flatSet{Scope: ScopeSession, Text: strings.Repeat("é", 128), HasText: true}},
	{"text of 256 bytes, escaped", `{"text":"` + strings.Repeat(`\u00e9`, 128) + `"}`, flatSet{Scope: ScopeSession, Text: strings.Repeat("é", 128), HasText: true}},
	{"payload of 1024 bytes", padTo(`{"status":"away"}`, MaxSetPayload), sessionSet(Away)},
	{"activity", `{"activity":true}`, flatSet{Scope: ScopeSession, Activity: true}},
	{"activity null is absent", `{"activity":null}`, flatSet{Scope: ScopeSession}},
	{"activity with a status", `{"activity":true,"status":"away"}`, flatSet{Scope: ScopeSession, Status: Away, HasStatus: true, Activity: true}},
	{"activity at account scope", `{"scope":"account","activity":true}`, flatSet{Scope: ScopeAccount, Activity: true}},
}

var invalidSetPayloads = []struct{ name, payload string }{
	{"empty", ``},
	{"not JSON", `status=away`},
	{"JSON array", `[{"status":"away"}]`},
	{"empty array", `[]`},
	{"null", `null`},
	{"null with space", ` null `},
	{"number", `42`},
	{"string", `"away"`},
	{"bool", `true`},
	{"unknown field", `{"status":"away","mood":"happy"}`},
	{"unknown field alone", `{"user":"bob"}`},
	{"field name in capitals", `{"Status":"busy"}`},
	{"field names in other cases", `{"TEXT":"hi","Scope":"account"}`},
	{"a field twice", `{"status":"bogus","status":"busy"}`},
	{"a field twice after an escaped text", `{"text":"a\"b\\","status":"away","status":"busy"}`},
	{"an escaped field name", `{"\u0073tatus":"busy"}`},
	{"unknown status", `{"status":"asleep"}`},
	{"upper-case status", `{"status":"AWAY"}`},
	{"empty status", `{"status":""}`},
	{"offline status", `{"status":"offline"}`},
	{"status not a string", `{"status":1}`},
	{"idle at account scope", `{"scope":"account","status":"idle"}`},
	{"offline at account scope", `{"scope":"account","status":"offline"}`},
	{"device at account scope", `{"scope":"account","device":"phone"}`},
	{"unknown scope", `{"scope":"global"}`},
	{"empty scope", `{"scope":""}`},
	{"text of 257 bytes", `{"text":"` + strings.Repeat("x", 257) + `"}`},
	{"text of 257 bytes, escaped", `{"text":"` + strings.Repeat(`\u00e9`, 128) + `x"}`},
	{"text not a string", `{"text":["a"]}`},
	{"text with an escaped newline", `{"text":"a\nb"}`},
	{"text with an escaped ESC", `{"text":"\u001b[31mred"}`},
	{"text with a raw bidi override", "{\"text\":\"\u202eevil\"}"},
	{"text with an escaped bidi override", `{"text":"\u202eevil"}`},
	{"account text with a bidi isolate", `{"scope":"account","text":"\u2066x\u2069"}`},
	{"empty device", `{"device":""}`},
	{"device too long", `{"device":"` + strings.Repeat("d", MaxDeviceBytes+1) + `"}`},
	{"device with control char", `{"device":"a\u0000b"}`},
	{"device with a zero width space", `{"device":"ph\u200bone"}`},
	{"device with a leading space", `{"device":" phone"}`},
	{"payload over 1024 bytes", padTo(`{"status":"away"}`, MaxSetPayload+1)},
	{"invalid UTF-8 in a string", "{\"text\":\"\xff\"}"},
	{"invalid UTF-8 outside strings", "{\"text\":\"a\"}\xff"},
	{"trailing data", `{"status":"away"} x`},
	{"trailing comma", `{"status":"away"},`},
	{"two objects", `{"status":"away"}{"status":"busy"}`},
	{"two objects with space", `{} {}`},
	{"unterminated", `{"status":"away"`},
	{"activity false", `{"activity":false}`},
	{"activity not a bool", `{"activity":"yes"}`},
	{"activity as a number", `{"activity":1}`},
	{"activity in capitals", `{"Activity":true}`},
	{"activity twice", `{"activity":true,"activity":true}`},
	{"a field twice after activity", `{"activity":true,"status":"bogus","status":"busy"}`},
	{"a field twice after activity false", `{"activity":false,"status":"away","status":"away"}`},
}

func TestParseSetRequest(t *testing.T) {
	for _, tc := range validSetPayloads {
		t.Run("valid/"+tc.name, func(t *testing.T) {
			r, err := ParseSetRequest([]byte(tc.payload))
			if err != nil {
				t.Fatalf("ParseSetRequest(%q): %v", tc.payload, err)
			}
			if got := flatten(r); got != tc.want {
				t.Fatalf("ParseSetRequest(%q) = %+v, want %+v", tc.payload, got, tc.want)
			}
		})
	}
	for _, tc := range invalidSetPayloads {
		t.Run("invalid/"+tc.name, func(t *testing.T) {
			r, err := ParseSetRequest([]byte(tc.payload))
			if !errors.Is(err, ErrBadPayload) {
				t.Fatalf("ParseSetRequest(%q) = %+v, %v; want ErrBadPayload", tc.payload, flatten(r), err)
			}
			if got := flatten(r); got != (flatSet{}) {
				t.Fatalf("failed ParseSetRequest returned %+v", got)
			}
		})
	}
}

func TestSetRequestOnlyActivity(t *testing.T) {
	for in, want := range map[string]bool{`{"activity":true}`: true, `{}`: true, `{"activity":true,"text":""}`: false, `{"status":"online"}`: false} {
		r, err := ParseSetRequest([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if r.OnlyActivity() != want {
			t.Errorf("%s: OnlyActivity %v, want %v", in, r.OnlyActivity(), want)
		}
	}
}

func TestSetRequestUpdates(t *testing.T) {
	r, err := ParseSetRequest([]byte(`{"status":"busy","text":"call","device":"desk"}`))
	if err != nil {
		t.Fatal(err)
	}
	if u := r.Update(); u.Status != r.Status || u.Text != r.Text || u.Device != r.Device || *u.Status != Busy {
		t.Fatalf("Update() = %+v", u)
	}
	a, err := ParseSetRequest([]byte(`{"scope":"account","status":"online","text":""}`))
	if err != nil {
		t.Fatal(err)
	}
	au := a.AccountUpdate()
	if au.Status != a.Status || au.Text != a.Text {
		t.Fatalf("AccountUpdate() = %+v", au)
	}
	// Applied, it clears the override and the text.
	u, err := User{Account: Account{Status: DND, Text: "x"}}.SetAccount(au)
	if err != nil || u.Account != (Account{}) {
		t.Fatalf("SetAccount(AccountUpdate()) = %+v, %v", u.Account, err)
	}
}
