package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/presenced/presenced/auth"
	"github.com/presenced/presenced/presence"
)

const passwdUsage = `usage: presenced passwd FILE USER

Sets USER's password in the password file FILE (the format of htpasswd -B),
creating the file with mode 0600 if it does not exist. On a terminal the
password is asked for twice without echo; otherwise it is the first line of
standard input.
`

// runPasswd is `presenced passwd FILE USER`: args are the arguments after
// "passwd". It returns the exit code: 0 done, 2 a usage error or bad input,
// 1 an I/O error.
func runPasswd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stdout, passwdUsage)
		return 0
	}
	if len(args) != 2 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(stderr, passwdUsage)
		return 2
	}
	file, user := args[0], args[1]
	if err := checkPasswdUser(user); err != nil {
		fmt.Fprintf(stderr, "presenced passwd: %v\n", err)
		return 2
	}
	var password []byte
	var err error
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fd := int(f.Fd())
		password, err = promptTwice(func() ([]byte, error) { return term.ReadPassword(fd) }, user, stderr)
	} else {
		password, err = readLine(stdin)
	}
	if err != nil {
		fmt.Fprintf(stderr, "presenced passwd: %v\n", err)
		if errors.Is(err, errBadPassword) {
			return 2
		}
		return 1
	}
	if err := auth.AddPassword(file, user, password); err != nil {
		fmt.Fprintf(stderr, "presenced passwd: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "presenced passwd: set the password of %s in %s\n", user, file)
	return 0
}

// errBadPassword marks a password that cannot be used: exit code 2.
var errBadPassword = errors.New("bad password")

// checkPasswdUser refuses a user name that presenced cannot use (see
// presence.ValidUser) or that cannot stand in the file (':').
func checkPasswdUser(user string) error {
	if strings.Contains(user, ":") {
		return fmt.Errorf("user name %q holds ':', which separates user and hash in the file", user)
	}
	return presence.ValidUser(user)
}

// checkPassword refuses an empty or too long password.
func checkPassword(p []byte) error {
	switch {
	case len(p) == 0:
		return fmt.Errorf("%w: empty", errBadPassword)
	case len(p) > auth.MaxPasswordBytes:
		return fmt.Errorf("%w: %d bytes, at most %d", errBadPassword, len(p), auth.MaxPasswordBytes)
	}
	return nil
}

// promptTwice asks for the password twice on the terminal (read reads one
// without echo) and requires both to match.
func promptTwice(read func() ([]byte, error), user string, stderr io.Writer) ([]byte, error) {
	fmt.Fprintf(stderr, "New password for %s: ", user)
	first, err := read()
	fmt.Fprintln(stderr)
	if err != nil {
		return nil, fmt.Errorf("reading the password: %w", err)
	}
	if err := checkPassword(first); err != nil {
		return nil, err
	}
	fmt.Fprint(stderr, "Again: ")
	second, err := read()
	fmt.Fprintln(stderr)
	if err != nil {
		return nil, fmt.Errorf("reading the password: %w", err)
	}
	if string(first) != string(second) {
		return nil, fmt.Errorf("%w: the two passwords differ", errBadPassword)
	}
	return first, nil
}

// readLine reads the password from the first line of r, less its line
// ending.
func readLine(r io.Reader) ([]byte, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading the password: %w", err)
	}
	p := []byte(strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"))
	if err := checkPassword(p); err != nil {
		return nil, err
	}
	return p, nil
}
