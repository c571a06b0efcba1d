package delivery

import (
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// The node topics' interest: OnSubscribe tells NodeTopics of each filter
// that can match presence/nodes/{node}, and Outlet.Subscribed answers from
// mochi's index, a "+" level matching only a wildcard there.
func TestNodeTopicsInterest(t *testing.T) {
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var told []string
	d := NewDelivery(DeliveryOptions{Prefix: "presence", Server: srv, NodeTopics: func(f string) { told = append(told, f) }})
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	cl := srv.NewClient(a, "t", "obs", false)
	filters := []string{"presence/nodes/A", "presence/users/+", "presence/#", "presence/nodes/+/x", "#"}
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe}}
	for _, f := range filters {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f})
	}
	d.OnSubscribe(cl, pk)
	d.OnPacketProcessed(cl, pk, nil) // the fence the users' filter took
	if want := []string{"presence/nodes/A", "presence/#", "#"}; !slices.Equal(told, want) {
		t.Fatalf("told %v, want %v", told, want)
	}

	o := NewOutlet(srv, d)
	for _, tc := range []struct {
		filter string
		topics map[string]bool
	}{
		{"presence/nodes/A", map[string]bool{"presence/nodes/A": true, "presence/nodes/B": false, "presence/nodes/+": false}},
		{"presence/nodes/+", map[string]bool{"presence/nodes/A": true, "presence/nodes/+": true, "presence/users/A": false}},
		{"presence/#", map[string]bool{"presence/nodes/B": true, "presence/nodes/+": true}},
		{"presence/users/+", map[string]bool{"presence/nodes/+": false, "presence/nodes/A": false}},
	} {
		srv.Topics.Subscribe(cl.ID, packets.Subscription{Filter: tc.filter})
		for topic, want := range tc.topics {
			if got := o.Subscribed(topic); got != want {
				t.Errorf("subscribed to %s: Subscribed(%s) = %v, want %v", tc.filter, topic, got, want)
			}
		}
		srv.Topics.Unsubscribe(tc.filter, cl.ID)
	}
}
