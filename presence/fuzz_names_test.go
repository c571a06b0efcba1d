package presence

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The fuzz targets below compare each check with a reference written out
// plainly from the rules in names.go, independently of its tables and
// caches, and check what an accepted value promises. Their seeds are in
// testdata/fuzz/<FuzzName>.

// category returns r's two-letter general category, "Cn" when it has none.
func category(r rune) string {
	for name, table := range unicode.Categories {
		if len(name) == 2 && unicode.Is(table, r) {
			return name
		}
	}
	return "Cn"
}

// scriptName returns r's script by the Script property.
func scriptName(r rune) string {
	for name, table := range unicode.Scripts {
		if unicode.Is(table, r) {
			return name
		}
	}
	return "Unknown"
}

// oneScript reports whether the letters of s are of one script, counting
// Han with Hiragana and Katakana, Han with Hangul and Han with Bopomofo as
// one (UTS #39 augmented script sets).
func oneScript(s string) bool {
	seen := make(map[string]bool)
	for _, r := range s {
		switch sc := scriptName(r); sc {
		case "Common", "Inherited", "Unknown":
		default:
			seen[sc] = true
		}
	}
	if len(seen) <= 1 {
		return true
	}
	for _, group := range [][]string{{"Han", "Hiragana", "Katakana"}, {"Han", "Hangul"}, {"Han", "Bopomofo"}} {
		in := 0
		for _, sc := range group {
			if seen[sc] {
				in++
			}
		}
		if in == len(seen) {
			return true
		}
	}
	return false
}

// refName is the reference of the name rules.
func refName(s string, max int, identifier, topicLevel, innerSpace bool) bool {
	if s == "" || len(s) > max || !utf8.ValidString(s) || !norm.NFC.IsNormalString(s) {
		return false
	}
	for i, r := range s {
		switch category(r) {
		case "Cc", "Cf", "Co", "Cs", "Cn":
			return false
		}
		if topicLevel && strings.ContainsRune("/+#", r) {
			return false
		}
		if !identifier {
			continue
		}
		if r == ' ' && innerSpace && i > 0 && i < len(s)-1 {
			continue
		}
		if unicode.IsSpace(r) || unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp) {
			return false
		}
		if unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) {
			return false
		}
		// A compatibility decomposition, bar the Thai and Lao vowel AM.
		if r != 0x0E33 && r != 0x0EB3 && norm.NFKD.String(string(r)) != norm.NFD.String(string(r)) {
			return false
		}
		if i == 0 && unicode.Is(unicode.M, r) {
			return false
		}
	}
	if topicLevel && s[0] == '$' {
		return false
	}
	return !identifier || oneScript(s)
}

// refText is the reference of the text rule.
func refText(s string) bool {
	if len(s) > MaxTextBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if category(r) == "Cc" || unicode.Is(unicode.Bidi_Control, r) {
			return false
		}
	}
	return true
}

// checkName runs one name check on s against its reference, and checks what
// an accepted name promises.
func checkName(t *testing.T, what string, check func(string) error, want bool, s string, max int) {
	t.Helper()
	err := check(s)
	if err != nil && !errors.Is(err, ErrBadName) {
		t.Fatalf("%s(%q): error %v does not wrap ErrBadName", what, s, err)
	}
	if got := err == nil; got != want {
		t.Fatalf("%s(%q) accepts: %v, the reference: %v (error %v)", what, s, got, want, err)
	}
	if err != nil {
		return
	}
	if len(s) == 0 || len(s) > max || !utf8.ValidString(s) || norm.NFC.String(s) != s {
		t.Fatalf("%s accepted %q: empty, over %d bytes, not UTF-8 or not NFC", what, s, max)
	}
	// What every name may hold is a session id, and a name is a text too.
	if err := ValidSessionID(s); err != nil {
		t.Fatalf("%s accepted %q, ValidSessionID refuses it: %v", what, s, err)
	}
	if err := ValidText(s); err != nil {
		t.Fatalf("%s accepted %q, ValidText refuses it: %v", what, s, err)
	}
	// It comes back byte for byte through a presence payload.
	p := Aggregate{User: s, Sessions: []SessionView{{ID: s, Device: s}}}
	q, err := ParseAggregate(p.AppendJSON(nil))
	if err != nil || q.User != s || q.Sessions[0].ID != s || q.Sessions[0].Device != s {
		t.Fatalf("%s accepted %q, the payload gives back %+v, %v", what, s, q, err)
	}
}

