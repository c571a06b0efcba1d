package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// The operator's commands (who, user, kick, account, forget) talk to a
// running presenced's admin API: the address from --admin, else
// PRESENCED_ADMIN_URL, else http://127.0.0.1:8080; the token from --token
// or --token-file, else PRESENCED_ADMIN_TOKEN, else the file
// PRESENCED_ADMIN_TOKEN_FILE names. Each prints a table, or with --json
// the API's JSON. Exit codes: 0 done, 1 the API refused or could not be
// reached, 2 a usage error.

// cliCommands are the operator's commands, by name, with their usage.
var cliCommands = map[string]struct {
	usage string
	run   func(c *cli, args []string) error
}{
	"who":     {whoUsage, runWho},
	"user":    {userUsage, runUser},
	"kick":    {kickUsage, runKick},
	"account": {accountUsage, runAccount},
	"forget":  {forgetUsage, runForget},
}

// cliCommonUsage is the flags every operator's command takes.
const cliCommonUsage = `
Every command takes:
  --admin URL         the admin API (default: PRESENCED_ADMIN_URL, else http://127.0.0.1:8080)
  --token TOKEN       the admin token (default: PRESENCED_ADMIN_TOKEN)
  --token-file FILE   a file holding it (default: PRESENCED_ADMIN_TOKEN_FILE)
  --operator NAME     who asks, in the node's log (X-Presenced-Operator; default: $USER)
  --timeout DURATION  how long to wait for each answer (default 10s)
  --json              print the API's JSON instead of a table
`

// errUsage is a usage error (exit 2); its text is printed with the usage.
var errUsage = errors.New("usage")

// usageError says what was wrong with the command line.
func usageError(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// cli is one operator's command being run.
type cli struct {
	name     string
	fs       *flag.FlagSet
	env      map[string]string
	stdout   io.Writer
	admin    string
	token    string
	tokFile  string
	operator string
	timeout  time.Duration
	json     bool
	http     *http.Client
}

// isCLI reports whether name is one of the operator's commands.
func isCLI(name string) bool {
	_, ok := cliCommands[name]
	return ok
}

// runCLI runs operator's command name with args (after the name).
func runCLI(name string, args, env []string, stdout, stderr io.Writer) int {
	cmd := cliCommands[name]
	c := &cli{name: name, stdout: stdout, env: map[string]string{}}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			c.env[k] = v
		}
	}
	c.fs = flag.NewFlagSet("presenced "+name, flag.ContinueOnError)
	c.fs.SetOutput(io.Discard)
	c.fs.StringVar(&c.admin, "admin", "", "")
	c.fs.StringVar(&c.token, "token", "", "")
	c.fs.StringVar(&c.tokFile, "token-file", "", "")
	c.fs.StringVar(&c.operator, "operator", "", "")
	c.fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "")
	c.fs.BoolVar(&c.json, "json", false, "")
	err := cmd.run(c, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, cmd.usage+cliCommonUsage)
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "presenced %s: %s\n%s%s", name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "), cmd.usage, cliCommonUsage)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "presenced %s: %v\n", name, err)
		return 1
	}
	return 0
}

// parse parses the command line, flags and arguments in any order (after
// a "--" the next word is an argument even if it starts with "-"), and
// returns the arguments.
func (c *cli) parse(args []string) ([]string, error) {
	var rest []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError("%v", err)
		}
		args = c.fs.Args()
		if len(args) == 0 {
			break
		}
		rest = append(rest, args[0])
		args = args[1:]
	}
	if c.timeout <= 0 {
		return nil, usageError("--timeout must be above 0")
	}
	return rest, c.setup()
}

// setup works out the address, the token and who asks.
func (c *cli) setup() error {
	if c.admin == "" {
		c.admin = c.env["PRESENCED_ADMIN_URL"]
	}
	if c.admin == "" {
		c.admin = "http://127.0.0.1:8080"
	}
	if !strings.Contains(c.admin, "://") {
		c.admin = "http://" + c.admin
	}
	u, err := url.Parse(c.admin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError("--admin %q: want http://HOST:PORT or https://HOST:PORT", c.admin)
	}
	c.admin = strings.TrimSuffix(u.String(), "/")
	if c.token == "" && c.tokFile == "" {
		c.token, c.tokFile = c.env["PRESENCED_ADMIN_TOKEN"], c.env["PRESENCED_ADMIN_TOKEN_FILE"]
	}
	if c.token == "" && c.tokFile != "" {
		b, err := os.ReadFile(c.tokFile)
		if err != nil {
			return fmt.Errorf("token file: %w", err)
		}
		c.token = strings.TrimSpace(string(b))
	}
	if c.operator == "" {
		c.operator = c.env["USER"]
	}
	c.http = &http.Client{Timeout: c.timeout}
	return nil
}

// apiError is an answer of the API that is not a success.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string {
	hint := ""
	switch e.code {
	case http.StatusUnauthorized:
		hint = " (give the admin token: --token, PRESENCED_ADMIN_TOKEN or PRESENCED_ADMIN_TOKEN_FILE)"
	case http.StatusForbidden:
		hint = " (actions need a node with admin.token set)"
	}
	return fmt.Sprintf("%d %s: %s%s", e.code, http.StatusText(e.code), e.msg, hint)
}

// do sends a request to the API and decodes a JSON answer into out (when
// out is not nil); it returns the raw answer.
func (c *cli) do(method, path string, body any, out any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = strings.NewReader(string(b))
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.admin+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.operator != "" {
		req.Header.Set("X-Presenced-Operator", c.operator)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the admin API at %s: %w", c.admin, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return raw, &apiError{code: resp.StatusCode, msg: msg}
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, fmt.Errorf("the answer of %s %s is not what was expected: %w", method, path, err)
		}
	}
	return raw, nil
}

// maxAnswer bounds an answer read (a page of 1,000 users is well under).
const maxAnswer = 64 << 20

// userPath is the API's path of user (escaped), with more after it.
func userPath(user string, more ...string) string {
	p := "/api/v1/users/" + url.PathEscape(user)
	for _, m := range more {
		p += "/" + m
	}
	return p
}

// printJSON prints raw JSON as it came, ending with a newline.
func (c *cli) printJSON(raw []byte) {
	s := strings.TrimRight(string(raw), "\n")
	fmt.Fprintln(c.stdout, s)
}
