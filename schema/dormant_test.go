package schema_test

import (
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/schema"
)

// dormantPayloads are AppendJSON outputs of a device that sleeps by design,
// driven through the real operations: connected, dormant after its clean
// end, offline (reason missed) once its check-in is missed.
func dormantPayloads(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	rules := presence.NewRules(nil)
	commit := func(name string, u presence.User, now time.Time) presence.User {
		t.Helper()
		u, a, changed := u.Commit(rules, now)
		if !changed {
			t.Fatalf("%s: nothing to commit", name)
		}
		out[name] = a.AppendJSON(nil)
		return u
	}
	u, s, _, err := presence.User{}.Open(presence.OpenArgs{User: "sensor-7", ID: "s7", Node: "node-1", Device: "sensor",
		TTL: time.Minute, Expect: time.Hour, Margin: 6 * time.Minute}, at(0))
	if err != nil {
		t.Fatal(err)
	}
	u = commit("sleeper online", u, at(0))
	u, _, err = u.End(s.ID, s.Epoch, presence.EndClean, nil, at(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	u = commit("dormant", u, at(2*time.Second))
	u, _, ok := u.Miss(at(time.Hour + 6*time.Minute + 2*time.Second))
	if !ok {
		t.Fatal("not missed")
	}
	commit("missed", u, at(time.Hour+6*time.Minute+2*time.Second))
	return out
}

// A dormant payload, and the offline one of its missed check-in, are
// valid; a dormant payload that breaks the rules is refused.
func TestUserSchemaDormant(t *testing.T) {
	s := compile(t, schema.User)
	payloads := dormantPayloads(t)
	for name, b := range payloads {
		mustValid(t, s, name, b)
		p, err := presence.ParseAggregate(b)
		if err != nil {
			t.Errorf("%s: ParseAggregate: %v", name, err)
		}
		if (p.Status == presence.Dormant) != !p.NextExpected.IsZero() {
			t.Errorf("%s: status %s with next_expected %v", name, p.Status, p.NextExpected)
		}
	}
	dormant, online := payloads["dormant"], payloads["sleeper online"]
	for _, c := range []struct {
		name    string
		payload []byte
		change  func(m map[string]any)
	}{
		{"dormant without next_expected", dormant, func(m map[string]any) { delete(m, "next_expected") }},
		{"dormant with a session", dormant, func(m map[string]any) { m["sessions"] = mutateMap(online)["sessions"] }},
		{"dormant without last_seen", dormant, func(m map[string]any) { m["last_seen"] = nil }},
		{"dormant next_expected not a time", dormant, func(m map[string]any) { m["next_expected"] = "in an hour" }},
		{"online with next_expected", online, func(m map[string]any) { m["next_expected"] = "2026-11-30T13:00:00.000Z" }},
		{"offline with next_expected", payloads["missed"], func(m map[string]any) { m["next_expected"] = "2026-11-30T13:00:00.000Z" }},
	} {
		mustRefuse(t, s, c.name, mutate(t, c.payload, c.change))
	}
}
