package presence

// Names and texts.
//
// A user name is an identity: authentication gives it, it becomes one topic
// level of presence/users/{user}, and observers read it. So it follows the
// spirit of the PRECIS IdentifierClass (RFC 8264, profiled for user names by
// RFC 8265): a name that looks like another, or hides part of itself, is
// refused. A device label follows the same rules with a space allowed
// inside. A session id (the MQTT client id) is opaque: only characters that
// cannot be shown safely are refused. A status or account text is free text
// without control characters or bidi controls.
//
// Normalisation. Names are never rewritten: a name must already be in
// Unicode Normalization Form C (NFC), and one that is not is refused with
// its NFC spelling in the error. Silently normalising would make two
// spellings that authentication tells apart ("é" as one code point, or as
// "e" and a combining accent) one user; refusing them keeps one spelling per
// identity without ever merging two. The same holds for compatibility
// characters (fullwidth letters, ligatures, superscripts, mathematical
// letters): a name that NFKC would change is refused rather than folded.
// Texts are not normalised either; they are shown, not compared.

import (
	"fmt"
	"slices"
	"sort"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Limits on names and texts.
const (
	MaxUserBytes      = 128
	MaxDeviceBytes    = 64
	MaxSessionIDBytes = 256
	MaxTextBytes      = 256
	MaxSetPayload     = 1024
)

// nameRules say what one kind of name may hold.
type nameRules struct {
	kind       string // "user", "device", "session id": for errors
	max        int    // bytes
	identifier bool   // no space or default-ignorable character, no leading combining mark, NFKC-stable, one script
	topicLevel bool   // no '/', '+' or '#', no leading '$': the name is a topic level
	innerSpace bool   // U+0020 allowed between other characters (with identifier)
}

var (
	userRules    = nameRules{kind: "user", max: MaxUserBytes, identifier: true, topicLevel: true}
	deviceRules  = nameRules{kind: "device", max: MaxDeviceBytes, identifier: true, innerSpace: true}
	sessionRules = nameRules{kind: "session id", max: MaxSessionIDBytes}
	groupRules   = nameRules{kind: "group", max: MaxUserBytes, identifier: true, topicLevel: true}
)

// ValidUser checks a user name: it becomes one topic level of
// presence/users/{user}. A user name is 1 to MaxUserBytes bytes of UTF-8 in
// NFC, and refuses:
//   - control characters (Cc), format characters (Cf: bidi controls, zero
//     width spaces and joiners, the soft hyphen, the BOM, ...), private-use
//     characters (Co), surrogates (Cs) and unassigned code points (Cn,
//     noncharacters included);
//   - every space (Zs, Zl, Zp and the White_Space characters) and the other
//     default-ignorable characters (variation selectors, Hangul fillers, the
//     combining grapheme joiner), which show as nothing;
//   - a combining mark first, which would sit on whatever precedes the name;
//   - characters with a compatibility decomposition (NFKC changes them:
//     fullwidth "ａ", "ﬁ", "²", mathematical "𝐚"), except the Thai and Lao
//     vowel AM (U+0E33, U+0EB3), which those scripts write every day;
//   - letters of more than one script (UTS #39 "single script": Latin "a"
//     with Cyrillic "а" is refused). Characters of the Common and Inherited
//     scripts (ASCII digits, '-', '_', '.', combining accents) go with any
//     script, and Han goes with Hiragana and Katakana (Japanese), with
//     Hangul (Korean) and with Bopomofo;
//   - '/', '+' and '#', and a leading '$' (MQTT topic syntax).
func ValidUser(s string) error { return validName(userRules, s) }

// ValidGroup checks a group name: it becomes one topic level of
// presence/groups/{group}, under the rules of ValidUser.
func ValidGroup(s string) error { return validName(groupRules, s) }

// ValidDevice checks a device label: the rules of ValidUser, except that a
// space U+0020 may stand between other characters (not first or last), and
// that '/', '+', '#' and a leading '$' are allowed (a label is never a topic
// level). It is 1 to MaxDeviceBytes bytes.
func ValidDevice(s string) error { return validName(deviceRules, s) }

// ValidSessionID checks a session id (the MQTT client id): 1 to
// MaxSessionIDBytes bytes of UTF-8 in NFC without control (Cc), format (Cf),
// private-use (Co) or surrogate (Cs) characters and without unassigned code
// points (Cn). Anything else is allowed: client ids are opaque.
func ValidSessionID(s string) error { return validName(sessionRules, s) }

// ValidText checks a status or account text: at most MaxTextBytes bytes of
// UTF-8. It refuses control characters (Cc: ESC, newline, tab, DEL, the C1
// controls) and the bidi controls (U+061C, U+200E, U+200F, U+202A-U+202E,
// U+2066-U+2069), which could reorder what is shown around the text. It keeps
// every other character: the zero width joiner and non-joiner, variation
// selectors and emoji tags, which emoji and several scripts need, and
// unassigned code points (newer emoji). Errors wrap ErrBadPayload.
func ValidText(s string) error {
	if len(s) > MaxTextBytes {
		return fmt.Errorf("%w: text is %d bytes, at most %d", ErrBadPayload, len(s), MaxTextBytes)
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return fmt.Errorf("%w: text is not valid UTF-8 (byte 0x%02X at byte %d)", ErrBadPayload, s[i], i)
			}
		}
		var why string
		switch {
		case unicode.Is(unicode.Cc, r):
			why = "a control character"
		case isBidiControl(r):
			why = "a bidi control"
		default:
			continue
		}
		return fmt.Errorf("%w: text has %s (%s) at byte %d", ErrBadPayload, codePoint(r), why, i)
	}
	return nil
}

