package notify

import (
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/presenced/presenced/webhook"
)

// Pusher sends an event this node alone originates (webhook.Hub.SendHere):
// it must return at once (the hub queues, batches and retries). The
// event's ID is the message's id, its idempotency key.
type Pusher interface {
	SendHere(webhook.Event)
}

// EventType is the type of a notify event.
const EventType = "notify"

// The reasons of a push.
const (
	ReasonOffline    = "offline"     // the user was offline when the message came
	ReasonGraceEnded = "grace_ended" // the user was still offline when the grace ended
)

// eventData is a notify event's data.
type eventData struct {
	Topic    string    `json:"topic"`
	Payload  string    `json:"payload"`
	Encoding string    `json:"encoding"` // "text" (valid UTF-8) or "base64"
	Reason   string    `json:"reason"`
	QueuedAt time.Time `json:"queued_at"`
}

// event is the push of m for reason, at now.
func event(topic string, m Message, reason string, now time.Time) webhook.Event {
	d := eventData{Topic: topic, Reason: reason, QueuedAt: m.QueuedAt, Encoding: "text", Payload: string(m.Payload)}
	if !utf8.Valid(m.Payload) {
		d.Encoding, d.Payload = "base64", base64.StdEncoding.EncodeToString(m.Payload)
	}
	b, _ := json.Marshal(d) // strings and a time: cannot fail
	return webhook.Event{ID: m.ID, Type: EventType, User: m.User, At: now, Data: b}
}
