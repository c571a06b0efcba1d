package schema_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/schema"
	"github.com/presenced/presenced/webhook"
)

// The events package webhook makes, in a body as an endpoint receives it,
// are valid; a body the schema must refuse is refused.
func TestWebhookBodies(t *testing.T) {
	s := compile(t, schema.Webhook)
	sess := presence.SessionView{ID: "alice/phone", Epoch: 3, Node: "node-1", Device: "phone", Status: presence.Online, ConnectedAt: at(0)}
	on := presence.Aggregate{User: "alice", Status: presence.Online, Version: 10, Since: at(0), Sessions: []presence.SessionView{sess}}
	away := on
	away.Status, away.Text, away.Version = presence.Away, "lunch", 11
	off := presence.Aggregate{User: "alice", Status: presence.Offline, Version: 12, Since: at(time.Minute), LastSeen: at(time.Minute)}
	var events []webhook.Event
	for _, c := range []struct {
		a      presence.Aggregate
		before presence.Shown
	}{{on, presence.Shown{}}, {away, on.Shown()}, {off, away.Shown()}} {
		ev, ok := webhook.FromShown(c.a, c.before)
		if !ok {
			t.Fatalf("no transition for %+v", c.a)
		}
		events = append(events, ev)
	}
	for _, le := range []presence.LifecycleEvent{
		{Kind: presence.LifecycleConnected, User: "alice", Session: sess, At: at(0), Version: 10},
		{Kind: presence.LifecycleDisconnected, User: "alice", Session: sess, Reason: presence.EndNetwork, At: at(time.Minute), Version: 12},
	} {
		ev, _ := webhook.FromLifecycle(le)
		events = append(events, ev)
	}
	events = append(events, webhook.Event{ID: "n-1", Type: "notify.push", User: "bob", At: at(0), Data: json.RawMessage(`{"anything":1}`)})
	valid := func(body any) error {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		return s.Validate(doc)
	}
	if err := valid(map[string]any{"events": events}); err != nil {
		t.Fatalf("a body of the package's events is refused: %v", err)
	}
	bad := events[0]
	bad.Data = json.RawMessage(`{"status":"sleepy","text":"","since":"2026-11-30T12:00:00Z","sessions":1}`)
	noData := events[2]
	noData.Data = nil
	for name, body := range map[string]any{
		"no events":                 map[string]any{"events": []any{}},
		"an unknown field":          map[string]any{"events": events[:1], "more": true},
		"a bad status":              map[string]any{"events": []webhook.Event{bad}},
		"a user event without data": map[string]any{"events": []webhook.Event{noData}},
	} {
		if valid(body) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
