// Package sparkplug makes the broker a Sparkplug B aware MQTT server
// (Sparkplug 3.0, chapter 10), opt-in, on one node: it keeps a retained copy
// of the latest NBIRTH and DBIRTH of every edge node and device under
// $sparkplug/certificates/, and it tracks each edge node's bdSeq from its
// NBIRTH, so that an NDEATH whose bdSeq is not the live birth's, the stale
// death of an earlier connection, is flagged and, when asked, dropped.
//
// The package has three parts, each in a file of its own: the topic
// namespace (topic.go), the decoder of the few fields of a Sparkplug B
// payload the server reads (payload.go, protobuf wire format, no generated
// code), the edge nodes' state (edges.go: pure, bounded, the time an
// input), and the mochi hook that ties them to the broker (hook.go).
//
// A node holds the state of the edge nodes connected to it: presenced's
// nodes do not route MQTT messages between each other, so an edge node and
// the host applications that read it share a node, as they share a broker.
package sparkplug
