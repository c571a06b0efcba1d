// Package listener provides MQTT listeners (TCP and WebSocket) for the
// mochi-mqtt broker whose connections never let one client that does not
// read hold up the rest of the broker.
//
// # The problem
//
// mochi writes every packet to a client's net.Conn while holding that
// client's lock (Client.WritePacket), and every QoS 1 or 2 delivery to the
// client takes the same lock first (Client.NextPacketID, from
// Server.publishToClient). With mochi's own listeners, a client that stops
// reading its socket makes the broker's write block as soon as the client's
// TCP window and the kernel's send buffer are full; from then on every
// goroutine that publishes to that client with QoS > 0 waits for the blocked
// write, which may last until the client's keep-alive ends. Server.Publish
// from the embedding program is one of those goroutines, and so is
// Server.Close, which writes a DISCONNECT to every client.
//
// # What this package does about it
//
// The listeners hand mochi a *Conn instead of the bare socket. Its Write never
// waits for the network: it tries the socket once without blocking, and the
// bytes the kernel does not take at once join a per-connection backlog that a
// goroutine of the connection writes out. A client whose backlog would grow
// over Config.MaxBacklog, or that takes no byte for Config.WriteTimeout, is a
// slow consumer (the term nats-server uses; mosquitto bounds its queue the
// same way): its connection is reset, its reads and writes fail with
// ErrSlowConsumer from then on, and Stats counts it. So a client that does
// not read costs at most MaxBacklog bytes and WriteTimeout, and delays no
// one else.
//
// An idle connection costs only its *Conn: no goroutine and no buffer. The
// goroutine and the backlog exist only while bytes are waiting.
//
// The listeners also add what mochi's own lack:
//
//   - a CONNECT timeout: mochi sets no deadline before it has read CONNECT, so
//     a socket that never speaks would be held forever, and would also keep
//     Server.Close waiting for it;
//   - Close closes the connections that have not sent CONNECT yet, and waits
//     for every goroutine the listener started;
//   - Close can disconnect the listener's clients without mochi's
//     closeListenerClients, which can deadlock (see Config.Server);
//   - both bind their port in Init, so a port in use is an error from
//     Server.AddListener, and an Address of ":0" reports the port it got.
//
// # TLS
//
// With Config.TLS set, the TCP listener serves MQTT over TLS and the
// WebSocket listener serves wss. The TLS layer sits on top of the *Conn
// (socket, *Conn, crypto/tls, then WebSocket for wss), so it hands its
// encrypted records to a Write that never waits: everything above holds for
// TLS clients too. The handshake runs in the connection's own goroutine,
// within ConnectTimeout; a client that never completes it is closed then,
// and Close does not wait for it. Failed handshakes count in
// Stats.TLSFailures.
//
// LoadTLS reads the certificate, key and optional client CAs from PEM
// files, and its Reload reads them again (on SIGHUP, say) for the
// handshakes that follow. With client CAs, PeerCertificate(cl.Net.Conn)
// gives a hook the client's verified certificate.
//
// # Use
//
//	srv := mqtt.New(&mqtt.Options{InlineClient: true})
//	srv.Options.Capabilities.MaximumPacketSize = 1 << 20 // refuse larger packets before reading them
//	tcp := listener.NewTCP(listener.Config{ID: "tcp", Address: ":1883", Server: srv})
//	if err := srv.AddListener(tcp); err != nil {
//		return err // the port is in use, for example
//	}
//	ws := listener.NewWebSocket(listener.Config{ID: "ws", Address: ":8080", Server: srv})
//	if err := srv.AddListener(ws); err != nil {
//		return err
//	}
//	certs, err := listener.LoadTLS(listener.TLSFiles{CertFile: "server.pem", KeyFile: "server.key"})
//	if err != nil {
//		return err // the error names the file
//	}
//	mqtts := listener.NewTCP(listener.Config{ID: "tls", Address: ":8883", Server: srv, TLS: certs.Config()})
//	if err := srv.AddListener(mqtts); err != nil {
//		return err
//	}
//	// and on SIGHUP: if err := certs.Reload(); err != nil { log it; the old certificate stays }
//	return srv.Serve()
//
// A hook can tell a slow consumer from other ends in OnDisconnect: the error
// mochi passes is ErrSlowConsumer, for TCP and WebSocket clients alike, with
// TLS or without (and From(cl.Net.Conn) gives the *Conn, whose SlowConsumer
// reports it too).
package listener
