package integration

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/presence"
)

// Issue 18 (TestDrainTimeout under load: end reasons drain:2 network:2):
// when the drain times out the server closes what is left, writing each
// client a DISCONNECT 0x8B before mochi records the stop cause; a client
// that closes at once on reading it ended as network, not shutdown. Many
// MQTT 5 clients that reset the moment they read anything make that
// window show: every session must end as drain or shutdown.
func TestDrainTimeoutClientsCloseAtOnce(t *testing.T) {
	if embedded() {
		t.Skip("the drain is the binary's")
	}
	const clients = 300
	n := startNode(t, func(c *configs.Config) {
		c.Drain.Rate, c.Drain.Timeout = 1, configs.Duration(time.Second)
		c.Presence.MaxSessionsPerUser = clients
	})
	if n.cfg.Redis.Addrs != nil {
		t.Skip("reads the end reasons from the in-memory store")
	}
	var users []string
	for i := range clients {
		u := fmt.Sprintf("sd%03d", i)
		users = append(users, u)
		conn := rawConnectV(t, n.MQTTAddr(), 5, u+"-phone", u)
		go func() {
			var b [1]byte
			_ = conn.SetReadDeadline(time.Now().Add(2 * waitTimeout))
			_, _ = conn.Read(b[:]) // the DISCONNECT (or the close)
			_ = conn.(*net.TCPConn).SetLinger(0)
			_ = conn.Close()
		}()
	}
	if code := drainPost(t, n.AdminAddr(), ""); code != http.StatusAccepted {
		t.Fatalf("POST /api/v1/drain: %d", code)
	}
	count := map[presence.EndReason]int{}
	for _, r := range endReasons(t, n, users) {
		count[r]++
	}
	t.Logf("%d clients that close on reading the DISCONNECT: end reasons %v", clients, count)
	if count[presence.EndDrain]+count[presence.EndShutdown] != clients {
		t.Errorf("end reasons %v: want drain or shutdown for all %d", count, clients)
	}
}

// rawConnectV connects over TCP with a CONNECT of version (4 or 5) and
// reads the CONNACK, which must accept.
func rawConnectV(t *testing.T, addr string, version byte, clientID, user string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, waitTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.Write(connectBytes(t, version, clientID, user, 60)); err != nil {
		t.Fatalf("write CONNECT: %v", err)
	}
	first, body, err := readPacket(conn, waitTimeout)
	if err != nil || first != 0x20 || len(body) < 2 || body[1] != 0 {
		t.Fatalf("%s: CONNACK %#x %x %v", clientID, first, body, err)
	}
	return conn
}
