package lifecycle

import (
	"encoding/json"

	"github.com/presenced/presenced/presence"
)

// DefaultEMQXPrefix is where EMQX publishes its system topics.
const DefaultEMQXPrefix = "$SYS/brokers"

// EMQX is the EMQX 5 dialect: {prefix}/{node}/clients/{clientid}/connected
// and .../disconnected, {node} being the node the session was on (the same
// topic from every node), with the fields of EMQX 5's emqx_sys messages.
// EMQX has no event for a refused CONNECT: connect_failed is not sent.
type EMQX struct {
	Prefix string // "": DefaultEMQXPrefix
}

// emqxEvent is both messages: the connected one has keepalive, clean_start
// and expiry_interval; the disconnected one reason and disconnected_at.
type emqxEvent struct {
	ClientID       string  `json:"clientid"`
	Username       *string `json:"username"` // null without one, as EMQX 5 sends undefined
	IPAddress      string  `json:"ipaddress"`
	SockPort       int     `json:"sockport"`
	Protocol       string  `json:"protocol"`
	ProtoName      string  `json:"proto_name"`
	ProtoVer       uint8   `json:"proto_ver"`
	ConnectedAt    int64   `json:"connected_at"`
	TS             int64   `json:"ts"`
	Keepalive      *uint16 `json:"keepalive,omitempty"`
	CleanStart     *bool   `json:"clean_start,omitempty"`
	ExpiryInterval *int64  `json:"expiry_interval,omitempty"`
	Connack        *int    `json:"connack,omitempty"` // 0 on connected, as EMQX's documented sample has it
	Reason         string  `json:"reason,omitempty"`
	DisconnectedAt int64   `json:"disconnected_at,omitempty"`
}

// EMQXReason is presenced's end reason as one of EMQX's reason atoms where
// one fits (normal, keepalive_timeout, sock_closed, takenover, kicked), and
// new ones, documented, where none does: drain (the node drained and moved
// the client), shutdown (its node shut down), node_lost (its node stopped
// renewing: crashed or cut off), missed (a device that sleeps by design
// did not check in in time; presence/dormant.go); an unknown reason is
// unknown.
func EMQXReason(r presence.EndReason) string {
	switch r {
	case presence.EndClean:
		return "normal"
	case presence.EndTimeout:
		return "keepalive_timeout"
	case presence.EndNetwork:
		return "sock_closed"
	case presence.EndTakeover:
		return "takenover"
	case presence.EndKicked:
		return "kicked"
	case presence.EndDrain:
		return "drain"
	case presence.EndShutdown:
		return "shutdown"
	case presence.EndNodeLost:
		return "node_lost"
	case presence.EndMissed: // a sleeping device's check-in did not come
		return "missed"
	}
	return "unknown"
}

// protoName is the protocol name of the CONNECT of version v.
func protoName(v uint8) string {
	if v == 3 {
		return "MQIsdp"
	}
	return "MQTT"
}

// Encode implements Dialect.
func (d EMQX) Encode(ev presence.LifecycleEvent) (string, []byte, bool) {
	s := ev.Session
	if !topicLevel(s.ID) || ev.Kind == presence.LifecycleConnectFailed || s.Node == "" {
		return "", nil, false
	}
	prefix := d.Prefix
	if prefix == "" {
		prefix = DefaultEMQXPrefix
	}
	c := s.Conn
	e := emqxEvent{ClientID: s.ID, IPAddress: c.IP, SockPort: c.Port, Protocol: "mqtt",
		ProtoName: protoName(c.ProtoVer), ProtoVer: c.ProtoVer, TS: millis(ev)}
	if c.Username != "" {
		e.Username = &c.Username
	}
	if !s.ConnectedAt.IsZero() {
		e.ConnectedAt = s.ConnectedAt.UnixMilli()
	}
	switch ev.Kind {
	case presence.LifecycleConnected:
		keep, clean, expiry := c.KeepAlive, c.CleanStart, int64(c.Expiry)*1000 // EMQX 5 keeps it in ms
		connack := 0
		e.Keepalive, e.CleanStart, e.ExpiryInterval, e.Connack = &keep, &clean, &expiry, &connack
	case presence.LifecycleDisconnected:
		e.Reason = EMQXReason(ev.Reason)
		e.DisconnectedAt = millis(ev)
	default:
		return "", nil, false
	}
	b, err := json.Marshal(e)
	if err != nil {
		return "", nil, false
	}
	return prefix + "/" + s.Node + "/clients/" + s.ID + "/" + ev.Kind.String(), b, true
}
