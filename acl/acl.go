package acl

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
)

// ErrSyntax is the error of a line the parser cannot read.
var ErrSyntax = errors.New("acl: syntax error")

// Access is what a rule grants, or Deny.
type Access uint8

// The accesses of a rule.
const (
	Read      Access = 1
	Write     Access = 2
	ReadWrite        = Read | Write
	Deny      Access = 4
)

// rule is one topic or pattern line.
type rule struct {
	access  Access
	topic   string // a topic filter; for a pattern, with %u and %c
	pattern bool
}

// Rules is a parsed file.
type Rules struct {
	anonymous []rule
	users     map[string][]rule
	patterns  []rule
}

// Parse reads a file's text; an error names the line.
func Parse(r io.Reader) (*Rules, error) {
	rs := &Rules{users: map[string][]rule{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	var user *string
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		kw, rest := cutSpace(line)
		switch kw {
		case "user":
			if rest == "" {
				return nil, fmt.Errorf("%w: line %d: user needs a name", ErrSyntax, n)
			}
			u := rest
			user = &u
			if _, ok := rs.users[u]; !ok {
				rs.users[u] = nil
			}
		case "topic", "pattern":
			ru, err := parseRule(rest, kw == "pattern")
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: %s: %v", ErrSyntax, n, kw, err)
			}
			switch {
			case ru.pattern:
				rs.patterns = append(rs.patterns, ru)
			case user == nil:
				rs.anonymous = append(rs.anonymous, ru)
			default:
				rs.users[*user] = append(rs.users[*user], ru)
			}
		default:
			return nil, fmt.Errorf("%w: line %d: unknown keyword %q (user, topic or pattern)", ErrSyntax, n, kw)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrSyntax, n+1, err)
	}
	return rs, nil
}

// parseRule reads "[access] topic".
func parseRule(s string, pattern bool) (rule, error) {
	ru := rule{access: ReadWrite, pattern: pattern}
	first, rest := cutSpace(s)
	switch first {
	case "read":
		ru.access, s = Read, rest
	case "write":
		ru.access, s = Write, rest
	case "readwrite":
		ru.access, s = ReadWrite, rest
	case "deny":
		ru.access, s = Deny, rest
	default:
		if rest != "" { // a misspelt access, not a topic with a space
			return ru, fmt.Errorf("unknown access %q (read, write, readwrite or deny; a topic with a space needs one)", first)
		}
	}
	if s == "" {
		return ru, errors.New("no topic")
	}
	if err := validFilter(s); err != nil {
		return ru, err
	}
	ru.topic = s
	return ru, nil
}

// cutSpace splits s at its first run of spaces or tabs.
func cutSpace(s string) (first, rest string) {
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i:])
}

// validFilter checks MQTT's wildcard rules: + alone in its level, # alone
// in the last.
func validFilter(f string) error {
	levels := strings.Split(f, "/")
	for i, l := range levels {
		switch {
		case l == "#" && i != len(levels)-1:
			return fmt.Errorf("%q: # must be the last level", f)
		case l != "#" && strings.Contains(l, "#"), l != "+" && strings.Contains(l, "+"):
			return fmt.Errorf("%q: a wildcard must be a whole level", f)
		}
	}
	return nil
}

// Allows reports whether a connection of user ("" anonymous) with client id
// clientID may write topic (a topic name), or read topic (a topic name or a
// subscription filter, without its $share/<group>/).
func (rs *Rules) Allows(user, clientID, topic string, write bool) bool {
	want := Read
	if write {
		want = Write
	}
	var own []rule
	if user == "" {
		own = rs.anonymous
	} else {
		own = rs.users[user]
	}
	granted := false
	check := func(ru rule, t string) bool { // false: denied
		if ru.access == Deny {
			// A filter is refused when the deny rule covers it; one that
			// only overlaps is granted, and each delivery checked.
			return !covers(t, topic)
		}
		if ru.access&want != 0 && covers(t, topic) {
			granted = true
		}
		return true
	}
	for _, ru := range own {
		if !check(ru, ru.topic) {
			return false
		}
	}
	for _, ru := range rs.patterns {
		t, ok := expand(ru.topic, user, clientID)
		if ok && !check(ru, t) {
			return false
		}
	}
	return granted
}

// expand substitutes %u and %c; false when the pattern applies to nobody
// here (%u of an anonymous connection, a value bringing in a wildcard).
func expand(p, user, clientID string) (string, bool) {
	if strings.Contains(p, "%u") {
		if user == "" || strings.ContainsAny(user, "+#") {
			return "", false
		}
		p = strings.ReplaceAll(p, "%u", user)
	}
	if strings.Contains(p, "%c") {
		if clientID == "" || strings.ContainsAny(clientID, "+#") {
			return "", false
		}
		p = strings.ReplaceAll(p, "%c", clientID)
	}
	return p, true
}

// covers reports whether every topic filter f can match is matched by the
// rule's filter r (for a topic name: whether r matches it). MQTT's rules:
// # matches the rest, the parent level included (a/# matches a); + one
// level; a topic starting with $ is not matched by a wildcard first level.
func covers(r, f string) bool {
	if strings.HasPrefix(f, "$") && (strings.HasPrefix(r, "+") || strings.HasPrefix(r, "#")) {
		return false
	}
	rl, fl := strings.Split(r, "/"), strings.Split(f, "/")
	for i, x := range rl {
		if x == "#" {
			return true // what f has from here on (or nothing: a/# covers a)
		}
		if i >= len(fl) {
			return false
		}
		y := fl[i]
		switch {
		case y == "#":
			return false // f reads deeper than any rule but #
		case x == "+":
			continue // any one level, + included
		case x != y:
			return false
		}
	}
	return len(rl) == len(fl)
}

// File is a Rules read from a file, read again by Reload.
type File struct {
	path  string
	rules atomic.Pointer[Rules]
}

// Load reads the file at path.
func Load(path string) (*File, error) {
	f := &File{path: path}
	return f, f.Reload()
}

// Reload reads the file again (on SIGHUP); on an error the rules in use
// are kept.
func (f *File) Reload() error {
	fh, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("auth.acl_file: %w", err)
	}
	defer fh.Close()
	rs, err := Parse(fh)
	if err != nil {
		return fmt.Errorf("auth.acl_file %s: %w", f.path, err)
	}
	f.rules.Store(rs)
	return nil
}

// Allows is Rules.Allows of the rules in use.
func (f *File) Allows(user, clientID, topic string, write bool) bool {
	return f.rules.Load().Allows(user, clientID, topic, write)
}
