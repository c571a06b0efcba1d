package presence

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// nameCase is one input to a name check; want is "" for accepted, or a
// fragment the error must hold.
type nameCase struct {
	name, in, want string
}

func checkNames(t *testing.T, check func(string) error, cases []nameCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := check(tc.in)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("%q refused: %v", tc.in, err)
			case tc.want == "":
				return
			case err == nil:
				t.Fatalf("%q accepted, want an error with %q", tc.in, tc.want)
			case !errors.Is(err, ErrBadName):
				t.Fatalf("%q: error %v does not wrap ErrBadName", tc.in, err)
			case !strings.Contains(err.Error(), tc.want):
				t.Fatalf("%q: error %q does not say %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestValidUser(t *testing.T) {
	checkNames(t, ValidUser, []nameCase{
		// Accepted: names in several scripts, with Common and Inherited characters.
		{"ascii", "alice", ""},
		{"ascii with digit and hyphen", "alice-2", ""},
		{"dot and underscore", "a.b_c", ""},
		{"dollar inside", "a$b", ""},
		{"digits only", "1234", ""},
		{"a-ring precomposed", "\u00e5lice", ""},
		{"umlaut", "müller", ""},
		{"accent", "José", ""},
		{"Hawaiian okina", "Hawai\u02bbi", ""},
		{"combining dot with no precomposed form", "q\u0307", ""},
		{"Cyrillic only", "алиса", ""},
		{"Greek with a digit", "Ελένη7", ""},
		{"Han", "李雷", ""},
		{"Han with Hiragana (Japanese)", "山田たろう", ""},
		{"Katakana with Hiragana (Japanese)", "カタカナとひらがな", ""},
		{"Han with Hangul (Korean)", "金민준", ""},
		{"Hangul", "김민준", ""},
		{"Thai with the vowel AM", "กำพล", ""},
		{"Arabic", "محمد", ""},
		{"Hebrew", "שלום", ""},
		{"Devanagari with vowel signs", "देवनागरी", ""},
		{"128 bytes", strings.Repeat("u", MaxUserBytes), ""},
		{"128 bytes of Cyrillic", strings.Repeat("д", MaxUserBytes/2), ""},

		// The examples.
		{"issue: Cyrillic a with Latin", "\u0430lice", "mixes scripts: Cyrillic (U+0430 at byte 0) with Latin (U+006C at byte 2)"},
		{"issue: right-to-left override", "\u202Eecila", "U+202E (a bidi control) at byte 0"},
		{"issue: escape sequence", "alice\u001b[31m", "U+001B (a control character) at byte 5"},

		// Control characters (Cc).
		{"newline", "a\nb", "U+000A (a control character)"},
		{"tab", "a\tb", "U+0009"},
		{"NUL", "a\x00b", "U+0000"},
		{"DEL", "a\x7fb", "U+007F"},
		{"C1 NEL", "a\u0085b", "U+0085 (a control character)"},
		// Format characters (Cf): bidi controls and invisible ones.
		{"LRE", "\u202Aalice", "U+202A (a bidi control)"},
		{"PDF", "alice\u202C", "U+202C (a bidi control)"},
		{"LRI", "\u2066alice\u2069", "U+2066 (a bidi control)"},
		{"PDI", "alice\u2069", "U+2069 (a bidi control)"},
		{"LRM", "alice\u200E", "U+200E (a bidi control) at byte 5"},
		{"RLM", "alice\u200F", "U+200F (a bidi control)"},
		{"Arabic letter mark", "\u061Cمحمد", "U+061C (a bidi control)"},
		{"zero width space", "ali\u200Bce", "U+200B (an invisible format character) at byte 3"},
		{"zero width non-joiner", "ali\u200Cce", "U+200C (an invisible format character)"},
		{"zero width joiner", "ali\u200Dce", "U+200D (an invisible format character)"},
		{"word joiner", "ali\u2060ce", "U+2060 (an invisible format character)"},
		{"byte order mark", "\uFEFFalice", "U+FEFF (an invisible format character) at byte 0"},
		{"soft hyphen", "ali\u00ADce", "U+00AD (an invisible format character)"},
		{"Mongolian vowel separator", "a\u180Eb", "U+180E (an invisible format character)"},
		{"tag character", "alice\U000E0041", "U+E0041 (an invisible format character)"},
		// Private use (Co), unassigned (Cn), surrogates (Cs, only as invalid UTF-8).
		{"private use", "alice\uE000", "U+E000 (a private-use character)"},
		{"supplementary private use", "alice\U000F0000", "U+F0000 (a private-use character)"},
		{"unassigned", "alice\u0378", "U+0378 (an unassigned code point)"},
		{"noncharacter U+FFFF", "alice\uFFFF", "U+FFFF (an unassigned code point)"},
		{"noncharacter U+FDD0", "\uFDD0alice", "U+FDD0 (an unassigned code point)"},
		{"encoded surrogate", "a\xed\xa0\x80b", "not valid UTF-8"},
		{"not UTF-8", "a\xffb", "not valid UTF-8"},
		// Spaces and other invisible characters.
		{"space", "ali ce", "U+0020 (a space) at byte 3"},
		{"no-break space", "alice\u00A0", "U+00A0 (a space)"},
		{"ideographic space", "李\u3000雷", "U+3000 (a space)"},
		{"en quad", "a\u2000b", "U+2000 (a space)"},
		{"line separator", "a\u2028b", "U+2028 (a space)"},
		{"paragraph separator", "a\u2029b", "U+2029 (a space)"},
		{"Hangul filler", "\u3164", "U+3164 (an invisible character)"},
		{"Hangul choseong filler", "\u115F김", "U+115F (an invisible character)"},
		{"variation selector 16", "alice\uFE0F", "U+FE0F (an invisible character)"},
		{"combining grapheme joiner", "a\u034Fb", "U+034F (an invisible character)"},
		// Normalisation.
		{"decomposed e acute", "jose\u0301", "not in Unicode normalization form C (NFC) from byte 3; its NFC spelling is \"josé\""},
		{"decomposed a ring", "a\u030Alice", "its NFC spelling is \"ålice\""},
		{"angstrom sign", "\u212B", "not in Unicode normalization form C"},
		{"leading combining mark", "\u0301alice", "starts with the combining mark U+0301"},
		{"fullwidth letters", "ａｌｉｃｅ", "U+FF41 (a compatibility variant of \"a\") at byte 0"},
		{"ligature", "\uFB01re", "U+FB01 (a compatibility variant of \"fi\")"},
		{"superscript", "alice²", "U+00B2 (a compatibility variant of \"2\")"},
		{"mathematical bold a", "\U0001D41Alice", "U+1D41A (a compatibility variant of \"a\")"},
		{"halfwidth katakana", "ｶﾀｶﾅ", "U+FF76"},
		// Confusables: more than one script.
		{"Greek capital alpha with Latin", "\u0391lice", "mixes scripts: Greek (U+0391 at byte 0) with Latin"},
		{"Latin with one Cyrillic letter", "p\u0430ypal", "mixes scripts: Latin (U+0070 at byte 0) with Cyrillic (U+0430 at byte 1)"},
		{"Cherokee with Latin", "\u13AAlice", "mixes scripts: Cherokee"},
		{"Hiragana with Hangul", "ひらがな김", "mixes scripts: Hiragana"},
		{"Han with Latin", "李lei", "mixes scripts: Han"},
		{"Hebrew with Arabic", "שלוםمحمد", "mixes scripts: Hebrew"},
		// Topic syntax and length, as before.
		{"empty", "", "empty user"},
		{"slash", "a/b", "cannot stand in a topic level"},
		{"plus", "a+b", "cannot stand in a topic level"},
		{"hash", "a#", "cannot stand in a topic level"},
		{"leading dollar", "$SYS", "starts with $"},
		{"129 bytes", strings.Repeat("u", MaxUserBytes+1), "129 bytes, at most 128"},
	})
}

func TestValidDevice(t *testing.T) {
	checkNames(t, ValidDevice, []nameCase{
		{"plain", "phone", ""},
		{"inner space", "my phone", ""},
		{"two words and a digit", "iPhone 15", ""},
		{"apostrophe", "Bob's phone", ""},
		{"slash, plus and hash stay allowed", "desk/2+#1", ""},
		{"leading dollar stays allowed", "$dev", ""},
		{"Cyrillic with a space", "Телефон Алисы", ""},
		{"Han", "电脑", ""},
		{"emoji symbol", "📱 phone", ""},
		{"64 bytes", strings.Repeat("d", MaxDeviceBytes), ""},

		{"empty", "", "empty device"},
		{"65 bytes", strings.Repeat("d", MaxDeviceBytes+1), "65 bytes, at most 64"},
		{"leading space", " phone", "starts or ends with a space"},
		{"trailing space", "phone ", "starts or ends with a space"},
		{"only a space", " ", "starts or ends with a space"},
		{"no-break space", "my\u00A0phone", "U+00A0 (a space)"},
		{"tab", "my\tphone", "U+0009 (a control character)"},
		{"NUL", "ph\x00one", "U+0000 (a control character)"},
		{"ESC", "ph\u001bone", "U+001B"},
		{"bidi override", "ph\u202Eone", "U+202E (a bidi control) at byte 2"},
		{"zero width space", "ph\u200Bone", "U+200B (an invisible format character)"},
		{"zero width joiner", "👩\u200D💻", "U+200D (an invisible format character)"},
		{"private use", "ph\uE000", "U+E000 (a private-use character)"},
		{"unassigned", "ph\u0378", "U+0378 (an unassigned code point)"},
		{"not NFC", "pho\u0308ne", "its NFC spelling is \"phöne\""},
		{"fullwidth", "ｐｈｏｎｅ", "U+FF50"},
		{"mixed scripts", "iPhone Алисы", "mixes scripts: Latin (U+0069 at byte 0) with Cyrillic (U+0410 at byte 7)"},
		{"Cyrillic o in a Latin label", "ph\u043Ene", "mixes scripts"},
		{"not UTF-8", "ph\xffone", "not valid UTF-8"},
	})
}

func TestValidSessionID(t *testing.T) {
	checkNames(t, ValidSessionID, []nameCase{
		{"plain", "c1", ""},
		{"mosquitto style", "mosq-123abc", ""},
		{"user and device", "bob/phone/2", ""},
		{"wildcards and dollar", "$a+b#", ""},
		{"space", "my client", ""},
		{"no-break space", "a\u00A0b", ""},
		{"mixed scripts", "\u0430lice", ""},
		{"fullwidth", "ｃ１", ""},
		{"emoji", "client 😀", ""},
		{"256 bytes", strings.Repeat("c", MaxSessionIDBytes), ""},

		{"empty", "", "empty session id"},
		{"257 bytes", strings.Repeat("c", MaxSessionIDBytes+1), "257 bytes, at most 256"},
		{"not UTF-8", "c\xff", "not valid UTF-8"},
		{"NUL", "c\x001", "U+0000 (a control character) at byte 1"},
		{"ESC", "\u001b[31m", "U+001B (a control character) at byte 0"},
		{"newline", "c\n", "U+000A"},
		{"bidi override", "\u202Ec1", "U+202E (a bidi control)"},
		{"zero width space", "c\u200B1", "U+200B (an invisible format character)"},
		{"soft hyphen", "c\u00AD1", "U+00AD"},
		{"byte order mark", "\uFEFFc1", "U+FEFF"},
		{"private use", "c\uE000", "U+E000 (a private-use character)"},
		{"unassigned", "c\u0378", "U+0378 (an unassigned code point)"},
		{"noncharacter", "c\uFFFE", "U+FFFE (an unassigned code point)"},
		{"not NFC", "e\u0301", "not in Unicode normalization form C"},
	})
}

// textCases are status and account texts; want is "" for accepted, or a
// fragment the error must hold.
var textCases = []struct{ name, in, want string }{
	{"empty", "", ""},
	{"plain", "at lunch", ""},
	{"several scripts and emoji", "zoë 日本語 😀", ""},
	{"emoji with zero width joiner", "👩\u200D💻 coding", ""},
	{"emoji with variation selector", "\u2764\uFE0F", ""},
	{"flag with tag characters", "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", ""},
	{"Persian with zero width non-joiner", "می\u200Cخواهم", ""},
	{"Arabic", "مرحبا بالعالم", ""},
	{"Hebrew with digits", "שלום 123", ""},
	{"mixed scripts", "\u0430lice", ""},
	{"soft hyphen", "a\u00ADb", ""},
	{"zero width space", "a\u200Bb", ""},
	{"not NFC", "jose\u0301", ""},
	{"line and paragraph separators", "a\u2028b\u2029c", ""},
	{"unassigned (a newer emoji)", "\U0001FAE8", ""},
	{"256 bytes", strings.Repeat("x", MaxTextBytes), ""},
	{"256 bytes of 2-byte runes", strings.Repeat("é", MaxTextBytes/2), ""},

	{"issue: escape sequence", "\u001b[31mred", "U+001B (a control character) at byte 0"},
	{"newline", "line\nbreak", "U+000A (a control character) at byte 4"},
	{"carriage return", "a\rb", "U+000D"},
	{"tab", "a\tb", "U+0009"},
	{"NUL", "a\x00", "U+0000"},
	{"DEL", "a\x7f", "U+007F"},
	{"C1 control", "a\u009b31m", "U+009B"},
	{"right-to-left override", "\u202Eevil", "U+202E (a bidi control) at byte 0"},
	{"left-to-right embedding", "x\u202A", "U+202A (a bidi control)"},
	{"pop directional formatting", "x\u202C", "U+202C (a bidi control)"},
	{"isolate", "\u2066x\u2069", "U+2066 (a bidi control)"},
	{"first strong isolate", "\u2068x", "U+2068 (a bidi control)"},
	{"left-to-right mark", "x\u200E", "U+200E (a bidi control) at byte 1"},
	{"right-to-left mark", "x\u200F", "U+200F (a bidi control)"},
	{"Arabic letter mark", "\u061C", "U+061C (a bidi control)"},
	{"not UTF-8", "a\xff", "not valid UTF-8 (byte 0xFF at byte 1)"},
	{"257 bytes", strings.Repeat("x", MaxTextBytes+1), "257 bytes, at most 256"},
}

// TestValidText checks the text rule on every path that takes a text: the
// presence/set payload, a session update, the account setting and an open.
func TestValidText(t *testing.T) {
	for _, tc := range textCases {
		t.Run(tc.name, func(t *testing.T) {
			payload, err := json.Marshal(map[string]string{"text": tc.in})
			if err != nil {
				t.Fatal(err)
			}
			if !utf8.ValidString(tc.in) {
				// json.Marshal would write U+FFFD: put the raw bytes in.
				payload = []byte(`{"text":"` + tc.in + `"}`)
			}
			_, parseErr := ParseSetRequest(payload)
			s := NewSession("alice", "c1", 1, "n1", base, testTTL)
			_, updateErr := s.Update(1, Update{Text: &tc.in})
			_, accountErr := User{Name: "alice"}.SetAccount(AccountUpdate{Text: &tc.in})
			a := args("c1", "n1", "phone")
			a.Text = tc.in
			for _, c := range []struct {
				path string
				err  error
			}{
				{"ValidText", ValidText(tc.in)},
				{"ParseSetRequest", parseErr},
				{"Session.Update", updateErr},
				{"User.SetAccount", accountErr},
				{"OpenArgs.Validate", a.Validate()},
			} {
				switch {
				case tc.want == "" && c.err != nil:
					t.Errorf("%s refused %q: %v", c.path, tc.in, c.err)
				case tc.want == "":
				case !errors.Is(c.err, ErrBadPayload):
					t.Errorf("%s(%q) = %v, want ErrBadPayload", c.path, tc.in, c.err)
				case (c.path != "ParseSetRequest" || utf8.ValidString(tc.in)) && !strings.Contains(c.err.Error(), tc.want):
					t.Errorf("%s(%q): error %q does not say %q", c.path, tc.in, c.err, tc.want)
				}
			}
		})
	}
}

// TestNameRulesCoverCategories walks whole categories: every code point of
// Cc, Cf, Co, Zs, Zl and Zp is refused in a user name, every Cc and Cf in a
// session id, and every Cc and bidi control in a text.
func TestNameRulesCoverCategories(t *testing.T) {
	for _, cat := range []struct {
		name  string
		table *unicode.RangeTable
		id    bool // refused in a session id too
	}{
		{"Cc", unicode.Cc, true}, {"Cf", unicode.Cf, true}, {"Co", unicode.Co, true},
		{"Zs", unicode.Zs, false}, {"Zl", unicode.Zl, false}, {"Zp", unicode.Zp, false},
	} {
		n := 0
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if !unicode.Is(cat.table, r) {
				continue
			}
			if cat.name == "Co" && n > 100 { // the planes of private use are big and alike
				break
			}
			n++
			name := "x" + string(r) + "y"
			if ValidUser(name) == nil {
				t.Errorf("ValidUser accepts %s (%s)", codePoint(r), cat.name)
			}
			if r != ' ' && ValidDevice(name) == nil {
				t.Errorf("ValidDevice accepts %s (%s)", codePoint(r), cat.name)
			}
			if cat.id && ValidSessionID(name) == nil {
				t.Errorf("ValidSessionID accepts %s (%s)", codePoint(r), cat.name)
			}
			if (cat.name == "Cc" || isBidiControl(r)) && ValidText(name) == nil {
				t.Errorf("ValidText accepts %s (%s)", codePoint(r), cat.name)
			}
		}
		if n == 0 {
			t.Errorf("no code point in %s", cat.name)
		}
	}
	// Every bidi control is a format character.
	for _, r := range []rune{0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069} {
		if !isBidiControl(r) || !unicode.Is(unicode.Cf, r) || !unicode.Is(unicode.Bidi_Control, r) {
			t.Errorf("%s: bidi control %v, Cf %v", codePoint(r), isBidiControl(r), unicode.Is(unicode.Cf, r))
		}
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.Is(unicode.Bidi_Control, r) != isBidiControl(r) {
			t.Errorf("isBidiControl(%s) = %v, Unicode's Bidi_Control says otherwise", codePoint(r), isBidiControl(r))
		}
	}
}

// TestNamesNeverNormalise: a name is accepted only in the spelling given,
// and its other spellings are refused, so two spellings never become one user.
func TestNamesNeverNormalise(t *testing.T) {
	for _, pair := range [][2]string{
		{"\u00e9", "e\u0301"},
		{"\u00c5ngstr\u00f6m", "A\u030angstro\u0308m"},
		{"\uac00", "\u1100\u1161"}, // Hangul syllable GA and its jamo
	} {
		if err := ValidUser(pair[0]); err != nil {
			t.Errorf("NFC %q refused: %v", pair[0], err)
		}
		if err := ValidUser(pair[1]); err == nil {
			t.Errorf("NFD %q accepted", pair[1])
		}
	}
}
