package auth_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/presenced/presenced/auth"
)

// checkPassword asserts that the password file at path lets user in with
// password.
func checkPassword(t *testing.T, path, user, password string) {
	t.Helper()
	a := newAuth(t, auth.Config{PasswordFile: path})
	if _, err := a.Authenticate(user, []byte(password), "c", nil); err != nil {
		t.Fatalf("%s with the password just set: %v", user, err)
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode()
}

// noTempFiles asserts that dir holds only the named files.
func noTempFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Errorf("directory holds %q, want %q", got, names)
	}
}

func TestAddPassword(t *testing.T) {
	t.Parallel()
	// The file an operator keeps: comments, blank lines, a CRLF line, an
	// htpasswd -B line, and no newline at the end.
	head := "# presenced users\n\n" + hashLine(t, "alice", "wonderland")
	bobLine := hashLine(t, "bob", "old")
	tail := "# service accounts\r\n" + carolLine + "\r\n" + daveLine
	existing := head + bobLine + tail

	tests := []struct {
		name     string
		initial  *string // nil: no file
		perm     os.FileMode
		user     string
		password string
		check    func(t *testing.T, before, after string, newLine string)
	}{
		{"creates the file", nil, 0, "alice", "wonderland", func(t *testing.T, _, after, line string) {
			if after != line+"\n" {
				t.Errorf("file %q, want the one line %q", after, line)
			}
		}},
		{"adds a user at the end", &existing, 0o600, "erin", "new one", func(t *testing.T, before, after, line string) {
			if want := before + "\n" + line + "\n"; after != want {
				t.Errorf("file\n%q\nwant\n%q", after, want)
			}
		}},
		{"replaces a user in place", &existing, 0o600, "bob", "new", func(t *testing.T, _, after, line string) {
			if want := head + line + "\n" + tail; after != want {
				t.Errorf("file\n%q\nwant\n%q", after, want)
			}
		}},
		{"replaces a CRLF line, keeping CRLF", &existing, 0o600, "carol", "staple", func(t *testing.T, _, after, line string) {
			if want := head + bobLine + "# service accounts\r\n" + line + "\r\n" + daveLine; after != want {
				t.Errorf("file\n%q\nwant\n%q", after, want)
			}
		}},
		{"replaces the last line without newline", &existing, 0o600, "dave", "staple", func(t *testing.T, _, after, line string) {
			if want := head + bobLine + "# service accounts\r\n" + carolLine + "\r\n" + line; after != want {
				t.Errorf("file\n%q\nwant\n%q", after, want)
			}
		}},
		{"keeps a wider mode", &existing, 0o640, "bob", "new", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "passwd")
			before := ""
			if tt.initial != nil {
				before = *tt.initial
				writeFile(t, dir, "passwd", []byte(before))
				if err := os.Chmod(path, tt.perm); err != nil {
					t.Fatal(err)
				}
			}
			if err := auth.AddPassword(path, tt.user, []byte(tt.password)); err != nil {
				t.Fatalf("AddPassword: %v", err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			after := string(data)
			var newLine string
			for _, l := range strings.Split(after, "\n") {
				if strings.HasPrefix(l, tt.user+":") {
					newLine = strings.TrimSuffix(l, "\r")
				}
			}
			hash := strings.TrimPrefix(newLine, tt.user+":")
			if cost, err := bcrypt.Cost([]byte(hash)); err != nil || cost < bcrypt.DefaultCost {
				t.Errorf("hash %q: cost %d, %v", hash, cost, err)
			}
			if tt.check != nil {
				tt.check(t, before, after, newLine)
			}
			wantPerm := tt.perm
			if tt.initial == nil {
				wantPerm = 0o600
			}
			if got := mode(t, path); got != wantPerm {
				t.Errorf("mode %v, want %v", got, wantPerm)
			}
			noTempFiles(t, dir, "passwd")
			checkPassword(t, path, tt.user, tt.password)
			if tt.initial != nil && tt.user != "alice" {
				checkPassword(t, path, "alice", "wonderland") // the others still get in
			}
		})
	}
}

func TestAddPasswordRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, user, password, want string
	}{
		{"empty user", "", "pw", "empty user name"},
		{"colon", "a:b", "pw", `holds ':'`},
		{"newline", "a\nb:$2y$", "pw", `holds '\n'`},
		{"comment", "#alice", "pw", "starts with '#'"},
		{"empty password", "alice", "", "empty password"},
		{"long password", "alice", strings.Repeat("x", auth.MaxPasswordBytes+1), "73 bytes, at most 72"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "passwd")
			err := auth.AddPassword(path, tt.user, []byte(tt.password))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
			if tt.password != "" && strings.Contains(err.Error(), tt.password) {
				t.Errorf("error %q holds the password", err)
			}
			noTempFiles(t, dir)
		})
	}
	// The longest password bcrypt reads is taken.
	path := filepath.Join(t.TempDir(), "passwd")
	long := strings.Repeat("y", auth.MaxPasswordBytes)
	if err := auth.AddPassword(path, "alice", []byte(long)); err != nil {
		t.Fatalf("a %d-byte password: %v", len(long), err)
	}
	checkPassword(t, path, "alice", long)
}

// A password file that is a symbolic link: the file it points to is
// replaced, and the link stays.
func TestAddPasswordThroughSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o700); err != nil {
		t.Fatal(err)
	}
	target := writeFile(t, filepath.Join(dir, "real"), "passwd", []byte(hashLine(t, "alice", "wonderland")))
	link := filepath.Join(dir, "passwd")
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	if err := auth.AddPassword(link, "bob", []byte("builder")); err != nil {
		t.Fatal(err)
	}
	if mode(t, link)&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced by a file")
	}
	data, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("alice:")) || !bytes.Contains(data, []byte("\nbob:$2a$")) {
		t.Errorf("target file %q", data)
	}
	checkPassword(t, link, "bob", "builder")
	noTempFiles(t, filepath.Join(dir, "real"), "passwd")
}

// A file written by AddPassword is one that htpasswd -B users can keep
// editing, and New reads: the round trip.
func TestAddPasswordThenHtpasswdLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeFile(t, dir, "passwd", []byte(carolLine+"\n"))
	if err := auth.AddPassword(path, "alice", []byte("wonderland")); err != nil {
		t.Fatal(err)
	}
	if err := auth.AddPassword(path, "alice", []byte("looking glass")); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if n := strings.Count(string(data), "alice:"); n != 1 {
		t.Fatalf("alice is on %d lines:\n%s", n, data)
	}
	a := newAuth(t, auth.Config{PasswordFile: path})
	for user, pw := range map[string]string{"alice": "looking glass", "carol": "correct horse"} {
		if _, err := a.Authenticate(user, []byte(pw), "c", nil); err != nil {
			t.Errorf("%s: %v", user, err)
		}
	}
	if _, err := a.Authenticate("alice", []byte("wonderland"), "c", nil); err == nil {
		t.Errorf("the replaced password still works")
	}
}
