package presenced_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/packets"

	presenced "github.com/presenced/presenced"
	"github.com/presenced/presenced/presence"
)

// Presence added to a program's own mochi broker: attach, start, serve.
// An observer subscribes to presence/users/+ (here in-process); a device
// connects, and later drops.
func Example() {
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	_ = srv.AddHook(new(auth.AllowHook), nil) // the program's authentication

	p, err := presenced.Attach(srv, presenced.Config{NodeID: "node-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	_ = p.Start(ctx)
	_ = srv.Serve()

	changes := make(chan packets.Packet, 8)
	_ = p.Subscribe("presence/users/+", 1, func(_ *mqtt.Client, _ packets.Subscription, pk packets.Packet) {
		changes <- pk
	})

	phone := connect(srv, "alice-phone", "alice") // over a listener in real life
	a, _ := presence.ParseAggregate((<-changes).Payload)
	fmt.Println(a.User, a.Status, a.Sessions[0].ID)

	_ = phone.Close() // the connection drops without a DISCONNECT
	a, _ = presence.ParseAggregate((<-changes).Payload)
	fmt.Println(a.User, a.Status, len(a.Sessions))

	_ = srv.Close()
	_ = p.Stop(ctx)
	// Output:
	// alice online alice-phone
	// alice offline 0
}

// connect hands srv one end of a pipe, sends an MQTT 3.1.1 CONNECT from the
// other as user, and returns that end once the CONNACK is read.
func connect(srv *mqtt.Server, clientID, user string) net.Conn {
	client, server := net.Pipe()
	go func() { _ = srv.EstablishConnection("pipe", server) }()
	var buf bytes.Buffer
	_ = (&packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 4,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30,
			ClientIdentifier: clientID, UsernameFlag: true, Username: []byte(user)},
	}).ConnectEncode(&buf)
	_, _ = client.Write(buf.Bytes())
	_, _ = io.ReadFull(client, make([]byte, 4)) // CONNACK
	return client
}
