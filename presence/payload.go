package presence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// TimeLayout is how every time in a payload is written: RFC 3339, UTC, ms.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// AppendJSON appends the payload of presence/users/{user} to b:
//
//	{"user","status","text","version","since","last_seen",["reason",]["link",]["next_expected",]"sessions":[{"id","epoch","node","device","status","connected_at"}]}
//
// last_seen is null while the user is online or was never seen offline.
// reason, link and next_expected are there only when not empty (issue 22).
// It is hand-written because it runs on every change; it produces the same
// document as encoding/json would.
func (p Aggregate) AppendJSON(b []byte) []byte {
	b = append(b, `{"user":`...)
	b = appendString(b, p.User)
	b = append(b, `,"status":`...)
	b = appendString(b, string(p.Status))
	b = append(b, `,"text":`...)
	b = appendString(b, p.Text)
	b = append(b, `,"version":`...)
	b = strconv.AppendUint(b, p.Version, 10)
	b = append(b, `,"since":`...)
	b = appendTime(b, p.Since)
	b = append(b, `,"last_seen":`...)
	b = appendTime(b, p.LastSeen)
	if p.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, string(p.Reason))
	}
	if p.Link != "" {
		b = append(b, `,"link":`...)
		b = appendString(b, p.Link)
	}
	if !p.NextExpected.IsZero() {
		b = append(b, `,"next_expected":`...)
		b = appendTime(b, p.NextExpected)
	}
	b = append(b, `,"sessions":[`...)
	for i, s := range p.Sessions {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendString(b, s.ID)
		b = append(b, `,"epoch":`...)
		b = strconv.AppendUint(b, s.Epoch, 10)
		b = append(b, `,"node":`...)
		b = appendString(b, s.Node)
		b = append(b, `,"device":`...)
		b = appendString(b, s.Device)
		b = append(b, `,"status":`...)
		b = appendString(b, string(s.Status))
		b = append(b, `,"connected_at":`...)
		b = appendTime(b, s.ConnectedAt)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// MarshalJSON implements json.Marshaler with AppendJSON.
func (p Aggregate) MarshalJSON() ([]byte, error) { return p.AppendJSON(nil), nil }

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, TimeLayout)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaping as encoding/json does
// (without its HTML escaping).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// wireAggregate mirrors the payload for decoding.
type wireAggregate struct {
	User     string        `json:"user"`
	Status   Status        `json:"status"`
	Text     string        `json:"text"`
	Version  uint64        `json:"version"`
	Since    time.Time     `json:"since"`
	LastSeen *time.Time    `json:"last_seen"`
	Reason   EndReason     `json:"reason"`
	Link     string        `json:"link"`
	Next     *time.Time    `json:"next_expected"`
	Sessions []SessionView `json:"sessions"`
}

// ParseAggregate decodes a presence/users/{user} payload.
func ParseAggregate(b []byte) (Aggregate, error) {
	var w wireAggregate
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&w); err != nil {
		return Aggregate{}, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	p := Aggregate{User: w.User, Status: w.Status, Text: w.Text, Version: w.Version, Since: w.Since, Sessions: w.Sessions,
		Reason: w.Reason, Link: w.Link}
	if w.LastSeen != nil {
		p.LastSeen = *w.LastSeen
	}
	if w.Next != nil {
		p.NextExpected = *w.Next
	}
	if p.Sessions == nil {
		p.Sessions = []SessionView{}
	}
	return p, nil
}

// Scope says what a presence/set applies to.
type Scope string

// Scopes.
const (
	ScopeSession Scope = "session"
	ScopeAccount Scope = "account"
)

// SetRequest is a decoded presence/set payload. User and session come from
// the connection that sent it, never from the payload.
type SetRequest struct {
	Scope  Scope
	Status *Status
	Text   *string
	Device *string
	// Activity is "activity": true: the user is here. Every presence/set
	// is activity (it is a PUBLISH); this one asks for nothing else, for an
	// application that publishes nothing else (see IdleDecide).
	Activity bool
	// Invisible and LastSeen are the privacy setting (account scope only;
	// issue 22, privacy.go).
	Invisible *bool
	LastSeen  *LastSeenMode
}

// OnlyActivity reports whether the request changes nothing but says the
// user is active: {"activity": true}, or an empty object.
func (r SetRequest) OnlyActivity() bool {
	return r.Status == nil && r.Text == nil && r.Device == nil && r.Invisible == nil && r.LastSeen == nil
}

// Update returns the session-scope change.
func (r SetRequest) Update() Update { return Update{Status: r.Status, Text: r.Text, Device: r.Device} }

// AccountUpdate returns the account-scope change.
func (r SetRequest) AccountUpdate() AccountUpdate {
	return AccountUpdate{Status: r.Status, Text: r.Text, Invisible: r.Invisible, LastSeen: r.LastSeen}
}

