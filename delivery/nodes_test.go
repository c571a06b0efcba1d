package delivery

import (
	"io"
	"log/slog"
	"net"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// The node topics' interest: Outlet.Subscribed answers from mochi's index,
// a "+" level matching only a wildcard there. (The interest stage tells
// the nodes stage of each filter that can read a node topic: interest's
// TestNodeFilters.)
func TestNodeTopicsSubscribed(t *testing.T) {
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	d := NewDelivery(DeliveryOptions{Prefix: "presence", Server: srv})
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	cl := srv.NewClient(a, "t", "obs", false)
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
