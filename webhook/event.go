package webhook

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/presenced/presenced/presence"
)

// Event is one event sent to the endpoints. ID is its idempotency key: the
// same transition carries the same ID whichever node sends it and however
// often, so a receiver drops an ID it has seen.
type Event struct {
	ID      string          `json:"id"` // idempotency key
	Type    string          `json:"type"`
	User    string          `json:"user"`
	Version uint64          `json:"version,omitempty"`
	At      time.Time       `json:"at"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// The event types this package makes (others, such as a notify's, are the
// sender's own).
const (
	UserOnline    = "user.online"    // a user was shown online (any status but offline) after offline
	UserOffline   = "user.offline"   // a user was shown offline
	UserStatus    = "user.status"    // a user's status or text changed while online
	SessionOpened = "session.opened" // a session opened (lifecycle, shown)
	SessionEnded  = "session.ended"  // a session ended (lifecycle, shown)
)

// UserTypes are the user transitions, the default of an endpoint's events.
var UserTypes = []string{UserOnline, UserOffline, UserStatus}

// UserData is the data of a user transition.
type UserData struct {
	Status   presence.Status `json:"status"`
	Text     string          `json:"text"`
	Since    time.Time       `json:"since"`
	LastSeen *time.Time      `json:"last_seen,omitempty"` // offline only
	Sessions int             `json:"sessions"`            // live sessions
	// Previous is what observers were shown before.
	PreviousStatus presence.Status `json:"previous_status,omitempty"`
	PreviousText   string          `json:"previous_text,omitempty"`
}

// SessionData is the data of a session event.
type SessionData struct {
	ClientID    string             `json:"client_id"`
	Epoch       uint64             `json:"epoch"`
	Node        string             `json:"node"`
	Device      string             `json:"device,omitempty"`
	ConnectedAt time.Time          `json:"connected_at"`
	Reason      presence.EndReason `json:"reason,omitempty"` // session.ended: why ("" unknown)
}

// UserID is the idempotency key of a user transition: the user and the
// version observers were shown.
func UserID(user string, version uint64) string {
	return user + "@" + strconv.FormatUint(version, 10)
}

// FromShown is the transition observers were shown when a was published
// over before (publisher.Options.Published): user.online, user.offline or
// user.status, or false when what changed is not a transition (an offline
// user's text, the sessions behind an unchanged status, or a user first
// shown here offline: nothing to announce).
func FromShown(a presence.Aggregate, before presence.Shown) (Event, bool) {
	wasOn := before.Version != 0 && before.Status != presence.Offline && before.Status != ""
	isOn := a.Status != presence.Offline && a.Status != ""
	var typ string
	switch {
	case isOn && !wasOn:
		typ = UserOnline
	case !isOn && wasOn:
		typ = UserOffline
	case isOn && (a.Status != before.Status || a.Text != before.Text):
		typ = UserStatus
	default:
		return Event{}, false
	}
	d := UserData{Status: a.Status, Text: a.Text, Since: a.Since, Sessions: len(a.Sessions)}
	if before.Version != 0 {
		d.PreviousStatus, d.PreviousText = before.Status, before.Text
	}
	at := a.Since
	if !isOn {
		ls := a.LastSeen
		d.LastSeen = &ls
		if !ls.IsZero() {
			at = ls
		}
	}
	data, _ := json.Marshal(d) // plain fields: cannot fail
	return Event{ID: UserID(a.User, a.Version), Type: typ, User: a.User, Version: a.Version, At: at, Data: data}, true
}

// FromLifecycle is a session.opened or session.ended event of a lifecycle
// event, or false for a kind webhooks do not send (a refused CONNECT).
func FromLifecycle(ev presence.LifecycleEvent) (Event, bool) {
	var typ, what string
	switch ev.Kind {
	case presence.LifecycleConnected:
		typ, what = SessionOpened, "opened"
	case presence.LifecycleDisconnected:
		typ, what = SessionEnded, "ended"
	default:
		return Event{}, false
	}
	s := ev.Session
	d := SessionData{ClientID: s.ID, Epoch: s.Epoch, Node: s.Node, Device: s.Device, ConnectedAt: s.ConnectedAt}
	if ev.Kind == presence.LifecycleDisconnected {
		d.Reason = ev.Reason
	}
	data, _ := json.Marshal(d)
	id := UserID(ev.User, ev.Version) + "/" + what + "/" + s.ID + "/" + strconv.FormatUint(s.Epoch, 10)
	return Event{ID: id, Type: typ, User: ev.User, Version: ev.Version, At: ev.At, Data: data}, true
}
