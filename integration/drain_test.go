package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	mqtt3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/presenced/presenced/configs"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// Drain tests: a node drained (POST /api/v1/drain here; SIGTERM in
// TestMultiNodeDrain) tells its clients to move at drain.rate, refuses new
// ones, ends their sessions as drain, and stops. The drain is the binary's
// (presenced.Broker), so these skip in the embedded form.

const drainRef = "other.example.com:1883"

// drainPost sends POST /api/v1/drain to an admin address, with a bearer
// token when token is not empty, and returns the status code.
func drainPost(t *testing.T, admin, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+admin+"/api/v1/drain", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := mnHTTP.Do(req)
	if err != nil {
		t.Fatalf("POST drain: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// rawConnect311 sends an MQTT 3.1.1 CONNECT over TCP and returns the CONNACK
// return code (-1: no CONNACK).
func rawConnect311(t *testing.T, addr, clientID string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, waitTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	body := []byte{0, 4, 'M', 'Q', 'T', 'T', 4, 2, 0, 30, 0, byte(len(clientID))}
	body = append(body, clientID...)
	if _, err := conn.Write(append([]byte{0x10, byte(len(body))}, body...)); err != nil {
		t.Fatalf("write CONNECT: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(waitTimeout))
	ack := make([]byte, 4)
	if _, err := io.ReadFull(conn, ack); err != nil || ack[0] != 0x20 {
		return -1
	}
	return int(ack[3])
}

// v3Lost connects an MQTT 3.1.1 client and returns a channel that receives
// the time its connection was lost.
func v3Lost(t *testing.T, addr, clientID, user string) <-chan time.Time {
	t.Helper()
	lost := make(chan time.Time, 1)
	opts := mqtt3.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(clientID).SetUsername(user).
		SetProtocolVersion(4).SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).
		SetKeepAlive(30 * time.Second).SetConnectTimeout(waitTimeout).
		SetConnectionLostHandler(func(mqtt3.Client, error) { lost <- time.Now() })
	c := mqtt3.NewClient(opts)
	v3Wait(t, "connect "+clientID, c.Connect())
	t.Cleanup(func() { c.Disconnect(0) })
	return lost
}

// movedAt waits for the server's DISCONNECT to c, checks its reason code
// and Server Reference, and returns when it came.
func movedAt(t *testing.T, c *client5, name string, code byte, ref string) time.Time {
	t.Helper()
	select {
	case d := <-c.gone:
		got := ""
		if d.Properties != nil {
			got = d.Properties.ServerReference
		}
		if d.ReasonCode != code || got != ref {
			t.Errorf("%s: DISCONNECT %#x with reference %q, want %#x with %q", name, d.ReasonCode, got, code, ref)
		}
		return d.at
	case <-time.After(waitTimeout):
		t.Fatalf("%s: no DISCONNECT within %v", name, waitTimeout)
	}
	return time.Time{}
}

// endReasons waits until the in-memory store holds an ended session for
// each of users (the node has stopped: it wrote them all), and returns their
// end reasons.
func endReasons(t *testing.T, n *testNode, users []string) map[string]presence.EndReason {
	t.Helper()
	got := map[string]presence.EndReason{}
	testkit.Wait(t, waitTimeout, "every session ended", func() error {
		for _, u := range users {
			rec, ok, err := n.Presence.User(context.Background(), u)
			if err != nil || !ok || len(rec.Sessions) > 0 || len(rec.Ended) == 0 {
				return fmt.Errorf("%s: %+v %v %v", u, rec, ok, err)
			}
			got[u] = rec.Ended[0].EndReason
		}
		return nil
	})
	return got
}

// A drain asked for on the admin port: /readyz answers 503 draining, new
// CONNECTs are refused (MQTT 5 0x9C with the Server Reference, 3.1.1 0x03),
// MQTT 5 clients get DISCONNECT 0x9C with the reference, a 3.1.1 client is
// closed, at drain.rate a second, without their wills; their sessions end
// as drain, and the node stops.
func TestDrainMovesClientsAtTheRate(t *testing.T) {
	if embedded() {
		t.Skip("the drain is the binary's")
	}
	const rate = 5
	n := startNode(t, func(c *configs.Config) {
		c.Drain.Rate, c.Drain.ServerReference, c.Drain.Timeout = rate, drainRef, configs.Duration(waitTimeout)
	})
	var users []string
	var v5 []*client5
	for i := range 4 {
		u := fmt.Sprintf("d%d", i)
		users = append(users, u)
		v5 = append(v5, dial5(t, n.MQTTAddr(), u+"-phone", u, withWill("wills/"+u, "gone", false)))
	}
	lost := v3Lost(t, n.MQTTAddr(), "old-phone", "old")
	users = append(users, "old")
	testkit.Wait(t, waitTimeout, "5 sessions", func() error {
		s := n.Stats().Get("sessions_opened_total")
		return testkit.Why(s == 5, fmt.Sprintf("%d opened", s))
	})

	if code := drainPost(t, n.AdminAddr(), ""); code != http.StatusAccepted {
		t.Fatalf("POST /api/v1/drain: %d", code)
	}
	if code, body := adminGet(t, n, "/readyz"); code != http.StatusServiceUnavailable || !strings.HasPrefix(string(body), "draining") {
		t.Errorf("readyz while draining: %d %q", code, body)
	}
	// While it drains, nobody gets in.
	conn, err := net.DialTimeout("tcp", n.MQTTAddr(), waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if _, ack, _ := connect5(t, conn, "late-phone", "late"); ack == nil || ack.ReasonCode != 0x9C || ack.Properties == nil || ack.Properties.ServerReference != drainRef {
		t.Errorf("MQTT 5 CONNECT while draining: %+v, want 0x9C with %q", ack, drainRef)
	}
	if code := rawConnect311(t, n.MQTTAddr(), "late-v3"); code != 0x03 {
		t.Errorf("MQTT 3.1.1 CONNECT while draining: return code %d, want 3", code)
	}

	var times []time.Time
	for i, c := range v5 {
		times = append(times, movedAt(t, c, users[i], 0x9C, drainRef))
	}
	select {
	case at := <-lost:
		times = append(times, at)
	case <-time.After(waitTimeout):
		t.Fatal("the 3.1.1 client was not closed")
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	took, least := times[len(times)-1].Sub(times[0]), time.Duration(len(times)-1)*time.Second/rate
	t.Logf("%d clients moved in %v at rate %d (at least %v)", len(times), took, rate, least)
	if took < least-50*time.Millisecond {
		t.Errorf("%d clients moved in %v: faster than drain.rate %d allows (%v)", len(times), took, rate, least)
	}
	testkit.Wait(t, waitTimeout, "the drain's counts", func() error {
		st := n.Stats()
		return testkit.Why(st.Get("drain_moved_total") == 5 && st.Of("connect_refusals_total", "draining") == 2 && st.Get("wills_suppressed_total") == 4,
			fmt.Sprintf("moved %d (want 5), refused %d (want 2), wills suppressed %d (want 4)", st.Get("drain_moved_total"), st.Of("connect_refusals_total", "draining"), st.Get("wills_suppressed_total")))
	})
	if n.cfg.Redis.Addrs != nil {
		return // the end reasons: TestMultiNodeDrain reads them from another node
	}
	for u, r := range endReasons(t, n, users) {
		if r != presence.EndDrain {
			t.Errorf("%s: session ended as %s, want drain", u, r)
		}
	}
}

// drain.timeout bounds the drain: what is not moved by then ends as
// shutdown when the node stops. Without a Server Reference, MQTT 5 clients
// are told 0x8B.
func TestDrainTimeout(t *testing.T) {
	if embedded() {
		t.Skip("the drain is the binary's")
	}
	n := startNode(t, func(c *configs.Config) { c.Drain.Rate, c.Drain.Timeout = 1, configs.Duration(time.Second) })
	var users []string
	var cs []*client5
	for i := range 4 {
		u := fmt.Sprintf("t%d", i)
		users = append(users, u)
		cs = append(cs, dial5(t, n.MQTTAddr(), u+"-phone", u))
	}
	start := time.Now()
	if code := drainPost(t, n.AdminAddr(), ""); code != http.StatusAccepted {
		t.Fatalf("POST /api/v1/drain: %d", code)
	}
	for i, c := range cs {
		movedAt(t, c, users[i], 0x8B, "") // the moved ones and, at the stop, the rest
	}
	took := time.Since(start)
	t.Logf("4 clients at rate 1 with timeout 1s: all gone after %v", took)
	if took >= 3*time.Second { // the rate alone would take 3 s (was 2.5 s: the timeout's 1 s with 1.5 s for a loaded machine)
		t.Errorf("all gone after %v: drain.timeout 1s not honoured", took)
	}
	if n.cfg.Redis.Addrs != nil {
		return
	}
	count := map[presence.EndReason]int{}
	for _, r := range endReasons(t, n, users) {
		count[r]++
	}
	if count[presence.EndDrain] < 1 || count[presence.EndShutdown] < 2 || count[presence.EndDrain]+count[presence.EndShutdown] != 4 {
		t.Errorf("end reasons %v: want 1 or 2 drain, the rest shutdown", count)
	}
}
