package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/presenced/presenced/presence"
)

const whoUsage = `usage: presenced who [--status S[,S]] [--group G] [--node N] [--prefix P] [--max N] [--json]

Lists users and their presence (GET /api/v1/users), a page at a time until
the last or --max users (default 10000): one line each, with the status, the
live sessions and their nodes, since when, and the text, then the counts.
Filters combine: --status online,away (or repeated), --group, --node (users
with a session there), --prefix (names that start with it).
`

const userUsage = `usage: presenced user NAME [--json]

One user: its presence, its account setting, its live sessions and its
recently ended ones with their end reasons (GET /api/v1/users/NAME and
/api/v1/users/NAME/sessions).
`

const kickUsage = `usage: presenced kick USER[/CLIENT_ID] [--reason-code N]

Ends every live session of USER, or its session CLIENT_ID, wherever it lives:
an MQTT 5 client gets DISCONNECT 0x98 (administrative action; --reason-code
another: 128, 131, 135, 137, 139, 151, 152, 159), an MQTT 3.1.1 client is
closed; the session ends as kicked. The client may connect again: to keep a
user out, remove its credentials first.
`

const accountUsage = `usage: presenced account USER STATUS [TEXT]
       presenced account USER --clear

Sets USER's account status (away, busy or dnd; online clears it) and text,
shown over every session's, or clears both. Prints the presence after it.
`

const forgetUsage = `usage: presenced forget USER

Forgets an offline user: its record and every node's retained presence of
it go. Refused (409) while a session of it is live: kick it first.
`

// usersPage is a page of GET /api/v1/users.
type usersPage struct {
	Users  []json.RawMessage `json:"users"`
	Next   string            `json:"next"`
	Counts json.RawMessage   `json:"counts"`
}

type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*m = append(*m, s)
		}
	}
	return nil
}

