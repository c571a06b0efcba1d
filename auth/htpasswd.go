package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode"

	"golang.org/x/crypto/bcrypt"
)

// MaxPasswordBytes is the longest password that AddPassword takes: bcrypt
// reads no further.
const MaxPasswordBytes = 72

// passwordCost is the bcrypt cost of the hashes AddPassword writes. Each
// connection with a password costs one hash of this cost, so it stays at
// the library's default.
const passwordCost = bcrypt.DefaultCost

// maxFileCost is the highest bcrypt cost a password file may use: each
// check of cost 15 already takes seconds of CPU.
const maxFileCost = 15

// passwordTable is a loaded password file.
type passwordTable struct {
	hashes map[string][]byte // user → bcrypt hash
	dummy  []byte            // compared for unknown users: of the file's usual cost
	cache  *verified         // passwords verified since the file was read; nil: no cache
}

// check reports whether password is user's. An unknown user costs one
// bcrypt comparison too, so the time taken does not tell who exists. A
// password longer than bcrypt reads is refused, rather than cut: no
// password set with AddPassword is that long.
func (t *passwordTable) check(user string, password []byte) bool {
	hash, ok := t.hashes[user]
	if !ok || len(password) > MaxPasswordBytes {
		_ = bcrypt.CompareHashAndPassword(t.dummy, password)
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, password) == nil
}

// loadPasswordFile reads and parses a password file.
func loadPasswordFile(path string, cacheSize int) (*passwordTable, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: password file: %w", err)
	}
	hashes, err := parsePasswords(data)
	if err != nil {
		return nil, fmt.Errorf("auth: password file %s: %w", path, err)
	}
	dummy, err := dummyHash(usualCost(hashes))
	if err != nil {
		return nil, fmt.Errorf("auth: password file %s: %w", path, err)
	}
	return &passwordTable{hashes: hashes, dummy: dummy, cache: newVerified(cacheSize)}, nil
}

// dummies holds the dummy hash of each cost made so far (int → []byte):
// one costs as much as a check, so it is made once per process.
var dummies sync.Map

// dummyHash is a hash of the given cost that no password is checked
// against successfully (an unknown user is refused whatever it says).
func dummyHash(cost int) ([]byte, error) {
	if h, ok := dummies.Load(cost); ok {
		return h.([]byte), nil
	}
	h, err := bcrypt.GenerateFromPassword([]byte("presenced: no such user"), cost)
	if err != nil {
		return nil, err
	}
	stored, _ := dummies.LoadOrStore(cost, h)
	return stored.([]byte), nil
}

// parsePasswords parses the lines of a password file.
func parsePasswords(data []byte) (map[string][]byte, error) {
	hashes := make(map[string][]byte)
	lineOf := make(map[string]int)
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line = strings.TrimSuffix(line, "\r")
		if t := strings.TrimSpace(line); t == "" || t[0] == '#' {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: no ':' between user and hash", n)
		}
		if user == "" {
			return nil, fmt.Errorf("line %d: empty user name", n)
		}
		if first, dup := lineOf[user]; dup {
			return nil, fmt.Errorf("line %d: user %q is on line %d too", n, user, first)
		}
		hash = strings.TrimSpace(hash)
		if !isBcrypt(hash) {
			return nil, fmt.Errorf("line %d: user %q: not a bcrypt hash ($2a$, $2b$ or $2y$); write it with `htpasswd -B` or `presenced passwd`", n, user)
		}
		if cost, _ := bcrypt.Cost([]byte(hash)); cost > maxFileCost {
			return nil, fmt.Errorf("line %d: user %q: bcrypt cost %d, at most %d (each connection would take too long)", n, user, cost, maxFileCost)
		}
		hashes[user] = []byte(hash)
		lineOf[user] = n
	}
	return hashes, nil
}