// isBidiControl reports whether r is one of the explicit bidirectional
// formatting characters (Unicode's Bidi_Control property).
func isBidiControl(r rune) bool {
	switch {
	case r == '\u061C', r == '\u200E', r == '\u200F':
		return true
	case r >= '\u202A' && r <= '\u202E':
		return true
	case r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// codePoint writes r as U+XXXX.
func codePoint(r rune) string { return fmt.Sprintf("U+%04X", r) }

// assigned are the general categories of every assigned code point; what
// none of them holds is unassigned (Cn). (Go's unicode.C holds Cn too.)
var assigned = []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z,
	unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs}

// refused says why r cannot stand in a name under rules, or "" when it can.
func (n nameRules) refused(r rune) string {
	switch {
	case unicode.Is(unicode.Cc, r):
		return "a control character"
	case isBidiControl(r):
		return "a bidi control"
	case unicode.Is(unicode.Cf, r):
		return "an invisible format character"
	case unicode.Is(unicode.Co, r):
		return "a private-use character"
	case unicode.Is(unicode.Cs, r):
		return "a surrogate"
	case !unicode.In(r, assigned...):
		return "an unassigned code point"
	case !n.identifier:
		return ""
	case r == ' ' && n.innerSpace:
		return ""
	case unicode.Is(unicode.Z, r) || unicode.IsSpace(r):
		return "a space"
	case unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector):
		return "an invisible character"
	}
	return ""
}

// compatibility reports whether r has a compatibility decomposition, which
// NFKC would apply. r is taken from a string in NFC.
func compatibility(r rune) bool {
	return r >= utf8.RuneSelf && r != '\u0E33' && r != '\u0EB3' && !norm.NFKC.IsNormalString(string(r))
}

