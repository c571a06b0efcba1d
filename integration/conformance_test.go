package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/presenced/presenced/configs"
)

// Issue 18 (a conformance regression): the Eclipse paho interoperability
// suite's MQTT 5 test_request_response failed 3 of 3 with presence on and
// passed with it off. Two MQTT 5 clients without user names (myclientid,
// myclientid2) connect with Clean Start; both subscribe TopicA at QoS 2
// with No Local; the requester publishes QoS 1 with a Response Topic and
// Correlation Data; the responder must receive it. The suite connects the
// same client ids test after test, right after the last test's
// DISCONNECTs, and the broker often meets the new CONNECT before it has
// read that DISCONNECT: a takeover of a connection that is ending.
// Presence counted those as a takeover battle and, once five came within
// the window, refused the next (CONNACK 0x9F): the refused responder never
// received the request. Each round here connects right after the last
// round's DISCONNECTs, 150 rounds; every connection must be accepted and
// the requests received (see the bound below), with presence on as with it
// off. The requester's SUBACK latency is logged for both.
func TestRequestResponseInterop(t *testing.T) {
	for _, mode := range []string{"on", "off"} {
		t.Run("presence-"+mode, func(t *testing.T) {
			n := startNode(t, func(c *configs.Config) { c.Presence.Mode = mode })
			const rounds = 150
			lost := 0
			var subacks []time.Duration
			for r := range rounds {
				ok, d := requestResponseRound(t, n.MQTTAddr(), r)
				if !ok {
					lost++
				}
				subacks = append(subacks, d)
			}
			slices.Sort(subacks)
			t.Logf("presence %s: %d of %d requests lost; requester SUBACK latency median %v, p90 %v, max %v",
				mode, lost, rounds, subacks[len(subacks)/2], subacks[len(subacks)*9/10], subacks[len(subacks)-1])
			// A reconnect that meets the old connection still live is a
			// takeover, and mochi v2.7.9's own takeover can drop the new
			// connection's subscription (the old connection's clean-up
			// runs before it is marked taken over): bare mochi lost 1 of
			// 150 now and then on a busy machine. A few are its share.
			if lost > 2 {
				t.Errorf("presence %s: the responder missed %d of %d requests", mode, lost, rounds)
			}
		})
	}
}

// requestResponseRound runs the scenario once and reports whether the
// responder received the request, and how long the requester's SUBSCRIBE
// took to be acknowledged.
func requestResponseRound(t *testing.T, addr string, round int) (bool, time.Duration) {
	t.Helper()
	requester := dial5(t, addr, "myclientid", "")
	responder := dial5(t, addr, "myclientid2", "")
	defer requester.disconnect()
	defer responder.disconnect()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub := &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "TopicA", QoS: 2, NoLocal: true}}}
	respSub := make(chan error, 1)
	go func() {
		_, err := responder.Subscribe(ctx, sub)
		respSub <- err
	}()
	start := time.Now()
	if _, err := requester.Subscribe(ctx, sub); err != nil {
		t.Fatalf("round %d: requester subscribe: %v", round, err)
	}
	subackIn := time.Since(start)
	// The suite publishes without waiting for the responder's SUBACK; on
	// a busy machine bare mochi then loses a request now and then too
	// (measured: 1-2 of 150 with two busy loops beside it, presence on or
	// off), so this waits for it: a loss here is a broker's fault.
	if err := <-respSub; err != nil {
		t.Fatalf("round %d: responder subscribe: %v", round, err)
	}
	corr := []byte(fmt.Sprintf("334-%d", round))
	if _, err := requester.Publish(ctx, &paho.Publish{Topic: "TopicA", QoS: 1, Payload: []byte("request"),
		Properties: &paho.PublishProperties{ResponseTopic: "TopicA", CorrelationData: corr}}); err != nil {
		t.Fatalf("round %d: request: %v", round, err)
	}
	// The paho suite waits up to 3 s for the request.
	deadline := time.After(3 * time.Second)
	for {
		select {
		case m := <-responder.msgs:
			if string(m.Properties.CorrelationData) == string(corr) {
				return true, subackIn
			}
		case <-deadline:
			return false, subackIn
		}
	}
}
