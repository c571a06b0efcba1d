package hooks

import (
	"net"
	"strconv"

	mqtt "github.com/mochi-mqtt/server/v2"

	"github.com/presenced/presenced/presence"
)

// connFacts is what the store keeps of a connection with its session (the
// lifecycle outputs tell it): read from mochi's client at
// OnSessionEstablish, after CONNECT was parsed and the OnConnect hooks ran
// (Limits may have set the keep-alive the server gives), on the client's
// own goroutine. srv, when set, caps the session expiry as the CONNACK
// will (mochi caps it only when it writes the CONNACK, after this hook).
func connFacts(cl *mqtt.Client, srv *mqtt.Server) presence.Conn {
	c := presence.Conn{
		Username:   string(cl.Properties.Username),
		IP:         hostOf(cl.Net.Remote),
		Listener:   cl.Net.Listener,
		ProtoVer:   cl.Properties.ProtocolVersion,
		KeepAlive:  cl.State.Keepalive,
		CleanStart: cl.Properties.Clean,
	}
	if cl.Net.Conn != nil {
		if a := cl.Net.Conn.LocalAddr(); a != nil {
			c.Port = portOf(a)
		}
	}
	if c.ProtoVer == 5 {
		c.Expiry = cl.Properties.Props.SessionExpiryInterval
		if srv != nil && srv.Options != nil && srv.Options.Capabilities != nil {
			c.Expiry = min(c.Expiry, srv.Options.Capabilities.MaximumSessionExpiryInterval)
		}
	}
	return c.Bounded()
}

// hostOf is the address of "host:port" without the port (the whole of
// anything else).
func hostOf(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// portOf is the port of a local address (0 when it has none).
func portOf(a net.Addr) int {
	switch t := a.(type) {
	case *net.TCPAddr:
		return t.Port
	case *net.UDPAddr:
		return t.Port
	}
	if _, p, err := net.SplitHostPort(a.String()); err == nil {
		if n, err := strconv.Atoi(p); err == nil && n > 0 && n <= 65535 {
			return n
		}
	}
	return 0
}