func validName(n nameRules, s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty %s", ErrBadName, n.kind)
	}
	if len(s) > n.max {
		return fmt.Errorf("%w: %s is %d bytes, at most %d", ErrBadName, n.kind, len(s), n.max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrBadName, n.kind, s)
	}
	for i, r := range s {
		if why := n.refused(r); why != "" {
			return fmt.Errorf("%w: %s %q has %s (%s) at byte %d", ErrBadName, n.kind, s, codePoint(r), why, i)
		}
		if n.topicLevel && (r == '/' || r == '+' || r == '#') {
			return fmt.Errorf("%w: %s %q has %q, which cannot stand in a topic level", ErrBadName, n.kind, s, r)
		}
	}
	if n.topicLevel && s[0] == '$' {
		return fmt.Errorf("%w: %s %q starts with $", ErrBadName, n.kind, s)
	}
	if n.innerSpace && (s[0] == ' ' || s[len(s)-1] == ' ') {
		return fmt.Errorf("%w: %s %q starts or ends with a space", ErrBadName, n.kind, s)
	}
	if !norm.NFC.IsNormalString(s) {
		return fmt.Errorf("%w: %s %q is not in Unicode normalization form C (NFC) from byte %d; its NFC spelling is %q",
			ErrBadName, n.kind, s, norm.NFC.QuickSpanString(s), norm.NFC.String(s))
	}
	if !n.identifier {
		return nil
	}
	for i, r := range s {
		if compatibility(r) {
			return fmt.Errorf("%w: %s %q has %s (a compatibility variant of %q) at byte %d",
				ErrBadName, n.kind, s, codePoint(r), norm.NFKC.String(string(r)), i)
		}
	}
	if first, _ := utf8.DecodeRuneInString(s); unicode.Is(unicode.M, first) {
		return fmt.Errorf("%w: %s %q starts with the combining mark %s", ErrBadName, n.kind, s, codePoint(first))
	}
	return singleScript(n.kind, s)
}

// singleScript refuses a name whose letters come from more than one script,
// after UTS #39's "single script" with augmented script sets: a character of
// the Common or Inherited script goes with any script, and Han, Hiragana,
// Katakana, Hangul and Bopomofo combine as Japanese, Korean and Han with
// Bopomofo write them. It uses each character's Script property
// (Script_Extensions is not in Go's tables), so characters such as the
// Japanese prolonged sound mark, whose script is Common, go with any script.
func singleScript(kind, s string) error {
	var (
		set        []string // resolved scripts so far; nil: any
		first      rune     // the first character with a script
		firstAt    int
		firstName  string
		lastScript *script // a cache: names are mostly of one script
	)
	for i, r := range s {
		sc := scriptOf(r, lastScript)
		if sc == nil || sc == lastScript {
			continue // no script, or the one just seen: the set stays
		}
		lastScript = sc
		if set == nil {
			set, first, firstAt, firstName = sc.augmented, r, i, sc.name
			continue
		}
		set = intersect(set, sc.augmented)
		if len(set) == 0 {
			return fmt.Errorf("%w: %s %q mixes scripts: %s (%s at byte %d) with %s (%s at byte %d)",
				ErrBadName, kind, s, firstName, codePoint(first), firstAt, sc.name, codePoint(r), i)
		}
	}
	return nil
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// script is one Unicode script with its UTS #39 augmented script set.
type script struct {
	name      string
	table     *unicode.RangeTable
	augmented []string
}

var latin = &script{name: "Latin", table: unicode.Latin, augmented: []string{"Latin"}}

// scripts are every script but Common and Inherited, sorted by name.
var scripts = func() []*script {
	// Han-based writing systems, after UTS #39 section 5.1.
	augment := map[string][]string{
		"Han":      {"Han", "Japanese", "Korean", "Han with Bopomofo"},
		"Hiragana": {"Hiragana", "Japanese"},
		"Katakana": {"Katakana", "Japanese"},
		"Hangul":   {"Hangul", "Korean"},
		"Bopomofo": {"Bopomofo", "Han with Bopomofo"},
	}
	var out []*script
	for name, table := range unicode.Scripts {
		if name == "Common" || name == "Inherited" {
			continue
		}
		if name == "Latin" {
			out = append(out, latin)
			continue
		}
		aug := augment[name]
		if aug == nil {
			aug = []string{name}
		}
		out = append(out, &script{name: name, table: table, augmented: aug})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}()

// scriptOf returns r's script, nil for Common and Inherited. It tries hint
// first.
func scriptOf(r rune, hint *script) *script {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' {
			return latin
		}
		return nil
	}
	if hint != nil && unicode.Is(hint.table, r) {
		return hint
	}
	for _, sc := range scripts {
		if unicode.Is(sc.table, r) {
			return sc
		}
	}
	return nil
}
