package hooks_test

import (
	"errors"
	"net"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/internal/testkit"
)

// presence/notify/{user} is the one writable topic under the prefix while
// Options.Notify is set: the hook hands it over with whether the
// connection is a service account, answers the verdict, and counts.
func TestPublishNotify(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	srv := mqtt.New(&mqtt.Options{InlineClient: true})
	cl := srv.NewClient(server, "t", "ops-1", false)
	cl.Properties.Username = []byte("ops")
	cl.Properties.ProtocolVersion = 5
	var verdict hooks.NotifyVerdict
	var got []string
	h := hooks.New(hooks.Options{Prefix: "presence", Tracker: testkit.NopTracker{},
		Service: func(cl *mqtt.Client) bool { return string(cl.Properties.Username) == "ops" }})
	h.OnSessionEstablish(cl, packets.Packet{})
	publish := func(topic string) error {
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish}, TopicName: topic, Payload: []byte("x")}
		_, err := h.OnPublish(cl, pk)
		return err
	}
	// Off: read-only as the rest of the prefix.
	if err := publish("presence/notify/alice"); !errors.Is(err, packets.ErrRejectPacket) || h.Stats.WritesDenied.Load() != 1 {
		t.Fatalf("notify off: %v, writes denied %d", err, h.Stats.WritesDenied.Load())
	}
	h.SetNotify(func(_ *mqtt.Client, service bool, user string, _ packets.Packet) hooks.NotifyVerdict {
		got = append(got, user)
		if !service {
			t.Errorf("ops handed over as not a service account")
		}
		return verdict
	})
	for _, c := range []struct {
		topic   string
		verdict hooks.NotifyVerdict
		taken   bool
	}{
		{"presence/notify/alice", hooks.NotifyTaken, true},
		{"presence/notify/alice", hooks.NotifyDenied, false},
		{"presence/notify/alice", hooks.NotifyTooLarge, false},
		{"presence/notify/alice", hooks.NotifyBusy, false},
		{"presence/notify/a/b", hooks.NotifyTaken, false}, // not one user: never handed over
		{"presence/notify/+", hooks.NotifyTaken, false},
		{"presence/notify/", hooks.NotifyTaken, false},
	} {
		verdict = c.verdict
		err := publish(c.topic)
		if c.taken != errors.Is(err, packets.CodeSuccessIgnore) || !c.taken && !errors.Is(err, packets.ErrRejectPacket) {
			t.Errorf("%s with verdict %d: %v", c.topic, c.verdict, err)
		}
	}
	if len(got) != 4 || h.Stats.NotifyTaken.Load() != 1 || h.Stats.NotifyRefused.Load() != 6 {
		t.Errorf("handed over %v, taken %d, refused %d", got, h.Stats.NotifyTaken.Load(), h.Stats.NotifyRefused.Load())
	}
	// presence/set and the rest of the prefix are as before.
	if err := publish("presence/users/alice"); !errors.Is(err, packets.ErrRejectPacket) {
		t.Errorf("presence/users/alice: %v", err)
	}
}