type wireSet struct {
	Status   *string `json:"status"`
	Text     *string `json:"text"`
	Device   *string `json:"device"`
	Scope    *string `json:"scope"`
	Activity *bool   `json:"activity"`
	// The privacy keys (privacy.go: setPrivacy).
	Invisible *bool   `json:"invisible"`
	LastSeen  *string `json:"last_seen"`
}

// ParseSetRequest decodes and checks a presence/set payload:
//
//	{"status": "online|idle|away|busy|dnd", "text": "...", "device": "...", "scope": "session|account", "activity": true,
//	 "invisible": true|false, "last_seen": "exact|quarter|hidden"}
//
// invisible and last_seen are the privacy setting, account scope only
// (refused at session scope, with ErrBadPrivacy; see Aggregate.Public).
// Every field is optional; scope defaults to session; activity is true or
// left out (false is refused: every presence/set is activity). At account scope the
// status may be away, busy or dnd, or online to clear the override, and "text": ""
// clears the text; device is not allowed there. The payload is at most 1 KiB
// of UTF-8 JSON, one object with no other fields; the text passes ValidText
// (at most 256 bytes, no control character or bidi control) and the device
// ValidDevice.
func ParseSetRequest(b []byte) (SetRequest, error) {
	// (The field names are exact and appear once: encoding/json alone would
	// take "Status" for "status", and the last of two "status".)
	if len(b) > MaxSetPayload {
		return SetRequest{}, fmt.Errorf("%w: payload is %d bytes, at most %d", ErrBadPayload, len(b), MaxSetPayload)
	}
	if !utf8.Valid(b) {
		return SetRequest{}, fmt.Errorf("%w: payload is not UTF-8", ErrBadPayload)
	}
	if err := setKeys(b); err != nil {
		return SetRequest{}, err
	}
	// setKeys refused every unknown field up to the first value that is
	// not a string, a boolean or null, and every field of wireSet is one of
	// those, so json.Unmarshal (which refuses data after the object) needs
	// no DisallowUnknownFields: a Decoder for it cost 6 of the 18
	// allocations of a set (issue 23).
	w, ok := decodeFlatSet(b)
	if !ok {
		if err := json.Unmarshal(b, &w); err != nil {
			return SetRequest{}, fmt.Errorf("%w: %v", ErrBadPayload, err)
		}
	}
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("null")) {
		return SetRequest{}, fmt.Errorf("%w: payload is null, want an object", ErrBadPayload)
	}
	r := SetRequest{Scope: ScopeSession, Text: w.Text, Device: w.Device}
	if w.Activity != nil {
		if !*w.Activity {
			return SetRequest{}, fmt.Errorf("%w: activity is true or left out (every presence/set is activity)", ErrBadPayload)
		}
		r.Activity = true
	}
	if w.Scope != nil {
		switch Scope(*w.Scope) {
		case ScopeSession, ScopeAccount:
			r.Scope = Scope(*w.Scope)
		default:
			return SetRequest{}, fmt.Errorf("%w: scope %q (want session or account)", ErrBadPayload, *w.Scope)
		}
	}
	if w.Status != nil {
		s, err := ParseStatus(*w.Status)
		if err != nil {
			return SetRequest{}, fmt.Errorf("%w: %v", ErrBadPayload, err)
		}
		if r.Scope == ScopeAccount && s != Online && !s.AccountStatus() {
			return SetRequest{}, fmt.Errorf("%w: status %q at account scope (want away, busy, dnd, or online to clear)", ErrBadPayload, s)
		}
		r.Status = &s
	}
	if r.Text != nil {
		if err := ValidText(*r.Text); err != nil {
			return SetRequest{}, err
		}
	}
	if err := r.setPrivacy(w); err != nil {
		return SetRequest{}, err
	}
	if r.Device != nil {
		if r.Scope == ScopeAccount {
			return SetRequest{}, fmt.Errorf("%w: device is a session field, not allowed at account scope", ErrBadPayload)
		}
		if err := ValidDevice(*r.Device); err != nil {
			return SetRequest{}, fmt.Errorf("%w: %v", ErrBadPayload, err)
		}
	}
	return r, nil
}