// isBcrypt reports whether s is a well-formed bcrypt hash:
// $2a$, $2b$ or $2y$, a two-digit cost that bcrypt takes, and 53
// characters of bcrypt's base64 (22 of salt, 31 of hash).
func isBcrypt(s string) bool {
	if len(s) != 60 || !(strings.HasPrefix(s, "$2a$") || strings.HasPrefix(s, "$2b$") || strings.HasPrefix(s, "$2y$")) || s[6] != '$' {
		return false
	}
	if _, err := bcrypt.Cost([]byte(s)); err != nil {
		return false
	}
	for _, c := range s[7:] {
		if !(c == '.' || c == '/' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// usualCost is the most common cost among hashes (the higher on a tie), or
// the default cost when there are none.
func usualCost(hashes map[string][]byte) int {
	count := make(map[int]int)
	best, bestN := passwordCost, 0
	for _, h := range hashes {
		c, _ := bcrypt.Cost(h) // checked when parsed
		count[c]++
		if n := count[c]; n > bestN || n == bestN && c > best {
			best, bestN = c, n
		}
	}
	return best
}

// AddPassword sets user's password in the password file at path, creating
// the file (mode 0600) when it does not exist. It hashes the password with
// bcrypt, replaces the user's line or else adds one at the end, and keeps
// every other line, comments included, as it was. It writes a temporary
// file beside the old one and renames it over it, so a reader sees either
// the old file or the new one; the new file keeps the old one's mode and,
// when the process may set it, its owner. Two AddPassword calls at once on
// one file may lose one of the changes.
//
// user must not be empty, start with '#', or hold ':' or a control
// character; password must be 1 to MaxPasswordBytes bytes.
func AddPassword(path, user string, password []byte) error {
	if err := checkFileUser(user); err != nil {
		return err
	}
	switch {
	case len(password) == 0:
		return errors.New("auth: empty password")
	case len(password) > MaxPasswordBytes:
		return fmt.Errorf("auth: the password is %d bytes, at most %d", len(password), MaxPasswordBytes)
	}
	hash, err := bcrypt.GenerateFromPassword(password, passwordCost)
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real // replace the file a link points to, not the link
	}
	old, err := os.ReadFile(path)
	var info fs.FileInfo
	switch {
	case errors.Is(err, fs.ErrNotExist):
		old = nil
	case err != nil:
		return fmt.Errorf("auth: password file: %w", err)
	default:
		if info, err = os.Stat(path); err != nil {
			return fmt.Errorf("auth: password file: %w", err)
		}
	}
	return writeAtomically(path, setPasswordLine(old, user, hash), info)
}

// checkFileUser refuses a name that cannot stand in a password file line.
func checkFileUser(user string) error {
	if user == "" {
		return errors.New("auth: empty user name")
	}
	if user[0] == '#' {
		return fmt.Errorf("auth: user name %q starts with '#', which makes a comment", user)
	}
	for _, r := range user {
		if r == ':' || unicode.IsControl(r) {
			return fmt.Errorf("auth: user name %q holds %q", user, r)
		}
	}
	return nil
}

// setPasswordLine returns the file data with user's line set to hash: the
// user's first line replaced (and any later ones dropped), or a line added
// at the end. Other lines are kept byte for byte.
func setPasswordLine(data []byte, user string, hash []byte) []byte {
	entry := append([]byte(user+":"), hash...)
	var out []byte
	done := false
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		body := bytes.TrimRight(line, "\r\n")
		name, _, ok := bytes.Cut(body, []byte(":"))
		t := bytes.TrimSpace(body)
		if !ok || len(t) == 0 || t[0] == '#' || string(name) != user {
			out = append(out, line...)
			continue
		}
		if done {
			continue // a duplicate, which New would refuse
		}
		done = true
		out = append(out, entry...)
		out = append(out, line[len(body):]...) // the line's own ending
	}
	if !done {
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		out = append(out, entry...)
		out = append(out, '\n')
	}
	return out
}

// writeAtomically writes data to a temporary file in path's directory and
// renames it to path. old is the file being replaced, nil when there is
// none: its mode (and, best effort, its owner) carry over; a new file has
// mode 0600.
func writeAtomically(path string, data []byte, old fs.FileInfo) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp*") // mode 0600
	if err != nil {
		return fmt.Errorf("auth: password file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
			err = fmt.Errorf("auth: password file %s: %w", path, err)
		}
	}()
	if old != nil {
		if err := tmp.Chmod(old.Mode().Perm()); err != nil {
			return err
		}
		keepOwner(tmp, old)
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil { // make the rename durable, best effort
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
