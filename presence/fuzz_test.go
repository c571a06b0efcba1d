package presence

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"
)

func FuzzParseSetRequest(f *testing.F) {
	for _, tc := range validSetPayloads {
		f.Add([]byte(tc.payload))
	}
	for _, tc := range invalidSetPayloads {
		f.Add([]byte(tc.payload))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseSetRequest(b)
		if err != nil {
			if !errors.Is(err, ErrBadPayload) {
				t.Fatalf("ParseSetRequest(%q) error %v is not ErrBadPayload", b, err)
			}
			if !reflect.DeepEqual(r, SetRequest{}) {
				t.Fatalf("failed ParseSetRequest(%q) returned %+v", b, r)
			}
			return
		}
		if len(b) > MaxSetPayload || !utf8.Valid(b) || !json.Valid(b) {
			t.Fatalf("accepted %q: over the limit, not UTF-8 or not JSON", b)
		}
		if trimmed := bytes.TrimLeft(b, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
			t.Fatalf("accepted %q, which is not an object", b)
		}
		switch r.Scope {
		case ScopeSession:
			if r.Status != nil && !r.Status.SessionStatus() {
				t.Fatalf("accepted %q: status %q at session scope", b, *r.Status)
			}
			if r.Device != nil {
				if err := ValidDevice(*r.Device); err != nil {
					t.Fatalf("accepted %q: %v", b, err)
				}
			}
			// A session accepts the update.
			s := NewSession("alice", "c1", 1, "n1", base, testTTL)
			if _, err := s.Update(1, r.Update()); err != nil {
				t.Fatalf("accepted %q, but Session.Update refuses it: %v", b, err)
			}
		case ScopeAccount:
			if r.Status != nil && *r.Status != Online && !r.Status.AccountStatus() {
				t.Fatalf("accepted %q: status %q at account scope", b, *r.Status)
			}
			if r.Device != nil {
				t.Fatalf("accepted %q: device at account scope", b)
			}
			// The account accepts the update.
			if _, err := (User{Name: "alice"}).SetAccount(r.AccountUpdate()); err != nil {
				t.Fatalf("accepted %q, but SetAccount refuses it: %v", b, err)
			}
		default:
			t.Fatalf("accepted %q: scope %q", b, r.Scope)
		}
		if r.Text != nil && (len(*r.Text) > MaxTextBytes || !utf8.ValidString(*r.Text)) {
			t.Fatalf("accepted %q: text of %d bytes (valid UTF-8: %v)", b, len(*r.Text), utf8.ValidString(*r.Text))
		}
		// The text has no control character or bidi control.
		if r.Text != nil && !refText(*r.Text) {
			t.Fatalf("accepted %q: text %q breaks the text rule", b, *r.Text)
		}
	})
}

func FuzzAppendJSON(f *testing.F) {
	for _, s := range trickyTexts {
		f.Add("alice", s, "phone")
		f.Add(s, "text", s)
	}
	f.Fuzz(func(t *testing.T, user, text, device string) {
		p := samplePresence(text)
		p.User = user
		p.Sessions[0].Device = device
		got := p.AppendJSON(nil)
		if !json.Valid(got) {
			t.Fatalf("AppendJSON is not valid JSON: %q", got)
		}
		want, err := json.Marshal(reference(p))
		if err != nil {
			t.Fatal(err)
		}
		if g, w := decodeAny(t, got), decodeAny(t, want); !reflect.DeepEqual(g, w) {
			t.Fatalf("AppendJSON and encoding/json differ:\n%s\n%s", got, want)
		}
		var back refPresence
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ name, in, out string }{
			{"user", user, back.User},
			{"text", text, back.Text},
			{"device", device, back.Sessions[0].Device},
			{"id", text, back.Sessions[1].ID},
		} {
			if utf8.ValidString(c.in) && c.out != c.in {
				t.Fatalf("%s %q came back as %q", c.name, c.in, c.out)
			}
			if !utf8.ValidString(c.out) {
				t.Fatalf("%s %q came back as invalid UTF-8 %q", c.name, c.in, c.out)
			}
		}
		// ParsePresence reads back what AppendJSON wrote.
		q, err := ParseAggregate(got)
		if err != nil {
			t.Fatalf("ParsePresence(%q): %v", got, err)
		}
		if q.User != back.User || q.Text != back.Text {
			t.Fatalf("ParsePresence = %q %q, want %q %q", q.User, q.Text, back.User, back.Text)
		}
	})
}

// FuzzDecodeFlatSet holds the set payload's fast path to encoding/json:
// whatever decodeFlatSet accepts, json.Unmarshal accepts too, with the
// same fields.
func FuzzDecodeFlatSet(f *testing.F) {
	for _, tc := range validSetPayloads {
		f.Add([]byte(tc.payload))
	}
	for _, tc := range invalidSetPayloads {
		f.Add([]byte(tc.payload))
	}
	for _, s := range []string{`{}`, ` { } `, `{"text":null}`, `{"activity":"true"}`, `{"status":true}`, `{"text":"a\u00e9"}`,
		`{"text":"tab	here"}`, `{"status":"away",}`, `{"status":"away"} x`, `{"invisible":false,"last_seen":"quarter"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) || setKeys(b) != nil {
			return // ParseSetRequest refuses these before either decoder
		}
		fast, ok := decodeFlatSet(b)
		if !ok {
			return
		}
		var slow wireSet
		if err := json.Unmarshal(b, &slow); err != nil {
			t.Fatalf("decodeFlatSet accepted %q, json.Unmarshal refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: decodeFlatSet %+v, json.Unmarshal %+v", b, fast, slow)
		}
	})
}