// setKeys checks that a presence/set object's field names are among the
// seven, in lower case, each at most once (encoding/json alone takes
// "Status" for "status", and the last of two). It scans the bytes without
// allocating; a value that is not a string, true, false or null, and anything that is
// not a well-formed object, is left to the decoder to refuse.
func setKeys(b []byte) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil
	}
	var seen [7]bool
	for i = skipSpace(b, i+1); i < len(b) && b[i] == '"'; {
		end := i + 1
		for end < len(b) && b[end] != '"' && b[end] != '\\' {
			end++
		}
		if end >= len(b) || b[end] == '\\' {
			return fmt.Errorf("%w: a field name with an escape", ErrBadPayload)
		}
		k := -1
		switch string(b[i+1 : end]) {
		case "status":
			k = 0
		case "text":
			k = 1
		case "device":
			k = 2
		case "scope":
			k = 3
		case "activity":
			k = 4
		case "invisible":
			k = 5
		case "last_seen":
			k = 6
		default:
			return fmt.Errorf("%w: unknown field %q (the fields are status, text, device, scope, activity, invisible and last_seen, in lower case)", ErrBadPayload, b[i+1:end])
		}
		if seen[k] {
			return fmt.Errorf("%w: field %q given twice", ErrBadPayload, b[i+1:end])
		}
		seen[k] = true
		i = skipSpace(b, end+1)
		if i >= len(b) || b[i] != ':' {
			return nil
		}
		i = skipSpace(b, i+1)
		switch {
		case i < len(b) && b[i] == '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			i++
		case bytes.HasPrefix(b[i:], []byte("null")), bytes.HasPrefix(b[i:], []byte("true")):
			i += 4
		case bytes.HasPrefix(b[i:], []byte("false")):
			i += 5
		default:
			return nil
		}
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ',' {
			return nil
		}
		i = skipSpace(b, i+1)
	}
	return nil
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// decodeFlatSet decodes the usual set payload without encoding/json: one
// object whose values are strings without escapes or control characters,
// booleans or null, with the fields setKeys allows. ok is false for
// anything else, and json.Unmarshal decides (FuzzDecodeFlatSet holds the
// two to the same result). It costs a string per value (issue 23:
// encoding/json took 12 of a set's 15 allocations).
func decodeFlatSet(b []byte) (w wireSet, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return wireSet{}, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return wireSet{}, skipSpace(b, i+1) == len(b)
	}
	for {
		key, next, ok := plainString(b, i)
		if !ok {
			return wireSet{}, false
		}
		i = skipSpace(b, next)
		if i >= len(b) || b[i] != ':' {
			return wireSet{}, false
		}
		i = skipSpace(b, i+1)
		var str *string
		var flag *bool
		switch {
		case i < len(b) && b[i] == '"':
			v, next, ok := plainString(b, i)
			if !ok {
				return wireSet{}, false
			}
			str, i = internedValue(v), next
		case bytes.HasPrefix(b[i:], []byte("true")):
			t := true
			flag, i = &t, i+4
		case bytes.HasPrefix(b[i:], []byte("false")):
			f := false
			flag, i = &f, i+5
		case bytes.HasPrefix(b[i:], []byte("null")):
			i += 4
		default:
			return wireSet{}, false
		}
		if !w.set(string(key), str, flag) {
			return wireSet{}, false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return wireSet{}, false
		}
		if b[i] == '}' {
			return w, skipSpace(b, i+1) == len(b)
		}
		if b[i] != ',' {
			return wireSet{}, false
		}
		i = skipSpace(b, i+1)
	}
}

// setWords are the values a set's status, scope and last_seen take, kept
// once so that decoding them allocates nothing.
var setWords = func() map[string]*string {
	m := make(map[string]*string)
	for _, w := range []string{"online", "idle", "away", "busy", "dnd", "offline", "session", "account", "exact", "quarter", "hidden", ""} {
		m[w] = &w
	}
	return m
}()

// internedValue is v as a *string: a shared one for the usual words (never
// written through: wireSet's strings are only read), a new one otherwise.
func internedValue(v []byte) *string {
	if p, ok := setWords[string(v)]; ok { // no allocation: a lookup by a converted []byte
		return p
	}
	s := string(v)
	return &s
}

// plainString reads the JSON string at b[i] when it has no escape and no
// control character: its bytes, and the index after its closing quote.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// set stores a decoded value in field key, as encoding/json would: a
// string or a boolean where the field has that type, null leaving it nil.
// It reports false for a value of the wrong type (encoding/json's error)
// and for a field it does not know (setKeys refused those already).
func (w *wireSet) set(key string, str *string, flag *bool) bool {
	if str == nil && flag == nil {
		return key == "status" || key == "text" || key == "device" || key == "scope" ||
			key == "activity" || key == "invisible" || key == "last_seen"
	}
	switch key {
	case "status":
		w.Status = str
	case "text":
		w.Text = str
	case "device":
		w.Device = str
	case "scope":
		w.Scope = str
	case "last_seen":
		w.LastSeen = str
	case "activity":
		w.Activity = flag
		return str == nil
	case "invisible":
		w.Invisible = flag
		return str == nil
	default:
		return false
	}
	return flag == nil
}
