// Package lifecycle is the lifecycle outputs: every open and end of a
// client id's sessions (and every CONNECT this node refused), published in
// the dialects other brokers' consumers already parse: AWS IoT Core's
// $aws/events/presence/... and EMQX 5's $SYS/brokers/{node}/clients/...
//
// The dialects are pure encoders (aws.go, emqx.go): a presence.LifecycleEvent
// in, a topic and a payload out, the same on every node for the same event.
// The Stage (stage.go) derives the events with a Sequencer per mode (raw:
// every committed change; shown: what observers were shown), queues them in
// a bounded queue and publishes them from one goroutine of its own, never on
// a client's. Refusals (refusals.go) is the hook that tells the stage of
// every CONNECT this node refused, from the CONNACK it wrote.
package lifecycle