func FuzzValidUser(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		checkName(t, "ValidUser", ValidUser, refName(s, MaxUserBytes, true, true, false), s, MaxUserBytes)
		if ValidUser(s) == nil {
			// A user name is a device label when it is short enough.
			if err := ValidDevice(s); len(s) <= MaxDeviceBytes && err != nil {
				t.Fatalf("ValidUser accepted %q, ValidDevice refuses it: %v", s, err)
			}
		}
	})
}

func FuzzValidDevice(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		checkName(t, "ValidDevice", ValidDevice, refName(s, MaxDeviceBytes, true, false, true), s, MaxDeviceBytes)
		if ValidDevice(s) == nil {
			if s[0] == ' ' || s[len(s)-1] == ' ' {
				t.Fatalf("ValidDevice accepted %q, with a space at an end", s)
			}
			// Without a space, '/', '+', '#' or a leading '$', it is a user name.
			if !strings.ContainsAny(s, " /+#") && s[0] != '$' {
				if err := ValidUser(s); err != nil {
					t.Fatalf("ValidDevice accepted %q, ValidUser refuses it: %v", s, err)
				}
			}
			// A session update takes it.
			sess := NewSession("alice", "c1", 1, "n1", base, testTTL)
			if got, err := sess.Update(1, Update{Device: &s}); err != nil || got.Device != s {
				t.Fatalf("ValidDevice accepted %q, Session.Update gives %q, %v", s, got.Device, err)
			}
		}
	})
}

func FuzzValidSessionID(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		checkName(t, "ValidSessionID", ValidSessionID, refName(s, MaxSessionIDBytes, false, false, false), s, MaxSessionIDBytes)
		if ValidSessionID(s) == nil {
			// An open takes it, and the session is found under it.
			u, sess, _, err := User{}.Open(args(s, "n1", ""), base)
			if err != nil || sess.ID != s {
				t.Fatalf("ValidSessionID accepted %q, Open gives %q, %v", s, sess.ID, err)
			}
			if _, ok := u.find(s); !ok {
				t.Fatalf("session %q not found after Open", s)
			}
		}
	})
}

func FuzzValidText(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidText(s)
		if err != nil && !errors.Is(err, ErrBadPayload) {
			t.Fatalf("ValidText(%q): error %v does not wrap ErrBadPayload", s, err)
		}
		if got, want := err == nil, refText(s); got != want {
			t.Fatalf("ValidText(%q) accepts: %v, the reference: %v (error %v)", s, got, want, err)
		}
		// Every path that takes a text agrees with ValidText.
		sess := NewSession("alice", "c1", 1, "n1", base, testTTL)
		_, updateErr := sess.Update(1, Update{Text: &s})
		_, accountErr := User{Name: "alice"}.SetAccount(AccountUpdate{Text: &s})
		a := args("c1", "n1", "")
		a.Text = s
		for path, e := range map[string]error{"Session.Update": updateErr, "User.SetAccount": accountErr, "OpenArgs.Validate": a.Validate()} {
			if (e == nil) != (err == nil) || (e != nil && !errors.Is(e, ErrBadPayload)) {
				t.Fatalf("%s(%q) = %v, ValidText = %v", path, s, e, err)
			}
		}
		if !utf8.ValidString(s) {
			return
		}
		// So does presence/set, at both scopes, and it gives the text back.
		for _, scope := range []Scope{ScopeSession, ScopeAccount} {
			b, jerr := json.Marshal(map[string]string{"text": s, "scope": string(scope)})
			if jerr != nil {
				t.Fatal(jerr)
			}
			if len(b) > MaxSetPayload {
				continue
			}
			r, perr := ParseSetRequest(b)
			if (perr == nil) != (err == nil) {
				t.Fatalf("ParseSetRequest(%s) = %v, ValidText = %v", b, perr, err)
			}
			if perr == nil && *r.Text != s {
				t.Fatalf("ParseSetRequest(%s) text %q, want %q", b, *r.Text, s)
			}
		}
	})
}
