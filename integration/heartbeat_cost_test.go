package integration

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
)

// The Redis cost of liveness. Clients at keep-alive 30 s send one PINGREQ
// every 30 s; nothing on that path touches Redis. Redis sees, per node, the
// node record refresh (every node_ttl/3), the sweep (every sweep_interval)
// and, every renew_interval, one epoch-checked refresh per session. The test
// measures Redis's total_commands_processed over a window of pings, and the
// cost of one bulk renewal, and checks the average stays at or below 0.05
// commands per PINGREQ with the default intervals.
func TestHeartbeatCostRedis(t *testing.T) {
	const (
		clients   = 3000
		keepalive = 30 * time.Second
		window    = 10 * time.Second
	)
	srv := redistest.Start(t)
	n := startNode(t, func(c *configs.Config) {
		c.Redis.Addrs = []string{srv.Addr()}
		c.Redis.NodeTTL = configs.Duration(10 * time.Second)      // the defaults
		c.Redis.SweepInterval = configs.Duration(2 * time.Second) // the defaults
		c.Admin.Addr = "off"
	})
	conns := make([]net.Conn, 0, clients)
	for i := range clients {
		conns = append(conns, rawMQTT(t, n.MQTTAddr(), i, uint16(keepalive/time.Second)))
	}
	testkit.Wait(t, 30*time.Second, "every session opened", func() error {
		return testkit.Why(n.Stats().Get("sessions_opened_total") == clients, fmt.Sprintf("%d opened", n.Stats().Get("sessions_opened_total")))
	})
	testkit.Wait(t, 30*time.Second, "the tracker idle", func() error {
		return testkit.Why(n.Stats().Get("tracker_queue_depth") == 0, fmt.Sprintf("tracker queue depth %d", n.Stats().Get("tracker_queue_depth")))
	})
	// A session makes no interest: nobody watches these users, so the
	// node subscribes no channel and hears no user.
	if s := n.Stats(); s.Get("redis_channels") != 0 || s.Get("interest_users_heard") != 0 {
		t.Errorf("%d channels subscribed, %d users heard; want 0 and 0: nobody watches the sessions' users", s.Get("redis_channels"), s.Get("interest_users_heard"))
	}
	// The node's state in the store says its final session count: a count
	// that changes is written at the next announcement (every 3 s), one
	// that stays the same costs nothing, so the window is steady state.
	rc := srv.Client(t)
	testkit.Wait(t, 30*time.Second, "the node's session count recorded", func() error {
		h, err := rc.HGet(context.Background(), "presenced:nodestate", n.cfg.NodeID).Result()
		return testkit.Why(err == nil && strings.Contains(h, fmt.Sprintf(`"sessions":%d`, clients)), fmt.Sprintf("%v %.200s", err, h))
	})

	// One bulk renewal of every session, as the node does every renew_interval.
	before := srv.Info(t, "total_commands_processed")
	if err := n.Presence.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if first := srv.Info(t, "total_commands_processed") - before - 1; first > 4*clients+10 {
		t.Fatalf("first bulk renewal cost %d commands for %d sessions", first, clients)
	}
	before = srv.Info(t, "total_commands_processed")
	if err := n.Presence.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	renewCost := srv.Info(t, "total_commands_processed") - before - 1 // minus the INFO itself

	// A window of steady state: every client pings at its keep-alive rate,
	// spread evenly, so the window holds clients × window/keepalive pings.
	var pings int64
	var mu sync.Mutex
	start := srv.Info(t, "total_commands_processed")
	began := time.Now()
	var wg sync.WaitGroup
	rng := rand.New(rand.NewSource(1))
	for _, c := range conns {
		at := time.Duration(rng.Int63n(int64(keepalive)))
		if at >= window {
			continue // this client's ping falls after the window
		}
		wg.Add(1)
		go func(c net.Conn, at time.Duration) {
			defer wg.Done()
			timer := time.NewTimer(at)
			defer timer.Stop()
			<-timer.C
			if _, err := c.Write([]byte{0xC0, 0x00}); err != nil {
				t.Errorf("ping: %v", err)
				return
			}
			mu.Lock()
			pings++
			mu.Unlock()
		}(c, at)
	}
	wg.Wait()
	time.Sleep(time.Until(began.Add(window))) // the window is wall time by definition
	idle := srv.Info(t, "total_commands_processed") - start - 1
	elapsed := time.Since(began)

	pingRate := float64(clients) / keepalive.Seconds()
	idleRate := float64(idle) / elapsed.Seconds()
	renewRate := float64(renewCost) / n.cfg.Presence.RenewInterval.D().Seconds()
	perPing := (idleRate + renewRate) / pingRate
	t.Logf("%d clients at keep-alive %v: %d pings in %v; Redis commands: %d in the window (%.2f/s), %d for one bulk renewal of %d sessions (every %v: %.3f/s)",
		clients, keepalive, pings, elapsed.Round(time.Millisecond), idle, idleRate, renewCost, clients, n.cfg.Presence.RenewInterval, renewRate)
	t.Logf("Redis commands per PINGREQ: %.4f in the window, %.4f with the renewal amortised", float64(idle)/float64(pings), perPing)
	if perPing > 0.05 {
		t.Fatalf("%.4f Redis commands per PINGREQ, want at most 0.05", perPing)
	}
	if pings < clients/4 {
		t.Fatalf("only %d pings sent", pings)
	}
}

// rawMQTT connects an MQTT 3.1.1 client with a user and reads its CONNACK.
func rawMQTT(t *testing.T, addr string, i int, keepalive uint16) net.Conn {
	t.Helper()
	var conn net.Conn
	var err error
	for try := 0; try < 5; try++ {
		if conn, err = net.DialTimeout("tcp", addr, waitTimeout); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	id := "hb-" + strconv.Itoa(i)
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 4,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: keepalive,
			ClientIdentifier: id, UsernameFlag: true, Username: []byte(id)},
	}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(waitTimeout))
	ack := make([]byte, 4)
	if _, err := conn.Read(ack); err != nil || ack[0] != 0x20 {
		t.Fatalf("connack %x: %v", ack, err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	go func() { // drain PINGRESPs
		b := make([]byte, 64)
		for {
			if _, err := conn.Read(b); err != nil {
				return
			}
		}
	}()
	return conn
}
