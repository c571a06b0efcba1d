package lifecycle

import (
	"encoding/json"

	"github.com/presenced/presenced/presence"
)

// DefaultAWSPrefix is where AWS IoT Core publishes its lifecycle events.
const DefaultAWSPrefix = "$aws/events/presence"

// AWS is the AWS IoT Core dialect: {prefix}/connected/{clientId},
// {prefix}/disconnected/{clientId} and {prefix}/connect_failed/{clientId},
// with the fields AWS documents for each ("Lifecycle events", AWS IoT Core
// developer guide), in the order of its samples. thingName is never sent
// (presenced has no exclusive things).
type AWS struct {
	Prefix string // "": DefaultAWSPrefix
}

type awsConnected struct {
	ClientID            string `json:"clientId"`
	Timestamp           int64  `json:"timestamp"`
	EventType           string `json:"eventType"`
	SessionIdentifier   string `json:"sessionIdentifier"`
	PrincipalIdentifier string `json:"principalIdentifier"`
	IPAddress           string `json:"ipAddress"`
	VersionNumber       uint64 `json:"versionNumber"`
}

type awsDisconnected struct {
	ClientID                  string `json:"clientId"`
	Timestamp                 int64  `json:"timestamp"`
	EventType                 string `json:"eventType"`
	SessionIdentifier         string `json:"sessionIdentifier"`
	PrincipalIdentifier       string `json:"principalIdentifier"`
	ClientInitiatedDisconnect bool   `json:"clientInitiatedDisconnect"`
	DisconnectReason          string `json:"disconnectReason"`
	VersionNumber             uint64 `json:"versionNumber"`
}

type awsConnectFailed struct {
	ClientID             string `json:"clientId"`
	Timestamp            int64  `json:"timestamp"`
	EventType            string `json:"eventType"`
	ConnectFailureReason string `json:"connectFailureReason"`
	PrincipalIdentifier  string `json:"principalIdentifier"`
	IPAddress            string `json:"ipAddress"`
}

// AWSDisconnectReason is presenced's end reason in AWS's words.
// node_lost (the session's node stopped renewing: crashed or cut off) is
// CONNECTION_LOST, as AWS says of a connection that is cut; an unknown
// reason is UNKNOWN.
func AWSDisconnectReason(r presence.EndReason) string {
	switch r {
	case presence.EndClean:
		return "CLIENT_INITIATED_DISCONNECT"
	case presence.EndTimeout:
		return "MQTT_KEEP_ALIVE_TIMEOUT"
	case presence.EndNetwork, presence.EndNodeLost:
		return "CONNECTION_LOST"
	case presence.EndTakeover:
		return "DUPLICATE_CLIENTID"
	case presence.EndKicked, presence.EndDrain, presence.EndShutdown:
		return "SERVER_INITIATED_DISCONNECT"
	case presence.EndMissed: // a sleeping device's check-in did not come: AWS's word for silence
		return "MQTT_KEEP_ALIVE_TIMEOUT"
	}
	return "UNKNOWN"
}

// AWSConnectFailureReason is a refusal in AWS's words: AUTHORIZATION_FAILED
// is the value AWS documents; the others are AWS's disconnect reasons that
// fit (THROTTLED, CLIENT_ERROR, SERVER_INITIATED_DISCONNECT).
func AWSConnectFailureReason(r presence.EndReason) string {
	switch r {
	case RefusedAuth:
		return "AUTHORIZATION_FAILED"
	case RefusedThrottle:
		return "THROTTLED"
	case RefusedProtocol:
		return "CLIENT_ERROR"
	case RefusedServer:
		return "SERVER_INITIATED_DISCONNECT"
	}
	return "UNKNOWN"
}

// Encode implements Dialect.
func (d AWS) Encode(ev presence.LifecycleEvent) (string, []byte, bool) {
	id := ev.Session.ID
	if !topicLevel(id) {
		return "", nil, false
	}
	prefix := d.Prefix
	if prefix == "" {
		prefix = DefaultAWSPrefix
	}
	var v any
	switch ev.Kind {
	case presence.LifecycleConnected:
		v = awsConnected{ClientID: id, Timestamp: millis(ev), EventType: "connected",
			SessionIdentifier: SessionIdentifier(ev.User, id, ev.Session.Epoch), PrincipalIdentifier: ev.User,
			IPAddress: ev.Session.Conn.IP, VersionNumber: ev.Session.Epoch}
	case presence.LifecycleDisconnected:
		v = awsDisconnected{ClientID: id, Timestamp: millis(ev), EventType: "disconnected",
			SessionIdentifier: SessionIdentifier(ev.User, id, ev.Session.Epoch), PrincipalIdentifier: ev.User,
			ClientInitiatedDisconnect: ev.Reason == presence.EndClean, DisconnectReason: AWSDisconnectReason(ev.Reason),
			VersionNumber: ev.Session.Epoch}
	case presence.LifecycleConnectFailed:
		v = awsConnectFailed{ClientID: id, Timestamp: millis(ev), EventType: "connect_failed",
			ConnectFailureReason: AWSConnectFailureReason(ev.Reason), PrincipalIdentifier: ev.User, IPAddress: ev.Session.Conn.IP}
	default:
		return "", nil, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", nil, false
	}
	return prefix + "/" + ev.Kind.String() + "/" + id, b, true
}
