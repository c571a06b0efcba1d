package schema_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
	"github.com/presenced/presenced/schema"
)

// Tests never read the wall clock: every time is built from base.
var base = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return base.Add(d) }

func ptr[T any](v T) *T { return &v }

// compile compiles the schema file name, with formats asserted (date-time is
// checked, not only annotated) and every other schema file loaded by its $id.
func compile(t testing.TB, name string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	for _, f := range schema.Files() {
		doc := readDoc(t, f)
		if err := c.AddResource(schema.BaseID+f, doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	s, err := c.Compile(schema.BaseID + name)
	if err != nil {
		t.Fatalf("%s does not compile: %v", name, err)
	}
	return s
}

// readDoc decodes a schema file as the validator does.
func readDoc(t testing.TB, name string) any {
	t.Helper()
	b, err := fs.ReadFile(schema.FS, name)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s is not JSON: %v", name, err)
	}
	return doc
}

// check validates the JSON payload b; a payload that is not one JSON value
// is refused too.
func check(s *jsonschema.Schema, b []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

func mustValid(t *testing.T, s *jsonschema.Schema, what string, b []byte) {
	t.Helper()
	if err := check(s, b); err != nil {
		t.Errorf("%s refused by %s:\n%s\n%v", what, s.Location, b, err)
	}
}

func mustRefuse(t *testing.T, s *jsonschema.Schema, what string, b []byte) {
	t.Helper()
	err := check(s, b)
	if err == nil {
		t.Errorf("%s accepted by %s:\n%s", what, s.Location, b)
		return
	}
	if testing.Verbose() {
		t.Logf("%s: %s", what, strings.ReplaceAll(err.Error(), "\n", " | "))
	}
}

// mutate decodes payload, lets change edit it, and encodes it again.
func mutate(t *testing.T, payload []byte, change func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// obj is the JSON object at m[key] (an element of an array when i >= 0).
func obj(m map[string]any, key string, i int) map[string]any {
	if i < 0 {
		return m[key].(map[string]any)
	}
	return m[key].([]any)[i].(map[string]any)
}

// ---- The schemas themselves ----

// Files lists the six schemas, each compiles against the 2020-12
// metaschema, names itself by BaseID + its file name, is documented, and
// carries one example that it accepts.
func TestSchemasCompileAndAcceptTheirExamples(t *testing.T) {
	want := []string{schema.Clock, schema.GroupDelta, schema.GroupSnapshot, schema.Node, schema.Set, schema.User, schema.Webhook}
	if got := schema.Files(); !slices.Equal(got, want) {
		t.Fatalf("Files() = %q, want %q", got, want)
	}
	for _, name := range schema.Files() {
		t.Run(name, func(t *testing.T) {
			s := compile(t, name)
			doc := readDoc(t, name).(map[string]any)
			if got := doc["$schema"]; got != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("$schema = %v, want draft 2020-12", got)
			}
			if got := doc["$id"]; got != schema.BaseID+name {
				t.Errorf("$id = %v, want %s", got, schema.BaseID+name)
			}
			for _, k := range []string{"title", "description"} {
				if v, _ := doc[k].(string); v == "" {
					t.Errorf("no %s", k)
				}
			}
			examples, _ := doc["examples"].([]any)
			if len(examples) != 1 {
				t.Fatalf("%d examples, want 1", len(examples))
			}
			if err := s.Validate(examples[0]); err != nil {
				t.Errorf("its example is refused: %v", err)
			}
		})
	}
}

// Each schema is self-contained, so a definition shared by several files is
// copied into each: the copies must not drift apart.
func TestSharedDefinitionsAgree(t *testing.T) {
	seen := map[string]any{}
	from := map[string]string{}
	for _, name := range schema.Files() {
		defs, _ := readDoc(t, name).(map[string]any)["$defs"].(map[string]any)
		for k, v := range defs {
			if prev, ok := seen[k]; ok && !reflect.DeepEqual(prev, v) {
				t.Errorf("$defs/%s differs between %s and %s", k, from[k], name)
			}
			seen[k], from[k] = v, name
		}
	}
}

// A snapshot and a delta share a topic: each schema refuses the other's
// example, so an observer can tell them apart.
func TestSnapshotAndDeltaAreTellable(t *testing.T) {
	example := func(name string) []byte {
		b, err := json.Marshal(readDoc(t, name).(map[string]any)["examples"].([]any)[0])
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mustRefuse(t, compile(t, schema.GroupSnapshot), "the delta example", example(schema.GroupDelta))
	mustRefuse(t, compile(t, schema.GroupDelta), "the snapshot example", example(schema.GroupSnapshot))
}

// ---- presence/users/{user} ----

// userPayloads are AppendJSON outputs of users driven through the real
// operations (Open, UpdateSession, SetAccount, End, Commit).
func userPayloads(t *testing.T) map[string][]byte {
	t.Helper()
	const ttl = 30 * time.Second
	rules := presence.NewRules([]string{"desk phone"})
	out := map[string][]byte{}
	commit := func(name string, u presence.User, now time.Time) presence.User {
		t.Helper()
		u, a, changed := u.Commit(rules, now)
		if !changed {
			t.Fatalf("%s: nothing to commit", name)
		}
		out[name] = a.AppendJSON(nil)
		return u
	}
	open := func(u presence.User, a presence.OpenArgs, now time.Time) (presence.User, presence.Session) {
		t.Helper()
		a.TTL = ttl
		u, s, _, err := u.Open(a, now)
		if err != nil {
			t.Fatalf("Open(%+v): %v", a, err)
		}
		return u, s
	}
	update := func(u presence.User, s presence.Session, upd presence.Update) presence.User {
		t.Helper()
		u, _, err := u.UpdateSession(s.ID, s.Epoch, upd)
		if err != nil {
			t.Fatalf("UpdateSession: %v", err)
		}
		return u
	}

	// Online with one session, no device; then each session status.
	u, s := open(presence.User{}, presence.OpenArgs{User: "ann", ID: "c1", Node: "node-1"}, at(0))
	u = commit("online", u, at(0))
	for i, st := range []presence.Status{presence.Idle, presence.Away, presence.Busy, presence.DND, presence.Online} {
		u = update(u, s, presence.Update{Status: &st})
		u = commit("session "+string(st), u, at(time.Duration(i+1)*time.Second))
	}

	// Several sessions with devices and texts; a text that needs escaping.
	u, _ = open(u, presence.OpenArgs{User: "ann", ID: "c2", Node: "node-2", Device: "laptop", Status: presence.Away, Text: "back at 3"}, at(10*time.Second))
	u = commit("two sessions", u, at(10*time.Second))
	u, s3 := open(u, presence.OpenArgs{User: "ann", ID: "ann/tablet#1 ✓", Node: "eu-west.node_3:1883", Device: "iPad (kitchen)"}, at(11*time.Second))
	u = commit("three sessions", u, at(11*time.Second))
	u = update(u, s3, presence.Update{Text: ptr("say \"hi\" \\ → 会議中 🚀👩‍💻 <b>&</b>\u200d\u2028\ufe0f")})
	u = update(u, s, presence.Update{Status: ptr(presence.Idle)})
	u = commit("texts", u, at(12*time.Second))
	u = update(u, s3, presence.Update{Text: ptr(strings.Repeat("x", presence.MaxTextBytes))})
	u = commit("longest text", u, at(13*time.Second))

	// The account override, every value, with a text; then cleared.
	for i, st := range []presence.Status{presence.Away, presence.Busy, presence.DND} {
		var err error
		u, err = u.SetAccount(presence.AccountUpdate{Status: &st, Text: ptr("account " + string(st))})
		if err != nil {
			t.Fatal(err)
		}
		u = commit("account "+string(st), u, at(time.Duration(20+i)*time.Second))
	}
	u, _ = u.SetAccount(presence.AccountUpdate{Status: ptr(presence.Online), Text: ptr("")})
	u = commit("account cleared", u, at(30*time.Second))

	// An authoritative device says dnd for the whole user.
	u, s4 := open(u, presence.OpenArgs{User: "ann", ID: "c4", Node: "node-1", Device: "desk phone", Status: presence.DND}, at(31*time.Second))
	u = commit("authoritative dnd", u, at(31*time.Second))

	// Every session ends: offline, with last_seen, and the will's text on
	// an unclean end.
	for _, x := range u.Sessions {
		if x.ID == s4.ID {
			continue
		}
		var err error
		u, _, err = u.End(x.ID, x.Epoch, presence.EndClean, nil, at(40*time.Second))
		if err != nil {
			t.Fatal(err)
		}
	}
	u = commit("last session left", u, at(40*time.Second))
	u, _, err := u.End(s4.ID, s4.Epoch, presence.EndNetwork, ptr("lost signal"), at(41*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	commit("offline with last words", u, at(41*time.Second))

	// Offline and never seen to end a session: last_seen is null.
	v, err := (presence.User{Name: "bob"}).SetAccount(presence.AccountUpdate{Status: ptr(presence.Busy), Text: ptr("on leave")})
	if err != nil {
		t.Fatal(err)
	}
	commit("offline never seen", v, at(0))

	// A clock in another zone with nanoseconds: still UTC milliseconds.
	paris := time.FixedZone("CET", 3600)
	w, _ := open(presence.User{}, presence.OpenArgs{User: "José", ID: "j", Node: "n"}, time.Date(2026, 11, 30, 13, 0, 0, 123456789, paris))
	commit("zoned clock", w, time.Date(2026, 11, 30, 13, 0, 0, 123456789, paris))
	return out
}

// Real payloads of presence/users/{user} are accepted, and they are what
// the schema says: ParseAggregate reads them back (a check on the
// payloads' own test, not on the schema).
func TestUserPayloadsAreValid(t *testing.T) {
	s := compile(t, schema.User)
	payloads := userPayloads(t)
	for _, name := range []string{"online", "session idle", "session away", "session busy", "session dnd",
		"two sessions", "three sessions", "texts", "longest text", "account away", "account busy", "account dnd",
		"authoritative dnd", "offline with last words", "offline never seen", "zoned clock"} {
		if _, ok := payloads[name]; !ok {
			t.Errorf("no payload %q", name)
		}
	}
	for name, b := range payloads {
		mustValid(t, s, name, b)
		if _, err := presence.ParseAggregate(b); err != nil {
			t.Errorf("%s: ParseAggregate: %v", name, err)
		}
	}
	var offline map[string]any
	if err := json.Unmarshal(payloads["offline with last words"], &offline); err != nil {
		t.Fatal(err)
	}
	if offline["last_seen"] == nil || offline["text"] != "lost signal" {
		t.Errorf("offline payload %v: want a last_seen and the will's text", offline)
	}
}

// Each way a users payload can be wrong is refused.
func TestUserSchemaRefuses(t *testing.T) {
	s := compile(t, schema.User)
	payloads := userPayloads(t)
	online := payloads["three sessions"]
	offline := payloads["offline with last words"]
	mustValid(t, s, "online", online)
	mustValid(t, s, "offline", offline)
	cases := []struct {
		name    string
		payload []byte
		change  func(m map[string]any)
	}{
		{"no user", online, func(m map[string]any) { delete(m, "user") }},
		{"no status", online, func(m map[string]any) { delete(m, "status") }},
		{"no text", online, func(m map[string]any) { delete(m, "text") }},
		{"no version", online, func(m map[string]any) { delete(m, "version") }},
		{"no since", online, func(m map[string]any) { delete(m, "since") }},
		{"no last_seen", online, func(m map[string]any) { delete(m, "last_seen") }},
		{"no sessions", online, func(m map[string]any) { delete(m, "sessions") }},
		{"an unknown field", online, func(m map[string]any) { m["mood"] = "happy" }},
		{"status unknown", online, func(m map[string]any) { m["status"] = "lost" }},
		{"status in capitals", online, func(m map[string]any) { m["status"] = "Online" }},
		{"status a number", online, func(m map[string]any) { m["status"] = 1 }},
		{"version a string", online, func(m map[string]any) { m["version"] = "17" }},
		{"version 0", online, func(m map[string]any) { m["version"] = 0 }},
		{"version negative", online, func(m map[string]any) { m["version"] = -1 }},
		{"version a fraction", online, func(m map[string]any) { m["version"] = 1.5 }},
		{"version from 2^53", online, func(m map[string]any) { m["version"] = json.Number("9007199254740992") }},
		{"since null", online, func(m map[string]any) { m["since"] = nil }},
		{"since without milliseconds", online, func(m map[string]any) { m["since"] = "2026-11-30T12:00:00Z" }},
		{"since with an offset", online, func(m map[string]any) { m["since"] = "2026-11-30T13:00:00.000+01:00" }},
		{"since not a time", online, func(m map[string]any) { m["since"] = "2026-13-45T12:00:00.000Z" }},
		{"since as a number", online, func(m map[string]any) { m["since"] = 1796040000000 }},
		{"last_seen while online", online, func(m map[string]any) { m["last_seen"] = "2026-11-30T12:00:00.000Z" }},
		{"online without sessions", online, func(m map[string]any) { m["sessions"] = []any{} }},
		{"sessions not an array", online, func(m map[string]any) { m["sessions"] = map[string]any{} }},
		{"offline with a session", offline, func(m map[string]any) { m["sessions"] = []any{obj(mutateMap(online), "sessions", 0)} }},
		{"text with a newline", online, func(m map[string]any) { m["text"] = "a\nb" }},
		{"text with a bidi override", online, func(m map[string]any) { m["text"] = "abc\u202edef" }},
		{"text of 257 characters", online, func(m map[string]any) { m["text"] = strings.Repeat("x", 257) }},
		{"text null", online, func(m map[string]any) { m["text"] = nil }},
		{"user empty", online, func(m map[string]any) { m["user"] = "" }},
		{"user with a slash", online, func(m map[string]any) { m["user"] = "a/b" }},
		{"user with a wildcard", online, func(m map[string]any) { m["user"] = "a+" }},
		{"user starting with $", online, func(m map[string]any) { m["user"] = "$SYS" }},
		{"user with a space", online, func(m map[string]any) { m["user"] = "ann lee" }},
		{"user with a zero width space", online, func(m map[string]any) { m["user"] = "ann\u200b" }},
		{"user of 129 characters", online, func(m map[string]any) { m["user"] = strings.Repeat("a", 129) }},
		{"status online, no session online", online, func(m map[string]any) {
			m["status"] = "online"
			for _, x := range m["sessions"].([]any) {
				x.(map[string]any)["status"] = "away"
			}
		}},
		{"status idle, a session online", online, func(m map[string]any) { m["status"] = "idle" }},
		{"session offline", online, func(m map[string]any) { obj(m, "sessions", 0)["status"] = "offline" }},
		{"session without an id", online, func(m map[string]any) { delete(obj(m, "sessions", 0), "id") }},
		{"session without an epoch", online, func(m map[string]any) { delete(obj(m, "sessions", 0), "epoch") }},
		{"session without a node", online, func(m map[string]any) { delete(obj(m, "sessions", 0), "node") }},
		{"session without a device", online, func(m map[string]any) { delete(obj(m, "sessions", 0), "device") }},
		{"session without connected_at", online, func(m map[string]any) { delete(obj(m, "sessions", 0), "connected_at") }},
		{"session with a text", online, func(m map[string]any) { obj(m, "sessions", 0)["text"] = "hi" }},
		{"session epoch a string", online, func(m map[string]any) { obj(m, "sessions", 0)["epoch"] = "1" }},
		{"session id empty", online, func(m map[string]any) { obj(m, "sessions", 0)["id"] = "" }},
		{"session id with a control", online, func(m map[string]any) { obj(m, "sessions", 0)["id"] = "a\x1bb" }},
		{"session node with a space", online, func(m map[string]any) { obj(m, "sessions", 0)["node"] = "node 1" }},
		{"session device with a leading space", online, func(m map[string]any) { obj(m, "sessions", 0)["device"] = " phone" }},
		{"session device null", online, func(m map[string]any) { obj(m, "sessions", 0)["device"] = nil }},
		{"session connected_at null", online, func(m map[string]any) { obj(m, "sessions", 0)["connected_at"] = nil }},
	}
	for _, c := range cases {
		mustRefuse(t, s, c.name, mutate(t, c.payload, c.change))
	}
	mustRefuse(t, s, "null", []byte("null"))
	mustRefuse(t, s, "an array", []byte("[]"))
}

func mutateMap(b []byte) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	return m
}

// ---- presence/groups/{group} ----

// world is the members' current presence, as the publisher holds it.
type world map[string]presence.Aggregate

func (w world) lookup(user string) (presence.Shown, bool) {
	a, ok := w[user]
	return a.Shown(), ok
}

const window = 250 * time.Millisecond

// groupPayloads drives a Board as the plugin does and returns every
// snapshot and delta it marshals, in order.
func groupPayloads(t *testing.T) (snapshots, deltas [][]byte) {
	t.Helper()
	clk := testkit.NewClock(base)
	w := world{}
	idx := roster.NewIndex()
	b := roster.NewBoard(idx, window, clk.Now, w.lookup)
	marshal := func(v any) []byte {
		t.Helper()
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	snapshot := func(group string) {
		t.Helper()
		s, ok := b.Snapshot(group)
		if !ok {
			t.Fatalf("no snapshot of %s", group)
		}
		snapshots = append(snapshots, marshal(s))
	}
	cut := func(want int) {
		t.Helper()
		clk.Advance(window)
		ds := b.Cut()
		if len(ds) != want {
			t.Fatalf("%d batches, want %d", len(ds), want)
		}
		for _, d := range ds {
			snapshot(d.Group)
			deltas = append(deltas, marshal(d))
		}
	}
	set := func(a presence.Aggregate) {
		w[a.User] = a
		b.Note(a)
	}
	lastSeen := at(-3 * time.Hour)

	idx.Create("empty")
	idx.Add("team", "ann", "bob", "cat", "dan", "José")
	w["ann"] = presence.Aggregate{User: "ann", Status: presence.Busy, Text: "In a meeting", Version: 5}
	w["bob"] = presence.Aggregate{User: "bob", Status: presence.Offline, LastSeen: lastSeen, Version: 7}
	w["dan"] = presence.Aggregate{User: "dan", Status: presence.Offline, Version: 2} // offline, never seen to leave
	w["José"] = presence.Aggregate{User: "José", Status: presence.DND, Text: "\"quoted\" 会議中 🚀", Version: 3}
	for _, g := range []string{"empty", "team"} {
		if _, ok := b.Watch(g); !ok {
			t.Fatalf("%s not watched", g)
		}
		snapshot(g)
	}

	// Every status, with and without a text.
	for i, st := range []presence.Status{presence.Online, presence.Idle, presence.Away, presence.Busy, presence.DND} {
		set(presence.Aggregate{User: "cat", Status: st, Text: "now " + string(st), Version: uint64(10 + i)})
		set(presence.Aggregate{User: "ann", Status: st, Version: uint64(10 + i)})
		cut(1)
	}
	// Going offline, with a last_seen.
	set(presence.Aggregate{User: "cat", Status: presence.Offline, LastSeen: at(time.Second), Text: "lost signal", Version: 20})
	cut(1)
	// A clock in another zone, with nanoseconds, as the memory store's
	// aggregates carry them (the users payload writes UTC milliseconds).
	set(presence.Aggregate{User: "dan", Status: presence.Offline, LastSeen: time.Date(2026, 11, 30, 13, 0, 0, 123456789, time.FixedZone("CET", 3600)), Version: 21})
	cut(1)
	// A member joins (never seen: offline at version 0) and one leaves.
	b.Joined(idx.Add("team", "eve"))
	b.Joined(idx.Remove("team", "bob"))
	cut(1)
	// Only removals: changes is null.
	b.Joined(idx.Remove("team", "eve", "cat"))
	cut(1)
	return snapshots, deltas
}

// Real snapshots and deltas, marshalled as the plugin marshals them, are
// accepted.
func TestGroupPayloadsAreValid(t *testing.T) {
	snap, delta := compile(t, schema.GroupSnapshot), compile(t, schema.GroupDelta)
	snapshots, deltas := groupPayloads(t)
	if len(snapshots) != 11 || len(deltas) != 9 {
		t.Fatalf("%d snapshots and %d deltas, want 11 and 9", len(snapshots), len(deltas))
	}
	for i, b := range snapshots {
		mustValid(t, snap, "snapshot "+string(rune('A'+i)), b)
		mustRefuse(t, delta, "a snapshot as a delta", b)
	}
	for i, b := range deltas {
		mustValid(t, delta, "delta "+string(rune('A'+i)), b)
		mustRefuse(t, snap, "a delta as a snapshot", b)
	}
	if last := deltas[len(deltas)-1]; !bytes.Contains(last, []byte(`"changes":[]`)) {
		t.Errorf("the removals-only delta %s: want \"changes\":[] (never null)", last)
	}
	if !bytes.Contains(snapshots[1], []byte(`{"user":"cat","status":"offline","last_seen":null,"version":0}`)) {
		t.Errorf("the first team snapshot %s has no never-seen member", snapshots[1])
	}
}

// Each way a group message can be wrong is refused.
func TestGroupSchemasRefuse(t *testing.T) {
	snap, delta := compile(t, schema.GroupSnapshot), compile(t, schema.GroupDelta)
	snapshots, deltas := groupPayloads(t)
	s, d := snapshots[1], deltas[len(deltas)-3] // the team with members; a delta with changes
	mustValid(t, snap, "snapshot", s)
	mustValid(t, delta, "delta", d)
	member := func(m map[string]any) map[string]any { return obj(m, "members", 0) }
	change := func(m map[string]any) map[string]any { return obj(m, "changes", 0) }
	snapCases := []struct {
		name   string
		change func(m map[string]any)
	}{
		{"no group", func(m map[string]any) { delete(m, "group") }},
		{"no version", func(m map[string]any) { delete(m, "version") }},
		{"no members", func(m map[string]any) { delete(m, "members") }},
		{"no online", func(m map[string]any) { delete(m, "online") }},
		{"no total", func(m map[string]any) { delete(m, "total") }},
		{"no by_status", func(m map[string]any) { delete(m, "by_status") }},
		{"a follows", func(m map[string]any) { m["follows"] = 1 }},
		{"version 0", func(m map[string]any) { m["version"] = 0 }},
		{"version a string", func(m map[string]any) { m["version"] = "1" }},
		{"group with a wildcard", func(m map[string]any) { m["group"] = "team/#" }},
		{"members null", func(m map[string]any) { m["members"] = nil }},
		{"total negative", func(m map[string]any) { m["total"] = -1 }},
		{"by_status with an unknown status", func(m map[string]any) { obj(m, "by_status", -1)["lost"] = 1 }},
		{"by_status with a zero", func(m map[string]any) { obj(m, "by_status", -1)["online"] = 0 }},
		{"by_status a fraction", func(m map[string]any) { obj(m, "by_status", -1)["busy"] = 0.5 }},
		{"member without user", func(m map[string]any) { delete(member(m), "user") }},
		{"member without status", func(m map[string]any) { delete(member(m), "status") }},
		{"member without last_seen", func(m map[string]any) { delete(member(m), "last_seen") }},
		{"member without version", func(m map[string]any) { delete(member(m), "version") }},
		{"member status unknown", func(m map[string]any) { member(m)["status"] = "gone" }},
		{"member text empty", func(m map[string]any) { member(m)["text"] = "" }},
		{"member text with a control", func(m map[string]any) { member(m)["text"] = "a\x07" }},
		{"member online with a last_seen", func(m map[string]any) {
			member(m)["status"], member(m)["last_seen"] = "online", "2026-11-30T12:00:00Z"
		}},
		{"member last_seen not a time", func(m map[string]any) {
			member(m)["status"], member(m)["last_seen"] = "offline", "yesterday"
		}},
		{"member never seen but online", func(m map[string]any) { member(m)["status"], member(m)["version"] = "online", 0 }},
		{"member version negative", func(m map[string]any) { member(m)["version"] = -1 }},
		{"member with an extra field", func(m map[string]any) { member(m)["sessions"] = []any{} }},
	}
	for _, c := range snapCases {
		mustRefuse(t, snap, "snapshot with "+c.name, mutate(t, s, c.change))
	}
	deltaCases := []struct {
		name   string
		change func(m map[string]any)
	}{
		{"no group", func(m map[string]any) { delete(m, "group") }},
		{"no version", func(m map[string]any) { delete(m, "version") }},
		{"no follows", func(m map[string]any) { delete(m, "follows") }},
		{"no changes", func(m map[string]any) { delete(m, "changes") }},
		{"no by_status", func(m map[string]any) { delete(m, "by_status") }},
		{"members", func(m map[string]any) { m["members"] = m["changes"] }},
		{"version 1", func(m map[string]any) { m["version"] = 1 }},
		{"follows 0", func(m map[string]any) { m["follows"] = 0 }},
		{"nothing changed", func(m map[string]any) { m["changes"] = []any{}; delete(m, "removed") }},
		{"changes null and nothing removed", func(m map[string]any) { m["changes"] = nil; delete(m, "removed") }},
		{"removed empty", func(m map[string]any) { m["removed"] = []any{} }},
		{"removed a member entry", func(m map[string]any) { m["removed"] = []any{change(m)} }},
		{"change status unknown", func(m map[string]any) { change(m)["status"] = "Busy" }},
		{"change version a string", func(m map[string]any) { change(m)["version"] = "12" }},
	}
	for _, c := range deltaCases {
		mustRefuse(t, delta, "delta with "+c.name, mutate(t, d, c.change))
	}
}

// ---- presence/set ----

// Inputs ParseSetRequest accepts are accepted by the schema.
func TestSetAcceptedInputsAreValid(t *testing.T) {
	s := compile(t, schema.Set)
	for _, in := range []string{
		`{}`,
		` { } `,
		`{"status":"online"}`,
		`{"status":"idle"}`,
		`{"status":"away"}`,
		`{"status":"busy"}`,
		`{"status":"dnd"}`,
		`{"text":""}`,
		`{"text":"In a meeting until 3"}`,
		`{"text":"say \"hi\" → 会議中 🚀👩‍💻 \u200d\ufe0f"}`,
		`{"text":"` + strings.Repeat("x", presence.MaxTextBytes) + `"}`,
		`{"device":"phone"}`,
		`{"device":"desk phone"}`,
		`{"device":"$dev/+#"}`,
		`{"device":"` + strings.Repeat("d", presence.MaxDeviceBytes) + `"}`,
		`{"scope":"session","status":"idle","text":"brb","device":"laptop"}`,
		`{"scope":"account"}`,
		`{"scope":"account","status":"online"}`,
		`{"scope":"account","status":"away","text":"on leave"}`,
		`{"scope":"account","status":"busy"}`,
		`{"scope":"account","status":"dnd","text":""}`,
		`{"scope":"account","text":"back Monday"}`,
		// null is read as absent (see the report): the schema allows it.
		`{"status":null,"text":null,"device":null,"scope":null}`,
		`{"scope":"account","device":null}`,
		`{"scope":null,"status":"idle"}`,
		`{"activity":true}`,
		`{"activity":null}`,
		`{"activity":true,"status":"online","text":"back"}`,
		`{"scope":"account","activity":true}`,
		`{"scope":"account","invisible":true}`,
		`{"scope":"account","invisible":false,"last_seen":"quarter"}`,
		`{"scope":"account","last_seen":"hidden","status":"busy"}`,
		`{"scope":"account","last_seen":"exact","invisible":null}`,
		`{"invisible":null,"last_seen":null}`,
	} {
		if _, err := presence.ParseSetRequest([]byte(in)); err != nil {
			t.Errorf("ParseSetRequest(%s): %v; the case is wrong", in, err)
			continue
		}
		mustValid(t, s, "accepted request", []byte(in))
	}
}

// Inputs ParseSetRequest refuses are refused by the schema where JSON
// Schema can say why. It cannot express:
//   - the payload's size (1024 bytes) and encoding (invalid UTF-8 is
//     replaced by U+FFFD by a JSON decoder before any schema sees it);
//   - lengths in UTF-8 bytes: maxLength counts characters, so the schema's
//     256 and 64 are weaker than the server's 256 and 64 bytes;
//   - the name rules of a device label beyond its characters: NFC,
//     compatibility characters (what NFKC changes), a leading combining
//     mark, one script (presence.ValidDevice);
//   - the characters of a device label outside the Basic Multilingual Plane
//     (format and private-use characters there, and unassigned code
//     points).
//
// Those inputs are listed with expressible false: the schema accepts them,
// and the server refuses them.
func TestSetRefusedInputs(t *testing.T) {
	s := compile(t, schema.Set)
	for _, c := range []struct {
		in          string
		expressible bool
	}{
		{`null`, true},
		{`[]`, true},
		{`"busy"`, true},
		{`{"status":"busy"} {}`, true}, // data after the object: refused by the JSON decoder
		{`{"status":"offline"}`, true},
		{`{"status":"Busy"}`, true},
		{`{"status":""}`, true},
		{`{"status":1}`, true},
		{`{"status":["busy"]}`, true},
		{`{"scope":"global"}`, true},
		{`{"scope":"Account"}`, true},
		{`{"scope":"account","status":"idle"}`, true},
		{`{"scope":"account","device":"phone"}`, true},
		{`{"mood":"happy"}`, true},
		{`{"user":"bob","status":"busy"}`, true},
		{`{"text":5}`, true},
		{`{"text":"a\nb"}`, true},
		{`{"text":"a\u0000b"}`, true},
		{`{"text":"a\u0085b"}`, true},
		{`{"text":"abc\u202edef"}`, true},
		{`{"text":"\u2067x\u2069"}`, true},
		{`{"text":"` + strings.Repeat("x", presence.MaxTextBytes+1) + `"}`, true},
		{`{"device":""}`, true},
		{`{"device":" phone"}`, true},
		{`{"device":"phone "}`, true},
		{`{"device":"a\tb"}`, true},
		{`{"device":"a\u00a0b"}`, true},
		{`{"device":"ph\u200bone"}`, true},
		{`{"device":"` + strings.Repeat("d", presence.MaxDeviceBytes+1) + `"}`, true},
		{`{"device":true}`, true},
		{`{"activity":false}`, true},
		{`{"activity":"true"}`, true},
		{`{"activity":1}`, true},
		{`{"Activity":true}`, true},
		{`{"invisible":true}`, true},
		{`{"scope":"session","last_seen":"quarter"}`, true},
		{`{"scope":"account","last_seen":"fuzzy"}`, true},
		{`{"scope":"account","last_seen":""}`, true},
		{`{"scope":"account","invisible":"yes"}`, true},
		{`{"scope":"account","Invisible":true}`, true},

		{`{"text":"` + strings.Repeat("é", presence.MaxTextBytes/2+1) + `"}`, false},     // 258 bytes, 129 characters
		{`{"device":"` + strings.Repeat("é", presence.MaxDeviceBytes/2+1) + `"}`, false}, // 66 bytes, 33 characters
		{`{"device":"pho\u0301ne"}`, false},                                              // ó not in NFC
		{`{"device":"\u0301phone"}`, false},                                              // a leading combining mark
		{`{"device":"ｐｈｏｎｅ"}`, false},                                                    // fullwidth: NFKC changes it
		{`{"device":"p\u0430ypal"}`, false},                                              // Latin with Cyrillic а
		{"{\"device\":\"phone\U000E0001\"}", false},                                      // a format character beyond the BMP
		{`{"text":"hi"` + strings.Repeat(" ", presence.MaxSetPayload) + `}`, false},      // over 1024 bytes
		{"{\"text\":\"a\xffb\"}", false},                                                 // not UTF-8
	} {
		if _, err := presence.ParseSetRequest([]byte(c.in)); err == nil {
			t.Errorf("ParseSetRequest(%s) accepts it; the case is wrong", c.in)
			continue
		}
		if c.expressible {
			mustRefuse(t, s, "refused request "+c.in, []byte(c.in))
		} else if err := check(s, []byte(c.in)); err != nil {
			t.Errorf("%s: the schema refuses it (%v): move it to the expressible cases", c.in, err)
		}
	}
}

// ParseSetRequest matches field names without regard to case (encoding/json
// does), so it accepts {"Status":"busy"}; the schema documents the lower
// case names and refuses the others. If ParseSetRequest comes to refuse
// them, drop this test.
func TestSetFieldNameCase(t *testing.T) {
	s := compile(t, schema.Set)
	for _, in := range []string{`{"Status":"busy"}`, `{"TEXT":"hi","Scope":"account"}`} {
		if _, err := presence.ParseSetRequest([]byte(in)); err == nil {
			t.Errorf("ParseSetRequest(%s) accepts a field name in capitals", in)
		}
		mustRefuse(t, s, "a field name in capitals", []byte(in))
	}
}

// ---- Characters ----

// defPattern returns the patterns of $defs/name in the schema file, as the
// validator compiles them (Go's regexp, its default engine).
func defPattern(t *testing.T, file, name string) []*regexp.Regexp {
	t.Helper()
	def := readDoc(t, file).(map[string]any)["$defs"].(map[string]any)[name].(map[string]any)
	var out []*regexp.Regexp
	add := func(d map[string]any) {
		if p, ok := d["pattern"].(string); ok {
			out = append(out, regexp.MustCompile(p))
		}
	}
	add(def)
	if all, ok := def["allOf"].([]any); ok {
		for _, d := range all {
			add(d.(map[string]any))
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: $defs/%s has no pattern", file, name)
	}
	return out
}

func matchAll(ps []*regexp.Regexp, s string) bool {
	for _, p := range ps {
		if !p.MatchString(s) {
			return false
		}
	}
	return true
}

// nextRune walks the code points a sweep tries: every one of the Basic
// Multilingual Plane, plane 1 (emoji, mathematical letters) and plane 14
// (tags, variation selectors); one in 16 of the Han planes 2 and 3 and of
// the private-use planes 15 and 16, one in 256 of the unassigned planes 4
// to 13 (the race detector makes a full sweep take a minute).
func nextRune(r rune) rune {
	switch {
	case r < 0x20000, r >= 0xE0000 && r < 0xF0000:
		return r + 1
	case r < 0x40000, r >= 0xF0000:
		return r + 16
	}
	return r + 256
}

// The character patterns never refuse what the server accepts: for each
// code point (see nextRune), a name the presence package accepts matches
// the schema's patterns. The text pattern is exact: it refuses what
// ValidText refuses.
func TestPatternsFollowTheServer(t *testing.T) {
	user := defPattern(t, schema.User, "user")
	group := defPattern(t, schema.GroupSnapshot, "group")
	device := defPattern(t, schema.User, "device")
	id := defPattern(t, schema.User, "session_id")
	text := defPattern(t, schema.User, "text")
	validUsers := 0
	for r := rune(0); r <= utf8.MaxRune; r = nextRune(r) {
		if !utf8.ValidRune(r) {
			continue // surrogates
		}
		c := string(r)
		if presence.ValidUser(c) == nil {
			validUsers++
			if !matchAll(user, c) {
				t.Errorf("user %q (%U) is valid but refused by the schema", c, r)
			}
		}
		if presence.ValidGroup(c) == nil && !matchAll(group, c) {
			t.Errorf("group %q (%U) is valid but refused by the schema", c, r)
		}
		for _, d := range []string{c, "1" + c + "1"} {
			if presence.ValidDevice(d) == nil && !matchAll(device, d) {
				t.Errorf("device %q (%U) is valid but refused by the schema", d, r)
			}
		}
		if presence.ValidSessionID(c) == nil && !matchAll(id, c) {
			t.Errorf("session id %q (%U) is valid but refused by the schema", c, r)
		}
		if ok := presence.ValidText(c) == nil; ok != matchAll(text, c) {
			t.Errorf("text %q (%U): ValidText accepts it: %v, the schema: %v", c, r, ok, !ok)
		}
	}
	if validUsers < 1000 {
		t.Fatalf("only %d one-character user names are valid: the sweep is broken", validUsers)
	}
	for _, name := range []string{"ann", "José", "山田太郎", "user.name-1_2", "Ωμέγα", "ann$", "o'brien"} {
		if err := presence.ValidUser(name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !matchAll(user, name) {
			t.Errorf("user %q is valid but refused by the schema", name)
		}
	}
}

// What presence.NodeStatus writes is valid, what the schema refuses
// ParseNodeStatus refuses too, and the reverse.
func TestNodePayloads(t *testing.T) {
	s := compile(t, schema.Node)
	good := map[string]presence.NodeStatus{
		"up":       {Node: "node-1", State: presence.NodeUp, Sessions: 0, Incarnation: "mx3xqq9p-5a9dcee719c5", At: at(0)},
		"draining": {Node: "a.b:c_d-1", State: presence.NodeDraining, Sessions: 15000, Incarnation: "i", At: at(time.Second)},
		"swept":    {Node: "C", State: presence.NodeDown, Incarnation: "i2", At: at(time.Minute), ReportedBy: "B"},
	}
	for name, n := range good {
		b, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		mustValid(t, s, name, b)
		if _, err := presence.ParseNodeStatus(b); err != nil {
			t.Errorf("%s: ParseNodeStatus: %v", name, err)
		}
	}
	up, _ := json.Marshal(good["up"])
	for _, c := range []struct {
		name   string
		change func(m map[string]any)
	}{
		{"no node", func(m map[string]any) { delete(m, "node") }},
		{"bad node", func(m map[string]any) { m["node"] = "a/b" }},
		{"bad state", func(m map[string]any) { m["state"] = "gone" }},
		{"negative sessions", func(m map[string]any) { m["sessions"] = -1 }},
		{"empty incarnation", func(m map[string]any) { m["incarnation"] = "" }},
		{"no at", func(m map[string]any) { delete(m, "at") }},
		{"bad reporter", func(m map[string]any) { m["reported_by"] = "a/b" }},
		{"unknown field", func(m map[string]any) { m["extra"] = 1 }},
	} {
		b := mutate(t, up, c.change)
		mustRefuse(t, s, c.name, b)
		if _, err := presence.ParseNodeStatus(b); err == nil {
			t.Errorf("%s: ParseNodeStatus accepted %s", c.name, b)
		}
	}
}

// presence/clock: what presence.Clock writes is valid (version 0 or a
// stamp), ParseClock reads it, and both refuse the same broken payloads.
func TestClockPayloads(t *testing.T) {
	s := compile(t, schema.Clock)
	good := map[string]presence.Clock{
		"first":          {Node: "node-1", Incarnation: "mx3xqq9p-5a9dcee719c5", Seq: 1, Time: at(0), Interval: 5 * time.Second},
		"with a version": {Node: "a.b:c_d-1", Incarnation: "i", Seq: 42, Version: 1796173236456001, Time: at(time.Second), Interval: time.Hour},
	}
	for name, c := range good {
		b := c.AppendJSON(nil)
		mustValid(t, s, name, b)
		if _, err := presence.ParseClock(b); err != nil {
			t.Errorf("%s: ParseClock: %v", name, err)
		}
	}
	first := good["with a version"].AppendJSON(nil)
	for _, c := range []struct {
		name   string
		change func(m map[string]any)
	}{
		{"no node", func(m map[string]any) { delete(m, "node") }},
		{"bad node", func(m map[string]any) { m["node"] = "a/b" }},
		{"empty incarnation", func(m map[string]any) { m["incarnation"] = "" }},
		{"seq 0", func(m map[string]any) { m["seq"] = 0 }},
		{"negative version", func(m map[string]any) { m["version"] = -1 }},
		{"no version", func(m map[string]any) { delete(m, "version") }},
		{"bad time", func(m map[string]any) { m["time"] = "yesterday" }},
		{"no interval", func(m map[string]any) { delete(m, "interval_ms") }},
		{"interval 0", func(m map[string]any) { m["interval_ms"] = 0 }},
		{"unknown field", func(m map[string]any) { m["extra"] = 1 }},
	} {
		b := mutate(t, first, c.change)
		mustRefuse(t, s, c.name, b)
		if _, err := presence.ParseClock(b); err == nil {
			t.Errorf("%s: ParseClock accepted %s", c.name, b)
		}
	}
}
