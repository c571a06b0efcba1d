package delivery

import (
	"errors"
	"strings"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/presence"
)

// Seeds of the fuzz targets are in testdata/fuzz/<FuzzName>.

// FuzzIdentify checks IdentityRule.Identify under both rules: from the
// username, and from the client id split at sep. An error wraps ErrBadName
// and comes with no identity; an observer has neither user nor device; a
// user passes ValidUser, names exactly one presence/users/{user} topic, and
// comes with a usable session id and, if any, a valid device.
func FuzzIdentify(f *testing.F) {
	d := NewDelivery(DeliveryOptions{Prefix: "presence"})
	f.Fuzz(func(t *testing.T, username, clientID, sep string) {
		for _, rule := range []hooks.IdentityRule{{}, {FromClientID: true, Separator: sep}} {
			id, err := rule.Identify(username, clientID)
			if err != nil {
				if !errors.Is(err, presence.ErrBadName) {
					t.Fatalf("%+v.Identify(%q, %q): error %v does not wrap ErrBadName", rule, username, clientID, err)
				}
				if id != (hooks.Identity{}) {
					t.Fatalf("%+v.Identify(%q, %q) failed with identity %+v", rule, username, clientID, id)
				}
				continue
			}
			if id.Observer() {
				if id != (hooks.Identity{}) {
					t.Fatalf("%+v.Identify(%q, %q): observer with %+v", rule, username, clientID, id)
				}
				if rule.FromClientID && strings.Contains(clientID, sep) || !rule.FromClientID && username != "" {
					t.Fatalf("%+v.Identify(%q, %q): observer, but the connection names a user", rule, username, clientID)
				}
				continue
			}
			if err := presence.ValidUser(id.User); err != nil {
				t.Fatalf("%+v.Identify(%q, %q) = %+v, but %v", rule, username, clientID, id, err)
			}
			if err := presence.ValidSessionID(clientID); err != nil {
				t.Fatalf("%+v.Identify(%q, %q) = %+v, but %v", rule, username, clientID, id, err)
			}
			if id.Device != "" {
				if err := presence.ValidDevice(id.Device); err != nil {
					t.Fatalf("%+v.Identify(%q, %q) = %+v, but %v", rule, username, clientID, id, err)
				}
			}
			if rule.FromClientID {
				if id.User+sep+id.Device != clientID || strings.Contains(id.User, sep) {
					t.Fatalf("%+v.Identify(%q, %q) = %+v: not the client id split at the first separator", rule, username, clientID, id)
				}
			} else if id.User != username || id.Device != "" {
				t.Fatalf("%+v.Identify(%q, %q) = %+v, want the username and no device", rule, username, clientID, id)
			}
			// The user is one topic level that can be published and read back.
			topic := d.users + id.User
			if !mqtt.IsValidFilter(topic, true) || strings.Count(topic, "/") != 2 {
				t.Fatalf("user %q: topic %q cannot be published", id.User, topic)
			}
			if u, ok := d.user(topic); !ok || u != id.User {
				t.Fatalf("user %q: topic %q reads back as %q, %v", id.User, topic, u, ok)
			}
			if !d.canMatchUsers(topic) {
				t.Fatalf("user %q: canMatchUsers(%q) is false", id.User, topic)
			}
		}
	})
}

// specMatch reports whether an MQTT filter matches a topic name by MQTT
// 5.0 section 4.7. auth.MatchTopic, mochi's matcher, is the base; it also
// matches a topic longer than the filter ("a" matches "a/b") and misses
// that "a/#" matches "a" (the parent level, 4.7.1.2), so both are put right.
func specMatch(filter, topic string) bool {
	fl, tl := strings.Count(filter, "/")+1, strings.Count(topic, "/")+1
	if strings.HasSuffix(filter, "/#") || filter == "#" {
		if parent, ok := strings.CutSuffix(filter, "/#"); ok && strings.Count(parent, "/")+1 == tl {
			if _, m := auth.MatchTopic(parent, topic); m {
				return true
			}
		}
	} else if fl != tl {
		return false
	}
	_, m := auth.MatchTopic(filter, topic)
	return m
}

// indexMatch reports whether mochi's topic index delivers topic to a
// subscription to filter, live or as a retained message.
func indexMatch(filter, topic string) bool {
	x := mqtt.NewTopicsIndex()
	x.Subscribe("c", packets.Subscription{Filter: filter})
	if _, ok := x.Subscribers(topic).Subscriptions["c"]; ok {
		return true
	}
	x.RetainMessage(packets.Packet{TopicName: topic, Payload: []byte("p")})
	for _, pk := range x.Messages(filter) {
		if pk.TopicName == topic {
			return true
		}
	}
	return false
}

// FuzzCanMatchUsers checks the Delivery hook's canMatchUsers against MQTT
// matching. For a valid filter that is not shared, canMatchUsers is true
// exactly when the filter matches presence/users/{u} for some single level
// u: the oracle tries u = x, u = y-z and the filter's third level when it
// is not a wildcard (a filter naming a user matches that user only). And whatever mochi's
// index delivers to the filter, live or retained, canMatchUsers must have
// seen coming: the fence depends on it. A shared filter never needs the
// fence (no retained messages).
func FuzzCanMatchUsers(f *testing.F) {
	d := NewDelivery(DeliveryOptions{Prefix: "presence"})
	f.Fuzz(func(t *testing.T, filter string) {
		got := d.canMatchUsers(filter) // never panics, valid or not
		if !mqtt.IsValidFilter(filter, false) {
			return
		}
		if mqtt.IsSharedFilter(filter) {
			if got {
				t.Fatalf("canMatchUsers(%q) is true for a shared filter", filter)
			}
			return
		}
		// Only the filter's third level can stand for the user level.
		users := []string{"x", "y-z"}
		if levels := strings.SplitN(filter, "/", 4); len(levels) >= 3 && levels[2] != "+" && levels[2] != "#" {
			users = append(users, levels[2])
		}
		spec, index := false, false
		for _, u := range users {
			topic := d.users + u
			spec = spec || specMatch(filter, topic)
			index = index || indexMatch(filter, topic)
		}
		if got != spec {
			t.Fatalf("canMatchUsers(%q) = %v, but the filter matches a user topic: %v", filter, got, spec)
		}
		if index && !got {
			t.Fatalf("canMatchUsers(%q) = false, but mochi delivers a user topic to it", filter)
		}
	})
}