func runWho(c *cli, args []string) error {
	var status multiFlag
	c.fs.Var(&status, "status", "")
	group := c.fs.String("group", "", "")
	node := c.fs.String("node", "", "")
	prefix := c.fs.String("prefix", "", "")
	maxUsers := c.fs.Int("max", 10000, "")
	rest, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError("unexpected %q", rest[0])
	}
	if *maxUsers < 1 {
		return usageError("--max must be at least 1")
	}
	q := url.Values{}
	for _, s := range status {
		q.Add("status", s)
	}
	for k, v := range map[string]string{"group": *group, "node": *node, "prefix": *prefix} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var all []json.RawMessage
	var counts json.RawMessage
	for cursor := ""; ; {
		q.Set("limit", strconv.Itoa(min(1000, *maxUsers-len(all))))
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page usersPage
		if _, err := c.do("GET", "/api/v1/users?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		all = append(all, page.Users...)
		counts = page.Counts
		if page.Next == "" || page.Next == cursor || len(all) >= *maxUsers || len(page.Users) == 0 {
			break
		}
		cursor = page.Next
	}
	if c.json {
		b, err := json.Marshal(struct {
			Users  []json.RawMessage `json:"users"`
			Counts json.RawMessage   `json:"counts,omitempty"`
		}{nonNilRaw(all), counts})
		if err != nil {
			return err
		}
		c.printJSON(b)
		return nil
	}
	w := tabwriter.NewWriter(c.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "USER\tSTATUS\tSESSIONS\tNODES\tSINCE\tTEXT")
	for _, raw := range all {
		var a presence.Aggregate
		if err := json.Unmarshal(raw, &a); err != nil {
			return fmt.Errorf("a user of the answer: %w", err)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", a.User, a.Status, len(a.Sessions), nodesOf(a), ago(a.Since), clip(a.Text, 40))
	}
	_ = w.Flush()
	fmt.Fprintf(c.stdout, "%d users", len(all))
	var n map[string]int
	if json.Unmarshal(counts, &n) == nil && n != nil {
		fmt.Fprintf(c.stdout, " (counts: total %d, online %d, away %d, dnd %d, offline %d)", n["total"], n["online"], n["away"], n["dnd"], n["offline"])
	}
	fmt.Fprintln(c.stdout)
	return nil
}

func runUser(c *cli, args []string) error {
	rest, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageError("give one user name")
	}
	user := rest[0]
	var a presence.Aggregate
	rawP, err := c.do("GET", userPath(user), nil, &a)
	if err != nil {
		return err
	}
	var s struct {
		Account presence.Account   `json:"account"`
		Live    []presence.Session `json:"live"`
		Ended   []presence.Session `json:"ended"`
		Held    json.RawMessage    `json:"held"`
	}
	rawS, err := c.do("GET", userPath(user, "sessions"), nil, &s)
	if err != nil {
		return err
	}
	if c.json {
		c.printJSON([]byte(`{"presence":` + strings.TrimSpace(string(rawP)) + `,"sessions":` + strings.TrimSpace(string(rawS)) + `}`))
		return nil
	}
	w := tabwriter.NewWriter(c.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "user\t%s\n", a.User)
	fmt.Fprintf(w, "status\t%s (since %s)\n", a.Status, utcStamp(a.Since))
	if a.Text != "" {
		fmt.Fprintf(w, "text\t%s\n", a.Text)
	}
	if !a.LastSeen.IsZero() {
		fmt.Fprintf(w, "last seen\t%s\n", utcStamp(a.LastSeen))
	}
	if s.Account.Status != "" || s.Account.Text != "" {
		fmt.Fprintf(w, "account\t%s %s\n", s.Account.Status, s.Account.Text)
	}
	fmt.Fprintf(w, "version\t%d\n", a.Version)
	if h := strings.TrimSpace(string(s.Held)); h != "" && h != "null" {
		fmt.Fprintf(w, "held\t%s\n", h)
	}
	_ = w.Flush()
	fmt.Fprintf(c.stdout, "\nlive sessions: %d\n", len(s.Live))
	if len(s.Live) > 0 {
		w = tabwriter.NewWriter(c.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(w, "CLIENT ID\tNODE\tDEVICE\tSTATUS\tEPOCH\tCONNECTED")
		for _, x := range s.Live {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", x.ID, x.Node, dash(x.Device), x.Status, x.Epoch, utcStamp(x.ConnectedAt))
		}
		_ = w.Flush()
	}
	if len(s.Ended) > 0 {
		fmt.Fprintf(c.stdout, "\nended sessions: %d\n", len(s.Ended))
		w = tabwriter.NewWriter(c.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(w, "CLIENT ID\tNODE\tDEVICE\tREASON\tENDED")
		for _, x := range s.Ended {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", x.ID, x.Node, dash(x.Device), x.EndReason, utcStamp(x.EndedAt))
		}
		_ = w.Flush()
	}
	return nil
}

func runKick(c *cli, args []string) error {
	code := c.fs.Int("reason-code", 0x98, "")
	rest, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageError("give USER or USER/CLIENT_ID")
	}
	// A user name has no '/' (presence refuses it); a client id may.
	user, id, one := strings.Cut(rest[0], "/")
	if user == "" || (one && id == "") {
		return usageError("give USER or USER/CLIENT_ID")
	}
	path := userPath(user, "kick")
	if one {
		path = userPath(user, "sessions", url.PathEscape(id), "kick")
	}
	var out struct {
		Kicked int `json:"kicked"`
	}
	raw, err := c.do("POST", path, map[string]int{"reason_code": *code}, &out)
	if err != nil {
		return err
	}
	if c.json {
		c.printJSON(raw)
		return nil
	}
	fmt.Fprintf(c.stdout, "kicked %d session%s of %s\n", out.Kicked, plural(out.Kicked), user)
	return nil
}

func runAccount(c *cli, args []string) error {
	clearIt := c.fs.Bool("clear", false, "")
	rest, err := c.parse(args)
	if err != nil {
		return err
	}
	var raw []byte
	switch {
	case *clearIt && len(rest) == 1:
		raw, err = c.do("DELETE", userPath(rest[0], "account"), nil, nil)
	case !*clearIt && (len(rest) == 2 || len(rest) == 3):
		body := map[string]string{"status": rest[1]}
		if len(rest) == 3 {
			body["text"] = rest[2]
		}
		raw, err = c.do("PUT", userPath(rest[0], "account"), body, nil)
	default:
		return usageError("give USER STATUS [TEXT], or USER --clear")
	}
	if err != nil {
		return err
	}
	if c.json {
		c.printJSON(raw)
		return nil
	}
	var a presence.Aggregate
	if err := json.Unmarshal(raw, &a); err != nil {
		return fmt.Errorf("the answer: %w", err)
	}
	fmt.Fprintf(c.stdout, "%s is %s", a.User, a.Status)
	if a.Text != "" {
		fmt.Fprintf(c.stdout, " (%s)", a.Text)
	}
	fmt.Fprintf(c.stdout, ", version %d\n", a.Version)
	return nil
}

func runForget(c *cli, args []string) error {
	rest, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageError("give one user name")
	}
	if _, err := c.do("DELETE", userPath(rest[0]), nil, nil); err != nil {
		return err
	}
	if c.json {
		c.printJSON([]byte(`{"forgotten":` + strconv.Quote(rest[0]) + `}`))
		return nil
	}
	fmt.Fprintf(c.stdout, "forgot %s\n", rest[0])
	return nil
}

// nodesOf lists the nodes of a's sessions, each once.
func nodesOf(a presence.Aggregate) string {
	var out []string
	for _, s := range a.Sessions {
		if !contains(out, s.Node) {
			out = append(out, s.Node)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ago says how long ago t was, to the second ("-" for none).
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Truncate(time.Second).String() + " ago"
}

// utcStamp is t in UTC, to the second.
func utcStamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return dash(s)
	}
	return string(r[:n-1]) + "…"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func nonNilRaw(s []json.RawMessage) []json.RawMessage {
	if s == nil {
		return []json.RawMessage{}
	}
	return s
}
