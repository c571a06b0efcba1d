package testkit

import (
	"io"
	"net"
)

// Streamed returns w as a loopback TCP connection whose bytes are carried
// to and from w by two goroutines, for a client that writes one packet in
// several Writes from several goroutines, as paho.golang does: it writes a
// packet with net.Buffers.WriteTo, which is one writev on a socket (Go
// serialises whole writes on one socket) but one Write per buffer on any
// other net.Conn (a WSConn, a *tls.Conn), so its keep-alive PINGREQ (sent
// as soon as it connects) or a PUBACK could land between a SUBSCRIBE's
// fixed header and its body, which the broker rightly refuses as
// malformed. Closing either end closes the other; both goroutines end
// then.
func Streamed(w net.Conn) (net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, err
	}
	server, err := ln.Accept()
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	go func() { // the client's bytes, in order (over a WSConn, as WebSocket messages)
		_, _ = io.Copy(w, server)
		_ = w.Close()
		_ = server.Close()
	}()
	go func() { // the broker's messages, as the client's stream
		_, _ = io.Copy(server, w)
		_ = server.Close()
		_ = w.Close()
	}()
	return client, nil
}
